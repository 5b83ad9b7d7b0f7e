"""Migration 10: the thread list's default order (spec 08 §8.3.1 ``activity``: last
activity newest first, then creation newest first, then id) is served by an index.

A thread's activity starts at its creation (§8.2.2), so it is stored from the start; the
migration fills it in for threads a version-9 file left without one. A version-9 file
opens, migrates and lists in the same order as before; the listing reads its page through
``threads_activity_order`` without sorting the whole table. Real ``Runtime`` and store; raw
SQL only to build the old file and to look at the plan."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sqlite_versions import make_version, populated_old_file
from threadloom import Runtime
from threadloom.store.core import threads
from threadloom.store.core.codec import THREAD_COLUMNS, THREAD_SUMMARY
from threadloom.store.shapes import ThreadQuery
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


def _old_order(conn: sqlite3.Connection) -> list[str]:
    """The order version 9 listed by (its ORDER BY, on the old file)."""
    rows = conn.execute(
        "SELECT id FROM threads ORDER BY"
        " COALESCE(last_activity_us, created_at_us) DESC, created_at_us DESC, id"
    )
    return [r[0] for r in rows]


async def test_a_version_9_file_migrates_and_lists_in_the_same_order(tmp_path: Path) -> None:
    old_url, ids, _ = await populated_old_file(
        tmp_path, lambda source, target: make_version(source, target, 9)
    )
    path = path_from_url(old_url)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        # version 9 created threads without an activity: give two of them none
        conn.execute("UPDATE threads SET last_activity_us = NULL WHERE id IN (?, ?)", ids[:2])
        before = _old_order(conn)
        created = dict(conn.execute("SELECT id, created_at_us FROM threads").fetchall())
    assert len(before) >= 3

    rt = await Runtime.open(old_url)
    try:
        rows, total = await rt.store.query_threads(ThreadQuery(limit=100))
        assert [row.id for row in rows] == before and total == len(before)
        for row in [r for r in rows if r.id in ids[:2]]:
            assert row.last_activity_us == created[row.id]
        fresh = await rt.create_thread(agent_id="chat")
        row = await rt.store.get_thread(fresh.thread_id)
        assert row is not None and row.last_activity_us == row.created_at_us
        rows, _ = await rt.store.query_threads(ThreadQuery(limit=1))
        assert [r.id for r in rows] == [fresh.thread_id]  # the newest activity first
    finally:
        await rt.close()

    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = {r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS} and 10 in versions
        missing = conn.execute("SELECT count(*) FROM threads WHERE last_activity_us IS NULL")
        assert missing.fetchone()[0] == 0


async def test_the_activity_listing_reads_its_page_through_the_index(tmp_path: Path) -> None:
    """The plans of the default listing, whole and one user's: an index in order, no sort
    (with one, a page cost a read and a sort of every thread: 44 ms at 50,000 threads)."""
    url = f"sqlite:///{tmp_path / 't.db'}"
    rt = await Runtime.open(url)
    try:
        for _ in range(3):
            await rt.create_thread(agent_id="chat")
    finally:
        await rt.close()
    select = f"SELECT {THREAD_COLUMNS}, {THREAD_SUMMARY} FROM threads"
    order = f" ORDER BY {threads._SORTS['activity']} LIMIT 50 OFFSET 0"
    with closing(sqlite3.connect(path_from_url(url))) as conn:
        for where, params, index in (
            ("", (), "threads_activity_order"),
            (" WHERE user_id = ?", ("someone",), "threads_user_activity"),
        ):
            plan = " | ".join(
                r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {select}{where}{order}", params)
            )
            assert index in plan and "TEMP B-TREE" not in plan, plan
