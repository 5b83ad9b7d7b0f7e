"""A look at a store's tables from outside it, for assertions about storage (spec 01 §1.11).

Both stores keep the same tables and columns, so a probe query is one SQL text (``?``
parameters) for both; the probe runs it on a connection of its own to the store's database:
a new ``sqlite3`` connection to the file, or a psycopg connection to the store's schema.
It sees what is committed, as another process would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import Any

from threadloom import Runtime


class StoreProbe:
    """Rows of the store at ``url`` (``sqlite:///…`` or ``postgresql://…``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        postgres = url.startswith(("postgresql://", "postgres://"))
        self.backend = "postgresql" if postgres else "sqlite"

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (integers, not ``Decimal``, for sums: cast as needed)."""
        if self.backend == "sqlite":
            import sqlite3

            from threadloom.store.sqlite.store import path_from_url

            with closing(sqlite3.connect(path_from_url(self.url))) as conn:
                return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]
        import psycopg

        from threadloom.store.postgres.dialect import translate

        with psycopg.connect(self.url, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(translate(sql), tuple(params)).fetchall()]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement that changes the tables (a test tampering with storage);
        returns its row count."""
        if self.backend == "sqlite":
            import sqlite3

            from threadloom.store.sqlite.store import path_from_url

            with closing(sqlite3.connect(path_from_url(self.url), isolation_level=None)) as conn:
                return conn.execute(sql, tuple(params)).rowcount
        import psycopg

        from threadloom.store.postgres.dialect import translate

        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(translate(sql), tuple(params)).rowcount

    def script(self, sqlite: str, postgresql: str) -> None:
        """Run the backend's text of a script of several statements (no parameters)."""
        if self.backend == "sqlite":
            import sqlite3

            from threadloom.store.sqlite.store import path_from_url

            with closing(sqlite3.connect(path_from_url(self.url), isolation_level=None)) as conn:
                conn.executescript(sqlite)
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(postgresql.encode())

    def tables(self) -> list[str]:
        """The names of the store's tables."""
        if self.backend == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
        else:
            sql = (
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        return sorted(r[0] for r in self.rows(sql))

    def columns(self, table: str) -> list[str]:
        """The column names of ``table``, in order."""
        if self.backend == "sqlite":
            return [r[1] for r in self.rows(f"PRAGMA table_info({table})")]
        return [
            r[0]
            for r in self.rows(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = ?"
                " ORDER BY ordinal_position",
                (table,),
            )
        ]

    @contextmanager
    def refusing(self, table: str, when: str, message: str) -> Iterator[None]:
        """The database refuses every insert into and update of ``table`` whose new row
        matches ``when`` (an SQL condition on ``NEW``) until the block ends, with the error
        ``message``: a trigger of its own raises, as a full disk, a constraint or a broken
        file would (no store is mocked)."""
        if self.backend == "sqlite":
            for event in ("INSERT", "UPDATE"):
                self.execute(
                    f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON {table}"
                    f" WHEN {when} BEGIN SELECT RAISE(ABORT, '{message}'); END"
                )
            drop = ["DROP TRIGGER refuse_insert", "DROP TRIGGER refuse_update"]
        else:
            self.execute(
                "CREATE FUNCTION tl_refuse() RETURNS trigger LANGUAGE plpgsql AS"
                f" $$BEGIN RAISE EXCEPTION '{message}'; END$$"
            )
            self.execute(
                f"CREATE TRIGGER tl_refuse BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW"
                f" WHEN ({when}) EXECUTE FUNCTION tl_refuse()"
            )
            drop = [f"DROP TRIGGER tl_refuse ON {table}", "DROP FUNCTION tl_refuse()"]
        try:
            yield
        finally:
            for statement in drop:
                self.execute(statement)


def probe(rt: Runtime) -> StoreProbe:
    """The probe of a runtime's store."""
    return StoreProbe(rt.store.url)
