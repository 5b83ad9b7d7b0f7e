"""Retention (spec 17 §17.2), on both stores: each rule, nothing without a setting, active
trees kept, a root and its children together, the dry run, the runtime's sweeper, the
settings, and (PostgreSQL) one node's pass at a time. Real Runtime on a real store; the
clock the store stamps rows with is the test's, moved forward by days."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from store_probe import probe
from threadloom import RetentionPolicy, Runtime
from threadloom.errors import InvalidArgument
from threadloom.records import LogRow, ThreadStatus, new_id
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.store.base import RequestDelta

DAY_US = 86_400_000_000


class Clock:
    """A clock the test moves: microseconds since the epoch."""

    def __init__(self, now: int = 1_800_000_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1  # strictly increasing, as a real clock reads
        return self.now

    def days(self, n: float) -> None:
        self.now += round(n * DAY_US)


async def opened(db_url: str, clock: Clock, **policy: Any) -> Runtime:
    return await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(interval_s=None, **policy)
    )


async def exists(rt: Runtime, *thread_ids: str) -> list[bool]:
    return [await rt.store.get_thread(t) is not None for t in thread_ids]


async def activity(rt: Runtime, clock: Clock, thread_id: str) -> None:
    """A run starts and ends on the thread now: its last activity (and its ancestors')."""
    await rt.store.set_status(thread_id, ThreadStatus(state="running", since=clock()))
    await rt.store.set_status(thread_id, ThreadStatus(state="idle", since=clock()))


def llm_row(body: str | None = None, **fields: Any) -> LogRow:
    return LogRow(
        id=new_id(),
        provider="scripted",
        model="m",
        created_at=0,
        is_complete=True,
        endpoint="chat.completions",
        request_body=body,
        response_body='{"choices":[{"message":{"content":"hi"}}]}',
        total_tokens=42,
        cost_total=0.25,
        **fields,
    )


async def test_c17_020_no_setting_deletes_nothing(db_url: str) -> None:
    """C17-020: every rule is off by default; a pass (and the settings read from an empty
    environment) deletes nothing — old, terminated and per-user threads and old log
    bodies all stay."""
    clock = Clock()
    rt = await opened(db_url, clock)
    try:
        old = (await rt.create_thread("a", user_id="u")).thread_id
        ended = await rt.create_thread("a", user_id="u")
        await ended.terminate()
        await rt.store.insert_log(old, llm_row('{"messages":[]}'))
        clock.days(3650)
        assert not RetentionPolicy().enabled
        assert not RetentionPolicy.from_env({}).enabled
        assert ServerSettings.from_env({}).retention == RetentionPolicy()
        report = await rt.apply_retention()
        assert report.ran and report.outcomes == [] and report.threads == 0
        assert await exists(rt, old, ended.thread_id) == [True, True]
        logs = await rt.store.list_logs(old)
        assert logs[0].request_body == '{"messages":[]}'
        assert logs[0].response_body is not None
    finally:
        await rt.close()


async def test_c17_021_inactive_threads_go_with_everything_of_theirs(db_url: str) -> None:
    """C17-021: ``inactive_days`` deletes a root thread whose last activity is older than
    N days, with its messages, logs, files and children; age is the last activity, not
    the creation: an old thread with a recent message stays."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=30)
    try:
        gone = await rt.create_thread("a", user_id="u")
        child = await rt.create_thread("a", user_id="u", parent=gone.thread_id)
        said = await gone.inject_message(role="user", content="hello")
        child_said = await child.inject_message(role="user", content="hello child")
        await rt.store.insert_log(gone.thread_id, llm_row('{"messages":[1]}'))
        await gone.write_file("notes/a.txt", b"abc", "text/plain")
        revived = await rt.create_thread("a", user_id="u")
        clock.days(31)
        fresh = await rt.create_thread("a", user_id="u")
        await activity(rt, clock, revived.thread_id)
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.threads, outcome.descendants) == ("inactive_days", 1, 1)
        assert outcome.ids == [gone.thread_id]
        assert await exists(rt, gone.thread_id, child.thread_id) == [False, False]
        assert await exists(rt, revived.thread_id, fresh.thread_id) == [True, True]
        left = probe(rt).rows(
            "SELECT (SELECT COUNT(*) FROM logs WHERE thread_id IN (?, ?)),"
            " (SELECT COUNT(*) FROM files WHERE thread_id IN (?, ?)),"
            " (SELECT COUNT(*) FROM messages WHERE id IN (?, ?))",
            (gone.thread_id, child.thread_id) * 2 + (said.id, child_said.id),
        )
        assert left == [(0, 0, 0)]
        assert await rt.store.read_events(gone.thread_id, 0) == []
    finally:
        await rt.close()


async def test_c17_022_children_go_only_with_their_root(db_url: str) -> None:
    """C17-022: a rule names root threads only. A child's activity is its root's (the
    root's last activity is bumped with it), so an old child under a recently active
    root stays; a child is never deleted alone, and a tree goes whole."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=10, terminated_days=1)
    try:
        root = await rt.create_thread("a")
        old_child = await rt.create_thread("a", parent=root.thread_id)
        await old_child.terminate()  # a terminated child: no rule deletes it alone
        clock.days(20)
        busy_child = await rt.create_thread("a", parent=root.thread_id)
        await activity(rt, clock, busy_child.thread_id)
        report = await rt.apply_retention()
        assert report.threads == 0
        assert await exists(rt, root.thread_id, old_child.thread_id) == [True, True]
        clock.days(11)
        report = await rt.apply_retention()
        inactive = report.outcomes[0]
        assert inactive.ids == [root.thread_id] and inactive.descendants == 2
        assert await exists(rt, root.thread_id, old_child.thread_id, busy_child.thread_id) == [
            False,
            False,
            False,
        ]
    finally:
        await rt.close()


async def test_c17_023_active_trees_are_never_deleted(db_url: str) -> None:
    """C17-023: a tree with a ``running`` thread or a queued message anywhere in it is
    kept (counted as kept), whatever its age; the others go."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=1)
    try:
        running = (await rt.create_thread("a")).thread_id
        queued_root = (await rt.create_thread("a")).thread_id
        queued_child = await rt.create_thread("a", parent=queued_root)
        idle = (await rt.create_thread("a")).thread_id
        await rt.store.set_stopped(queued_child.thread_id, True)
        await queued_child.queue_message(role="user", content="waits")
        assert (await rt.store.thread_stats(queued_child.thread_id)).queued_count == 1
        await rt.store.set_status(running, ThreadStatus(state="running", since=clock()))
        clock.days(5)
        for dry_run in (True, False):
            report = await rt.apply_retention(dry_run=dry_run)
            (outcome,) = report.outcomes
            assert outcome.ids == [idle] and outcome.kept_active == 2, dry_run
        assert await exists(rt, running, queued_root, queued_child.thread_id, idle) == [
            True,
            True,
            True,
            False,
        ]
    finally:
        await rt.close()


async def test_c17_024_terminated_threads_go_n_days_after_termination(db_url: str) -> None:
    """C17-024: ``terminated_days`` deletes root threads terminated more than N days ago;
    one terminated recently and an old one never terminated stay."""
    clock = Clock()
    rt = await opened(db_url, clock, terminated_days=7)
    try:
        early = await rt.create_thread("a")
        await early.terminate()
        never = (await rt.create_thread("a")).thread_id
        late = await rt.create_thread("a")
        clock.days(8)
        await late.terminate()
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.ids) == ("terminated_days", [early.thread_id])
        assert await exists(rt, early.thread_id, never, late.thread_id) == [False, True, True]
    finally:
        await rt.close()


async def test_c17_025_each_user_keeps_the_newest_n_threads(db_url: str) -> None:
    """C17-025: ``threads_per_user`` keeps each owner's newest N root threads by last
    activity (then creation, then id); the older ones go. Threads without an owner are
    one group; children do not count; an owner with N or fewer loses nothing."""
    clock = Clock()
    rt = await opened(db_url, clock, threads_per_user=2)
    try:
        mine = [(await rt.create_thread("a", user_id="u1")).thread_id for _ in range(4)]
        await rt.create_thread("a", user_id="u1", parent=mine[3])  # a child: not counted
        theirs = [(await rt.create_thread("a", user_id="u2")).thread_id for _ in range(2)]
        nobody = [(await rt.create_thread("a")).thread_id for _ in range(3)]
        clock.days(1)
        await activity(rt, clock, mine[0])
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert sorted(outcome.ids) == sorted([mine[1], mine[2], nobody[0]])
        assert await exists(rt, *mine) == [True, False, False, True]
        assert await exists(rt, *theirs) == [True, True]
        assert await exists(rt, *nobody) == [False, True, True]
    finally:
        await rt.close()


async def test_c17_026_log_bodies_go_rows_and_cost_stay(db_url: str) -> None:
    """C17-026: ``log_body_days`` deletes the request and response bodies of log rows
    older than N days; the rows, their tokens and cost stay, newer bodies stay, and a
    newer row whose request was stored as a delta of a stripped one reads the same."""
    clock = Clock()
    rt = await opened(db_url, clock, log_body_days=2)
    try:
        tid = (await rt.create_thread("a")).thread_id
        prefix, suffix = '{"messages":[', "]}"
        first = f"{prefix}1,2{suffix}"
        old, _ = await rt.store.insert_log(
            tid, llm_row(first, request_delta=RequestDelta(None, 0, prefix, ("1", "2"), suffix))
        )
        before = await rt.store.cost_summary([tid])
        clock.days(3)
        second = f"{prefix}1,2,3{suffix}"
        new, _ = await rt.store.insert_log(
            tid, llm_row(second, request_delta=RequestDelta(old.id, 2, prefix, ("3",), suffix))
        )
        assert (await rt.apply_retention(dry_run=True)).outcomes[0].log_rows == 1
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.log_rows) == ("log_body_days", 1)
        stripped = await rt.store.get_log(tid, old.id)
        kept = await rt.store.get_log(tid, new.id)
        assert stripped is not None and kept is not None
        assert stripped.request_body is None and stripped.response_body is None
        assert (stripped.total_tokens, stripped.cost_total) == (42, 0.25)
        assert kept.request_body == second and kept.response_body is not None
        after = await rt.store.cost_summary([tid])
        assert after.threads[tid].llm_cost == pytest.approx(0.5)
        assert after.threads[tid].request_count == before.threads[tid].request_count + 1
        assert (await rt.apply_retention()).outcomes[0].log_rows == 0  # nothing left to do
    finally:
        await rt.close()


async def test_c17_027_dry_run_says_what_would_go_and_deletes_nothing(db_url: str) -> None:
    """C17-027: a dry run reports per rule the root threads (ids), their descendants and
    log rows a pass would delete, counting a thread named by several rules once, and
    deletes nothing; the real pass then deletes exactly that."""
    clock = Clock()
    policy = {"inactive_days": 5, "terminated_days": 5, "threads_per_user": 1}
    rt = await opened(db_url, clock, **policy)
    try:
        a = (await rt.create_thread("a", user_id="u")).thread_id
        await rt.create_thread("a", user_id="u", parent=a)
        ended = await rt.create_thread("a", user_id="u")
        await ended.terminate()
        clock.days(6)
        b = (await rt.create_thread("a", user_id="u")).thread_id
        c = (await rt.create_thread("a", user_id="u")).thread_id
        dry = await rt.apply_retention(dry_run=True)
        assert dry.dry_run and [o.rule for o in dry.outcomes] == [
            "inactive_days",
            "terminated_days",
            "threads_per_user",
        ]
        assert [(o.threads, o.descendants) for o in dry.outcomes] == [(2, 1), (0, 0), (1, 0)]
        assert sorted(dry.outcomes[0].ids) == sorted([a, ended.thread_id])
        assert await exists(rt, a, ended.thread_id, b, c) == [True, True, True, True]
        assert dry.lines()[0] == "inactive_days: would delete 2 threads with 1 descendants;" + (
            " kept 0 active"
        )
        real = await rt.apply_retention()
        assert [(o.rule, sorted(o.ids)) for o in real.outcomes] == [
            (o.rule, sorted(o.ids)) for o in dry.outcomes
        ]
        assert real.threads == dry.threads == 4
    finally:
        await rt.close()


async def test_c17_028_paging_goes_past_a_batch_and_past_kept_threads(db_url: str) -> None:
    """C17-028: a pass works in pages of ``batch`` roots, one transaction per tree: more
    old threads than a page all go, and active ones met on the way do not stop it."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=1, batch=2)
    try:
        ids = [(await rt.create_thread("a", user_id="u")).thread_id for _ in range(7)]
        await rt.store.set_status(ids[1], ThreadStatus(state="running", since=clock()))
        await rt.store.set_status(ids[2], ThreadStatus(state="running", since=clock()))
        clock.days(2)
        report = await rt.apply_retention()
        assert report.outcomes[0].threads == 5 and report.outcomes[0].kept_active == 2
        assert await exists(rt, *ids) == [False, True, True, False, False, False, False]
    finally:
        await rt.close()


async def test_c17_029_the_runtime_sweeps_every_interval_and_logs_it(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """C17-029: a runtime that runs its store's threads runs a pass every ``interval_s``
    seconds and logs one INFO line per pass with the counts of each rule."""
    clock = Clock()
    rt = await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(inactive_days=1, interval_s=0.2)
    )
    try:
        tid = (await rt.create_thread("a")).thread_id
        clock.days(2)
        with caplog.at_level(logging.INFO, logger="threadloom.retention"):
            for _ in range(100):
                if not (await exists(rt, tid))[0]:
                    break
                await asyncio.sleep(0.05)
            assert not (await exists(rt, tid))[0]
        lines = [r.getMessage() for r in caplog.records if r.name == "threadloom.retention"]
        assert any("inactive_days: deleted 1 threads with 0 descendants" in x for x in lines)
    finally:
        await rt.close()


def test_c17_030_settings_from_the_environment_and_refusals() -> None:
    """C17-030: the ``THREADLOOM_RETENTION_*`` variables set the rules; a bad value is
    refused with a message naming the variable (a server refuses to start)."""
    env = {
        "THREADLOOM_RETENTION_INACTIVE_DAYS": "90",
        "THREADLOOM_RETENTION_TERMINATED_DAYS": "0.5",
        "THREADLOOM_RETENTION_THREADS_PER_USER": "1000",
        "THREADLOOM_RETENTION_LOG_BODY_DAYS": "14",
        "THREADLOOM_RETENTION_INTERVAL_SECONDS": "off",
    }
    policy = ServerSettings.from_env(env).retention
    assert policy == RetentionPolicy(90, 0.5, 1000, 14, None)
    bad = {
        "THREADLOOM_RETENTION_INACTIVE_DAYS": "-1",
        "THREADLOOM_RETENTION_THREADS_PER_USER": "0",
        "THREADLOOM_RETENTION_LOG_BODY_DAYS": "soon",
        "THREADLOOM_RETENTION_INTERVAL_SECONDS": "0",
    }
    for key, value in bad.items():
        with pytest.raises(SettingsError, match=key):
            ServerSettings.from_env({key: value})
    with pytest.raises(InvalidArgument, match="threads_per_user"):
        RetentionPolicy(threads_per_user=0)
