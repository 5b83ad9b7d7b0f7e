"""Context assembly: from stored history to the messages of one model request (spec 04
§4.11, spec 03 §3.8–§3.10).

The stored history is the truth; request-context hooks change what one request sees,
never what is stored. Steps: system text → ``after_system_message`` → snapshot →
``filter_messages`` → past-tools rule and orphans → perspective and reasoning replay →
``prefilter_llm_history`` (may block) → provider-bound normalisation. An active
compaction (spec 23 §23.4) replaces the messages it covers with its summary right after
``filter_messages``, which still sees the live history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from threadloom.engine.env import StepEnv
from threadloom.engine.request.compacted import (
    COMPACTION_KEY,
    UNKNOWN,
    active_compaction,
    substitute,
)
from threadloom.engine.request.context_cache import ContextCache, Prepared, cache_key
from threadloom.engine.request.presentation import (
    Presented,
    RequestMessage,
    call_ids,
    convert,
    is_image,
)
from threadloom.errors import HookBlocked, InvalidMessage
from threadloom.records import Compaction, ContextEntry, Message, new_id
from threadloom.thread.history import MessageHistory
from threadloom.thread.validate import check_inject


@dataclass
class Assembly:
    """The outcome of one context assembly."""

    system: str
    messages: Sequence[RequestMessage] = ()
    blocked: str | None = None
    blocked_by: str | None = None
    presented: dict[int, Presented] = field(default_factory=dict)
    """Remembered conversions of the messages below, by ``id()`` of their request object
    (checked by identity before use, so a hook's copy is never mistaken for one)."""
    prepared: Prepared | None = None
    """The incremental path's normalised context (``context_cache``): when set, it holds
    the messages (``prepared.messages``, already normalised; ``messages`` stays empty)
    and the request builder uses them as they are."""
    compaction: Compaction | None = None
    """The compaction whose summary stands in ``messages`` for its range (spec 23 §23.4)."""


# -- filter_messages -----------------------------------------------------------------

_EDITABLE = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "silent",
    "attachments",
    "metadata",
)


def _filter_result(snapshot: Mapping[str, Message], returned: object, now: int) -> list[Message]:
    """Validate a ``filter_messages`` result: edited copies and synthetic messages."""
    if not isinstance(returned, list | tuple):
        raise InvalidMessage("filter_messages must return a list of messages")
    out: list[Message] = []
    for item in returned:
        raw = item.model_dump() if isinstance(item, Message) else item
        if not isinstance(raw, Mapping):
            raise InvalidMessage("filter_messages items must be messages or mappings")
        original = snapshot.get(raw.get("id") or "")
        fields = {k: raw[k] for k in _EDITABLE if k in raw}
        if original is not None:
            base = {k: getattr(original, k) for k in _EDITABLE}
            base.update(fields)
            fields = base
        if "role" not in fields:
            raise InvalidMessage("a synthetic message needs a role")
        if fields.get("attachments") is not None:
            fields["attachments"] = [
                a.model_dump() if isinstance(a, BaseModel) else a for a in fields["attachments"]
            ]
        try:
            checked = check_inject(fields, "filter_messages")
        except InvalidMessage:
            if fields.get("content") is not None or fields.get("role") not in (
                "system",
                "user",
                "assistant",
            ):
                raise
            checked = Message(id="", role=fields["role"], content=None)
        if original is not None:
            keep = {k: getattr(original, k) for k in Message.model_fields if k not in _EDITABLE}
            out.append(checked.model_copy(update=keep))
        else:
            out.append(
                checked.model_copy(
                    update={
                        "id": raw.get("id") or new_id(),
                        "status": "completed",
                        "depth": int(raw.get("depth") or 0),
                        "created_at": int(raw.get("created_at") or now),
                        "reasoning_content": raw.get("reasoning_content"),
                        "reasoning_details": _details_text(raw.get("reasoning_details")),
                    }
                )
            )
    return out


def _details_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- the run context (spec 13 §13.2.11) ----------------------------------------------

CONTEXT_HEADING = "Context from the client application:"


def context_part(entries: Sequence[ContextEntry]) -> str:
    """The run context as the part of the system text it is: a heading, then one line
    ``- <description>: <value>`` per entry, in order (``""`` for none)."""
    if not entries:
        return ""
    lines = [f"- {e.description}: {e.value}" for e in entries]
    return "\n".join([CONTEXT_HEADING, *lines])


