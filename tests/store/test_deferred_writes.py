"""Writes the logic defers (``Conn.defer``, ``Conn.defer_checked``): on PostgreSQL they are
queued in the transaction's pipeline and sent with the next statement whose result is
read, or with the COMMIT, the queued statements on distinct tables as one statement
(``dialect.merged``); on SQLite they run at once. Either way a transaction stores all of
them or none, an error of a deferred statement is the transaction's error (translated
where the logic tells it apart), and the connection serves the next write. Real stores,
both backends; raw SQL only to read the storage."""

from __future__ import annotations

from typing import Any

import pytest

from scripted_chat import chat_definitions
from store_probe import probe
from threadloom import Runtime
from threadloom.errors import InvalidMessage
from threadloom.records import Message, new_id
from threadloom.store.postgres.dialect import _groups, merged, native


def _count(rt: Runtime, sql: str, *params: Any) -> int:
    return int(probe(rt).rows(sql, params)[0][0])


@pytest.mark.parametrize("tool_calls", [False, True])
async def test_a_taken_message_id_is_refused_as_such_whenever_its_error_arrives(
    runtime: Runtime, tool_calls: bool
) -> None:
    """A message whose id is taken: the INSERT is deferred, so on PostgreSQL its error comes
    with the tool calls' statement (a message with calls) or with the COMMIT (one
    without); both are refused as the id, nothing of the transaction is stored, and the
    thread takes its next message."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    first = await state.inject_message(role="user", content="one")
    before = await runtime.store.get_thread(tid)
    assert before is not None
    again: dict[str, Any] = {"id": first.id, "role": "assistant", "content": "two"}
    if tool_calls:
        calls = '[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]'
        again["tool_calls"] = calls
    with pytest.raises(InvalidMessage, match=f"message id '{first.id}' already exists"):
        await runtime.store.insert_message(tid, Message(**again, created_at=0))

    after = await runtime.store.get_thread(tid)
    assert after is not None and after.event_seq == before.event_seq
    assert _count(runtime, "SELECT count(*) FROM messages WHERE thread_id = ?", tid) == 1
    assert _count(runtime, "SELECT count(*) FROM tool_calls WHERE thread_id = ?", tid) == 0
    assert _count(runtime, "SELECT count(*) FROM thread_events WHERE thread_id = ?", tid) == (
        after.event_seq
    )
    second = await state.inject_message(role="user", content="three")
    page = await state.get_messages(limit=None, order="asc")
    assert [m.id for m in page.messages] == [first.id, second.id]


async def test_model_turns_store_every_deferred_write(db_url: str) -> None:
    """Three model turns with a tool call each (their messages, tool call rows, LLM rows
    and request deltas, event rows and counters are deferred writes) read back whole: the
    messages in order, one event row per event number, the counters at the last ones, a
    tool call row per call, two LLM rows a turn whose request bodies read back."""
    runtime = await Runtime.open(db_url, definitions=chat_definitions())
    try:
        state = await runtime.create_thread("chat")
        tid = state.thread_id
        for i in range(3):
            await runtime.send_message(tid, f"q{i}")
            await runtime.wait_idle(tid, 30)
        page = await state.get_messages(limit=None, order="asc")
        assert [m.role for m in page.messages] == ["user", "assistant", "tool", "assistant"] * 3
        assert [m.content for m in page.messages if m.role == "user"] == ["q0", "q1", "q2"]
        assert all(
            m.content.startswith("done: echo ")
            for m in page.messages
            if m.role == "assistant" and not m.tool_calls
        )
        thread = await runtime.store.get_thread(tid)
        assert thread is not None
        seqs = probe(runtime).rows(
            "SELECT seq FROM thread_events WHERE thread_id = ? ORDER BY seq", (tid,)
        )
        assert [s for (s,) in seqs] == list(range(1, thread.event_seq + 1))
        assert _count(runtime, "SELECT msg_seq FROM threads WHERE id = ?", tid) == 12
        assert _count(runtime, "SELECT count(*) FROM tool_calls WHERE thread_id = ?", tid) == 3
        logs = await runtime.store.list_logs(tid, limit=None)
        assert len(logs) == 6
        for row in logs:
            full = await runtime.store.get_log(tid, row.id)
            assert full is not None and full.request_body and '"q0"' in full.request_body
        assert _count(runtime, "SELECT count(*) FROM log_requests WHERE thread_id = ?", tid) >= 5
    finally:
        await runtime.close()


def test_queued_statements_on_distinct_tables_are_one_statement() -> None:
    """Statements naming no table in common go as one ``WITH`` statement, the one that
    returns rows last, the parameters in the order of the text; one that names a table an
    earlier one changes starts the next statement."""
    queued: list[tuple[str, tuple[Any, ...]]] = [
        ("UPDATE threads SET a = ? WHERE id = ? RETURNING pg_notify('c', ?)", (1, "t", "n")),
        ("INSERT INTO thread_events(k) VALUES (?)", (2,)),
        ("INSERT INTO logs(k) VALUES (?)", (3,)),
        ("UPDATE logs SET k = ? WHERE id = (SELECT id FROM messages WHERE id = ?)", (4, "m")),
        ("INSERT INTO messages(k) VALUES (?)", (5,)),
    ]
    groups = _groups(queued)
    assert [[sql.split(" ")[0:3] for sql, _ in g] for g in groups] == [
        [
            ["INSERT", "INTO", "thread_events(k)"],
            ["INSERT", "INTO", "logs(k)"],
            ["UPDATE", "threads", "SET"],
        ],
        [["UPDATE", "logs", "SET"]],
        [["INSERT", "INTO", "messages(k)"]],
    ]
    first = groups[0]
    text = merged(tuple(sql for sql, _ in first))
    assert native(text) == (
        b"WITH w0 AS (INSERT INTO thread_events(k) VALUES ($1)),"
        b" w1 AS (INSERT INTO logs(k) VALUES ($2))"
        b" UPDATE threads SET a = $3 WHERE id = $4 RETURNING pg_notify('c', $5)"
    )
    assert native("SELECT '?' || ? || '%s'") == b"SELECT '?' || $1 || '%s'"
    params = [p for _, ps in first for p in ps]
    assert params == [2, 3, 1, "t", "n"]


def test_a_kept_reads_check_is_the_statement_of_the_writes_queued_with_it() -> None:
    """A kept read's check (``PgConn.kept_read``: a ``SELECT`` of a table no queued write
    names) is the statement itself of the writes gathered with it, their ``WITH`` queries
    its own, unless one of them returns rows: then it goes first, a statement of its own."""
    check = ("SELECT CASE WHEN (SELECT 1 FROM webhook_subscriptions) = ? THEN 1 END", ("f",))
    write = ("INSERT INTO messages(k) VALUES (?)", (1,))
    event = ("INSERT INTO thread_events(k) VALUES (?)", (2,))
    counted = ("/*expect 1*/ INSERT INTO tool_calls(k) VALUES (?) RETURNING 1", (3,))
    assert _groups([write, check, event]) == [[write, event, check]]
    assert _groups([check, write]) == [[write, check]]
    text = merged(tuple(sql for sql, _ in (write, event, check)))
    assert native(text) == (
        b"WITH w0 AS (INSERT INTO messages(k) VALUES ($1)),"
        b" w1 AS (INSERT INTO thread_events(k) VALUES ($2))"
        b" SELECT CASE WHEN (SELECT 1 FROM webhook_subscriptions) = $3 THEN 1 END"
    )
    assert _groups([check, write, counted]) == [[check], [write, counted]]
    assert _groups([check]) == [[check]]
    # writes that must follow one another: the check goes with the first statement
    again = ("INSERT INTO messages(k) VALUES (?)", (4,))
    assert _groups([check, write, again]) == [[write, check], [again]]


@pytest.mark.postgres_only
async def test_a_deferred_statement_that_fails_fails_its_transaction_alone(
    runtime: Runtime,
) -> None:
    """A deferred write the database refuses (here a CHECK on the event rows, which every
    write defers) fails its transaction at the commit: nothing of it is stored, and every
    pooled connection then serves writes again."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    await state.inject_message(role="user", content="kept")
    name = f"no_{new_id()[:8]}"
    probe(runtime).execute(
        f"ALTER TABLE thread_events ADD CONSTRAINT {name} CHECK (kind <> 'message') NOT VALID"
    )
    with pytest.raises(Exception, match=name):
        await state.inject_message(role="user", content="refused")
    probe(runtime).execute(f"ALTER TABLE thread_events DROP CONSTRAINT {name}")
    assert _count(runtime, "SELECT count(*) FROM messages WHERE thread_id = ?", tid) == 1
    for i in range(12):  # more than the pool's connections: each one is usable
        await state.inject_message(role="user", content=f"m{i}")
    page = await state.get_messages(limit=None, order="asc")
    assert [m.content for m in page.messages] == ["kept", *(f"m{i}" for i in range(12))]
