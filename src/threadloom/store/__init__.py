"""Persistence behind one Store protocol; ``open_store`` picks the backend from the URL.

The protocol's names (``Store``, ``ThreadRow`` …) are read from ``store/base.py`` when first
asked for: importing this package (as every ``threadloom.store.*`` import does) stays cheap
for the command line, whose ``--help`` imports no store (issue 40's start-up goal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.errors import StoreError

if TYPE_CHECKING:
    from threadloom.store.base import NewThread, Store, StoredEvent, ThreadRow, system_clock_us

DEFAULT_STORE = "sqlite:///./threadloom.db"
"""The store a server or command opens when none is named: ``threadloom.db`` in the working
folder."""

_FROM_BASE = frozenset({"NewThread", "Store", "StoredEvent", "ThreadRow", "system_clock_us"})


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from threadloom.store import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


__all__ = [
    "DEFAULT_STORE",
    "NewThread",
    "Store",
    "StoredEvent",
    "ThreadRow",
    "open_store",
    "system_clock_us",
]
