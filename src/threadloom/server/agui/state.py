"""AG-UI shared state and context (spec 13 §13.2.9, §13.2.11).

A request's ``state`` becomes the thread's shared state (spec 02 §2.20) before its messages
are sent; its ``context`` the thread's run context, which the engine puts into the system
text of the thread's model requests. The response sends the thread's state as
``STATE_SNAPSHOT`` right after ``RUN_STARTED``, then each change the run makes as
``STATE_DELTA``: the RFC 6902 JSON Patch, made by ``jsonpatch``, from the state the client
was last sent to the state the change's event carries (a change that leaves the client's
state as it is sends nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent

from threadloom.engine.run.runtime import Runtime
from threadloom.errors import InvalidArgument, StateTooLarge
from threadloom.records import RUN_CONTEXT_MAX_BYTES, ContextEntry, SharedState, state_json
from threadloom.server.errors import ApiError, bad_field
from threadloom.store.base import ThreadRow


def request_state(value: Any) -> dict[str, Any] | None:
    """The state a request gives the thread: ``None`` when it gives none (absent, ``null``
    or ``{}``: a client that holds no state yet); a 400 naming ``state`` when it is not a
    JSON object, a 413 when it is over the limit."""
    if value is None or value == {}:
        return None
    try:
        checked, _ = state_json(value)
    except StateTooLarge as exc:
        raise ApiError(413, "payload_too_large", str(exc)) from None
    except InvalidArgument as exc:
        raise bad_field("state", str(exc).removeprefix("state ")) from None
    return checked


def request_context(entries: Sequence[Any] | None) -> list[ContextEntry]:
    """The request's ``context`` as the thread's run context (a 413 over its limit)."""
    out = [ContextEntry(description=e.description, value=e.value) for e in entries or ()]
    try:
        state_json({"context": [e.model_dump() for e in out]}, "context", RUN_CONTEXT_MAX_BYTES)
    except StateTooLarge as exc:
        raise ApiError(413, "payload_too_large", str(exc)) from None
    return out


async def apply(
    runtime: Runtime,
    row: ThreadRow,
    state: Mapping[str, Any] | None,
    context: Sequence[ContextEntry],
) -> None:
    """Write the request's state (when it gives one and it differs: last write wins) and
    its context (when it differs from the thread's) before anything is sent."""
    if state is not None:
        thread = await runtime.thread(row.id)
        await thread.set_shared_state(state)
    changes = context or row.has_run_context
    if changes and list(context) != await runtime.store.get_run_context(row.id):
        await runtime.store.set_run_context(row.id, context)


class StateStream:
    """What of the thread's state one response has sent: its snapshot, then deltas.
    The state it starts from is read by the route before the run starts (after the
    request's own writes), so the response opens without a read of its own."""

    def __init__(self, start: SharedState | None = None) -> None:
        self.start = start or SharedState()
        self.sent: dict[str, Any] = dict(self.start.value)

    def snapshot(self) -> StateSnapshotEvent | None:
        """``STATE_SNAPSHOT`` of the thread's state, when it was ever written (a thread
        whose state never was sends none: the client's state is taken to be ``{}``).
        Changes after the read come as deltas (their frames follow the cursor)."""
        if not self.start.version:
            return None
        return StateSnapshotEvent(snapshot=self.start.value)

    def delta(self, frame: Mapping[str, Any]) -> BaseEvent | None:
        """The ``STATE_DELTA`` of a ``state_updated`` frame (``None``: nothing changed for
        this client)."""
        new = frame.get("state")
        if not isinstance(new, dict):
            return None
        ops = jsonpatch.make_patch(self.sent, new).patch
        self.sent = new
        if not ops:
            return None
        return StateDeltaEvent(delta=ops)
