"""Spec 01 §1.11.2 rule 4: on PostgreSQL a run's writes of its thread start from the thread
state its previous write left (``dialect.TxStates``) instead of reading the row: the
transaction's first statement locks the row and fails unless the row's ``xmin`` is still
that write's; the write then runs again from the row. Whatever wrote the row in between —
a send, a stop, another node taking the lease — is seen, nothing is written twice or lost,
and a lost lease still fails the write.

Real PostgreSQL store of a real ``Runtime``; the statements are observed on psycopg's
cursor and the store's ``Wire`` (not replaced), raw SQL only to read the storage or to
stand in for another node."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from scripted_chat import chat_definitions
from store_probe import probe
from threadloom import Runtime
from threadloom.errors import InvalidMessage, LeaseLost
from threadloom.records import LogRow, QueueEntry, ThreadStatus, WebhookSubscription, new_id
from threadloom.store.base import Fence, NewThread
from threadloom.store.postgres.store import PostgresStore
from threadloom.store.postgres.wire import Wire
from threadloom.thread.state import ThreadState

pytestmark = pytest.mark.postgres_only


@dataclass
class _Holder:
    """Holds a fence as a run does (``Run.fence``)."""

    fence: Fence | None


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement text sent while the test runs: a read's through a psycopg cursor, a
    write transaction's through its ``Wire`` (each called through)."""
    seen: list[str] = []
    execute = psycopg.Cursor.execute
    send = Wire.send

    def noting(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
        seen.append(query.decode() if isinstance(query, bytes) else str(query))
        return execute(self, query, *args, **kw)

    def sending(self: Wire, sql: bytes, *args: Any, **kw: Any) -> Any:
        seen.append(sql.decode())
        return send(self, sql, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", noting)
    monkeypatch.setattr(Wire, "send", sending)
    yield seen


def _reads(statements: list[str]) -> int:
    """Reads of the thread row a write starts with (``Tx``'s SELECT)."""
    return sum(1 for s in statements if s.startswith("SELECT msg_seq, clock_us"))


def _guards(statements: list[str]) -> int:
    return sum(1 for s in statements if "threadloom_stale()" in s)


async def _running(runtime: Runtime) -> tuple[ThreadState, ThreadState, Fence]:
    """A thread whose run started on this node: its fenced view (the run's writes) and
    its plain one (a send, a stop), and the run's fence."""
    store = runtime.store
    state = await runtime.create_thread("a")
    tid = state.thread_id
    status = ThreadStatus(state="running", since=store.clock(), reason=None)  # type: ignore[attr-defined]
    entry = QueueEntry(id=new_id(), role="user", content="go", source="api", created_at=0)
    _, _, begun = await store.enqueue_and_begin_run(tid, entry, clear_stop=True, status=status)
    assert begun is not None and begun.lease is not None
    fence = Fence(tid, begun.lease)
    row = await store.get_thread(tid)
    assert row is not None
    return ThreadState(runtime.hub, row, fenced_by=_Holder(fence)), state, fence


def _pg(runtime: Runtime) -> PostgresStore:
    store = runtime.store
    assert isinstance(store, PostgresStore)
    return store


def _contents(runtime: Runtime, tid: str) -> list[tuple[int, str]]:
    return [
        (int(seq), str(content))
        for seq, content in probe(runtime).rows(
            "SELECT seq, content FROM messages WHERE thread_id = ? ORDER BY seq", (tid,)
        )
    ]


def _events_whole(runtime: Runtime, tid: str) -> bool:
    """One event row per event number, up to the thread's."""
    rows = probe(runtime).rows(
        "SELECT seq FROM thread_events WHERE thread_id = ? ORDER BY seq", (tid,)
    )
    head = probe(runtime).rows("SELECT event_seq FROM threads WHERE id = ?", (tid,))[0][0]
    return [int(s) for (s,) in rows] == list(range(1, int(head) + 1))


async def test_c01_050_a_runs_writes_start_from_the_state_its_last_write_left(
    runtime: Runtime, statements: list[str]
) -> None:
    """C01-050: after the run's start (which took the lease) each fenced write starts from
    the kept state: no read of the row, one check each, and the rows read back whole."""
    fenced, _, _ = await _running(runtime)
    tid = fenced.thread_id
    statements.clear()
    for i in range(3):
        await fenced.inject_message(role="assistant", content=f"a{i}")
    assert _reads(statements) == 0
    assert _guards(statements) == 3
    assert _contents(runtime, tid) == [(1, "go"), (2, "a0"), (3, "a1"), (4, "a2")]
    assert _events_whole(runtime, tid)
    assert _pg(runtime).states.stale == 0
    assert tid in _pg(runtime).states.rows


async def test_c01_051_a_write_by_anyone_else_is_seen_by_the_next_run_write(
    runtime: Runtime, statements: list[str]
) -> None:
    """C01-051: a stop and a send written on this node beside the run forget its kept
    state: the run's next write reads the row. A write of another node (a connection of
    its own) changes the row unseen: the run's next write finds its kept state out of
    date, runs again from the row. Either way nothing is lost: the stop flag as last
    written, the numbers continuing after the send's."""
    fenced, plain, _ = await _running(runtime)
    tid = fenced.thread_id
    await fenced.inject_message(role="assistant", content="a0")
    await runtime.store.set_stopped(tid, True)
    await plain.inject_message(role="user", content="beside the run")
    stale = _pg(runtime).states.stale
    statements.clear()
    await fenced.inject_message(role="assistant", content="a1")
    assert _pg(runtime).states.stale == stale
    assert (_reads(statements), _guards(statements)) == (1, 0)
    row = await runtime.store.get_thread(tid)
    assert row is not None and row.stopped
    assert _contents(runtime, tid) == [(1, "go"), (2, "a0"), (3, "beside the run"), (4, "a1")]

    # another node: the stop flag cleared on a connection of its own
    assert probe(runtime).execute("UPDATE threads SET stopped = 0 WHERE id = ?", (tid,)) == 1
    statements.clear()
    await fenced.inject_message(role="assistant", content="a2")
    assert _pg(runtime).states.stale == stale + 1
    assert (_reads(statements), _guards(statements)) == (1, 1)  # checked, then read
    row = await runtime.store.get_thread(tid)
    assert row is not None and not row.stopped
    assert _contents(runtime, tid)[-1] == (5, "a2")
    assert _events_whole(runtime, tid)
    statements.clear()
    await fenced.inject_message(role="assistant", content="a3")  # kept again
    assert (_reads(statements), _guards(statements)) == (0, 1)


async def test_c01_052_a_lease_another_node_took_fails_the_write(
    runtime: Runtime,
) -> None:
    """C01-052: another node took the lease (its token written to the row) → the run's
    next write raises ``LeaseLost`` and writes nothing, though its kept state names the
    old lease."""
    fenced, _, _ = await _running(runtime)
    tid = fenced.thread_id
    await fenced.inject_message(role="assistant", content="a0")
    assert tid in _pg(runtime).states.rows
    probe(runtime).execute(
        "UPDATE threads SET lease_node = 'another node', lease_token = lease_token + 1"
        " WHERE id = ?",
        (tid,),
    )
    before = _contents(runtime, tid)
    with pytest.raises(LeaseLost):
        await fenced.inject_message(role="assistant", content="not written")
    assert _contents(runtime, tid) == before
    assert tid not in _pg(runtime).states.rows


async def test_c01_053_the_end_check_reads_the_queue_unless_it_is_known_empty(
    runtime: Runtime, statements: list[str]
) -> None:
    """C01-053: the end-of-run check starts from the kept state only while the queue is
    known empty (the start found it empty and the run queued nothing); a send queued
    during the run makes it read, find the entry, and keep the run going."""
    fenced, _, fence = await _running(runtime)
    tid = fenced.thread_id
    store = runtime.store.fenced(fence)
    statements.clear()
    settled, _ = await store.end_run(tid, "completed", (0, 0), allow_continue=True)
    assert settled and _reads(statements) == 0 and _guards(statements) == 1
    assert _pg(runtime).states.rows[tid][1][16] is None  # kept as released: no run's lease
    with pytest.raises(LeaseLost):  # the run's fence no longer starts from it
        await fenced.inject_message(role="assistant", content="after the end")

    fenced, _, fence = await _running(runtime)
    tid = fenced.thread_id
    await fenced.inject_message(role="assistant", content="a0")
    entry = QueueEntry(id=new_id(), role="user", content="later", source="api", created_at=0)
    await runtime.store.enqueue(tid, entry, clear_stop=False)
    statements.clear()
    settled, _ = await runtime.store.fenced(fence).end_run(
        tid, "completed", (0, 0), allow_continue=True
    )
    assert not settled
    assert _reads(statements) == 1
    row = await runtime.store.get_thread(tid)
    assert row is not None and row.status.state == "running"
    assert [e.id for e in await runtime.store.list_queue(tid)] == [entry.id]


async def test_c01_054_a_vacuumed_and_frozen_row_goes_on_from_the_kept_state(
    runtime: Runtime, statements: list[str]
) -> None:
    """C01-054: ``VACUUM FREEZE`` of the threads table moves no row version: ``xmin``
    keeps the id of the transaction that wrote the row (PostgreSQL 9.4 on marks a frozen
    row with flag bits), so the run's writes go on from the kept state, and the rows read
    back whole. (Where a row's ``xmin`` did change, the write would run again from it.)"""
    fenced, _, _ = await _running(runtime)
    tid = fenced.thread_id
    await fenced.inject_message(role="assistant", content="a0")
    xmin = probe(runtime).rows("SELECT xmin::text FROM threads WHERE id = ?", (tid,))
    probe(runtime).execute("VACUUM FREEZE threads", ())
    assert probe(runtime).rows("SELECT xmin::text FROM threads WHERE id = ?", (tid,)) == xmin
    statements.clear()
    await fenced.inject_message(role="assistant", content="a1")
    await fenced.inject_message(role="assistant", content="a2")
    assert (_reads(statements), _guards(statements)) == (0, 2)
    assert _contents(runtime, tid) == [(1, "go"), (2, "a0"), (3, "a1"), (4, "a2")]
    assert _events_whole(runtime, tid)


async def test_c01_055_a_taken_call_id_in_a_run_write_is_refused_as_such(
    runtime: Runtime,
) -> None:
    """C01-055: a run's write from its kept state sends its tool calls without waiting for
    their count; a call id another message holds makes the count short, the write runs
    again from the row and is refused as the taken id (``InvalidMessage``), nothing of it
    stored; the run's next write is stored."""
    fenced, _, _ = await _running(runtime)
    tid = fenced.thread_id
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    await fenced.inject_message(role="assistant", tool_calls=calls)
    stale = _pg(runtime).states.stale
    before = _contents(runtime, tid)
    with pytest.raises(InvalidMessage, match="call id 'c1' is already used by another message"):
        await fenced.inject_message(role="assistant", tool_calls=calls)
    assert _pg(runtime).states.stale == stale + 1
    assert _contents(runtime, tid) == before
    assert probe(runtime).rows("SELECT count(*) FROM tool_calls WHERE thread_id = ?", (tid,)) == [
        (1,)
    ]
    await fenced.inject_message(role="assistant", content="after")
    assert _contents(runtime, tid)[-1] == (len(before) + 1, "after")
    assert _events_whole(runtime, tid)


async def test_c01_056_a_log_update_that_moves_an_indexed_column_is_written(
    runtime: Runtime,
) -> None:
    """C01-056: a run's update of an LLM row from its kept state is sent matched on the row's
    indexed columns; one that changes them (another message) matches no row, runs again
    from the row and writes the new values."""
    fenced, _, fence = await _running(runtime)
    tid = fenced.thread_id
    store = runtime.store.fenced(fence)
    first = await fenced.inject_message(role="assistant", content="first")
    second = await fenced.inject_message(role="assistant", content="second")
    row, _ = await store.insert_log(
        tid, LogRow(id=new_id(), message_id=first.id, provider="p", model="m", created_at=0)
    )
    done = row.model_copy(update={"is_complete": True, "output_tokens": 3})
    stale = _pg(runtime).states.stale
    await store.update_log(tid, done)  # indexed columns kept: from the kept state
    assert _pg(runtime).states.stale == stale
    moved = done.model_copy(update={"message_id": second.id, "output_tokens": 5})
    await store.update_log(tid, moved)
    assert _pg(runtime).states.stale == stale + 1
    assert await runtime.store.get_log(tid, row.id) == moved
    assert probe(runtime).rows("SELECT message_id FROM logs WHERE id = ?", (row.id,)) == [
        (second.id,)
    ]


async def test_c01_057_writes_that_go_stale_again_and_again_all_land(runtime: Runtime) -> None:
    """C01-057: 60 run writes with tool calls, a send on this node after every other one
    and the stop flag flipped by another node's connection after every third (so a third
    of those start from a state out of date, and the statements prepared meanwhile run in
    batches that fail) → every write lands once, in order, the stop flag as last written,
    event rows whole; a failed batch leaves no statement taken as prepared that the server
    does not hold (C01-061)."""
    fenced, plain, _ = await _running(runtime)
    tid = fenced.thread_id
    expected = ["go"]
    stopped = False
    stale = _pg(runtime).states.stale
    for i in range(60):
        calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        await fenced.inject_message(role="assistant", content=f"a{i}", tool_calls=calls)
        expected.append(f"a{i}")
        if i % 2:
            await plain.inject_message(role="user", content=f"u{i}")
            expected.append(f"u{i}")
        if i % 3 == 0:
            stopped = not stopped
            probe(runtime).execute(
                "UPDATE threads SET stopped = ? WHERE id = ?", (int(stopped), tid)
            )
    assert _pg(runtime).states.stale - stale == 10  # the flips not followed by a send here
    assert _contents(runtime, tid) == list(enumerate(expected, start=1))
    row = await runtime.store.get_thread(tid)
    assert row is not None and row.stopped == stopped
    assert probe(runtime).rows("SELECT count(*) FROM tool_calls WHERE thread_id = ?", (tid,)) == [
        (60,)
    ]
    assert _events_whole(runtime, tid)


def _base_reads(statements: list[str]) -> int:
    return sum(1 for s in statements if s.startswith("SELECT base_id, depth, keep"))


async def test_c01_058_the_next_run_starts_from_the_last_request_row_while_the_row_holds(
    db_url: str, statements: list[str]
) -> None:
    """C01-058: model turns with a tool call each: after the first turn no LLM row reads its
    request's base (the run's own last row, or the previous run's kept with the released
    state, the thread row unchanged since); after retention strips the thread's log bodies
    (which writes the thread row) the next turn's first LLM row reads its base again, finds
    it gone and stores its request whole."""
    runtime = await Runtime.open(db_url, definitions=chat_definitions())
    try:
        state = await runtime.create_thread("chat")
        tid = state.thread_id
        await runtime.send_message(tid, "q0")
        await runtime.wait_idle(tid, 30)
        statements.clear()
        for i in (1, 2):
            await runtime.send_message(tid, f"q{i}")
            await runtime.wait_idle(tid, 30)
        assert _base_reads(statements) == 0
        # every body so far stripped: the kept request row among them
        strip = await runtime.store.strip_log_bodies(runtime.store.clock(), None, 100)  # type: ignore[attr-defined]
        assert strip.rows == 6
        statements.clear()
        await runtime.send_message(tid, "q3")
        await runtime.wait_idle(tid, 30)
        assert _base_reads(statements) == 1
        logs = await runtime.store.list_logs(tid, limit=None)
        assert len(logs) == 8
        last = await runtime.store.get_log(tid, logs[-1].id)
        assert last is not None and last.request_body is not None
        assert all(f'"q{i}"' in last.request_body for i in range(4))
    finally:
        await runtime.close()


def _enabled_reads(statements: list[str]) -> int:
    return sum(1 for s in statements if s.startswith("SELECT id, event_types FROM webhook"))


async def test_c01_059_the_settlements_webhooks_follow_the_subscriptions_as_they_change(
    db_url: str, statements: list[str]
) -> None:
    """C01-059: the run's settling write takes the enabled webhook subscriptions this node
    read last, checked with the write: a subscription created, disabled or deleted since
    makes the check fail and the write read them again. Every ``run.settled`` is written for
    exactly the subscriptions enabled when it committed."""
    runtime = await Runtime.open(db_url, definitions=chat_definitions())
    try:
        state = await runtime.create_thread("chat")
        tid = state.thread_id

        async def turn(i: int) -> None:
            await runtime.send_message(tid, f"q{i}")
            await runtime.wait_idle(tid, 30)

        def settled_for() -> list[str]:
            return [
                str(sub)
                for (sub,) in probe(runtime).rows(
                    "SELECT subscription_id FROM webhook_outbox WHERE event_type = 'run.settled'"
                    " ORDER BY created_at_us, subscription_id"
                )
            ]

        await turn(0)
        statements.clear()
        await turn(1)
        assert _enabled_reads(statements) == 0  # none then, none now: from what was read
        assert settled_for() == []
        sub = WebhookSubscription(id="wh_a", url="http://127.0.0.1:9/h", secret="s" * 24)
        await runtime.store.create_webhook(sub)
        statements.clear()
        await turn(2)
        assert _enabled_reads(statements) == 1  # the check failed: read again
        assert settled_for() == ["wh_a"]
        statements.clear()
        await turn(3)
        assert _enabled_reads(statements) == 0
        assert settled_for() == ["wh_a", "wh_a"]
        await runtime.store.update_webhook("wh_a", {"enabled": False})
        await turn(4)
        assert settled_for() == ["wh_a", "wh_a"]
        await runtime.store.update_webhook("wh_a", {"enabled": True})
        await runtime.store.create_webhook(sub.model_copy(update={"id": "wh_b"}))
        await turn(5)
        assert settled_for() == ["wh_a", "wh_a", "wh_a", "wh_b"]
    finally:
        await runtime.close()


async def test_c01_060_a_childs_writes_keep_the_parents_run_state_usable(
    runtime: Runtime, statements: list[str]
) -> None:
    """C01-060: a child thread written while its parent's run holds a kept state → the
    child's write raises the parent's activity time (spec 08 §8.2.2) and carries the kept
    state to its own transaction's version: the parent's next run write starts from it (no
    read of the row, no stale count), and the parent's activity time stays the child's."""
    fenced, _, _ = await _running(runtime)
    parent = fenced.thread_id
    await fenced.inject_message(role="assistant", content="a0")
    child = await runtime.store.create_thread(
        NewThread(id=new_id(), agent_id="a", parent_id=parent)
    )
    stale = _pg(runtime).states.stale
    before = await runtime.store.get_thread(parent)
    assert before is not None and before.last_activity_us is not None
    queued, _ = await runtime.store.enqueue(  # a send to the child: activity (§8.2.2)
        child.id,
        QueueEntry(id=new_id(), role="user", content="c", source="api", created_at=0),
        clear_stop=False,
    )
    touched = await runtime.store.get_thread(parent)
    assert touched is not None and touched.last_activity_us is not None
    assert touched.last_activity_us == queued.created_at > before.last_activity_us
    statements.clear()
    await fenced.inject_message(role="assistant", content="a1")
    assert (_reads(statements), _guards(statements)) == (0, 1)
    assert _pg(runtime).states.stale == stale
    after = await runtime.store.get_thread(parent)
    assert after is not None and after.last_activity_us is not None
    assert after.last_activity_us >= touched.last_activity_us
    assert _contents(runtime, parent) == [(1, "go"), (2, "a0"), (3, "a1")]
    assert _events_whole(runtime, parent)
