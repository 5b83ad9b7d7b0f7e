"""Parent, child and termination (spec 02 §2.10, §2.13, §2.14)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.errors import InvalidArgument, ThreadNotFound, ThreadTerminated
from threadloom.records import SubagentRegistryEntry
from threadloom.store.base import Fence
from threadloom.thread.queue import enqueue

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub
    from threadloom.thread.state import ThreadState


async def _live_row_check(state: ThreadState) -> str | None:
    """Raise ``ThreadTerminated`` for a terminated thread; return its parent id."""
    row = await state.hub.store.get_thread(state.thread_id)
    if row is None:
        raise ThreadNotFound(state.thread_id)
    state.hub.note_thread(row)
    if row.terminated is not None:
        raise ThreadTerminated(state.thread_id, row.terminated)
    return row.parent_id


async def set_registry_status(
    hub: ThreadHub, parent_id: str, child_id: str, label: str, *, fence: Fence | None = None
) -> None:
    """Write ``label`` into the parent's registry entry for the child and publish it;
    ``fence``: the lease of the execution that writes it (``Store.fenced``)."""
    store = hub.store.fenced(fence)
    async with hub.lock(parent_id):
        event = await store.set_registry_status(parent_id, child_id, label)
        if event is not None:
            await hub.publish_events([event])


RECONCILE_EVERY_US = 60_000_000
"""A parent's registry is reconciled on reads at most once per this many µs."""

SETTLED_ENTRY = frozenset(("idle", "failed", "terminated"))
"""Entry statuses the reconciler leaves alone; any other (``running``, a label) is checked."""


async def reconcile_registry(
    hub: ThreadHub, parent_id: str, *, force: bool = False, fence: Fence | None = None
) -> list[SubagentRegistryEntry]:
    """Bring the parent's open registry entries in line with their children (spec 06
    §6.11) and return the registry as it then is.

    A missing or terminated child makes its entry ``terminated``; a child with no active
    run and nothing queued makes it ``idle`` or ``failed`` after its run status. Runs on
    a read at most once per ``RECONCILE_EVERY_US`` per parent, unless ``force``d (start-up).
    ``fence``: the lease of the execution that reads it (its writes are fenced).
    """
    entries = await hub.store.get_registry(parent_id)
    now = hub.clock()
    last = hub.registry_checked.get(parent_id)
    if not force and last is not None and now - last < RECONCILE_EVERY_US:
        return entries
    hub.registry_checked[parent_id] = now
    open_entries = [e for e in entries if e.status not in SETTLED_ENTRY]
    if not open_entries:
        return entries
    rows = await hub.store.get_threads([e.reference for e in open_entries])
    changed = False
    for entry in open_entries:
        if entry.reference in hub.children_starting:
            continue  # created by this process, its first message not queued yet
        row = rows.get(entry.reference)
        if row is None or row.terminated is not None:
            settled = "terminated"
        elif row.status.state == "running" or await hub.store.list_queue(entry.reference):
            continue
        else:
            settled = row.status.state
        await set_registry_status(hub, parent_id, entry.reference, settled, fence=fence)
        changed = True
    return await hub.store.get_registry(parent_id) if changed else entries


async def set_status(state: ThreadState, label: str) -> None:
    if not isinstance(label, str):
        raise InvalidArgument("set_status requires a string")
    label = label.strip()
    if not label:
        raise InvalidArgument("set_status requires non-empty status")
    parent_id = await _live_row_check(state)
    if parent_id is not None:
        await set_registry_status(state.hub, parent_id, state.thread_id, label, fence=state.fence)


async def terminate(state: ThreadState) -> int:
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        at, events = await state.store.terminate(tid)
        hub.set_terminated(tid, at)
        if events:
            await hub.publish_events(events)
            row = await hub.store.get_thread(tid)
            if row is not None:
                hub.publish(tid, "thread_updated", None, {"thread": row.record().model_dump()})
    if not events:
        return at
    if state.parent_thread_id is not None:
        await set_registry_status(hub, state.parent_thread_id, tid, "terminated", fence=state.fence)
    if hub.abort_run is not None:
        await hub.abort_run(tid, "terminated", state.execution is not None)
    return at


async def get_child_thread(state: ThreadState, reference_id: str) -> ThreadState | None:
    from threadloom.thread.state import load_state

    if not isinstance(reference_id, str):
        return None
    entries = await state.get_children()
    if not any(e.reference == reference_id for e in entries):
        return None
    child = await load_state(state.hub, reference_id, missing_ok=True)
    if child is None or child.parent_thread_id != state.thread_id:
        return None
    return child


async def notify_parent(state: ThreadState, content: str) -> None:
    if not isinstance(content, str):
        raise InvalidArgument("notify_parent requires a string")
    content = content.strip()
    if not content:
        raise InvalidArgument("notify_parent requires non-empty content")
    parent_id = await _live_row_check(state)
    record = getattr(state.execution, "record_parent_notification", None)
    if record is not None:
        record(content)
    if parent_id is None:
        return
    entries = await state.hub.store.get_registry(parent_id)
    owner = next((e.owner for e in entries if e.reference == state.thread_id), "a")
    await enqueue(
        state.hub,
        parent_id,
        {
            "role": "assistant" if owner == "b" else "user",
            "content": content,
            "attachments": None,
            "silent": True,
            "metadata": {
                "subagent_id": state.thread_id,
                "forwarded_from": {"thread_id": state.thread_id, "message_id": None},
            },
        },
        "subagent",
    )


__all__ = ["get_child_thread", "notify_parent", "reconcile_registry", "set_status", "terminate"]
