"""Persistence behind one Store protocol; ``open_store`` picks the backend from the URL."""

from __future__ import annotations

from typing import Any

from threadloom.errors import StoreError
from threadloom.store.base import NewThread, Store, StoredEvent, ThreadRow, system_clock_us


async def open_store(url: str, **options: Any) -> Store:
    """Open the store named by ``url``: ``sqlite:///path.db`` (or a plain path), or
    ``postgresql://user@host:5432/database`` (the ``postgres`` extra)."""
    if not isinstance(url, str) or not url:
        raise StoreError("a store URL is required, e.g. sqlite:///threadloom.db")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme in ("", "sqlite"):
        from threadloom.store.sqlite.store import SqliteStore

        return await SqliteStore.open(url, **options)
    if scheme in ("postgresql", "postgres"):
        try:
            from threadloom.store.postgres.store import PostgresStore
        except ImportError as exc:
            raise StoreError(
                f"the PostgreSQL store needs psycopg: pip install 'threadloom[postgres]' ({exc})"
            ) from exc
        return await PostgresStore.open(url, **options)
    raise StoreError(
        f"unsupported store URL {url!r}: use sqlite:///path/to/file.db"
        " or postgresql://user@host:5432/database"
    )


__all__ = ["NewThread", "Store", "StoredEvent", "ThreadRow", "open_store", "system_clock_us"]
