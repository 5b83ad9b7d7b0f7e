"""Tool calls that need a person's approval (spec 14): which calls need it, parking them,
and running the decided ones when the run goes on.

Fail closed: a call that needs approval runs only after ``Store.consume_approval`` found
an explicit, stored approve that no one consumed before — in the transaction that records
the call's start. Anything else (no decision, a rejection, a cancellation, arguments that
changed since they were shown) gives the model an error result and runs nothing.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any

from threadloom.define.tool import ToolResult
from threadloom.engine.env import StepEnv
from threadloom.records import (
    Approval,
    Message,
    ToolCall,
    ToolCallFunction,
    arguments_hash,
    encode_tool_calls,
    json_compact,
)

logger = logging.getLogger("threadloom.approvals")

NESTED = (
    'Tool "{name}" needs a person\'s approval, which a nested prompt cannot wait for: '
    "it was not run."
)
REJECTED = "Rejected: the call was not approved{by}{reason}."
CHANGED = "Not run: the arguments changed after they were shown for approval."
NOT_APPROVED = "Not run: the call has no approval that can still run ({state})."


def _definition(env: StepEnv, name: str) -> Any:
    resolved = env.offered.get(name)
    if resolved is None or getattr(resolved, "kind", "tool") != "tool":
        return None
    target = resolved.target
    return getattr(target, "tool_definition", target)


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    try:
        value = json.loads(call.function.arguments or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def needs_approval(env: StepEnv, call: ToolCall) -> bool:
    """Whether a person must approve ``call`` before it runs (spec 14 §14.1). A rule
    function that raises or answers anything but a bool counts as yes; a call whose
    arguments are not a JSON object needs none (it is refused before any tool runs)."""
    definition = _definition(env, call.function.name)
    if definition is None:
        return False
    return await definition_needs_approval(
        definition, call.function.name, _arguments(call), env.state
    )


async def definition_needs_approval(
    definition: Any, name: str, arguments: dict[str, Any] | None, state: Any
) -> bool:
    """Whether a call of ``definition`` with ``arguments`` needs a person's approval
    (spec 14 §14.1): the one reading of ``requires_approval``, for the model's calls and
    the tool playground's (spec 08 §8.14), failing closed."""
    rule = getattr(definition, "requires_approval", False)
    if rule is False or rule is None:
        return False
    if rule is True:
        return True
    if arguments is None:
        return False
    try:
        answer = rule(dict(arguments), state)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # fail closed
        logger.warning(
            "requires_approval of tool %s raised %s: approval required",
            name,
            type(exc).__name__,
            exc_info=exc,
        )
        return True
    return answer is not False


def has_rules(env: StepEnv) -> bool:
    """Whether any tool offered to the step can need approval (else nothing is checked)."""
    for resolved in env.tools:
        target = resolved.target
        definition = getattr(target, "tool_definition", target)
        if getattr(definition, "requires_approval", False) not in (False, None):
            return True
    return False


def nested_refusal(name: str) -> ToolResult:
    return ToolResult(status="error", error=NESTED.format(name=name))


async def park(env: StepEnv, calls: list[ToolCall]) -> None:
    """Store the calls' pending approvals and publish them (spec 14 §14.2)."""
    message_id = env.pending_id
    approvals = []
    for call in calls:
        arguments = _arguments(call) or {}
        approvals.append(
            Approval(
                thread_id=env.state.thread_id,
                tool_call_id=call.id,
                message_id=message_id,
                tool=call.function.name,
                arguments=arguments,
                arguments_hash=arguments_hash(arguments),
                state="pending",
                requested_at=0,
            )
        )
    hub = env.run.hub
    async with hub.lock(env.state.thread_id):
        events = await env.run.store.request_approvals(env.state.thread_id, approvals)
        await hub.publish_events(events)


def rejection(approval: Approval) -> ToolResult:
    by = f" by {approval.decided_by}" if approval.decided_by else ""
    reason = f": {approval.reason}" if approval.reason else ""
    return ToolResult(status="error", error=REJECTED.format(by=by, reason=reason))


async def consume(env: StepEnv, approval: Approval, issued: Message | None) -> ToolCall | str:
    """The call to run for an approved ``approval``, its approval consumed (the start
    recorded), or the error text when it must not run: the call's arguments in the stored
    message are not the ones shown, or the approval was consumed or cancelled already.
    Edited arguments are written into the stored message first, so the model's history
    shows what ran."""
    call = None
    if issued is not None:
        call = next((c for c in issued.decoded_tool_calls() if c.id == approval.tool_call_id), None)
    current = _arguments(call) if call is not None else None
    if call is None or current is None or arguments_hash(current) != approval.arguments_hash:
        return CHANGED
    consumed = await env.run.store.consume_approval(env.state.thread_id, approval.tool_call_id)
    if consumed is None:
        return NOT_APPROVED.format(state="consumed or cancelled")
    if consumed.edited_arguments is not None:
        edited = json_compact(consumed.edited_arguments)
        call = call.model_copy(
            update={"function": ToolCallFunction(name=call.function.name, arguments=edited)}
        )
        assert issued is not None
        await _rewrite_arguments(env, issued, call)
    return call


async def _rewrite_arguments(env: StepEnv, issued: Message, call: ToolCall) -> None:
    calls = [call if c.id == call.id else c for c in issued.decoded_tool_calls()]
    hub = env.state.hub
    async with hub.lock(env.state.thread_id):
        current = await env.run.store.get_message(env.state.thread_id, issued.id)
        if current is None:
            return
        updated = current.model_copy(update={"tool_calls": encode_tool_calls(calls)})
        stored, event = await env.run.store.update_message(env.state.thread_id, updated)
        hub.publish_message(event, stored)