# -- the pipeline --------------------------------------------------------------------


def _eligible(
    history: Sequence[Message], include_chat: bool, anchor_id: str | None
) -> list[Message]:
    messages = [m for m in history if m.depth == 0 and m.status == "completed"]
    if include_chat or anchor_id is None:
        return messages
    ids = [m.id for m in messages]
    start = ids.index(anchor_id) if anchor_id in ids else len(messages)
    return messages[start:]


def _past_tools(messages: list[Message], anchor_created: int | None) -> list[Message]:
    """``include_past_tools=False``: tool traffic before the turn anchor is removed."""
    if anchor_created is None:
        return messages
    out: list[Message] = []
    for m in messages:
        if m.created_at >= anchor_created:
            out.append(m)
        elif m.role == "tool":
            continue
        elif m.tool_calls:
            if (m.content or "").strip() or m.attachments:
                out.append(m.model_copy(update={"tool_calls": None}))
        else:
            out.append(m)
    return out


def _drop_orphans(messages: list[Message], history: MessageHistory | None) -> list[Message]:
    calls = {cid for m in messages if m.tool_calls for cid in call_ids(history, m)}
    return [m for m in messages if m.role != "tool" or m.tool_call_id in calls]


def _present(
    messages: list[Message],
    side: str,
    include_reasoning: bool,
    history: MessageHistory | None = None,
    presented: dict[int, Presented] | None = None,
    recent: frozenset[str] = frozenset(),
    files: Mapping[str, bytes | None] | None = None,
) -> list[RequestMessage]:
    """Perspective (spec 04 §4.8.1) and reasoning replay (§4.11.5); conversions of the
    history's own records are remembered, and listed in ``presented`` by request object."""
    own = "assistant" if side == "a" else "user"
    issuer: dict[str, str] = {}
    for m in messages:
        if m.tool_calls:
            for call_id in call_ids(history, m):
                issuer[call_id] = m.role
    key = ("request", own, include_reasoning)
    out: list[RequestMessage] = []
    for m in messages:
        if m.role == "tool" and issuer.get(m.tool_call_id or "") != own:
            continue
        if m.attachments:  # depends on position and file bytes: converted every time
            item = convert(m, own, include_reasoning, m.id in recent, files)
        elif history is not None:
            item = history.memo(
                m, key, lambda r: convert(r, own, include_reasoning, history=history)
            )
        else:
            item = convert(m, own, include_reasoning)
        if item is None:
            continue
        if presented is not None:
            presented[id(item.request)] = item
        out.append(item.request)
    return out


