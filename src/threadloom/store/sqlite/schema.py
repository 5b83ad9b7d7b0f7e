"""Applying the SQLite store's numbered migrations (``migrations.py``); the applied versions
are recorded in a table.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from threadloom.store.sqlite.migrations import MIGRATIONS as MIGRATIONS
from threadloom.store.sqlite.schema_checks import checks_as_comparisons

# Migrations done in Python instead of SQL text, inside the migration's transaction.
_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {9: checks_as_comparisons}

# Migrations that rebuild a table other tables reference: applied with foreign keys off
# (a DROP TABLE would otherwise cascade), then checked with foreign_key_check.
_REBUILDS: dict[int, tuple[str, ...]] = {8: ("tool_calls", "logs")}

LATEST_VERSION = MIGRATIONS[-1][0]


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS threadloom_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    return {row[0] for row in conn.execute("SELECT version FROM threadloom_migrations")}


def migrate(conn: sqlite3.Connection, upto: int = LATEST_VERSION) -> int:
    """Apply every migration not yet recorded, up to version ``upto`` (tests build older
    databases with it), each in its own transaction; returns the schema version. A
    database newer than this code is refused."""
    done = applied_versions(conn)
    if done and max(done) > LATEST_VERSION:
        raise RuntimeError(
            f"database schema version {max(done)} is newer than this Threadloom ({LATEST_VERSION})"
        )
    for version, name, sql in MIGRATIONS:
        if version in done or version > upto:
            continue
        checked = _REBUILDS.get(version)
        keys_on = conn.execute("PRAGMA foreign_keys").fetchone()[0]
        if checked is not None:  # only outside a transaction
            conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
            if version in _STEPS:
                _STEPS[version](conn)
            for table in checked or ():
                broken = conn.execute(f"PRAGMA foreign_key_check({table})").fetchone()
                if broken is not None:
                    raise RuntimeError(f"migration {version} broke a reference: {broken}")
            conn.execute(
                "INSERT INTO threadloom_migrations(version, name, applied_at) VALUES (?,?,?)",
                (version, name, time.time_ns() // 1000),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            if checked is not None:
                conn.execute(f"PRAGMA foreign_keys = {'ON' if keys_on else 'OFF'}")
    return max(applied_versions(conn))
