"""The one function that turns a committed event into its wire data (spec 09 §9.6 rule 6):
the data a subscriber is sent is read from the entity's state now, not kept with the event.

Used by ``ThreadHub`` when it publishes committed events (its own and other nodes') and by
the WebSocket session when it replays the events after a client's ``since``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from threadloom.errors import ThreadNotFound
from threadloom.records import Message, SubagentRegistryEntry
from threadloom.store.base import Store, StoredEvent


class EventSource(Protocol):
    """What reading an event's entity needs: the store and the registry projection of
    messages (``ThreadHub`` is one)."""

    @property
    def store(self) -> Store: ...

    async def project(self, thread_id: str, messages: list[Message]) -> list[Message]: ...


def registry_wire(entry: SubagentRegistryEntry) -> dict[str, Any]:
    """The HTTP and stream form of a registry entry (spec 08 §8.2.7); ``relationship``
    falls back to the agent name."""
    return {
        "id": entry.reference,
        "relationship": entry.relationship or entry.name,
        "agent_name": entry.name,
        "title": entry.title,
        "threadName": entry.thread_name,
        "status": entry.status,
        "blocking": entry.blocking,
        "resumable": entry.resumable,
        "owner": entry.owner,
        "description": entry.description,
        "createdAt": entry.created_at,
        "spawnGroupId": entry.spawn_group_id,
    }


async def event_data(
    source: EventSource,
    event: StoredEvent,
    read: Callable[[str, Message], None] | None = None,
) -> dict[str, Any]:
    """``event``'s wire data from its entity's state now; an entity gone since gives
    ``None`` in its place (``{"message": None, "message_id": …}``, ``{"status": None, …}``).
    ``read(thread_id, message)`` is told of each message read, before it is projected."""
    store, tid, entity = source.store, event.thread_id, event.entity_id or ""
    if event.kind == "message":
        message = await store.get_message(tid, entity)
        if message is None:
            return {"message": None, "message_id": entity}
        if read is not None:
            read(tid, message)
        return {"message": (await source.project(tid, [message]))[0].to_wire()}
    if event.kind == "message_deleted":
        payload = event.payload or {}
        return {
            "message_id": entity,
            "depth": payload.get("depth", 0),
            "silent": payload.get("silent", False),
        }
    if event.kind == "status":
        row = await store.get_thread(tid)
        if row is None:
            return {"status": None, "terminated": None}
        return {"status": row.status.model_dump(), "terminated": row.terminated}
    if event.kind == "log":
        log = await store.get_log(tid, entity)
        return {"log": log.to_list_wire() if log else None}
    if event.kind == "subagent":
        entries = {e.reference: e for e in await store.get_registry(tid)}
        found = entries.get(entity)
        return {"entry": registry_wire(found) if found else None}
    if event.kind == "subagent_removed":
        return {"reference": entity}
    if event.kind == "shared_state":  # spec 02 §2.20: the state now, with its version
        try:
            return (await store.get_shared_state(tid)).to_wire()
        except ThreadNotFound:
            return {"state": None, "version": None, "updated_at": None}
    if event.kind == "approval":
        approval = await store.get_approval(tid, entity)
        return {"approval": approval.to_wire() if approval else None, "tool_call_id": entity}
    return dict(event.payload or {})