async def assemble(env: StepEnv) -> Assembly:
    """Build the request context for the acting side's step."""
    run, state, prompt = env.run, env.state, env.prompt
    hub = state.hub
    system = run.definitions.render_system(prompt, state.arguments, state.context)
    if env.nested is None and run.row.has_run_context:  # spec 13 §13.2.11
        part = await run.run_context()
        system = f"{system}\n\n{part}" if system and part else system or part
    compaction = None
    if env.nested is None:  # spec 23 §23.4: known to the history after its first request
        live = run.execution.message_history
        compaction = live.caches.get(COMPACTION_KEY, UNKNOWN)
        if compaction is UNKNOWN:
            compaction = await active_compaction(hub.store, state.thread_id, live)
    bare = env.run.hookless(env.execution)  # then no hook below runs, until something is awaited
    hooks = () if bare else env.run.hooks_for("after_system_message", env.execution)
    if hooks:
        system = await hub.hooks.run_transform(
            hooks,
            state,
            system,
            validate=lambda prev, ret, hook: _system_result(ret),
            propagate=False,
        )
    reasoning = getattr(prompt, "reasoning", None)
    include_reasoning = reasoning is None or bool(getattr(reasoning, "include", True))
    history = env.execution.message_history
    if (
        compaction is None
        and env.nested is None
        and prompt.include_past_tools
        and (prompt.include_chat or env.anchor_id is None)
        and history is run.execution.message_history
        and (
            bare
            or not (
                env.run.hooks_for("filter_messages", env.execution)
                or env.run.hooks_for("prefilter_llm_history", env.execution)
            )
        )
    ):
        own = "assistant" if env.side == "a" else "user"
        cache = history.caches.get(cache_key(own, include_reasoning))
        if cache is None:  # once per history and side
            cache = ContextCache.of(history, own, include_reasoning)
        prepared = cache.prepare(history, system)
        if prepared is not None:
            return Assembly(system=system, prepared=prepared)
    if env.nested is not None:
        snapshot = env.nested.snapshot()
    else:
        records = run.execution.message_history.raw()
        snapshot = _eligible(records, prompt.include_chat, env.anchor_id)
    hooks = env.run.hooks_for("filter_messages", env.execution)
    if hooks:
        snapshot = await _filtered(hub, hooks, state, snapshot)
    applied = None
    if compaction is not None:  # after filter_messages: hooks see the live history
        before = snapshot
        snapshot = substitute(snapshot, run.execution.message_history.raw(), compaction)
        applied = compaction if snapshot is not before else None
    if not prompt.include_past_tools:
        snapshot = _past_tools(snapshot, env.anchor_created)
    snapshot = _drop_orphans(snapshot, history)
    threshold = int(getattr(prompt, "recent_image_threshold", 10) or 0)
    recent = frozenset(m.id for m in snapshot[-threshold:]) if threshold else frozenset()
    files = await _image_bytes(state, _among(snapshot, recent))
    presented: dict[int, Presented] = {}
    messages = _present(snapshot, env.side, include_reasoning, history, presented, recent, files)
    if env.nested is not None:
        messages.extend(env.nested.extra)
    if system:
        messages.insert(0, RequestMessage(role="system", content=system))
    hooks = env.run.hooks_for("prefilter_llm_history", env.execution)
    if hooks:
        try:
            messages = await hub.hooks.run_transform(
                hooks,
                state,
                messages,
                validate=lambda prev, ret, hook: _request_result(ret),
                propagate=False,
                allow_block=True,
            )
        except Exception as exc:
            if getattr(exc, "block", False) is True or isinstance(exc, HookBlocked):
                text = str(exc) or f"Request blocked by hook {getattr(exc, 'hook_id', '')}".strip()
                return Assembly(system=system, blocked=text)
            raise
    return Assembly(system=system, messages=messages, presented=presented, compaction=applied)


# (No lambda or comprehension in ``assemble`` reads its variables: each would be a cell
# of its frame, made on every step, held across its awaits; issue 40.)


async def _filtered(hub: Any, hooks: Any, state: Any, snapshot: list[Message]) -> list[Message]:
    """``snapshot`` through the ``filter_messages`` hooks (spec 03)."""
    by_id = {m.id: m for m in snapshot}
    filtered: list[Message] = await hub.hooks.run_transform(
        hooks,
        state,
        snapshot,
        validate=lambda prev, ret, hook: _filter_result(by_id, ret, hub.clock()),
        propagate=False,
    )
    return filtered


def _among(messages: list[Message], ids: frozenset[str]) -> list[Message]:
    """The messages of ``messages`` whose ids are in ``ids``."""
    return [m for m in messages if m.id in ids]


async def _image_bytes(state: Any, messages: list[Message]) -> dict[str, bytes | None]:
    """The bytes of the image attachments of ``messages`` (``None`` when unreadable)."""
    read = getattr(state, "read_file", None)
    out: dict[str, bytes | None] = {}
    for message in messages:
        for ref in message.attachments or []:
            if is_image(ref) and ref.path not in out:
                try:
                    out[ref.path] = await read(ref.path) if read is not None else None
                except Exception:
                    out[ref.path] = None
    return out


def _system_result(returned: object) -> str:
    if not isinstance(returned, str):
        raise InvalidMessage("after_system_message must return a string or None")
    return returned


def _request_result(returned: object) -> list[RequestMessage]:
    if not isinstance(returned, list | tuple):
        raise InvalidMessage("prefilter_llm_history must return a list")
    try:
        return [
            r if isinstance(r, RequestMessage) else RequestMessage.model_validate(r)
            for r in returned
        ]
    except ValidationError as exc:
        raise InvalidMessage(f"prefilter_llm_history returned an invalid message: {exc}") from None
