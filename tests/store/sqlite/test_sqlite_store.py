"""The SQLite store's own options: URLs, write modes, and waiting for another process."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.errors import InvalidMessage, StoreError
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


def test_url_forms() -> None:
    """SQLAlchemy's convention: three slashes relative, four absolute; plain paths as given."""
    assert path_from_url("sqlite:///./threadloom.db") == "./threadloom.db"
    assert path_from_url("sqlite:///data/t.db") == "data/t.db"
    assert path_from_url("sqlite:////var/lib/t.db") == "/var/lib/t.db"
    assert path_from_url("/tmp/t.db") == "/tmp/t.db"
    with pytest.raises(StoreError, match="sqlite:///path"):
        path_from_url("sqlite://host/t.db")


async def test_unknown_write_mode_is_refused(db_url: str) -> None:
    with pytest.raises(StoreError, match="write_mode"):
        await Runtime.open(db_url, write_mode="sometimes")


@pytest.mark.parametrize("mode", ["auto", "thread", "inline"])
async def test_every_write_mode_keeps_order_and_durability(db_url: str, mode: str) -> None:
    """Concurrent writes to several threads in each mode: all stored, in call order per thread."""
    runtime = await Runtime.open(db_url, write_mode=mode)
    states = [await runtime.create_thread("a") for _ in range(5)]
    await asyncio.gather(
        *(s.inject_message(role="user", content=f"{n}") for n in range(20) for s in states)
    )
    ids = [s.thread_id for s in states]
    await runtime.close()
    reopened = await Runtime.open(db_url)
    for thread_id in ids:
        page = await (await reopened.thread(thread_id)).get_messages(order="asc", limit=None)
        assert [m.content for m in page.messages] == [str(n) for n in range(20)]
        stamps = [m.created_at for m in page.messages]
        assert stamps == sorted(set(stamps))
    await reopened.close()


@pytest.mark.parametrize("mode", ["auto", "inline"])
async def test_write_waits_for_another_process_holding_the_lock(tmp_path: Path, mode: str) -> None:
    """When another connection holds SQLite's write lock, the write waits for it on the
    writer thread instead of failing (and the event loop keeps running meanwhile)."""
    path = tmp_path / "busy.db"
    runtime = await Runtime.open(f"sqlite:///{path}", write_mode=mode)
    state = await runtime.create_thread("a")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    task = asyncio.create_task(state.inject_message(role="user", content="after the lock"))
    ticks = 0
    for _ in range(10):
        await asyncio.sleep(0.01)
        ticks += 1
    assert not task.done()
    assert ticks == 10  # the loop was not blocked while the write waited
    other.execute("COMMIT")
    other.close()
    stored = await asyncio.wait_for(task, 5)
    assert (await state.get_message(stored.id)) == stored
    await runtime.close()


async def test_a_batch_waits_for_another_process_holding_the_lock(tmp_path: Path) -> None:
    """Under load (``auto``) writes join a batch on the loop's thread; while another
    connection holds the write lock the batch moves to the writer thread and waits there,
    the loop keeps running, and every write lands once the lock is released."""
    path = tmp_path / "busy.db"
    runtime = await Runtime.open(f"sqlite:///{path}")
    states = [await runtime.create_thread("a") for _ in range(8)]
    store: Any = runtime.store
    commits = store.commits
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    writes = asyncio.gather(
        *(s.inject_message(role="user", content=f"m{i}") for i, s in enumerate(states))
    )
    ticks = 0
    for _ in range(10):
        await asyncio.sleep(0.01)
        ticks += 1
    assert not writes.done() and ticks == 10
    other.execute("COMMIT")
    other.close()
    stored = await asyncio.wait_for(writes, 5)
    assert [m.content for m in stored] == [f"m{i}" for i in range(8)]
    assert store.commits - commits < 8  # they still shared commits
    for state, message in zip(states, stored, strict=True):
        assert (await state.get_message(message.id)) == message
    await runtime.close()


@pytest.mark.parametrize("mode", ["thread", "auto"])
async def test_group_commit_isolates_a_failing_write(db_url: str, mode: str) -> None:
    """Writes queued together are committed together (on the writer thread, or under load
    on the loop's thread), each in its own savepoint: one refused write (a reused tool call
    id) fails alone, the others land."""
    runtime = await Runtime.open(db_url, write_mode=mode)
    states = [await runtime.create_thread("a") for _ in range(40)]
    await states[0].inject_message(
        role="assistant", tool_calls=[{"id": "dup", "function": {"name": "f", "arguments": "{}"}}]
    )
    store: Any = runtime.store
    commits, writes = store.commits, store.writes
    results = await asyncio.gather(
        *(s.inject_message(role="user", content=f"m{i}") for i, s in enumerate(states)),
        states[0].inject_message(
            role="assistant",
            tool_calls=[{"id": "dup", "function": {"name": "f", "arguments": "{}"}}],
        ),
        return_exceptions=True,
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1 and isinstance(failures[0], InvalidMessage)
    assert store.writes - writes == 41
    assert store.commits - commits < 41  # several writes shared a commit
    for i, state in enumerate(states):
        page = await state.get_messages(limit=None)
        assert f"m{i}" in [m.content for m in page.messages]
    await runtime.close()


async def test_a_refused_message_insert_says_why(db_url: str) -> None:
    """A message id or tool call id that is taken is refused as such; any other refusal of
    the database (here a trigger, as a CHECK would) keeps its own reason instead of
    claiming the id."""
    runtime = await Runtime.open(db_url)
    state = await runtime.create_thread("a")
    first = await state.inject_message(role="user", content="one")
    with pytest.raises(InvalidMessage, match=f"message id '{first.id}' already exists"):
        await runtime.store.insert_message(state.thread_id, first.model_copy())
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "CREATE TRIGGER no_two BEFORE INSERT ON messages WHEN NEW.content = 'two'"
            " BEGIN SELECT RAISE(ABORT, 'no second message'); END"
        )
    with pytest.raises(sqlite3.IntegrityError, match="no second message"):
        await state.inject_message(role="user", content="two")
    call = {"id": "c1", "function": {"name": "f", "arguments": "{}"}}
    await state.inject_message(role="assistant", tool_calls=[call])
    with pytest.raises(InvalidMessage, match="call id 'c1' is already used by another message"):
        await state.inject_message(role="assistant", tool_calls=[call])
    with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "CREATE TRIGGER no_calls BEFORE INSERT ON tool_calls"
            " BEGIN SELECT RAISE(ABORT, 'no more calls'); END"
        )
    with pytest.raises(sqlite3.IntegrityError, match="no more calls"):
        await state.inject_message(role="assistant", tool_calls=[{**call, "id": "c2"}])
    page = await state.get_messages(order="asc", limit=None)
    assert [(m.content, m.tool_calls is None) for m in page.messages] == [
        ("one", True),
        (None, False),
    ]
    await runtime.close()


async def test_a_failing_batch_settles_every_write(db_url: str) -> None:
    """If the loop's connection itself fails (here: it was closed underneath), each write of
    the batch gets the error; none is left waiting forever."""
    runtime = await Runtime.open(db_url)
    states = [await runtime.create_thread("a") for _ in range(5)]
    store: Any = runtime.store
    store._iconn.close()
    results = await asyncio.wait_for(
        asyncio.gather(
            *(s.inject_message(role="user", content="x") for s in states), return_exceptions=True
        ),
        5,
    )
    assert all(isinstance(r, sqlite3.ProgrammingError) for r in results), results
    store._iconn = None  # the store's close would close it again
    await runtime.close()
