"""Test helper: a store file at an older schema version, holding the rows of a current one."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from threadloom.store.sqlite import schema


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
    return conn


def make_version(source: str, target: str, version: int) -> None:
    """``target``: migrations up to ``version``, then every row of ``source``."""
    with closing(copy_at_version(source, target, version)) as conn:
        conn.execute("DETACH DATABASE src")
