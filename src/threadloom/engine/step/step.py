"""One model step: context, pending message, model request, finalisation and tool calls
(spec 04 §4.9.2 steps 8-12, §4.12, §4.13, §4.14). The run loop (``loop.py``) decides what
happens around it: delivery, turns, stop conditions; a sub-prompt runs it nested.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadloom.define.output import Checked, retry_text
from threadloom.engine.env import StepEnv
from threadloom.engine.request.context import assemble
from threadloom.engine.run.compaction import maybe_compact
from threadloom.engine.step.model_call import StepError, call_model
from threadloom.engine.step.outcome import CallOutcome, ModelResult, ToolRound
from threadloom.engine.step.pending import publish_chunk, release_hold
from threadloom.engine.step.tools import canonical_arguments, run_tools
from threadloom.errors import OutputInvalid
from threadloom.records import (
    Message,
    ToolCall,
    ToolCallFunction,
    copy_with,
    encode_tool_calls,
    json_compact,
    new_call_id,
    new_id,
    trusted,
)
from threadloom.thread import messages as thread_messages

EMPTY_REPLY = (
    "You must reply. Empty response was rejected. Return non-empty content, call a tool, "
    "or include attachments."
)


def role_of(side: str) -> str:
    """A model message of side a is stored ``assistant``, of side b ``user``."""
    return "assistant" if side == "a" else "user"


@dataclass
class StepOutcome:
    """What a model step produced (``blocked``: a request-context hook blocked it)."""

    blocked: bool = False
    result: ModelResult | None = None
    message: Message | None = None
    round: ToolRound = field(default_factory=ToolRound)
    guard: bool = False
    handoff: CallOutcome | None = None
    retry: bool = False
    """The answer did not match the prompt's output type: the problem was sent back and
    the side steps again (spec 24 §24.3)."""


async def model_step(env: StepEnv) -> StepOutcome:
    """Pending message, model request, finalisation and tool calls of one step."""
    run = env.run
    env.execution.step = env
    if env.nested is None:  # spec 23 §23.3: one attribute when compaction is off
        model = run.definitions.model(env.prompt.model)
        if model is not None and model.compact_at is not None:
            await maybe_compact(env, model)
    assembly = await assemble(env)
    label = env.side_def.label
    if assembly.blocked is not None:
        await thread_messages.create(
            env.state,
            Message(
                id=new_id(),
                role=role_of(env.side),
                content=assembly.blocked,
                name=label,
                prompt=env.prompt.name,
                metadata={"status_kind": "hook_blocked"},
            ),
            propagate=False,
            require_live=False,
        )
        return StepOutcome(blocked=True)
    # The pending message is stored with the first attempt's LLM row (one commit), just
    # before the request is sent (spec 04 §4.12.1); chunk events already carry its id.
    # Built without validation (its values are typed as its fields): its dictionary on
    # the class's shared keys, 288 bytes instead of 832 while the step holds it (issue 40)
    env.pending_candidate = trusted(
        Message,
        {
            "id": new_id(),
            "role": role_of(env.side),
            "content": None,
            "status": "pending",
            "name": label,
            "prompt": env.prompt.name,
            "depth": env.depth,
            "parent_id": env.parent_message_id,
        },
    )
    env.pending_id = env.pending_candidate.id
    try:
        result = await call_model(env, assembly, env.pending_id)
    except asyncio.CancelledError:
        await release_hold(env, raising=False)  # the settlement fails what is stored
        env.held = None
        raise
    except Exception:
        await release_hold(env, raising=False)
        env.held = None
        if env.pending is not None:
            await thread_messages.runtime_update(
                env.state,
                env.pending.id,
                {"status": "failed", "content": run.partial.get(env.pending.id) or None},
                allowed=thread_messages.FAILURE_KEYS,
            )
        run.partial.pop(env.pending_id, None)
        run.partial_reasoning.pop(env.pending_id, None)
        raise
    pending = env.pending
    assert pending is not None
    calls, guard = post_process(env, result)
    encoded = encode_tool_calls(calls) if calls else None
    checked = check_output(env, result, calls)
    try:
        message = await finalise(env, pending, result, guard, encoded, checked)
    finally:
        env.held = None  # the hold is over (and no cycle is left between the two)
    run.partial.pop(pending.id, None)
    run.partial_reasoning.pop(pending.id, None)
    stored_calls = _stored_calls(message, calls, encoded, env.original_arguments)
    # (no comprehension reads ``guard``: it would be a cell of this frame, issue 40)
    record_calls = stored_calls if guard is None else _without(stored_calls, guard)
    round_ = await run_tools(env, record_calls)
    run.keep_tool_rows(round_.stored)
    await drop_calls(env, message, round_.outcomes)
    if guard is not None:
        stored = await thread_messages.create(
            env.state,
            Message(
                id=new_id(),
                role="tool",
                content=EMPTY_REPLY,
                name="invalid_assistant_response",
                tool_call_id=guard,
                tool_status="error",
                prompt=env.prompt.name,
                depth=env.depth,
                parent_id=env.parent_message_id,
            ),
            propagate=False,
            require_live=False,
        )
        run.keep_tool_rows((stored,))
        return StepOutcome(result=result, message=message, round=round_, guard=True)
    if checked is not None:
        retry = await settle_output(env, checked)
        if retry:
            return StepOutcome(result=result, message=message, round=round_, retry=True)
    handoffs = [
        o
        for o in round_.outcomes
        if o.kind == "handoff" and o.result.status == "success" and not o.dropped
    ]
    return StepOutcome(
        result=result,
        message=message,
        round=round_,
        handoff=handoffs[-1] if handoffs else None,
    )


def _without(calls: list[ToolCall], call_id: str) -> list[ToolCall]:
    """``calls`` without the one of id ``call_id``."""
    return [c for c in calls if c.id != call_id]


def _stored_calls(
    message: Message, calls: list[ToolCall], encoded: str | None, original: dict[str, str]
) -> list[ToolCall]:
    """The finalised message's calls as they run: with the arguments text the model sent,
    so it sees its own parse errors. When the stored text is the one ``calls`` encoded
    (no hook changed it) and holds no ``extra_content`` (a JSON round trip could change
    it), ``calls`` are those records: no decode, and a copy only for changed arguments."""
    if (
        encoded is None
        or message.tool_calls != encoded
        or any(c.extra_content is not None for c in calls)
    ):
        calls = message.decoded_tool_calls()
    out = []
    for c in calls:
        sent = original.get(c.id, c.function.arguments)
        if sent != c.function.arguments:
            c = c.model_copy(
                update={"function": ToolCallFunction(name=c.function.name, arguments=sent)}
            )
        out.append(c)
    return out


def post_process(env: StepEnv, result: ModelResult) -> tuple[list[ToolCall], str | None]:
    side_def = env.side_def
    if side_def.stop_tool and side_def.stop_tool_response_property:
        for call in result.tool_calls:
            if call.name != side_def.stop_tool:
                continue
            try:
                value = json.loads(call.arguments or "{}")
            except ValueError:
                continue
            text = (
                value.get(side_def.stop_tool_response_property) if isinstance(value, dict) else None
            )
            if isinstance(text, str) and text:
                result.content = text
                publish_chunk(env, "message_chunk", env.pending_id, text, 0)
                break
    calls = [
        ToolCall(
            id=c.id,
            function=ToolCallFunction(name=c.name, arguments=canonical_arguments(c.arguments)),
            extra_content=c.extra_content,
        )
        for c in result.tool_calls
    ]
    env.original_arguments = {c.id: c.arguments for c in result.tool_calls}
    seen: set[str] = set()
    for record in calls:
        if record.id in seen:
            raise StepError(f"Duplicate tool call id: {record.id}")
        seen.add(record.id)
    guard: str | None = None
    if not calls and not result.content.strip():
        guard = new_call_id()
        calls.append(
            ToolCall(
                id=guard,
                function=ToolCallFunction(
                    name="invalid_assistant_response",
                    arguments=json_compact(
                        {"reason": "empty_response", "assistantMessageId": env.pending_id}
                    ),
                ),
            )
        )
    return calls, guard


def check_output(env: StepEnv, result: ModelResult, calls: list[ToolCall]) -> Checked | None:
    """The answer checked against the prompt's output type (spec 24 §24.3): a final answer
    (text, no tool call) of a top-level step whose prompt declares one; else None."""
    prompt = env.prompt
    if getattr(prompt, "output_type", None) is None or calls or env.nested is not None:
        return None
    output = prompt.output
    if output is None or not result.content.strip():
        return None
    return output.check(result.content)


async def settle_output(env: StepEnv, checked: Checked) -> bool:
    """After a checked answer is stored: True when the problem was sent back for another
    attempt; raises ``OutputInvalid`` when the retries are used up (spec 24 §24.3, §24.4)."""
    name = env.prompt.name
    attempts = env.execution.output_attempts
    if checked.problem is None:
        attempts.pop(name, None)
        return False
    failed = attempts[name] = attempts.get(name, 0) + 1
    if failed > env.prompt.output_retries:
        attempts.pop(name, None)
        raise OutputInvalid(name, failed, checked.problem)
    await thread_messages.create(
        env.state,
        Message(
            id=new_id(),
            role="user" if env.side == "a" else "assistant",
            content=retry_text(checked.problem),
            name="output_validation",
            prompt=env.prompt.name,
            depth=env.depth,
            parent_id=env.parent_message_id,
            silent=True,
            metadata={"status_kind": "output_invalid", "output_attempt": failed},
        ),
        propagate=False,
        require_live=False,
    )
    return True


async def finalise(
    env: StepEnv,
    pending: Message,
    result: ModelResult,
    guard: str | None,
    encoded: str | None,
    checked: Checked | None = None,
) -> Message:
    """Store the model's answer in its pending message (spec 04 §4.13 step 4);
    ``encoded``: the stored text of its tool calls (``post_process``); ``checked``: the
    answer checked against the prompt's output type, whose value or problem goes in its
    metadata (spec 24 §24.5)."""
    pending_id = pending.id
    content: str | None = result.content or None
    hooks = env.run.hooks_for("before_create_message", env.execution)
    if hooks and content is not None:
        probe = Message(
            id=pending_id,
            role=role_of(env.side),
            content=content,
            name=env.side_def.label,
            prompt=env.prompt.name,
        )
        final = await env.state.hub.hooks.run_transform(
            hooks,
            env.state,
            probe,
            validate=lambda prev, ret, hook: thread_messages.merge_created(prev, ret, hook.id),
            propagate=False,
        )
        content = final.content
    updates = {
        "content": content,
        "tool_calls": encoded,
        "log_id": result.log_id,
        "status": "completed",
        "reasoning_content": result.reasoning_content or None,
        "reasoning_details": json_compact(result.reasoning_details)
        if result.reasoning_details
        else None,
        "attachments": None,
    }
    metadata = (
        {"reasoning_duration_ms": result.reasoning_duration_ms}
        if result.reasoning_duration_ms is not None
        else None
    )
    if checked is not None:
        found: dict[str, Any] = (
            {"output": checked.value} if checked.valid else {"output_error": checked.problem}
        )
        metadata = {**(metadata or {}), **found}
    # an answer that did not match is followed by the problem, not the run's end
    reason = (
        ends_with(env, result) if guard is None and not (checked and not checked.valid) else None
    )
    fields: dict[str, Any] = dict(updates)  # the completed message over the pending one
    if metadata:
        fields["metadata"] = {**(pending.metadata or {}), **metadata}
    held = env.held
    try:
        if held is not None:
            if result.log_row is not None:
                coalesced = await held.finalise(fields, result.log_row, reason)
                if coalesced is not None:
                    return coalesced
            # committed meanwhile (finalised as usual below), or that commit failed: its
            # error is raised here
            await release_hold(env)
            assert env.pending is not None
            pending = env.pending
        if reason is not None and result.log_row is not None:
            # the run ends with this message: one commit with the end-of-run check
            return await env.run.finish_run(copy_with(pending, fields), result.log_row, reason)
        return await thread_messages.runtime_update(
            env.state,
            pending_id,
            updates,
            allowed=thread_messages.FINALIZE_KEYS,
            metadata=metadata,
            known=pending,  # nothing else may change a pending message: no re-read
            log=result.log_row,  # the attempt's completed row, in the same commit
        )
    except Exception as exc:
        row_stored = held is None or held.stored_row is not None  # a held pair: once stored
        if result.log_row is not None and row_stored:
            # the request succeeded: its row is still complete (and keeps the response)
            await env.state.hub.update_log(
                env.state.thread_id,
                result.log_row,
                bodies=("response",),
                fence=env.state.fence,
            )
        if "already used" in str(exc):
            raise StepError(f"Duplicate tool call id: {exc}") from exc
        raise


def ends_with(env: StepEnv, result: ModelResult) -> str | None:
    """The reason code this step will end the run with, when it is certain before the
    model message is finalised and nothing can run between that commit and the
    end-of-run check (so both commit together, ``RunManager.finish_run``): a
    top-level step of a thread without a parent, side a of an ``ai_human`` agent
    answering with text and no tool call under ``stop_on_response`` (§4.15 rule 5,
    the run parks), no stop, termination or call queued by code, no update hook."""
    run = env.run
    if (
        env.depth != 0
        or env.nested is not None
        or result.tool_calls
        or not result.content.strip()
        or run.row.parent_id is not None
        or run.agent.type != "ai_human"
        or env.side != "a"
        or not env.side_def.stop_on_response
        or run.stop_requested()
        or env.execution.queued_calls
    ):
        return None
    if run.hookless(env.execution) or not (
        run.hooks_for("before_update_message", env.execution)
        or run.hooks_for("after_update_message", env.execution)
    ):
        return "stop_on_response"
    return None


async def drop_calls(env: StepEnv, message: Message, outcomes: Sequence[CallOutcome]) -> None:
    """Calls a hook DROPped leave the message (spec 03 §3.6.11)."""
    dropped = {o.call.id for o in outcomes if o.dropped}
    if not dropped:
        return
    remaining = [c for c in message.decoded_tool_calls() if c.id not in dropped]
    if not remaining and not (message.content or "").strip() and not message.attachments:
        await env.state.delete_message(message.id)
        return
    async with env.state.hub.lock(env.state.thread_id):
        updated = message.model_copy(
            update={"tool_calls": encode_tool_calls(remaining) if remaining else None}
        )
        stored, event = await env.state.store.update_message(env.state.thread_id, updated)
        env.state.hub.publish_message(event, stored)
