"""Reading, injecting, updating and deleting messages (spec 02 §2.4, §2.5, §2.7, §2.8).

Order of every write: validate → (``before_*`` hooks, outside the lock) → under the
thread's write lock: commit, reflect in live histories, publish → (``after_*`` hooks).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from threadloom.define.hook import HookContext, HookDefinition
from threadloom.errors import (
    InvalidArgument,
    InvalidMessage,
    InvalidUpdate,
    MessageGenerating,
    MessageNotFound,
    ThreadTerminated,
)
from threadloom.records import PROJECTED_FIELDS, LogRow, Message, MessagesPage, new_id
from threadloom.thread import queue
from threadloom.thread.validate import (
    INJECT_FIELDS,
    UPDATE_FIELDS,
    apply_update,
    check_inject,
    check_update_names,
    gather,
)

if TYPE_CHECKING:
    from threadloom.store.base import Store, ThreadRow
    from threadloom.thread.hub import ThreadHub
    from threadloom.thread.state import ThreadState

MAX_IDS = 200

# Fields the runtime owns on a message being created (spec 03 §3.6.6).
_OWNED = (
    "id",
    "created_at",
    "status",
    "depth",
    "parent_id",
    "prompt",
    "log_id",
    "reasoning_content",
    "reasoning_details",
    "subagent_id",
    *PROJECTED_FIELDS,
)


def _hooks(state: ThreadState, name: str) -> Sequence[tuple[HookDefinition, HookContext]]:
    """The hooks named ``name`` that run for a write made through ``state`` (spec 03 §3.3)."""
    return state.hub.resolve_hooks(name, state.agent_id, state.prompt_name, state.prompt_hooks)


def _check_int(name: str, value: object, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{name} must be an integer ≥ 0" + (" or None" if allow_none else ""))


async def get_messages(
    state: ThreadState,
    store: Store,
    *,
    limit: int | None,
    offset: int,
    order: str,
    include_silent: bool,
    max_depth: int | None,
    ids: Sequence[str] | None,
    include_workblocks: bool,
) -> MessagesPage:
    _check_int("limit", limit, allow_none=True)
    _check_int("offset", offset, allow_none=False)
    _check_int("max_depth", max_depth, allow_none=True)
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'")
    if not isinstance(include_silent, bool) or not isinstance(include_workblocks, bool):
        raise InvalidArgument("include_silent and include_workblocks must be booleans")
    hub, tid = state.hub, state.thread_id
    wanted: list[str] = []
    if ids is not None:
        if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
            raise InvalidArgument("ids must be a sequence of strings")
        wanted = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    if wanted:
        if len(wanted) > MAX_IDS:
            raise InvalidArgument("Too many message IDs requested")
        found = await store.read_by_ids(
            tid,
            wanted,
            include_silent=include_silent,
            max_depth=max_depth,
            include_workblocks=include_workblocks,
        )
        found = await hub.project(tid, found)
        return MessagesPage(messages=found, total=len(found), has_more=False)
    page, total = await store.read_page(
        tid,
        limit=limit,
        offset=offset,
        order="asc" if order == "asc" else "desc",
        include_silent=include_silent,
        max_depth=max_depth,
    )
    page = await hub.project(tid, page)
    return MessagesPage(messages=page, total=total, has_more=offset + len(page) < total)


async def get_wire_page(
    state: ThreadState,
    store: Store,
    *,
    limit: int | None,
    offset: int,
    order: str,
    include_silent: bool,
    max_depth: int | None,
) -> WirePage:
    """``get_messages`` without ``ids``, each message as its wire record
    (``Message.to_wire()``) built from the store's rows (issue 40: a first read of a page
    costs no records). A page with a message that names a subagent is read as records and
    projected (spec 01 §1.4.11), then rendered: the same records either way."""
    _check_page(limit, offset, order, include_silent, max_depth)
    found = await store.read_page_wire(
        state.thread_id,
        limit=limit,
        offset=offset,
        order="asc" if order == "asc" else "desc",
        include_silent=include_silent,
        max_depth=max_depth,
    )
    if found is not None:
        wire, total = found
        return WirePage(wire, total, offset + len(wire) < total, projected=False)
    page = await get_messages(
        state,
        store,
        limit=limit,
        offset=offset,
        order=order,
        include_silent=include_silent,
        max_depth=max_depth,
        ids=None,
        include_workblocks=False,
    )
    wire = [m.to_wire(copy_metadata=False) for m in page.messages]
    return WirePage(wire, page.total, page.has_more, projected=True)


async def thread_and_wire_page(
    hub: ThreadHub,
    thread_id: str,
    *,
    limit: int | None,
    offset: int,
    order: str,
    include_silent: bool,
    max_depth: int | None,
    wanted: Callable[[ThreadRow], bool],
    from_replica: bool = False,
) -> tuple[ThreadRow | None, WirePage | None]:
    """The thread's row and, when ``wanted(row)`` (called inside the read, on whichever
    thread the store reads on; twice when the store read the row again, C08-195), its
    page of wire records, both read in one snapshot
    (issue 40: a first read's access check and page, one snapshot — on PostgreSQL one
    hand-off to a connection instead of two). The page is ``None`` when there is no row,
    when ``wanted`` refused it, or when a message of the page names a subagent (read it
    then with ``get_wire_page``, which projects). A held pending message is committed
    first, as for every read of the thread. With a read replica (``from_replica``) the
    row stays the primary's point read and the page the replica's (spec 17 §17.5.4
    rule 5): two reads, as before."""
    _check_page(limit, offset, order, include_silent, max_depth)
    await hub.commit_deferred(thread_id)
    store = hub.store
    reader = store.replica() if from_replica else store
    page: dict[str, Any] = {
        "limit": limit,
        "offset": offset,
        "order": "asc" if order == "asc" else "desc",
        "include_silent": include_silent,
        "max_depth": max_depth,
    }
    found: tuple[list[dict[str, Any]], int] | None = None
    if reader is store:
        row, found = await store.get_thread_page_wire(thread_id, wanted=wanted, **page)
    else:
        row = await store.get_thread(thread_id)
        if row is not None and wanted(row):
            found = await reader.read_page_wire(thread_id, **page)
    if found is None:
        return row, None
    wire, total = found
    return row, WirePage(wire, total, offset + len(wire) < total, projected=False)


def _check_page(
    limit: int | None, offset: int, order: str, include_silent: bool, max_depth: int | None
) -> None:
    _check_int("limit", limit, allow_none=True)
    _check_int("offset", offset, allow_none=False)
    _check_int("max_depth", max_depth, allow_none=True)
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'")
    if not isinstance(include_silent, bool):
        raise InvalidArgument("include_silent must be a boolean")


@dataclass(frozen=True, slots=True)
class WirePage:
    """A page of wire records (in the order read), its total, whether more follow, and
    whether a record carries projected ``subagent_*`` fields (such a page is not kept by
    a server's page cache: the child's changes do not move the parent's ``event_seq``)."""

    messages: list[dict[str, Any]]
    total: int
    has_more: bool
    projected: bool


async def get_message(state: ThreadState, message_id: str) -> Message | None:
    if not isinstance(message_id, str):
        raise InvalidArgument("message_id must be a string")
    found = await state.hub.store.get_message(state.thread_id, message_id)
    if found is None:
        return None
    return (await state.hub.project(state.thread_id, [found]))[0]


def merge_created(original: Message, returned: object, hook_id: str) -> Message:
    """A ``before_create_message`` result merged over the message (spec 03 §3.6.6):
    validated like caller input, with the runtime-owned fields restored."""
    if isinstance(returned, Message):
        changes = {k: getattr(returned, k) for k in INJECT_FIELDS}
    elif isinstance(returned, Mapping):
        unknown = [k for k in returned if k not in Message.model_fields]
        if unknown:
            raise InvalidMessage(
                f"before_create_message hook '{hook_id}' returned unknown field '{unknown[0]}'"
            )
        changes = {k: v for k, v in returned.items() if k in INJECT_FIELDS}
    else:
        raise InvalidMessage(
            f"before_create_message hook '{hook_id}' must return a Message, a mapping or None"
        )
    fields = {k: getattr(original, k) for k in INJECT_FIELDS}
    fields.update(changes)
    if fields.get("attachments") is not None:
        fields["attachments"] = [
            a.model_dump() if hasattr(a, "model_dump") else a for a in fields["attachments"]
        ]
    owned = {k: getattr(original, k) for k in _OWNED}
    if original.status == "pending":
        # a pending model message has no content until it is finalised (spec 01 §1.4.13
        # rule 10): the rule of caller input (content or calls or attachments) does not
        # apply to it, and what a hook returns as its content is not kept
        fields["content"] = ""
        owned["content"] = None
    try:
        checked = check_inject(fields, "before_create_message")
    except InvalidMessage as exc:
        raise InvalidMessage(f"before_create_message hook '{hook_id}': {exc}") from None
    return checked.model_copy(update=owned)


def derive_subagent_id(message: Message) -> Message:
    """Set ``subagent_id`` from a non-empty string ``metadata.subagent_id`` (in place)."""
    value = (message.metadata or {}).get("subagent_id")
    message.subagent_id = value if isinstance(value, str) and value else None
    return message


async def create(
    state: ThreadState,
    candidate: Message,
    *,
    propagate: bool,
    require_live: bool = True,
    log_for: Callable[[Message], LogRow | None] | None = None,
) -> Message:
    """The create lifecycle for one message (spec 02 §2.5.2 steps 4-9, spec 03 §3.7).
    ``log_for`` builds an update of a log row from the final message, committed with it."""
    stored, _ = await _create(state, candidate, propagate, require_live, log_for, None)
    return stored


def create_with_log(
    state: ThreadState,
    candidate: Message,
    log: LogRow,
    *,
    require_live: bool = True,
    durable: bool = True,
) -> Coroutine[Any, Any, tuple[Message, LogRow]]:
    """Create a runtime message and insert a new log row in the same transaction (a
    pending model message and its first LLM row); failures of hooks are recorded.
    ``durable=False``: see ``Store.insert_message_and_log``. ``_create``'s coroutine
    itself, whose row is ``log`` as stored (never ``None``): no coroutine of its own
    alive while the step's write waits (issue 40)."""
    return cast(
        "Coroutine[Any, Any, tuple[Message, LogRow]]",
        _create(state, candidate, False, require_live, None, log, durable),
    )


async def _before_create(state: ThreadState, candidate: Message, *, propagate: bool) -> Message:
    """The ``before_create_message`` chain over a candidate, then its derived
    ``subagent_id`` (spec 03 §3.6.6): what every create path stores."""
    hooks = _hooks(state, "before_create_message")
    if hooks:
        candidate = await state.hub.hooks.run_transform(
            hooks,
            state,
            candidate,
            validate=lambda prev, ret, hook: merge_created(prev, ret, hook.id),
            propagate=propagate,
        )
    return derive_subagent_id(candidate)


async def _create(
    state: ThreadState,
    candidate: Message,
    propagate: bool,
    require_live: bool,
    log_for: Callable[[Message], LogRow | None] | None,
    new_log: LogRow | None,
    durable: bool = True,
) -> tuple[Message, LogRow | None]:
    hub, tid = state.hub, state.thread_id
    if _hooks(state, "before_create_message"):
        candidate = await _before_create(state, candidate, propagate=propagate)
    else:  # no chain to await: what _before_create would store, without its coroutine
        derive_subagent_id(candidate)
    async with hub.lock(tid):
        log = new_log or (log_for(candidate) if log_for is not None else None)
        stored, log = await insert_locked(
            state,
            candidate,
            log,
            require_live=require_live,
            new_log=new_log is not None,
            durable=durable,
        )
    after = _hooks(state, "after_create_message")
    if after:
        await hub.hooks.run_event(after, state, stored.model_copy(deep=True))
    return stored, log


async def insert_locked(
    state: ThreadState,
    message: Message,
    log: LogRow | None,
    *,
    require_live: bool = True,
    new_log: bool,
    durable: bool = True,
) -> tuple[Message, LogRow | None]:
    """Commit a message that has been through its create hooks (with ``log``, a log row
    to insert when ``new_log`` or else to update, in the same transaction) and publish
    both, the caller holding the thread's write lock. Returns the stored message as
    published and the stored row."""
    hub, tid = state.hub, state.thread_id
    try:
        if log is None:
            stored, event = await state.store.insert_message(
                tid, message, require_live=require_live
            )
            log_event = None
        else:  # the message and its log row commit together
            stored, log, (event, log_event) = await state.store.insert_message_and_log(
                tid, message, log, require_live=require_live, new_log=new_log, durable=durable
            )
    except ThreadTerminated as exc:
        hub.set_terminated(tid, exc.terminated_at)
        raise
    stored = (await hub.project(tid, [stored]))[0]
    hub.publish_message(event, stored)
    if log is not None and log_event is not None:
        hub.publish_log(tid, log_event.seq, log)
    return stored, log


async def inject_message(
    state: ThreadState, message: Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> Message:
    candidate = check_inject(gather(message, fields, "inject_message"))
    terminated = state.terminated
    if terminated is not None:
        raise ThreadTerminated(state.thread_id, terminated)
    candidate.id = new_id()  # the candidate is ours: fill in place, no copies
    candidate.depth = state.depth
    candidate.parent_id = state.parent_message_id
    candidate.prompt = state.prompt_name
    return await create(state, candidate, propagate=True)


def _check_update_result(prev: object, returned: object, hook_id: str) -> dict[str, Any]:
    if not isinstance(returned, Mapping):
        raise InvalidMessage(f"before_update_message hook '{hook_id}' must return a mapping")
    try:
        check_update_names(returned, UPDATE_FIELDS)
    except InvalidUpdate as exc:
        raise InvalidUpdate(f"before_update_message hook '{hook_id}': {exc}") from None
    return dict(returned)


async def update_message(
    state: ThreadState,
    message_id: str,
    updates: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
) -> Message:
    data = gather(updates, fields, "update_message")
    check_update_names(data, UPDATE_FIELDS)
    hub, tid = state.hub, state.thread_id
    current = await hub.store.get_message(tid, message_id) if isinstance(message_id, str) else None
    if current is None:
        raise MessageNotFound(str(message_id))
    if queue.is_pending_view(current):
        edited = await queue.edit_entry(state, message_id, data)
        if edited is not None:
            return edited
        current = await hub.store.get_message(tid, message_id)  # delivered meanwhile
        if current is None:
            raise MessageNotFound(message_id)
    if current.status == "pending":
        raise MessageGenerating(message_id)
    if not data:
        return (await hub.project(tid, [current]))[0]
    apply_update(current, data)  # type and invariant errors before any hook runs
    hooks = _hooks(state, "before_update_message")
    if hooks:
        data = await hub.hooks.run_transform(
            hooks,
            state,
            data,
            args_builder=lambda value: (state, message_id, value),
            validate=lambda prev, ret, hook: _check_update_result(prev, ret, hook.id),
            propagate=True,
        )
    return await _commit_update(state, message_id, lambda current: apply_update(current, data))


async def delete_message(state: ThreadState, message_id: str) -> bool:
    return bool(await delete_with_cascade(state, message_id))


async def delete_with_cascade(state: ThreadState, message_id: str) -> list[str]:
    """Delete a message with its cascade, or cancel a waiting entry (spec 02 §2.8); the ids
    removed in canonical order (empty when there was nothing to delete)."""
    if not isinstance(message_id, str):
        raise InvalidArgument("message_id must be a string")
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        current = await hub.store.get_message(tid, message_id)
        if current is None:
            return []
        if current.status == "pending" and not queue.is_pending_view(current):
            raise MessageGenerating(message_id)
        events = await state.store.delete_message(tid, message_id)
        await hub.publish_events(events)
    return [e.entity_id for e in events if e.kind == "message_deleted" and e.entity_id]


FINALIZE_KEYS = frozenset(
    (
        "content",
        "tool_calls",
        "log_id",
        "status",
        "reasoning_content",
        "reasoning_details",
        "attachments",
    )
)
FAILURE_KEYS = frozenset(("status", "content"))


def _runtime_update_result(
    allowed: frozenset[str], returned: object, hook_id: str
) -> dict[str, Any]:
    if not isinstance(returned, Mapping) or not set(returned) <= allowed:
        raise InvalidUpdate(
            f"before_update_message hook '{hook_id}' returned keys outside {sorted(allowed)}"
        )
    return dict(returned)


async def _commit_update(
    state: ThreadState,
    message_id: str,
    change: Callable[[Message], Message],
    *,
    allow_pending: bool = False,
    known: Message | None = None,
    log: LogRow | None = None,
) -> Message:
    """Under the write lock: re-read the message (unless the caller holds its current
    record), apply ``change``, commit and publish; then the ``after_update_message`` hooks
    (spec 02 §2.7.2 steps 5-9)."""
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        current = known if known is not None else await hub.store.get_message(tid, message_id)
        if current is None or queue.is_pending_view(current):
            raise MessageNotFound(message_id)
        if current.status == "pending" and not allow_pending:
            raise MessageGenerating(message_id)
        if log is None:
            stored, event = await state.store.update_message(tid, change(current))
        else:
            stored, (log_event, event) = await state.store.update_message_and_log(
                tid, change(current), log, bodies=("response",)
            )
            hub.publish_log(tid, log_event.seq, log)
        stored = (await hub.project(tid, [stored]))[0]
        hub.publish_message(event, stored)
    after = _hooks(state, "after_update_message")
    if after:
        await hub.hooks.run_event(after, state, stored.model_copy(deep=True))
    return stored


async def runtime_update(
    state: ThreadState,
    message_id: str,
    updates: Mapping[str, Any],
    *,
    allowed: frozenset[str],
    metadata: Mapping[str, Any] | None = None,
    known: Message | None = None,
    log: LogRow | None = None,
) -> Message:
    """An update the runtime makes (finalisation, failure): update hooks run, their
    failures are recorded and the previous updates applied (spec 03 §3.7). ``known`` is
    the message's current record when the runtime holds it (a pending model message,
    which nothing else may change), saving a read."""
    data = dict(updates)
    hooks = _hooks(state, "before_update_message")
    if hooks:
        data = await _runtime_update_hooks(state, hooks, message_id, data, allowed)
    # no closure here: a variable a nested function reads is a cell in this frame, made on
    # every call, and a step's finalisation holds them across its write (issue 40)
    change = partial(_runtime_change, data, metadata)
    return await _commit_update(state, message_id, change, allow_pending=True, known=known, log=log)


async def _runtime_update_hooks(
    state: ThreadState,
    hooks: Sequence[tuple[HookDefinition, HookContext]],
    message_id: str,
    data: dict[str, Any],
    allowed: frozenset[str],
) -> dict[str, Any]:
    """``runtime_update``'s ``before_update_message`` chain over ``data``."""
    result: dict[str, Any] = await state.hub.hooks.run_transform(
        hooks,
        state,
        data,
        args_builder=lambda value: (state, message_id, value),
        validate=lambda prev, ret, hook: _runtime_update_result(allowed, ret, hook.id),
        propagate=False,
    )
    return result


def _runtime_change(
    data: Mapping[str, Any], metadata: Mapping[str, Any] | None, current: Message
) -> Message:
    """The stored message ``current`` with a runtime update's fields (``metadata``
    merged into its own)."""
    fields = dict(data)
    if metadata:
        fields["metadata"] = {**(current.metadata or {}), **metadata}
    return current.model_copy(update=fields)


async def deliver(state: ThreadState, entry_id: str, candidate: Message) -> Message | None:
    """Deliver a queue entry as a stored message with the entry's id, through the create
    lifecycle (failures recorded, spec 03 §3.7); ``None`` if the entry is gone."""
    hub, tid = state.hub, state.thread_id
    candidate = await _before_create(state, candidate, propagate=False)
    async with hub.lock(tid):
        delivered = await state.store.deliver_queue_entry(tid, entry_id, candidate)
        if delivered is None:
            return None
        stored, event = delivered
        stored = (await hub.project(tid, [stored]))[0]
        hub.publish_message(event, stored)
    after = _hooks(state, "after_create_message")
    if after:
        await hub.hooks.run_event(after, state, stored.model_copy(deep=True))
    return stored
