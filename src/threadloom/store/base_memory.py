"""The memory part of the Store protocol (spec 20): JSON documents by scope, namespace and
key, across threads. ``threadloom.store.base.Store`` is a ``MemoryStore``.

``scope`` is the stored scope (``records.memory.scope_of``), ``namespace`` a namespace's
stored form (its labels joined by ``.``), ``value`` the document as JSON text; what has
expired is decided by the store's clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from threadloom.records import MemoryItem


class MemoryStore(Protocol):
    """Items of the memory store (spec 20 §20.1–§20.5)."""

    async def put_memory(
        self,
        scope: str,
        namespace: str,
        key: str,
        value: str,
        *,
        ttl_us: int | None = None,
        if_version: int | None = None,
    ) -> MemoryItem | None:
        """Store the document (a new item, or the next version of the live one); None
        (nothing written) when ``if_version`` is given and is not the stored version (0:
        only where no live item is)."""
        ...

    async def get_memory(self, scope: str, namespace: str, key: str) -> MemoryItem | None: ...

    async def delete_memory(
        self, scope: str, namespace: str, key: str, *, if_version: int | None = None
    ) -> bool:
        """Delete the live item (with ``if_version``: only at that version)."""
        ...

    async def search_memory(
        self,
        scope: str,
        prefix: Sequence[str],
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """Live items under ``prefix`` matching ``filter``, most recently updated first."""
        ...

    async def memory_namespaces(
        self,
        scope: str,
        prefix: Sequence[str] = (),
        *,
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]: ...

    async def delete_expired_memory(self, limit: int = 1000) -> int:
        """Remove up to ``limit`` expired items (the retention pass); how many."""
        ...
