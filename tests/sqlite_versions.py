"""Test helper: a store file at an older schema version, holding the rows of a current one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from thread_content import fill_thread
from threadloom import Runtime
from threadloom.records import LogRow, SubagentRegistryEntry, new_id
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url


def llm_row(message_id: str, complete: bool) -> LogRow:
    return LogRow(
        id=new_id(),
        message_id=message_id,
        provider="scripted",
        model="m",
        is_complete=complete,
        created_at=0,
        cost_total=0.25,
        request_body='{"messages":[]}',
        response_body='{"content":"x"}' if complete else None,
    )


async def populate(rt: Runtime) -> list[str]:
    """Two root threads and a child: messages of every kind (tool calls, a nested one, a
    silent one), queue entries, app and LLM log rows (one incomplete), a registry entry,
    a file; the events all of it wrote."""
    parent = await rt.create_thread("a")
    other = await rt.create_thread("a")
    child = await rt.create_thread("child_agent", parent=parent.thread_id)
    await rt.store.upsert_registry_entry(
        parent.thread_id,
        SubagentRegistryEntry(
            reference=child.thread_id, relationship="r", owner="a", name="child_agent"
        ),
    )
    for n, state in enumerate((parent, other, child)):
        user_id = await fill_thread(rt, state, str(n))
        await rt.store.insert_log(state.thread_id, llm_row(user_id, True))
        await rt.store.insert_log(state.thread_id, llm_row(user_id, False))
        await state.write_file(f"/notes/{n}.txt", b"note")
    return [parent.thread_id, other.thread_id, child.thread_id]


async def snapshot(rt: Runtime, ids: list[str]) -> dict[str, Any]:
    store: Any = rt.store
    out: dict[str, Any] = {"list": await store.list_threads(limit=100)}
    for tid in ids:
        out[tid] = (
            await store.get_thread(tid),
            await store.read_page(
                tid, limit=None, offset=0, order="asc", include_silent=True, max_depth=None
            ),
            await store.read_page(
                tid, limit=2, offset=1, order="desc", include_silent=False, max_depth=0
            ),
            await store.read_page(
                tid, limit=10, offset=0, order="desc", include_silent=True, max_depth=0
            ),
            await store.top_level_history(tid),
            await store.newest_top_level_id(tid),
            await store.read_events(tid, 0),
            await store.read_events(tid, 3, limit=4),
            await store.list_logs(tid, limit=None),
            await store.list_logs(tid, limit=None, kind="app"),
            await store.cost_summary([tid]),
            await store.thread_stats(tid),
            await store.get_registry(tid),
            await store.list_queue(tid),
            await store.read_file(tid, "/notes/0.txt"),
        )
    return out


async def populated_old_file(
    tmp_path: Path, make_old: Callable[[str, str], None]
) -> tuple[str, list[str], dict[str, Any]]:
    """A store populated by ``populate`` and read by ``snapshot``, then ``make_old(source,
    target)`` writes its rows into an older file: that file's URL, the thread ids and the
    snapshot the migrated file must read back."""
    new_url = f"sqlite:///{tmp_path / 'new.db'}"
    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    rt = await Runtime.open(new_url)
    try:
        ids = await populate(rt)
        before = await snapshot(rt, ids)
    finally:
        await rt.close()
    make_old(path_from_url(new_url), path_from_url(old_url))
    return old_url, ids, before


def copy_at_version(source: str, target: str, version: int) -> sqlite3.Connection:
    """Create ``target`` with migrations up to ``version`` and copy every row of
    ``source`` into it (the columns that version has). Returns the open connection, with
    ``source`` still attached as ``src``, for the caller's version-specific rows; the
    caller detaches it and closes the connection."""
    conn = sqlite3.connect(target, isolation_level=None)
    assert schema.migrate(conn, upto=version) == version
    conn.execute("ATTACH DATABASE ? AS src", (source,))
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' AND name != 'threadloom_migrations'"
        )
    ]
    for table in tables:
        columns = ", ".join(r[1] for r in conn.execute(f"PRAGMA main.table_info({table})"))
        conn.execute(f"INSERT INTO main.{table}({columns}) SELECT {columns} FROM src.{table}")
    if version < 11:  # short response bodies in the log row: before, in log_bodies
        conn.execute(
            "INSERT INTO main.log_bodies(log_id, part, body)"
            " SELECT id, 'response', response_body FROM src.logs WHERE response_body IS NOT NULL"
        )
    return conn


def make_version(source: str, target: str, version: int) -> None:
    """``target``: migrations up to ``version``, then every row of ``source``."""
    with closing(copy_at_version(source, target, version)) as conn:
        conn.execute("DETACH DATABASE src")
