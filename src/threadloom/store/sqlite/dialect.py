"""The SQLite dialect of the shared transaction logic, and the connection class that
carries it (``conn.sql``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from threadloom.store.core.conn import Dialect
from threadloom.store.shapes import Fence, StoredEvent


class SqliteDialect(Dialect):
    """SQLite's texts: its JSON1 functions, ``MAX`` of two values, ``LIMIT -1``. No row
    lock: ``BEGIN IMMEDIATE`` takes the database's write lock, so every write transaction
    is serialised with every other."""

    name = "sqlite"
    greatest = "MAX"
    is_same = "IS"
    lock_thread = ""
    lock_accounts = None
    no_limit = -1
    position = "instr"
    next_tnum = "(SELECT COALESCE(MAX(tnum), 0) + 1 FROM threads)"
    integrity_error = sqlite3.IntegrityError

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def tag_values(self, column: str) -> tuple[str, str]:
        return f"json_each({column})", "json_each.value"

    def attachment_path_join(self, alias: str) -> tuple[str, str]:
        return f"json_each({alias}.attachments) AS j", "json_extract(j.value, '$.path')"

    def unique_violation(self, exc: BaseException) -> str | None:
        """SQLite names the violated key only in its message ("UNIQUE constraint failed:
        messages.id"); its error name tells a unique key from other constraints."""
        if not isinstance(exc, sqlite3.IntegrityError):
            return None
        name = getattr(exc, "sqlite_errorname", "")
        if name not in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"):
            return None
        _, _, columns = str(exc).partition(": ")
        return columns or None


SQLITE = SqliteDialect()


class SqliteConnection(sqlite3.Connection):
    """``sqlite3.Connection`` with the dialect the shared logic reads (``conn.sql``)."""

    sql: Dialect = SQLITE
    node_id: str | None = None
    fence: Fence | None = None
    announce = False  # one process runs an SQLite store: nobody to tell

    def watched(self, thread_id: str, events: Sequence[StoredEvent]) -> bool:
        return False
