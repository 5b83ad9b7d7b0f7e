"""One declarative definition per route of spec 20 §20.7 (the memory store across
threads), as ``endpoints.py`` does for spec 08. Reads and searches repeat after a transport
error; a put too (it writes the same value again), but not one with ``if_version`` (a
repeat of a compare-and-set that won would answer 409); a delete never repeats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from threadloom.client.calls import UNSET, Call, Retry, Unset, json_body, list_of, model_of
from threadloom.records.memory import SEPARATOR
from threadloom.wire.memory import ItemOut as MemoryEntry

ITEMS = "/api/memory/items"


def _namespaces(response: httpx.Response) -> list[tuple[str, ...]]:
    return [tuple(ns) for ns in response.json()["namespaces"]]


def _deleted(response: httpx.Response) -> None:
    return None


def _scope(user_id: str | Unset, agent_id: str | Unset) -> dict[str, str]:
    out: dict[str, str] = {}
    if user_id is not UNSET:
        out["user_id"] = str(user_id)
    if agent_id is not UNSET:
        out["agent_id"] = str(agent_id)
    return out


class MemoryEndpoints:
    """The caller's own user memory by default; ``user_id`` another user's (admins),
    ``agent_id`` an agent's (admins)."""

    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        ttl_s: float | Unset = UNSET,
        if_version: int | Unset = UNSET,
        user_id: str | Unset = UNSET,
        agent_id: str | Unset = UNSET,
    ) -> Call[MemoryEntry]:
        """Store ``value`` at ``key`` of ``namespace`` (last write wins; with
        ``if_version``, a 409 ``memory_conflict`` unless the stored version is that)."""
        body = json_body(
            namespace=list(namespace),
            key=key,
            value=dict(value),
            ttl_s=ttl_s,
            if_version=if_version,
            **_scope(user_id, agent_id),
        )
        retry: Retry = "safe" if if_version is UNSET else "never"
        return Call("PUT", ITEMS, model_of(MemoryEntry, "item"), json=body, retry=retry)

    def get(
        self,
        namespace: Sequence[str],
        key: str,
        *,
        user_id: str | Unset = UNSET,
        agent_id: str | Unset = UNSET,
    ) -> Call[MemoryEntry]:
        """The item (a 404 ``memory_item_not_found`` when there is none)."""
        params = {"namespace": SEPARATOR.join(namespace), "key": key, **_scope(user_id, agent_id)}
        return Call("GET", ITEMS, model_of(MemoryEntry, "item"), params=params)

    def delete(
        self,
        namespace: Sequence[str],
        key: str,
        *,
        if_version: int | Unset = UNSET,
        user_id: str | Unset = UNSET,
        agent_id: str | Unset = UNSET,
    ) -> Call[None]:
        params: dict[str, Any] = {
            "namespace": SEPARATOR.join(namespace),
            "key": key,
            **_scope(user_id, agent_id),
        }
        if if_version is not UNSET:
            params["if_version"] = str(if_version)
        return Call("DELETE", ITEMS, _deleted, params=params, retry="never")

    def search(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: Mapping[str, Any] | Unset = UNSET,
        limit: int | Unset = UNSET,
        offset: int | Unset = UNSET,
        user_id: str | Unset = UNSET,
        agent_id: str | Unset = UNSET,
    ) -> Call[list[MemoryEntry]]:
        body = json_body(
            namespace_prefix=list(namespace_prefix),
            filter=filter if filter is UNSET else dict(filter),
            limit=limit,
            offset=offset,
            **_scope(user_id, agent_id),
        )
        return Call("POST", "/api/memory/search", list_of(MemoryEntry, "items"), json=body)

    def list_namespaces(
        self,
        *,
        prefix: Sequence[str] = (),
        suffix: Sequence[str] = (),
        max_depth: int | Unset = UNSET,
        limit: int | Unset = UNSET,
        offset: int | Unset = UNSET,
        user_id: str | Unset = UNSET,
        agent_id: str | Unset = UNSET,
    ) -> Call[list[tuple[str, ...]]]:
        body = json_body(
            prefix=list(prefix),
            suffix=list(suffix),
            max_depth=max_depth,
            limit=limit,
            offset=offset,
            **_scope(user_id, agent_id),
        )
        return Call("POST", "/api/memory/namespaces", _namespaces, json=body)
