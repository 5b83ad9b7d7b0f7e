"""``Memory``: the memory store across threads (spec 20), as tools, hooks and the HTTP API
use it — one scope (a user's memory, or an agent's), LangGraph's ``BaseStore`` verbs
(``put``, ``get``, ``delete``, ``search``, ``list_namespaces``) over the Store's memory part.

A tool or hook reaches it through its ``ThreadState``: ``state.memory`` is the memory of the
thread's user (shared by every thread and agent of that user), ``state.agent_memory`` the
agent's own (shared by every thread of that agent). The HTTP API (``/api/memory``) gives a
caller their own user memory, and an admin any scope.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.errors import InvalidField, MemoryConflict
from threadloom.records import MemoryItem
from threadloom.records.memory import (
    MAX_LIMIT,
    ScopeKind,
    checked,
    checked_namespace,
    filter_problem,
    key_problem,
    namespace_problem,
    scope_of,
    ttl_problem,
    value_problem,
)
from threadloom.store.base import Store


def _limit(field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidField(field, f"must be an integer from {low} to {high}")
    return value


class Memory:
    """One scope of the memory store (spec 20 §20.1): ``kind`` ``"user"`` or ``"agent"``,
    ``owner`` the user's or agent's id (a user's None: threads that have no user)."""

    def __init__(self, store: Store, kind: ScopeKind, owner: str | None) -> None:
        self._store = store
        self.kind = kind
        self.owner = owner
        self.scope = scope_of(kind, owner)

    def __repr__(self) -> str:
        return f"<Memory {self.scope}>"

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        ttl_s: float | None = None,
        if_version: int | None = None,
    ) -> MemoryItem:
        """Store ``value`` (a JSON object) at ``key`` of ``namespace`` (§20.3): a new item,
        or the next version of the live one — last write wins. With ``if_version``, only
        if the stored item is at that version (0: only if there is none), else
        :class:`MemoryConflict` and nothing changes. ``ttl_s``: seconds until it expires
        (each put sets it anew; None: never)."""
        stored = checked_namespace(namespace)
        checked("key", key_problem(key))
        checked("value", value_problem(value))
        checked("ttl_s", ttl_problem(ttl_s))
        if if_version is not None:
            _limit("if_version", if_version, 0, 2**53 - 1)
        text = json.dumps(dict(value), separators=(",", ":"), ensure_ascii=False)
        ttl_us = round(ttl_s * 1_000_000) if ttl_s is not None else None
        item = await self._store.put_memory(
            self.scope, stored, key, text, ttl_us=ttl_us, if_version=if_version
        )
        if item is None:
            assert if_version is not None
            current = await self._store.get_memory(self.scope, stored, key)
            raise MemoryConflict(key, if_version, current.version if current else None)
        return item

    async def get(self, namespace: Sequence[str], key: str) -> MemoryItem | None:
        """The live item at ``key`` of ``namespace``; None when there is none (or it
        expired)."""
        stored = checked_namespace(namespace)
        checked("key", key_problem(key))
        return await self._store.get_memory(self.scope, stored, key)

    async def delete(
        self, namespace: Sequence[str], key: str, *, if_version: int | None = None
    ) -> bool:
        """Delete the item; False when there was none. With ``if_version``, only at that
        version (else :class:`MemoryConflict`)."""
        stored = checked_namespace(namespace)
        checked("key", key_problem(key))
        if if_version is not None:
            _limit("if_version", if_version, 1, 2**53 - 1)
        if await self._store.delete_memory(self.scope, stored, key, if_version=if_version):
            return True
        if if_version is not None:
            current = await self._store.get_memory(self.scope, stored, key)
            if current is not None:
                raise MemoryConflict(key, if_version, current.version)
        return False

    async def search(
        self,
        namespace_prefix: Sequence[str] = (),
        /,
        *,
        filter: Mapping[str, Any] | None = None,
        query: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """The live items whose namespace starts with ``namespace_prefix`` (§20.4) and
        whose value meets ``filter``, most recently updated first. ``query`` (semantic
        search) needs an embedding function, which this release does not configure: a
        query is refused rather than ignored."""
        checked("namespace_prefix", namespace_problem(namespace_prefix, prefix=True))
        checked("filter", filter_problem(filter))
        if query is not None:
            raise InvalidField(
                "query",
                "needs an embedding function (semantic search), and none is configured",
            )
        _limit("limit", limit, 1, MAX_LIMIT)
        _limit("offset", offset, 0, 2**31 - 1)
        return await self._store.search_memory(
            self.scope,
            tuple(namespace_prefix),
            filter=dict(filter) if filter else None,
            limit=limit,
            offset=offset,
        )

    async def list_namespaces(
        self,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces that hold live items (§20.5), those under ``prefix`` and ending
        with ``suffix``, cut to their first ``max_depth`` labels, in order."""
        checked("prefix", namespace_problem(prefix, prefix=True))
        checked("suffix", namespace_problem(suffix, prefix=True))
        if max_depth is not None:
            _limit("max_depth", max_depth, 1, 10)
        _limit("limit", limit, 1, MAX_LIMIT)
        _limit("offset", offset, 0, 2**31 - 1)
        return await self._store.memory_namespaces(
            self.scope,
            tuple(prefix),
            suffix=tuple(suffix),
            max_depth=max_depth,
            limit=limit,
            offset=offset,
        )
