"""The durable queue from the ThreadState side (spec 02 §2.6, §2.7.4).

Entries are validated synchronously and the write lock is the first thing awaited, so
concurrent ``queue_message`` calls commit in the order they were made (the lock is FIFO).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.errors import ThreadTerminated
from threadloom.records import Message, QueueEntry, QueueSource, new_id
from threadloom.store.base import Fence
from threadloom.thread.validate import apply_queue_update, check_queue, gather

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub
    from threadloom.thread.state import ThreadState

# Sources whose entries clear the stop flag: people and code, not subagent traffic (C5).
CLEARS_STOP = frozenset(("api", "queue_message"))


def is_pending_view(message: Message) -> bool:
    """True for the pending view of a queue entry (stored messages never carry ``queued``)."""
    return message.status == "pending" and (message.metadata or {}).get("queued") is True


async def enqueue(
    hub: ThreadHub,
    thread_id: str,
    fields: Mapping[str, Any],
    source: QueueSource,
    *,
    fence: Fence | None = None,
) -> Message:
    """Commit a validated entry, publish its pending view, and signal the runtime;
    ``fence``: the lease of the execution that queues it (``Store.fenced``)."""
    store = hub.store.fenced(fence)
    async with hub.lock(thread_id):
        entry = QueueEntry.model_construct(id=new_id(), source=source, created_at=0, **fields)
        try:
            stored, event = await store.enqueue(thread_id, entry, clear_stop=source in CLEARS_STOP)
        except ThreadTerminated as exc:
            hub.set_terminated(thread_id, exc.terminated_at)
            raise
        view = (await hub.project(thread_id, [stored.pending_view()]))[0]
        hub.publish_message(event, view, stored=False)
    hub.signal_work(thread_id)
    return view


async def queue_message(
    state: ThreadState, message: Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> Message:
    checked = check_queue(gather(message, fields, "queue_message"))
    return await enqueue(state.hub, state.thread_id, checked, "queue_message", fence=state.fence)


async def edit_entry(
    state: ThreadState, entry_id: str, updates: Mapping[str, Any]
) -> Message | None:
    """Edit a waiting entry in place; ``None`` when it was delivered before the lock."""
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        entry = await hub.store.get_queue_entry(tid, entry_id)
        if entry is None:
            return None
        current = {
            "content": entry.content,
            "metadata": entry.metadata,
            "silent": entry.silent,
            "attachments": entry.attachments,
        }
        if not updates:
            changed = entry
        else:
            edited = entry.model_copy(update=apply_queue_update(current, updates))
            result = await state.store.update_queue_entry(tid, edited)
            if result is None:
                return None
            changed, event = result
        view = changed.pending_view(cancelled=state.terminated is not None)
        view = (await hub.project(tid, [view]))[0]
        if updates:
            hub.publish_message(event, view, stored=False)
        return view
