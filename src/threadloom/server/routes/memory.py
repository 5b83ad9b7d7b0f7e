"""The memory store over HTTP (spec 20 §20.7): put, read and delete an item, search items,
list namespaces, under ``/api/memory``.

Whose memory: the caller's own user memory (that of the threads they own; a system
principal's: that of threads without a user); ``user_id`` names another user's (admins, or
the caller's own id), ``agent_id`` an agent's (admins; ``user_id`` is then not read). Any
other caller gets 403 and learns nothing of the scope. Each request is one store
transaction (a conditional put that loses reads the stored version after, to name it in
the 409).
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom import errors as E
from threadloom.records.memory import SEPARATOR
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routing import Router
from threadloom.thread.memory import Memory
from threadloom.wire.auth import Success
from threadloom.wire.memory import (
    ItemAnswer,
    ItemList,
    ListNamespaces,
    NamespaceList,
    PutItem,
    SearchItems,
)

router = Router(prefix="/api/memory", tags=["memory"])


def _scope(request: Request, who: Principal, user_id: str | None, agent_id: str | None) -> Memory:
    store = deps.runtime(request).hub.store
    if agent_id is not None:  # an agent's memory: user_id is not read
        if not who.is_admin:
            raise ApiError(403, "forbidden", "Forbidden: an agent's memory is for admins")
        return Memory(store, "agent", agent_id)
    if user_id is not None and user_id != who.owner_id and not who.is_admin:
        raise ApiError(403, "forbidden", "Forbidden: another user's memory")
    return Memory(store, "user", user_id if user_id is not None else who.owner_id)


def _named(query: deps.Query, name: str) -> str:
    value = query.raw(name)
    if value is None or value == "":
        raise bad_field(name, "is required")
    return value


def _invalid(exc: E.InvalidField) -> ApiError:
    return bad_field(exc.field, exc.problem)


@router.put("/items", summary="Store an item in a memory")
async def put_memory_item(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    body = await deps.body_of(request, PutItem)
    memory = _scope(request, who, body.user_id, body.agent_id)
    try:
        item = await memory.put(
            body.namespace, body.key, body.value, ttl_s=body.ttl_s, if_version=body.if_version
        )
    except E.InvalidField as exc:
        raise _invalid(exc) from None
    return ItemAnswer.of(item).to_wire()


def _located(request: Request, who: Principal, query: deps.Query) -> tuple[Memory, list[str], str]:
    """The scope, namespace (``a.b``: labels joined by ``.``) and key a ``GET`` or
    ``DELETE`` names in its query."""
    memory = _scope(request, who, query.raw("user_id") or None, query.raw("agent_id") or None)
    return memory, _named(query, "namespace").split(SEPARATOR), _named(query, "key")


@router.get("/items", summary="An item of a memory")
async def get_memory_item(
    request: Request,
    who: Principal = Depends(deps.principal),
    query: deps.Query = Depends(deps.query),
) -> dict[str, Any]:
    memory, namespace, key = _located(request, who, query)
    try:
        item = await memory.get(namespace, key)
    except E.InvalidField as exc:
        raise _invalid(exc) from None
    if item is None:
        raise ApiError(404, "memory_item_not_found", f"Memory item not found: {key}")
    return ItemAnswer.of(item).to_wire()


@router.delete("/items", summary="Delete an item of a memory")
async def delete_memory_item(
    request: Request,
    who: Principal = Depends(deps.principal),
    query: deps.Query = Depends(deps.query),
) -> dict[str, Any]:
    memory, namespace, key = _located(request, who, query)
    version = query.int("if_version", maximum=2**53 - 1)
    if version == 0:
        raise bad_field("if_version", "must be an integer from 1 to 9007199254740991")
    try:
        deleted = await memory.delete(namespace, key, if_version=version)
    except E.InvalidField as exc:
        raise _invalid(exc) from None
    if not deleted:
        raise ApiError(404, "memory_item_not_found", f"Memory item not found: {key}")
    return Success(success=True).to_wire()


@router.post("/search", summary="Search the items of a memory")
async def search_memory(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    body = await deps.body_of(request, SearchItems)
    memory = _scope(request, who, body.user_id, body.agent_id)
    try:
        items = await memory.search(
            body.namespace_prefix, filter=body.filter, limit=body.limit, offset=body.offset
        )
    except E.InvalidField as exc:
        raise _invalid(exc) from None
    return ItemList.of(items).to_wire()


@router.post("/namespaces", summary="The namespaces of a memory")
async def list_memory_namespaces(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    body = await deps.body_of(request, ListNamespaces)
    memory = _scope(request, who, body.user_id, body.agent_id)
    try:
        found = await memory.list_namespaces(
            prefix=body.prefix,
            suffix=body.suffix,
            max_depth=body.max_depth,
            limit=body.limit,
            offset=body.offset,
        )
    except E.InvalidField as exc:
        raise _invalid(exc) from None
    return NamespaceList(namespaces=[list(ns) for ns in found]).to_wire()
