"""The SQLite dialect of the shared transaction logic, and the connection class that
carries it (``conn.sql``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from threadloom.store.core.conn import Dialect
from threadloom.store.core.search import fts5_match
from threadloom.store.shapes import Fence, SearchTerm, StoredEvent
from threadloom.store.sqlite.search_index import CATCH_UP


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

    # the FTS5 index of migration 26 (store/sqlite/search_index.py); bm25 is lower-better;
    # the messages stored since it last caught up wait in its backlog (migration 27)
    search_catch_up = CATCH_UP
    search_hits = (
        "SELECT m.thread_id AS thread_id, m.rid AS rid, -bm25(messages_fts) AS score"
        " FROM messages_fts JOIN messages m ON m.rid = messages_fts.rowid"
        " WHERE messages_fts MATCH ?"
    )

    def search_match(self, terms: Sequence[SearchTerm]) -> str:
        return fts5_match(terms)

    def search_snippets(self, count: int) -> str:
        return (
            "SELECT rowid, snippet(messages_fts, 0, char(2), char(3), '…', 24)"
            f" FROM messages_fts WHERE messages_fts MATCH ? AND rowid IN ({','.join('?' * count)})"
        )

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
    defer = sqlite3.Connection.execute  # nothing to save by waiting: a call, not a round trip

    def watched(self, thread_id: str, events: Sequence[StoredEvent]) -> bool:
        return False

    def kept_state(self, thread_id: str, waiting: bool) -> Sequence[Any] | None:
        return None  # reading the row is a call in process, not a round trip

    def keep_state(self, thread_id: str, state: Sequence[Any] | None, xid: str | None) -> None:
        pass

    def kept_base(self, thread_id: str, version: str) -> Any:
        return None

    def touched(self, thread_id: str, version: str, activity: int) -> None:
        pass

    def kept_read(
        self, sql: str, check: str, fingerprint: Callable[[list[Any]], str]
    ) -> list[Any] | None:
        return None

    def keep_read(self, sql: str, rows: list[Any]) -> None:
        pass

    def defer_expect(self, sql: str, parameters: Sequence[Any], rows: int, /) -> None:
        raise NotImplementedError("no state is kept on SQLite (kept_state)")

    def defer_checked(
        self,
        sql: str,
        parameters: Sequence[Any],
        translate: Callable[[BaseException], BaseException | None],
        /,
    ) -> None:
        try:
            self.execute(sql, parameters)
        except sqlite3.Error as exc:
            error = translate(exc)
            if error is None:
                raise
            raise error from exc
