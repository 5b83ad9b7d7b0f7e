"""Migration 9 of the SQLite store: CHECK constraints written as comparisons, not IN lists.

SQLite evaluates ``col IN ('a','b','c')`` with more than two constants by building an
ephemeral b-tree of the list (a temporary pager and a page, ~20k instructions) each time
a statement runs the check: every message insert ran two (``role``, ``status``), every
message status change and thread status change one, twelve per tool-using turn.
``col = 'a' OR col = 'b' OR col = 'c'`` accepts and refuses exactly the same values (the
columns are TEXT with BINARY collation; NULL passes both, as for any CHECK) with a few
comparisons.

A CHECK constraint is part of a table's ``CREATE TABLE`` text only, not of its rows, so
the migration rewrites that text in ``sqlite_schema`` (SQLite's documented procedure for
schema changes that leave the stored content as it is: ``writable_schema``, then a new
``schema_version`` so every connection reloads the schema, parsing the new text before
the migration commits; no row is read or written, however large the file). A text that
does not hold the expected constraint (a database altered by hand) keeps it as it is, and
so do all when the rewrite is refused (a SQLite built with its defensive flag on makes
``sqlite_schema`` read-only): the migration is then recorded without a change.
"""

from __future__ import annotations

import logging
import sqlite3

logger = logging.getLogger(__name__)

_REWRITES: dict[str, tuple[tuple[str, str], ...]] = {
    "threads": (
        (
            "CHECK (status_state IN ('idle','running','failed'))",
            "CHECK (status_state = 'idle' OR status_state = 'running' OR status_state = 'failed')",
        ),
    ),
    "messages": (
        (
            "CHECK (role IN ('system','user','assistant','tool'))",
            "CHECK (role = 'system' OR role = 'user' OR role = 'assistant' OR role = 'tool')",
        ),
        (
            "CHECK (status IN ('pending','completed','failed'))",
            "CHECK (status = 'pending' OR status = 'completed' OR status = 'failed')",
        ),
    ),
    "message_queue": (
        (
            "CHECK (role IN ('user','assistant','system'))",
            "CHECK (role = 'user' OR role = 'assistant' OR role = 'system')",
        ),
    ),
}


def checks_as_comparisons(conn: sqlite3.Connection) -> None:
    """Rewrite the CHECK constraints above, inside the caller's transaction."""
    texts = dict(
        conn.execute(
            f"SELECT name, sql FROM sqlite_schema WHERE type = 'table'"
            f" AND name IN ({', '.join('?' * len(_REWRITES))})",
            tuple(_REWRITES),
        ).fetchall()
    )
    changed: dict[str, str] = {}
    for table, rewrites in _REWRITES.items():
        text = texts.get(table)
        if text is None:
            continue
        new = text
        for old, replacement in rewrites:
            new = new.replace(old, replacement)
        if new != text:
            changed[table] = new
    if not changed:
        return
    conn.execute("SAVEPOINT checks")
    try:
        _rewrite(conn, changed)
    except sqlite3.DatabaseError as exc:
        # e.g. a SQLite built defensive (sqlite_schema read-only): the IN lists stay,
        # correct, only slower
        conn.execute("ROLLBACK TO checks")
        logger.warning("migration 9: CHECK constraints kept as they are (%s)", exc)
    finally:
        conn.execute("RELEASE checks")


def _rewrite(conn: sqlite3.Connection, changed: dict[str, str]) -> None:
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    conn.execute("PRAGMA writable_schema = ON")
    try:
        for table, text in changed.items():
            conn.execute(
                "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?",
                (text, table),
            )
        conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")
    for table in changed:  # the schema is read again (and parsed) before this runs
        conn.execute(f"SELECT * FROM {table} LIMIT 0").fetchall()
