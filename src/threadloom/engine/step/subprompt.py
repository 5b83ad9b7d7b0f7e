"""Sub-prompts: a prompt called as a tool runs one nested step (spec 04 §4.17).

The nested step shares the caller's run (its ``context``, cancellation and acting side),
writes its messages one level deeper under the caller's reserved tool-result id, makes
exactly one model request (retries and fallbacks included) and runs that response's
tool calls. No queue delivery, no stop conditions, no session accounting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from threadloom.define.agent import Side
from threadloom.define.tool import ToolResult
from threadloom.engine.env import ExecutionState, StepEnv
from threadloom.engine.request.presentation import RequestMessage
from threadloom.engine.run.subagents import runtime_tools
from threadloom.engine.step.step import StepOutcome, model_step
from threadloom.records import Message
from threadloom.thread.history import NestedHistory


@dataclass
class Nested:
    """What a nested step sees: the caller's snapshot (when ``include_chat``), its own
    persisted messages, and in-memory messages appended after them."""

    caller: list[Message]
    history: NestedHistory
    extra: list[RequestMessage] = field(default_factory=list)

    def snapshot(self) -> list[Message]:
        own = [m for m in self.history.nested() if m.status == "completed"]
        return [*self.caller, *own]


def _issues(exc: ValidationError) -> str:
    return "; ".join(
        f"[{'.'.join(str(p) for p in err['loc']) or 'root'}] {err['msg']}" for err in exc.errors()
    )


def _validate(prompt: Any, arguments: dict[str, Any]) -> str | None:
    """Validate call arguments against the sub-prompt's ``required_schema`` (a pydantic
    model); an error text, or ``None`` when they pass."""
    schema = getattr(prompt, "required_schema", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(arguments)
        except ValidationError as exc:
            return f"Prompt tool argument validation failed: {_issues(exc)}"
    return None


def _initial_message(options: Any, arguments: dict[str, Any]) -> RequestMessage | None:
    prop = getattr(options, "init_user_message_property", None) if options else None
    if prop:
        value = arguments.get(prop)
        if value is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
        return RequestMessage(role="user", content=text)
    if arguments:
        return RequestMessage(
            role="user", content=json.dumps(arguments, indent=2, ensure_ascii=False)
        )
    return None


async def run_subprompt(
    env: StepEnv, resolved: Any, arguments: dict[str, Any], reserved_id: str
) -> ToolResult:
    """Run the sub-prompt named by ``resolved`` and turn its step into the caller's result."""
    prompt = resolved.target
    options = getattr(resolved, "options", None)
    problem = _validate(prompt, arguments)
    if problem is not None:
        return ToolResult(status="error", error=problem)
    run, caller = env.run, env.execution
    caller_history = (
        [
            m
            for m in caller.message_history.raw()
            if m.status == "completed" and m.id != env.pending_id and m.depth == caller.depth
        ]
        if prompt.include_chat
        else []
    )
    history = NestedHistory(caller_history, reserved_id)
    execution = ExecutionState(
        run_id=caller.run_id,
        current_side=caller.current_side,
        prompt=prompt.name,
        prompt_path=(*caller.prompt_path, prompt.name),
        depth=env.depth + 1,
        message_history=history,
        parent_id=reserved_id,
        prompt_hooks=tuple(prompt.hooks or ()),
        root_message_id=caller.root_message_id,
    )
    extra = _initial_message(options, arguments)
    nested = Nested(caller=caller_history, history=history, extra=[extra] if extra else [])
    hub = env.state.hub
    hub.attach_history(env.state.thread_id, history)
    try:
        sub_env = StepEnv(
            run=run,
            state=run.state(execution, arguments=arguments),
            side=env.side,
            prompt=prompt,
            side_def=Side(label=env.side_def.label),
            tools=await runtime_tools(run, prompt),
            anchor_id=None,
            anchor_created=None,
            depth=env.depth + 1,
            parent_message_id=reserved_id,
            parent_log_id=env.current_log.id if env.current_log else None,
            execution=execution,
            dispatch=env.dispatch,
            nested=nested,
        )
        outcome = await model_step(sub_env)
    finally:
        hub.detach_history(env.state.thread_id, history)
    if outcome.blocked or outcome.result is None:
        return ToolResult(status="error", error="Sub-prompt request was blocked")
    return _result(options, outcome)


def _result(options: Any, outcome: StepOutcome) -> ToolResult:
    """The caller's result from the nested step (spec 04 §4.17 step 5)."""
    include_text = getattr(options, "include_text_response", True) if options else True
    include_calls = getattr(options, "include_tool_calls", True) if options else True
    include_errors = getattr(options, "include_errors", True) if options else True
    outcomes = outcome.round.outcomes
    failed = [o for o in outcomes if o.result.status == "error" and not o.dropped]
    attachments: list[Any] = list(outcome.message.attachments or []) if outcome.message else []
    for stored in outcome.round.stored:
        attachments.extend(stored.attachments or [])
    if include_errors and failed:
        lines = [f"Sub-prompt failed with {len(failed)} error(s):"]
        lines += [
            f"  {o.call.function.name}: {o.result.error or o.result.result or ''}" for o in failed
        ]
        return ToolResult(status="error", error="\n".join(lines), attachments=attachments)
    parts: list[str] = []
    content = outcome.message.content if outcome.message else None
    if include_text and content:
        parts.append(content)
    if include_calls and outcome.round.stored:
        lines = ["Tool Executions:"]
        by_call = {m.tool_call_id: m for m in outcome.round.stored}
        for o in outcomes:
            result = by_call.get(o.call.id)
            lines.append(f"Tool Call: {o.call.function.name}({o.call.function.arguments})")
            lines.append(f"Tool Response: {result.content if result else ''}")
        parts.append("\n".join(lines))
    text = "\n\n".join(parts) or "Prompt executed successfully"
    return ToolResult(status="success", result=text, attachments=attachments)
