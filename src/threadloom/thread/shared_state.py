"""A thread's shared state (spec 02 §2.20): one JSON object per thread that the client
(AG-UI's ``state``, the REST route) and the agent (tools, hooks, prompts through their
``ThreadState``) both read and write, stored with the thread.

A write is one store transaction under the thread's write lock, published as a durable
``shared_state`` event (its data: the state with its version), so the stream, the web UI
and AG-UI see every change in order. Concurrent writers: the last write wins, unless it
names the version it read (``version=``), which makes it refuse with ``StateConflict``
when another write came first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from threadloom.errors import InvalidArgument
from threadloom.records import SharedState, state_json
from threadloom.store.base import StateChange

if TYPE_CHECKING:
    from threadloom.thread.state import ThreadState


def _version(version: object) -> int | None:
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidArgument("version must be a non-negative integer")
    return version


async def read(state: ThreadState) -> SharedState:
    return await state.hub.store.get_shared_state(state.thread_id)


async def write(state: ThreadState, change: StateChange) -> SharedState:
    """Commit ``change`` and publish its event; the state as stored."""
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        written = await state.store.write_shared_state(tid, change)
        await hub.publish_events(written.events)
    return written.state


async def replace(state: ThreadState, value: Mapping[str, Any], version: object) -> SharedState:
    checked, _ = state_json(value)
    return await write(state, StateChange(replace=checked, expected_version=_version(version)))


async def update(
    state: ThreadState,
    changes: Mapping[str, Any],
    remove: Iterable[str],
    version: object,
) -> SharedState:
    checked, _ = state_json(changes, "changes")
    if isinstance(remove, str):
        raise InvalidArgument("remove must be a list of keys, not a string")
    keys = tuple(remove)
    if not all(isinstance(k, str) for k in keys):
        raise InvalidArgument("remove must be a list of keys (strings)")
    change = StateChange(merge=checked, remove=keys, expected_version=_version(version))
    return await write(state, change)
