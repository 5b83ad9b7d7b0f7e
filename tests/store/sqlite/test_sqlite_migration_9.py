"""Migration 9 (store/sqlite/schema_checks.py): the CHECK constraints that listed three or
more values with IN are written as comparisons. A version-8 database holding data opens,
migrates and reads back exactly as before; the rewritten constraints refuse the same
values; the file passes SQLite's integrity check; the store keeps writing and numbering.
No statement of a turn builds an ephemeral table for a check any more.

The version-8 file is made the way version 8 left it: migrations 1-8 applied to an empty
file, then every row of a database the store itself populated copied into it. Real
``Runtime``; raw SQL only to build the old file and to assert the storage."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sqlite_versions import make_version, populated_old_file, snapshot
from threadloom import Runtime
from threadloom.store.sqlite import schema, schema_checks
from threadloom.store.sqlite.schema_checks import checks_as_comparisons
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself

_TABLES = ("threads", "messages", "message_queue")


def _table_sql(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'table'"
            " AND name IN ('threads', 'messages', 'message_queue')"
        ).fetchall()
    )


async def test_a_version_8_database_migrates_and_reads_back_the_same(tmp_path: Path) -> None:
    old_url, ids, before = await populated_old_file(
        tmp_path, lambda source, target: make_version(source, target, 8)
    )
    with closing(sqlite3.connect(path_from_url(old_url))) as conn:
        old_sql = _table_sql(conn)
        assert "CHECK (role IN ('system','user','assistant','tool'))" in old_sql["messages"]

    rt = await Runtime.open(old_url)
    try:
        assert await snapshot(rt, ids) == before
        state = await rt.thread(ids[0])
        stored = await state.inject_message(role="user", content="after the migration")
        assert await state.get_message(stored.id) == stored
        page = await state.get_messages(order="asc", limit=None)
        assert stored in page.messages
    finally:
        await rt.close()

    with closing(sqlite3.connect(path_from_url(old_url), isolation_level=None)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = {r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS} and 9 in versions
        new_sql = _table_sql(conn)
        for table in _TABLES:  # an IN list of two (tool_status) needs no ephemeral table
            for column in ("role", "status", "status_state"):
                assert f"({column} IN (" not in new_sql[table], table
        # only the constraints changed: the rest of each CREATE TABLE text is as it was
        assert (
            new_sql["messages"]
            .replace(
                "CHECK (role = 'system' OR role = 'user' OR role = 'assistant' OR role = 'tool')",
                "CHECK (role IN ('system','user','assistant','tool'))",
            )
            .replace(
                "CHECK (status = 'pending' OR status = 'completed' OR status = 'failed')",
                "CHECK (status IN ('pending','completed','failed'))",
            )
            == old_sql["messages"]
        )


@pytest.mark.parametrize(
    ("statement", "params"),
    [
        (
            "INSERT INTO messages(rid, id, thread_id, seq, role, status, created_at)"
            " VALUES (?, 'm', 't', 1, ?, 'completed', 0)",
            (1, "bogus"),
        ),
        (
            "INSERT INTO messages(rid, id, thread_id, seq, role, status, created_at)"
            " VALUES (?, 'm', 't', 1, 'user', ?, 0)",
            (1, "done"),
        ),
        (
            "INSERT INTO message_queue(id, thread_id, qseq, role, content, source, created_at)"
            " VALUES ('q', ?, 1, ?, 'x', 'api', 0)",
            ("t", "tool"),
        ),
        ("UPDATE threads SET status_state = ? WHERE id = ?", ("stopped", "t")),
        ("UPDATE threads SET status_state = ? WHERE id = ?", ("Idle", "t")),
    ],
)
def test_the_rewritten_checks_refuse_what_the_old_ones_refused(
    tmp_path: Path, statement: str, params: tuple[object, ...]
) -> None:
    with closing(sqlite3.connect(tmp_path / "c.db", isolation_level=None)) as conn:
        schema.migrate(conn)
        conn.execute(
            "INSERT INTO threads(id, agent_id, origin_agent_id, created_at_us, status_state,"
            " status_since, tnum) VALUES ('t', 'a', 'a', 0, 'idle', 0, 1)"
        )
        for role in ("system", "user", "assistant", "tool"):  # and accept the same ones
            for status in ("pending", "completed", "failed"):
                conn.execute(
                    "INSERT INTO messages(id, thread_id, seq, role, status, created_at)"
                    " VALUES (?, 't', 1, ?, ?, 0)",
                    (f"{role}-{status}", role, status),
                )
        for state in ("idle", "running", "failed"):
            conn.execute("UPDATE threads SET status_state = ? WHERE id = 't'", (state,))
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            conn.execute(statement, params)


def test_the_rewrite_is_done_once(tmp_path: Path) -> None:
    """Run again (nothing left to rewrite), it changes nothing, not the schema version."""
    with closing(sqlite3.connect(tmp_path / "once.db", isolation_level=None)) as conn:
        schema.migrate(conn)
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        texts = _table_sql(conn)
        conn.execute("BEGIN IMMEDIATE")
        checks_as_comparisons(conn)
        conn.execute("COMMIT")
        assert conn.execute("PRAGMA schema_version").fetchone()[0] == version
        assert _table_sql(conn) == texts


def test_no_check_of_a_turn_builds_an_ephemeral_table(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "plan.db", isolation_level=None)) as conn:
        schema.migrate(conn)
        for statement in (
            "INSERT INTO messages(rid, id, thread_id, seq, role, status, created_at)"
            " VALUES (1, 'm', 't', 1, 'user', 'completed', 0)",
            "UPDATE messages SET status = 'failed' WHERE id = 'm'",
            "UPDATE threads SET status_state = 'running' WHERE id = 't'",
            "INSERT INTO message_queue(id, thread_id, qseq, role, content, source, created_at)"
            " VALUES ('q', 't', 1, 'user', 'x', 'api', 0)",
        ):
            opcodes = [row[1] for row in conn.execute(f"EXPLAIN {statement}")]
            assert "OpenEphemeral" not in opcodes, statement


def test_a_refused_rewrite_keeps_every_constraint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When SQLite refuses the new text (here: one that does not parse; a SQLite built
    defensive refuses any edit of sqlite_schema), no table's text changes, the migration
    is recorded, and the file keeps working with its IN-list checks."""
    monkeypatch.setitem(
        schema_checks._REWRITES,
        "messages",
        (("CHECK (role IN ('system','user','assistant','tool'))", "CHECK (role = )"),),
    )
    with closing(sqlite3.connect(tmp_path / "kept.db", isolation_level=None)) as conn:
        assert schema.migrate(conn, upto=8) == 8
        before = _table_sql(conn)
        assert schema.migrate(conn, upto=9) == 9  # the rewrite under test, no later migration
        assert "kept as they are" in caplog.text
        assert _table_sql(conn) == before
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute(
            "INSERT INTO messages(id, thread_id, seq, role, status, created_at)"
            " VALUES ('m', 't', 1, 'user', 'completed', 0)"
        )
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            conn.execute(
                "INSERT INTO messages(id, thread_id, seq, role, status, created_at)"
                " VALUES ('n', 't', 1, 'bogus', 'completed', 0)"
            )
