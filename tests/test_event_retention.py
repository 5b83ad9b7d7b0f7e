"""The replay window of the event rows (spec 09 §9.6.1): ``Store.prune_events`` on the
SQLite store, the pass of ``thread/retention.py``, the runtime's pruner and its settings.
C09-030 (resume across a pruned window) is in tests/server/test_c09_resume.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from store_probe import StoreProbe
from threadloom import EventRetention, Runtime
from threadloom.errors import InvalidArgument
from threadloom.server.app import serve_app
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.store import open_store
from threadloom.store.core.events import prune_chunk

HOUR_US = 3_600_000_000


class Clock:
    """A clock the test moves: microseconds since the epoch."""

    def __init__(self, now: int = 1_800_000_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


async def open_runtime(db_url: str, clock: Clock, **retention: float | None) -> Runtime:
    return await Runtime.open(
        db_url, clock=clock, event_retention=EventRetention(**{"interval": None, **retention})
    )


async def thread_with_events(runtime: Runtime, messages: int) -> str:
    state = await runtime.create_thread("a")
    for n in range(messages):
        await state.inject_message(role="user", content=f"m{n}")
    return state.thread_id


async def window(runtime: Runtime, thread_id: str) -> tuple[int, int, list[int]]:
    """(head, events_pruned_through, the seq of every event row left)."""
    row = await runtime.store.get_thread(thread_id)
    assert row is not None
    left = [e.seq for e in await runtime.store.read_events(thread_id, 0, limit=100_000)]
    return row.event_seq, row.events_pruned_through, left


async def test_a_row_goes_once_more_than_keep_newer_rows_follow_it(db_url: str) -> None:
    runtime = await open_runtime(db_url, Clock(), events=5)
    try:
        thread = await thread_with_events(runtime, 20)
        head, through, left = await window(runtime, thread)
        assert through == 0 and left == list(range(1, head + 1))
        report = await runtime.prune_events()
        head, through, left = await window(runtime, thread)
        assert left == list(range(head - 5, head + 1))  # the newest 6: each has ≤ 5 newer
        assert through == head - 6
        assert report.rows == head - 6 and report.threads == 1
        again = await runtime.prune_events()
        assert (again.rows, again.threads) == (0, 0)  # nothing more to do
    finally:
        await runtime.close()


async def test_rows_older_than_the_window_go_and_younger_ones_stay(db_url: str) -> None:
    clock = Clock()
    runtime = await open_runtime(db_url, clock, seconds=3600)
    try:
        thread = await thread_with_events(runtime, 5)
        old_head, _, _ = await window(runtime, thread)
        clock.now += 2 * HOUR_US
        state = await runtime.thread(thread)
        for n in range(3):
            await state.inject_message(role="user", content=f"late {n}")
        clock.now += 60_000_000  # a minute later the late rows are still young
        report = await runtime.prune_events()
        head, through, left = await window(runtime, thread)
        assert through == old_head and report.rows == old_head
        assert left == list(range(old_head + 1, head + 1))
        events = await runtime.store.read_events(thread, 0)
        assert all(e.created_at >= clock.now - HOUR_US for e in events)
    finally:
        await runtime.close()


async def test_a_quiet_thread_is_pruned_whole_then_skipped_until_it_changes(
    db_url: str,
) -> None:
    clock = Clock()
    runtime = await open_runtime(db_url, clock, seconds=60)
    try:
        quiet = await thread_with_events(runtime, 4)
        clock.now += 2 * HOUR_US
        busy = await thread_with_events(runtime, 4)
        report = await runtime.prune_events()
        head, through, left = await window(runtime, quiet)
        assert (through, left) == (head, [])
        assert report.threads == 1
        busy_head, busy_through, busy_left = await window(runtime, busy)
        assert busy_through == 0 and busy_left == list(range(1, busy_head + 1))
        assert (await runtime.prune_events()).threads == 0  # the quiet thread is skipped
        state = await runtime.thread(quiet)
        await state.inject_message(role="user", content="back")
        after = await runtime.store.read_events(quiet, head)
        assert [e.seq for e in after] == [head + 1]  # resumable from where it was pruned
        assert (await runtime.prune_events()).rows == 0  # a young row stays
    finally:
        await runtime.close()


async def test_a_pass_works_in_bounded_chunks_and_ends_where_one_step_would(
    db_url: str,
) -> None:
    clock = Clock()
    runtime = await open_runtime(db_url, clock, events=3)
    threads = [await thread_with_events(runtime, 12) for _ in range(5)]
    head = (await window(runtime, threads[0]))[0]
    await runtime.close()
    store: Any = await open_store(db_url, clock=clock)
    try:
        cursor: int | None = 0
        steps, rows = 0, 0
        while cursor is not None:
            chunk = await store._write(prune_chunk, 0, 3, cursor, 2, 7)
            assert chunk.rows <= 7
            rows += chunk.rows
            cursor, steps = chunk.cursor, steps + 1
        assert rows == 5 * (head - 4)
        assert steps >= rows // 7  # the row budget split threads across chunks
        tables = StoreProbe(db_url)
        for thread in threads:
            left = tables.rows(
                "SELECT seq FROM thread_events WHERE thread_id = ? ORDER BY seq", (thread,)
            )
            assert [s for (s,) in left] == list(range(head - 3, head + 1))
            (through,) = tables.rows(
                "SELECT events_pruned_through FROM threads WHERE id = ?", (thread,)
            )[0]
            assert through == head - 4
    finally:
        await store.close()


async def test_deleting_a_pruned_thread_still_deletes_its_rows(db_url: str) -> None:
    runtime = await open_runtime(db_url, Clock(), events=2)
    try:
        doomed = await thread_with_events(runtime, 6)
        kept = await thread_with_events(runtime, 6)
        await runtime.prune_events()
        await runtime.delete_thread(doomed)
        assert await runtime.store.read_events(doomed, 0) == []
        head, through, left = await window(runtime, kept)
        assert left == list(range(through + 1, head + 1)) and len(left) == 3
    finally:
        await runtime.close()


async def test_the_owning_runtime_prunes_in_the_background(db_url: str) -> None:
    runtime = await Runtime.open(
        db_url, event_retention=EventRetention(seconds=3600, events=2, interval=0.05)
    )
    try:
        thread = await thread_with_events(runtime, 8)
        for _ in range(250):  # a pass may have run while the events were being written:
            await asyncio.sleep(0.02)  # wait for the one that sees them all
            head, through, left = await window(runtime, thread)
            if through == head - 3:
                break
        assert through == head - 3 and left == [head - 2, head - 1, head]
    finally:
        await runtime.close()
    assert runtime._pruner is not None and runtime._pruner._task is None  # stopped with it


async def test_a_sharing_runtime_leaves_pruning_to_the_owner(db_url: str) -> None:
    owner = await Runtime.open(db_url, event_retention=EventRetention(events=1, interval=None))
    guest = await Runtime.open(
        db_url, exclusive=False, event_retention=EventRetention(events=1, interval=0.02)
    )
    try:
        thread = await thread_with_events(owner, 6)
        await asyncio.sleep(0.2)
        assert (await window(owner, thread))[1] == 0  # neither one pruned by itself
        await owner.prune_events()
        head, through, _ = await window(owner, thread)
        assert through == head - 2
    finally:
        await guest.close()
        await owner.close()


def test_bad_retention_settings_are_refused() -> None:
    for bad in (
        {"seconds": 0},
        {"seconds": float("inf")},
        {"events": 0},
        {"events": True},
        {"interval": 0},
        {"interval": -1.0},
    ):
        with pytest.raises(InvalidArgument, match="retention"):
            EventRetention(**bad)  # type: ignore[arg-type]
    assert EventRetention() == EventRetention(3600.0, 10_000, 60.0)


def test_the_server_reads_the_replay_window_from_the_environment() -> None:
    default = ServerSettings.from_env({})
    assert (default.replay_seconds, default.replay_events) == (3600.0, 10_000)
    custom = ServerSettings.from_env(
        {"THREADLOOM_STREAM_REPLAY_SECONDS": "600", "THREADLOOM_STREAM_REPLAY_EVENTS": "500"}
    )
    assert (custom.replay_seconds, custom.replay_events) == (600.0, 500)
    for key, bad in (
        ("THREADLOOM_STREAM_REPLAY_SECONDS", "0"),
        ("THREADLOOM_STREAM_REPLAY_SECONDS", "soon"),
        ("THREADLOOM_STREAM_REPLAY_EVENTS", "0"),
        ("THREADLOOM_STREAM_REPLAY_EVENTS", "many"),
    ):
        with pytest.raises(SettingsError, match=key):
            ServerSettings.from_env({key: bad})


async def test_a_budget_spent_at_a_thread_boundary_starts_the_next_chunk_there(
    db_url: str,
) -> None:
    clock = Clock()
    runtime = await open_runtime(db_url, clock)
    threads = [await thread_with_events(runtime, 6) for _ in range(3)]
    head = (await window(runtime, threads[0]))[0]
    await runtime.close()
    store: Any = await open_store(db_url, clock=clock)
    try:
        per = head - 4  # what keep=3 prunes of each thread: the budget of one chunk
        chunks = []
        cursor: int | None = 0
        while cursor is not None:
            chunk = await store._write(prune_chunk, 0, 3, cursor, 10, per)
            chunks.append((chunk.rows, chunk.threads))
            cursor = chunk.cursor
        assert chunks == [(per, 1), (per, 1), (per, 1)]  # no thread counted for nothing
    finally:
        await store.close()


async def test_the_served_runtime_prunes_with_the_servers_window(tmp_path: Path) -> None:
    settings = ServerSettings(
        store=f"sqlite:///{tmp_path / 'served.db'}", replay_seconds=600, replay_events=500
    )
    app = serve_app(None, settings)
    async with app.app.router.lifespan_context(app.app):
        runtime = app.context.runtime
        assert runtime.retention == EventRetention(600, 500)
        assert runtime._pruner is not None and runtime._pruner._task is not None
    assert runtime._pruner._task is None  # stopped with the runtime
