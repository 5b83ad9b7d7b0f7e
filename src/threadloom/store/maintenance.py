"""An operator's work on a store, whatever its backend (spec 17 §17.3, §17.4): what a start
would migrate, migrating before nodes start, and backup and restore of an SQLite file (a
PostgreSQL database is backed up with PostgreSQL's own tools: :func:`pg_dump_advice`).

The commands of ``cli/backup.py`` and ``cli/migrate.py`` call these; the backends' own
modules (``sqlite/schema.py``, ``sqlite/backup.py``, ``postgres/schema.py``) do the work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from threadloom.errors import StoreError
from threadloom.store.core.upgrades import Plan, SchemaTooNew


def is_postgres(url: str) -> bool:
    return url.split("://", 1)[0] in ("postgresql", "postgres") if "://" in url else False


def _sqlite_path(url: str) -> str:
    from threadloom.store.sqlite.store import path_from_url

    return path_from_url(url)


def migration_plan(url: str) -> Plan:
    """What opening the store at ``url`` would apply; nothing is changed (an SQLite file
    that does not exist is not created). ``SchemaTooNew`` for a newer schema this release
    cannot use, ``StoreError`` when the store cannot be read."""
    if is_postgres(url):
        found: Plan = _pg(url, lambda conn: _pg_schema().plan(conn))
        return found
    import sqlite3

    from threadloom.store.sqlite import schema

    path = Path(_sqlite_path(url))
    if not path.exists():
        pending = [(v, name) for v, name, _ in schema.MIGRATIONS]
        return Plan("sqlite", 0, schema.LATEST_VERSION, pending)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read SQLite database {str(path)!r}: {exc}") from exc
    try:
        return schema.plan(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read SQLite database {str(path)!r}: {exc}") from exc
    finally:
        conn.close()


async def migrate(url: str) -> tuple[Plan, int]:
    """Apply the migrations a start would apply (the plan before, and the schema version
    after). An SQLite file is migrated only while no process runs it (its process lock)."""
    before = migration_plan(url)
    if is_postgres(url):
        from threadloom.store.postgres.store import PostgresStore

        store: Any = await PostgresStore.open(url, pool_size=1)
        await store.close()
    else:
        from threadloom.store.sqlite.process_lock import ProcessLock
        from threadloom.store.sqlite.store import SqliteStore

        path = _sqlite_path(url)
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise StoreError(f"cannot open SQLite database {path!r}: its directory does not exist")
        lock = ProcessLock.acquire(path)
        try:
            store = await SqliteStore.open(url)
            await store.close()
        finally:
            lock.release()
    return before, migration_plan(url).current


def sqlite_backup(url: str, out: str | Path, **options: Any) -> Any:
    """``sqlite/backup.backup`` of the SQLite store at ``url`` (a ``Copied``)."""
    from threadloom.store.sqlite.backup import backup

    return backup(_sqlite_path(url), out, **options)


def sqlite_restore(backup_path: str | Path, url: str, **options: Any) -> Any:
    """``sqlite/backup.restore`` of ``backup_path`` as the SQLite store at ``url``."""
    from threadloom.store.sqlite.backup import restore

    return restore(backup_path, _sqlite_path(url), **options)


def pg_schema_name(url: str) -> str | None:
    """The schema a PostgreSQL URL names in ``options=-csearch_path=…`` (its first)."""
    for key, value in parse_qsl(urlsplit(url).query):
        if key != "options":
            continue
        for word in value.split():
            if word.startswith("-csearch_path="):
                first = word.split("=", 1)[1].split(",")[0].strip().strip('"')
                return first or None
    return None


def pg_dump_advice(url: str, out: str) -> str:
    """Why ``threadloom backup`` does not copy a PostgreSQL store, and the commands that do
    (docs/deploy.md, "Backup and restore")."""
    from threadloom.store.postgres.store import redacted

    parts = urlsplit(redacted(url))
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ("options",)]
    plain = urlunsplit(parts._replace(query="&".join(f"{k}={v}" for k, v in query)))
    schema = pg_schema_name(url) or "<schema>"
    return (
        "threadloom backup copies SQLite files only; back up a PostgreSQL store with"
        " PostgreSQL's tools (docs/deploy.md, 'Backup and restore'):\n"
        f"  pg_dump --format=custom --schema={schema} --file={out} '{plain}'\n"
        f"  pg_restore --dbname='{plain}' {out}    (into a database without that schema)\n"
        "and, for point-in-time recovery, WAL archiving (archive_mode, archive_command)"
        " with pg_basebackup."
    )


def _pg_schema() -> Any:
    from threadloom.store.postgres import schema

    return schema


def _pg(url: str, work: Any) -> Any:
    """``work(conn)`` on one autocommit connection to ``url``; errors as ``StoreError``."""
    try:
        import psycopg
    except ImportError as exc:
        raise StoreError(
            f"the PostgreSQL store needs psycopg: pip install 'threadloom[postgres]' ({exc})"
        ) from exc
    from threadloom.store.postgres.dialect import driver_reason
    from threadloom.store.postgres.store import redacted

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            return work(conn)
    except SchemaTooNew:
        raise
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot read PostgreSQL database {redacted(url)}: {driver_reason(exc)}"
        ) from exc
