"""Migration 11: a short LLM response body (``bodies.INLINE_RESPONSE_MAX``) is kept in its
``logs`` row (``logs.response_body``), a longer one in ``log_bodies`` as before; each body
is in one place or the other, never both, and every read returns it from either.

A version-10 file (its responses all in log_bodies) opens, migrates without moving a row
and reads back the same; an update that writes such a row's response moves it into the
row when short. On a new file, each way a response is written (insert, update, the
update of another column, none) leaves it in the right place. Real ``Runtime`` and store
on real SQLite files; raw SQL only to build the old file and to look where a body is."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from sqlite_versions import make_version, populated_old_file, snapshot
from threadloom import Runtime
from threadloom.records import LogRow, Message, new_id
from threadloom.store.base import NewThread
from threadloom.store.core.bodies import INLINE_RESPONSE_MAX
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import SqliteStore, path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself

SHORT = '{"content":"done"}'
LONG = '{"content":"' + "x" * INLINE_RESPONSE_MAX + '"}'
EDGE = "y" * INLINE_RESPONSE_MAX  # the longest kept in the row


def where(path: str, log_id: str) -> tuple[str | None, str | None]:
    """The response as stored: (in the row, in log_bodies)."""
    with closing(sqlite3.connect(path)) as conn:
        inline = conn.execute("SELECT response_body FROM logs WHERE id = ?", (log_id,))
        beside = conn.execute(
            "SELECT body FROM log_bodies WHERE log_id = ? AND part = 'response'", (log_id,)
        )
        row, body = inline.fetchone(), beside.fetchone()
    assert row is not None
    return row[0], None if body is None else body[0]


async def test_a_version_10_file_migrates_and_reads_the_same(tmp_path: Path) -> None:
    old_url, ids, before = await populated_old_file(
        tmp_path, lambda source, target: make_version(source, target, 10)
    )
    path = path_from_url(old_url)
    with closing(sqlite3.connect(path)) as conn:
        responses = conn.execute(
            "SELECT b.log_id, l.thread_id, b.body FROM log_bodies b JOIN logs l ON l.id = b.log_id"
            " WHERE b.part = 'response' ORDER BY b.log_id"
        ).fetchall()
    assert responses  # the populated file has LLM rows with a response

    rt = await Runtime.open(old_url)
    try:
        assert await snapshot(rt, ids) == before
        # an update that writes the response of a row stored before moves it into the row
        log_id, tid, body = responses[0]
        stored = await rt.store.get_log(tid, log_id)
        assert stored is not None and stored.response_body == body
        changed = stored.model_copy(update={"response_body": SHORT, "output_tokens": 3})
        await rt.store.update_log(tid, changed, bodies=("response",))
        assert await rt.store.get_log(tid, log_id) == changed
        assert where(path, log_id) == (SHORT, None)
        # an update that does not write the response leaves an old row's where it is
        other_id, other_tid, other_body = responses[1]
        other = await rt.store.get_log(other_tid, other_id)
        assert other is not None
        with_results = other.model_copy(update={"tool_results": "[]"})
        await rt.store.update_log(other_tid, with_results, bodies=())
        assert where(path, other_id) == (None, other_body)
        got = await rt.store.get_log(other_tid, other_id)
        assert got is not None and (got.response_body, got.tool_results) == (other_body, "[]")
    finally:
        await rt.close()

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = {r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS} and 11 in versions


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(f"sqlite:///{tmp_path / 'bodies.db'}")
    yield opened
    await opened.close()


def llm(response: str | None) -> LogRow:
    return LogRow(
        id=new_id(),
        provider="p",
        model="m",
        created_at=0,
        is_complete=response is not None,
        request_body='{"messages":[]}',
        response_body=response,
    )


async def _thread(store: SqliteStore) -> str:
    return (await store.create_thread(NewThread(id=new_id(), agent_id="a"))).id


async def _read(store: SqliteStore, tid: str, log_id: str) -> LogRow:
    one = await store.get_log(tid, log_id)
    listed = [r for r in await store.list_logs(tid, limit=None) if r.id == log_id]
    assert one is not None and listed == [one]
    return one


@pytest.mark.parametrize(
    ("response", "placed"),
    [(SHORT, (SHORT, None)), (EDGE, (EDGE, None)), (LONG, (None, LONG)), (None, (None, None))],
)
async def test_an_insert_keeps_a_short_response_in_the_row(
    store: SqliteStore, response: str | None, placed: tuple[str | None, str | None]
) -> None:
    tid = await _thread(store)
    row, _ = await store.insert_log(tid, llm(response))
    assert where(store.path, row.id) == placed
    assert (await _read(store, tid, row.id)).response_body == response


@pytest.mark.parametrize("first", [SHORT, LONG, None])
@pytest.mark.parametrize("then", [SHORT, EDGE, LONG, None])
async def test_an_update_of_the_response_moves_it_where_it_belongs(
    store: SqliteStore, first: str | None, then: str | None
) -> None:
    tid = await _thread(store)
    row, _ = await store.insert_log(tid, llm(first))
    changed = row.model_copy(update={"response_body": then, "is_complete": True})
    await store.update_log(tid, changed, bodies=("response",))
    short = then is not None and len(then) <= INLINE_RESPONSE_MAX
    assert where(store.path, row.id) == ((then, None) if short else (None, then))
    assert await _read(store, tid, row.id) == changed


@pytest.mark.parametrize("first", [SHORT, LONG])
async def test_the_writes_of_a_turn_keep_the_response_where_it_is(
    store: SqliteStore, first: str
) -> None:
    """The engine's writes: the model message with its row (insert), then a tool result
    with the row's other columns (no response written), then the answer with a new row and
    the pending path's update of message and row with the response."""
    tid = await _thread(store)
    call = Message(id=new_id(), role="assistant", content=None)
    _, row, _ = await store.insert_message_and_log(tid, call, llm(first), new_log=True)
    result = Message(id=new_id(), role="tool", content="r", tool_call_id="c1", name="t")
    later = row.model_copy(update={"tool_results": '[{"id":"c1"}]', "response_body": None})
    await store.insert_message_and_log(tid, result, later)  # bodies not written
    kept = await _read(store, tid, row.id)
    assert (kept.response_body, kept.tool_results) == (first, '[{"id":"c1"}]')
    assert where(store.path, row.id) == ((first, None) if first == SHORT else (None, first))

    pending, _ = await store.insert_message(tid, Message(id=new_id(), role="assistant"))
    open_row, _ = await store.insert_log(tid, llm(None))
    answer = pending.model_copy(update={"content": "done"})
    closed = open_row.model_copy(update={"response_body": first, "is_complete": True})
    await store.update_message_and_log(tid, answer, closed, bodies=("response",))
    assert await _read(store, tid, open_row.id) == closed
    assert where(store.path, open_row.id) == ((first, None) if first == SHORT else (None, first))


@pytest.mark.parametrize("then", [SHORT, LONG])
async def test_an_update_that_moves_the_row_writes_its_response_too(
    store: SqliteStore, then: str
) -> None:
    """An update that changes an indexed column (the row's message) takes the statement
    that returns the stored values: it writes the response's column as well."""
    tid = await _thread(store)
    first, _ = await store.insert_message(tid, Message(id=new_id(), role="user", content="a"))
    second, _ = await store.insert_message(tid, Message(id=new_id(), role="user", content="b"))
    row, _ = await store.insert_log(tid, llm(None).model_copy(update={"message_id": first.id}))
    moved = row.model_copy(
        update={"message_id": second.id, "response_body": then, "is_complete": True}
    )
    await store.update_log(tid, moved, bodies=("response",))
    assert await _read(store, tid, row.id) == moved
    assert where(store.path, row.id) == ((then, None) if then == SHORT else (None, then))
