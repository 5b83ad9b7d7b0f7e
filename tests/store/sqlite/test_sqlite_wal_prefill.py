"""The WAL prefill (store/sqlite/wal_prefill.py): the runtime that claims a file writes the
WAL's steady-state size in zeros, so the commits after a start never grow the file; it is
skipped where it could touch frames another connection needs, and the data is whole
whatever happens to the process. Real Runtime and store."""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.errors import StoreError
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.store.sqlite.store import WAL_AUTOCHECKPOINT_PAGES, SqliteStore
from threadloom.store.sqlite.wal_prefill import wal_size

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


def definitions() -> Definitions:
    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(lambda request: Reply.text("ok")), model="m"),
        Prompt(name="P", model="M", system="s"),
        Agent(name="chat", side_a=Side(prompt="P", label="A"), side_b=Side(label="B")),
    )


async def test_the_wal_keeps_its_prefilled_size_across_checkpoints(tmp_path: Path) -> None:
    db = str(tmp_path / "t.db")
    expected = wal_size(WAL_AUTOCHECKPOINT_PAGES, 4096)
    runtime = await Runtime.open(db, definitions=definitions())
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore) and store.wal_prefilled
        assert os.path.getsize(db + "-wal") == expected
        state = await runtime.create_thread(agent_id="chat")
        sent = []
        # far more than the 4,000 pages after which SQLite checkpoints and wraps around
        filler = "x" * 3000
        for i in range(1500):
            sent.append(f"{i} {filler}")
            await state.inject_message(role="user", content=sent[-1])
        assert os.path.getsize(db) > 4 << 20  # checkpoints copied the pages: it wrapped
        assert os.path.getsize(db + "-wal") == expected  # written within the zeros only
        await runtime.send_message(state.thread_id, "and now?")
        await runtime.wait_idle(state.thread_id, timeout=10)
    finally:
        await runtime.close()
    again = await Runtime.open(db, definitions=definitions())
    try:
        state = await again.thread(state.thread_id)
        page = await state.get_messages(order="asc", limit=None)
        assert [m.content for m in page.messages] == [*sent, "and now?", "ok"]
    finally:
        await again.close()
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_no_prefill_while_another_connection_holds_the_wal(tmp_path: Path) -> None:
    """A reader of another process (here: a connection) in the middle of a snapshot keeps
    the WAL from being emptied: the prefill is skipped and the store works as before."""
    db = str(tmp_path / "t.db")
    first = await Runtime.open(db, definitions=definitions())
    state = await first.create_thread(agent_id="chat")
    await state.inject_message(role="user", content="before")
    await first.close()
    with closing(sqlite3.connect(db, isolation_level=None)) as reader:
        reader.execute("PRAGMA wal_autocheckpoint = 0")
        reader.execute("PRAGMA user_version = 7")  # a commit of its own: frames in the WAL
        reader.execute("BEGIN")  # a snapshot that reads those frames
        assert reader.execute("SELECT count(*) FROM threads").fetchone()[0] == 1
        runtime = await Runtime.open(db, definitions=definitions())
        try:
            store = runtime.store
            assert isinstance(store, SqliteStore) and not store.wal_prefilled
            again = await runtime.thread(state.thread_id)
            await again.inject_message(role="user", content="after")
            page = await again.get_messages(order="asc")
            assert [m.content for m in page.messages] == ["before", "after"]
        finally:
            await runtime.close()
        assert reader.execute("PRAGMA user_version").fetchone()[0] == 7
        reader.execute("COMMIT")


async def test_no_prefill_without_per_commit_syncs(tmp_path: Path) -> None:
    for sync in ("NORMAL", "OFF"):
        runtime = await Runtime.open(
            str(tmp_path / f"{sync}.db"), definitions=definitions(), synchronous=sync
        )
        try:
            store = runtime.store
            assert isinstance(store, SqliteStore) and not store.wal_prefilled
        finally:
            await runtime.close()


async def test_a_shared_runtime_does_not_prefill(tmp_path: Path) -> None:
    """Only the runtime that claims the file (``exclusive``, the default) touches its WAL."""
    db = str(tmp_path / "t.db")
    shared = await Runtime.open(db, definitions=definitions(), exclusive=False)
    try:
        store = shared.store
        assert isinstance(store, SqliteStore) and not store.wal_prefilled
        assert os.path.getsize(db + "-wal") < wal_size(WAL_AUTOCHECKPOINT_PAGES, 4096)
    finally:
        await shared.close()


async def test_a_failed_prefill_leaves_a_working_store(tmp_path: Path, monkeypatch: Any) -> None:
    """The disk fills up while the zeros are written (the OS error is simulated): the open
    goes on without the prefill, the partial zeros are dropped, and the store works."""
    from threadloom.store.sqlite import wal_prefill

    def disk_full(path: str, size: int) -> None:
        with open(path, "r+b") as f:
            f.write(bytes(4096))  # some zeros made it to the file first
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(wal_prefill, "_write_zeros", disk_full)
    db = str(tmp_path / "t.db")
    runtime = await Runtime.open(db, definitions=definitions())
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore) and not store.wal_prefilled
        assert os.path.getsize(db + "-wal") == 0  # the partial zeros are gone
        state = await runtime.create_thread(agent_id="chat")
        await runtime.send_message(state.thread_id, "hello")
        await runtime.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc")
        assert [m.content for m in page.messages] == ["hello", "ok"]
    finally:
        await runtime.close()


async def test_an_unusable_lock_file_is_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    (tmp_path / "t.db.lock").mkdir()  # not a file the lock can be taken on
    with pytest.raises(StoreError, match="lock file"):
        await Runtime.open(str(db), definitions=definitions())
