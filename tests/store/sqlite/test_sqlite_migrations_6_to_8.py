"""Migrations 6 to 8 (store/sqlite/schema.py): a database at schema version 5 with data in
every per-thread table opens, migrates, reads back exactly as before (page totals from the
moved counts, messages from the rebuilt table included), and keeps numbering; the foreign
keys that name the rebuilt messages table still act.

The version-5 file is made the way an older Threadloom left it: migrations 1-5 applied to
an empty file, then every row of a database the store itself populated copied into it
(only the columns version 5 has). Real ``Runtime``; raw SQL only to build the old file and
to assert the storage."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from sqlite_versions import copy_at_version, populated_old_file, snapshot
from threadloom import Runtime
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


def _make_version_5(source: str, target: str) -> None:
    """``target``: migrations 1-5 applied, then every row of ``source`` (v5 columns only),
    as version 5 kept it."""
    with closing(copy_at_version(source, target, 5)) as conn:
        # version 5 kept every count in message_counts (7 moved one bucket to the thread row)
        conn.execute(
            "INSERT INTO main.message_counts(thread_id, depth, silent, count)"
            " SELECT id, 0, 0, top_visible_count FROM src.threads WHERE top_visible_count > 0"
        )
        conn.execute("DETACH DATABASE src")


async def test_a_version_5_database_migrates_and_reads_back_the_same(tmp_path: Path) -> None:
    old_url, ids, before = await populated_old_file(tmp_path, _make_version_5)
    with closing(sqlite3.connect(path_from_url(old_url))) as conn:
        events = conn.execute("SELECT COUNT(*) FROM thread_events").fetchone()[0]
        assert events > 30
        assert (
            "WITHOUT ROWID"
            in conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'thread_events'"
            ).fetchone()[0]
        )

    rt = await Runtime.open(old_url)
    try:
        assert await snapshot(rt, ids) == before
        versions = {r[0] for r in _q(old_url, "SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS}
        assert _q(old_url, "SELECT COUNT(*) FROM thread_events") == [(events,)]
        assert not _q(old_url, "SELECT 1 FROM message_counts WHERE depth = 0 AND silent = 0")
        tnums = [r[0] for r in _q(old_url, "SELECT tnum FROM threads")]
        assert None not in tnums and len(set(tnums)) == len(tnums) == 3
        assert not _q(old_url, "SELECT name FROM sqlite_master WHERE name LIKE '%_v5'")
        assert not _q(old_url, "SELECT name FROM sqlite_master WHERE name LIKE '%_v8'")
        assert _q(
            old_url,
            "SELECT COUNT(*) FROM messages m JOIN threads t ON t.id = m.thread_id"
            " WHERE m.rid != t.tnum * 4294967296 + m.seq",
        ) == [(0,)]
        for child in ("tool_calls", "logs"):
            targets = {r[2] for r in _q(old_url, f"PRAGMA foreign_key_list({child})")}
            assert "messages" in targets and "messages_v8" not in targets

        # numbering goes on where it stopped, and the new rows read back with the old
        parent, other, child = ids
        head = before[parent][0].event_seq
        state = await rt.thread(parent)
        message = await state.inject_message(role="user", content="after migration")
        fresh = await rt.store.read_events(parent, 0)
        assert [e.seq for e in fresh] == list(range(1, head + 2))
        assert fresh[:-1] == before[parent][6]
        assert (fresh[-1].kind, fresh[-1].entity_id) == ("message", message.id)
        made = await rt.create_thread("a")
        await made.inject_message(role="user", content="new thread")
        assert [e.seq for e in await rt.store.read_events(made.thread_id, 0)] == [1]
        assert await rt.store.read_events(other, 0) == before[other][6]
        assert (await rt.store.thread_stats(parent)).message_count == before[parent][
            11
        ].message_count + 1

        # the foreign keys to messages act on the rebuilt table
        assistant = before[other][1][0][1]
        assert assistant.tool_calls is not None
        logged = [r for r in before[other][8] if r.message_id == before[other][1][0][0].id]
        assert logged
        await rt.store.delete_message(other, before[other][1][0][0].id)
        await rt.store.delete_message(other, assistant.id)
        assert _q(
            old_url, "SELECT COUNT(*) FROM tool_calls WHERE message_id = ?", assistant.id
        ) == [(0,)]
        after = {r.id: r.message_id for r in await rt.store.list_logs(other, limit=None)}
        assert [after[r.id] for r in logged] == [None] * len(logged)

        # deleting a thread takes its messages and event rows (and its child's) with it
        assert await rt.delete_thread(parent) == [child, parent]
        for tid in (parent, child):
            for table in ("thread_events", "messages"):
                found = _q(old_url, f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", tid)
                assert found == [(0,)], (table, tid)
        kept = await rt.store.read_events(other, 0)
        assert kept[: len(before[other][6])] == before[other][6]
        assert [e.kind for e in kept[len(before[other][6]) :]] == ["message_deleted"] * 4
    finally:
        await rt.close()


def _q(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path_from_url(url))) as conn:
        return conn.execute(sql, params).fetchall()
