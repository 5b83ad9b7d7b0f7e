"""Updating a log row in the SQLite store (``runs._update_log_in``): every column is
replaced, whether the indexed ones (kind, message_id, parent_log_id, retry_of_log_id) keep
their values (one statement) or change (their new values are written), to a value or to
NULL; a row of another thread, or no row, is refused. Real store on a real SQLite file."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from threadloom.records import LogRow, Message, new_id
from threadloom.store.base import NewThread
from threadloom.store.sqlite.store import SqliteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = await SqliteStore.open(f"sqlite:///{tmp_path / 'logs.db'}")
    yield opened
    await opened.close()


async def _thread(store: SqliteStore) -> str:
    return (await store.create_thread(NewThread(id=new_id(), agent_id="a"))).id


async def _message(store: SqliteStore, thread_id: str) -> str:
    stored, _ = await store.insert_message(thread_id, Message(id=new_id(), role="user"))
    return stored.id


def _indexed(store: SqliteStore, log_id: str) -> tuple[object, ...]:
    with sqlite3.connect(store.path) as conn:
        row = conn.execute(
            "SELECT kind, message_id, parent_log_id, retry_of_log_id FROM logs WHERE id = ?",
            (log_id,),
        ).fetchone()
    return tuple(row)


async def test_an_update_keeping_the_indexed_columns_replaces_the_rest(
    store: SqliteStore,
) -> None:
    tid = await _thread(store)
    mid = await _message(store, tid)
    row, _ = await store.insert_log(
        tid,
        LogRow(
            id=new_id(),
            message_id=mid,
            provider="p",
            model="m",
            created_at=0,
            is_complete=False,
            request_body="{}",
        ),
    )
    done = row.model_copy(
        update={"is_complete": True, "output_tokens": 7, "response_body": "ok", "error": None}
    )
    event = await store.update_log(tid, done)
    assert (event.kind, event.entity_id) == ("log", row.id)
    assert await store.get_log(tid, row.id) == done
    assert _indexed(store, row.id) == (None, mid, None, None)


async def test_an_update_changing_the_indexed_columns_writes_them(store: SqliteStore) -> None:
    tid = await _thread(store)
    first, second = await _message(store, tid), await _message(store, tid)
    parent, _ = await store.insert_log(
        tid, LogRow(id=new_id(), provider="p", model="m", created_at=0)
    )
    row, _ = await store.insert_log(
        tid, LogRow(id=new_id(), message_id=first, provider="p", model="m", created_at=0)
    )
    moved = row.model_copy(
        update={"message_id": second, "parent_log_id": parent.id, "retry_of_log_id": parent.id}
    )
    await store.update_log(tid, moved)
    assert _indexed(store, row.id) == (None, second, parent.id, parent.id)
    assert await store.get_log(tid, row.id) == moved
    cleared = moved.model_copy(
        update={"kind": "app", "message_id": None, "parent_log_id": None, "app_cost": 0.5}
    )
    await store.update_log(tid, cleared)
    assert _indexed(store, row.id) == ("app", None, None, parent.id)
    assert await store.get_log(tid, row.id) == cleared


async def test_an_update_of_a_row_not_in_the_thread_is_refused(store: SqliteStore) -> None:
    tid, other = await _thread(store), await _thread(store)
    row, _ = await store.insert_log(tid, LogRow(id=new_id(), provider="p", model="m", created_at=0))
    with pytest.raises(LookupError):
        await store.update_log(other, row.model_copy(update={"model": "x"}))
    with pytest.raises(LookupError):
        await store.update_log(tid, row.model_copy(update={"id": new_id()}))
    assert await store.get_log(tid, row.id) == row
