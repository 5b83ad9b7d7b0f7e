"""Migration 17: the shared state and the run context of a thread (spec 02 §2.20, spec 13
§13.2.11). A version-16 file opens, migrates, reads every thread as before with an empty
state at version 0 and no run context, and keeps what is written afterwards. Real
``Runtime`` on real SQLite files; raw SQL only to make the old file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sqlite_versions import make_version, populated_old_file, snapshot
from threadloom import Runtime
from threadloom.records import ContextEntry
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


async def test_c02_107_a_version_16_file_gets_an_empty_shared_state(tmp_path: Path) -> None:
    """C02-107: the old threads read as before, each with state ``{}`` at version 0 and no
    run context; a state and a context written after the migration are kept."""
    old_url, ids, before = await populated_old_file(
        tmp_path, lambda source, target: make_version(source, target, 16)
    )
    path = path_from_url(old_url)
    with closing(sqlite3.connect(path)) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(threads)")}
        assert "shared_state" not in columns and "run_context" not in columns

    rt = await Runtime.open(old_url)
    try:
        after = await snapshot(rt, ids)
        assert {k: v for k, v in after.items() if k != "list"} == {
            k: v for k, v in before.items() if k != "list"
        }
        state = await (await rt.thread(ids[0])).read_shared_state()
        assert (state.value, state.version, state.updated_at) == ({}, 0, None)
        row = await rt.store.get_thread(ids[0])
        assert row is not None and not row.has_run_context
        await (await rt.thread(ids[0])).set_shared_state({"k": "v"})
        await rt.store.set_run_context(ids[0], [ContextEntry(description="d", value="v")])
        row = await rt.store.get_thread(ids[0])
        assert row is not None and row.has_run_context
    finally:
        await rt.close()

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = {r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS} and 17 in versions
        stored = conn.execute(
            "SELECT shared_state, shared_state_version, run_context FROM threads WHERE id = ?",
            (ids[0],),
        ).fetchone()
        assert stored == ('{"k":"v"}', 1, '[{"description":"d","value":"v"}]')
