"""One model step: context, pending message, model request, finalisation and tool calls
(spec 04 §4.9.2 steps 8-12, §4.12, §4.13, §4.14). The run loop (``loop.py``) decides what
happens around it: delivery, turns, stop conditions; a sub-prompt runs it nested.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.define.hook import HookContext, HookDefinition
from threadloom.define.tool import ToolResult
from threadloom.engine.execution import ExecutionState
from threadloom.engine.request.context import assemble
from threadloom.engine.step.model_call import ModelResult, StepError, call_model
from threadloom.engine.step.pending import HeldPending, may_hold
from threadloom.engine.step.tools import CallOutcome, ToolRound, canonical_arguments, run_tools
from threadloom.records import (
    LogRow,
    Message,
    ToolCall,
    ToolCallFunction,
    encode_tool_calls,
    json_compact,
    new_call_id,
    new_id,
)
from threadloom.thread import messages as thread_messages
from threadloom.thread.state import ThreadState
from threadloom.unvalidated import copy_with

if TYPE_CHECKING:
    from threadloom.engine.run.loop import Run

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


@dataclass
class StepEnv:
    """Everything one step of the acting side needs (a nested step sets ``nested``)."""

    run: Run
    state: ThreadState
    side: str
    prompt: Any
    side_def: Any
    tools: list[Any]
    anchor_id: str | None
    anchor_created: int | None
    pending_id: str = ""
    depth: int = 0
    parent_message_id: str | None = None
    parent_log_id: str | None = None
    current_log: LogRow | None = None
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    original_arguments: dict[str, str] = field(default_factory=dict)
    queued_tools: list[dict[str, Any]] = field(default_factory=list)
    announced: dict[str, asyncio.Task[None] | None] = field(default_factory=dict)
    pending_candidate: Message | None = None
    pending: Message | None = None
    """The step's pending model message, once stored (with the first LLM row) or held."""
    held: HeldPending | None = None
    """The pending message and first LLM row while held back (``engine/step/pending.py``)."""
    nested: Any = None
    """For a sub-prompt step: its snapshot and in-memory messages (``subprompt.Nested``)."""
    execution_state: ExecutionState | None = None

    @property
    def execution(self) -> ExecutionState:
        return self.execution_state or self.run.execution

    @property
    def offered(self) -> dict[str, Any]:
        return {t.name: t for t in self.tools}

    def state_for(self, execution: Any) -> ThreadState:
        return self.run.state(execution, arguments=self.state.arguments)

    def hooks_for(self, name: str) -> list[tuple[HookDefinition, HookContext]]:
        """The hooks named ``name`` for this step's prompt (spec 03 §3.3)."""
        run = self.run
        execution = self.execution_state or run.execution
        return run.hub.resolve_hooks(name, run.agent.name, execution.prompt, execution.prompt_hooks)

    def hookless(self) -> bool:
        """True when no hook of any name runs for this step's prompt now
        (``ThreadHub.hookless``): asked once where several names would be, with nothing
        awaited in between, so the registry cannot move."""
        run = self.run
        return run.hub.hookless(run.agent.name, self.execution.prompt_hooks)

    async def dispatch(
        self, resolved: Any, state: ThreadState, arguments: dict[str, Any], reserved_id: str
    ) -> ToolResult:
        """Run one call by its kind (spec 04 §4.14.3 step 3)."""
        kind = getattr(resolved, "kind", "tool")
        if kind == "subprompt":
            from threadloom.engine.step.subprompt import run_subprompt

            sub_result: ToolResult = await run_subprompt(self, resolved, arguments, reserved_id)
            return sub_result
        if kind == "subagent":
            from threadloom.engine.run.children import direct_call

            return await direct_call(self, resolved, state, arguments)
        if kind == "handoff":
            if self.run.agent.type != "ai_human":
                return ToolResult(status="error", error="Handoff requires an ai_human agent")
            return ToolResult(status="success", result="Handoff complete")
        if kind != "tool":
            return ToolResult(
                status="error", error=f"Tool kind {kind!r} is not supported by this runtime yet"
            )
        definition = getattr(resolved.target, "tool_definition", resolved.target)
        timeout = getattr(definition, "timeout", None)
        threads = self.run.manager.threads
        if timeout:
            try:
                async with asyncio.timeout(timeout):
                    result: ToolResult = await definition.invoke(state, arguments, threads)
                    return result
            except TimeoutError:
                return ToolResult(status="error", error=f"Tool timed out after {timeout:g} s")
        result = await definition.invoke(state, arguments, threads)
        return result

    def publish_chunk(self, kind: str, message_id: str, chunk: str, offset: int) -> None:
        self._publish(
            kind, {"message_id": message_id, "depth": self.depth, "chunk": chunk, "offset": offset}
        )

    def publish_event(self, event_type: str, data: dict[str, Any]) -> None:
        self._publish("event", {"event_type": event_type, "data": data})

    def _publish(self, kind: str, data: dict[str, Any]) -> None:
        """Publish an ephemeral event of the step, after its pending message if held."""
        if not self.state.hub.bus.wants(self.state.thread_id):
            return  # an ephemeral event nobody would receive (the bus keeps no history)
        if self.held is not None and self.held.publish(kind, data):
            return
        self.state.hub.publish(self.state.thread_id, kind, None, data)

    async def release_hold(self, *, raising: bool = True) -> None:
        """Commit the held pending message and its row now (a failure, a stop). When that
        commit failed the step has no pending message, and (``raising``) what it raised is
        raised here, as ``begin_attempt`` would have raised it without the hold."""
        held = self.held
        if held is None or await held.release():
            return
        self.pending = None
        if raising:
            assert held.error is not None
            raise held.error

    def row_as_stored(self, row: LogRow) -> LogRow:
        """The step's LLM row ``row`` as committed, if its held pair was meanwhile."""
        return self.held.current(row) if self.held is not None else row

    def progress_argument(self, name: str) -> str | None:
        """The argument a tool reports as progress in ``tool_call_started`` (§4.26)."""
        resolved = self.offered.get(name)
        target = getattr(resolved, "target", None)
        definition = getattr(target, "tool_definition", target)
        value = getattr(definition, "progress_argument", None)
        return value if isinstance(value, str) else None

    def announce_call(self, call_id: str, name: str, arguments: str, progress: str | None) -> None:
        """Announce a model tool call once: the ``tool_call_started`` event now, its hooks
        in a background task the call waits for before it runs (spec 03 §3.6.12)."""
        if call_id in self.announced:
            return
        if self.state.hub.bus.listened:
            self.publish_event(
                "tool_call_started",
                {
                    "id": call_id,
                    "name": name,
                    "message_id": self.pending_id,
                    "depth": self.depth,
                    "progress": progress,
                },
            )
        hooks = self.hooks_for("tool_call_started")
        if not hooks:
            self.announced[call_id] = None
            return
        call = ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=arguments))
        self.announced[call_id] = asyncio.get_running_loop().create_task(
            self.state.hub.hooks.run_event(hooks, self.state, call, progress)
        )

    async def begin_attempt(self, row: LogRow) -> LogRow:
        """Store an attempt's LLM row; the first one together with the pending message."""
        if self.pending is None and self.pending_candidate is not None:
            if may_hold(self, row.model):  # committed later or with the answer (pending.py)
                self.pending = self.pending_candidate
                self.held = HeldPending(self, self.pending_candidate, row)
                return row
            # a pending placeholder and the row of a request not yet sent: state crash
            # recovery repairs, so its commit need not wait for the disk (docs/engine.md)
            self.pending, stored = await thread_messages.create_with_log(
                self.state, self.pending_candidate, row, durable=False
            )
            return stored
        # a retry: its request failed, which committed the held pair first (call_model)
        return await self.state.hub.insert_log(self.state.thread_id, row)

    async def started(self, call_id: str) -> None:
        """Wait until the call's ``tool_call_started`` hooks have finished."""
        task = self.announced.get(call_id)
        if task is not None:
            await asyncio.wait([task])

    def tool_result_row(self, outcome: CallOutcome, stored: Message) -> LogRow | None:
        """The step's LLM row with this result appended to ``tool_results`` (and the tool
        error fields on an error, spec 04 §4.14.3 step 8); committed with the result."""
        row = self.current_log
        if row is None:
            return None
        self.tool_results.append(
            {
                "tool_call_id": outcome.call.id,
                "tool_name": outcome.call.function.name,
                "content": stored.content,
                "status": outcome.result.status,
                "timestamp": int(time.time() * 1000),
                **({"error_detail": outcome.detail} if outcome.detail else {}),
            }
        )
        update: dict[str, Any] = {"tool_results": json_compact(self.tool_results)}
        if self.queued_tools:
            update["queued_tools"] = json_compact(self.queued_tools)
        if outcome.result.status == "error":
            name = outcome.call.function.name
            update.update(
                error=f'Tool "{name}" failed: {outcome.result.error or ""}',
                error_type="tool_execution_error",
                error_origin=f"tool:{name}",
            )
        self.current_log = copy_with(row, update)
        return self.current_log


async def model_step(env: StepEnv) -> StepOutcome:
    """Pending message, model request, finalisation and tool calls of one step."""
    run = env.run
    env.execution.step = env
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
    env.pending_candidate = Message(
        id=new_id(),
        role=role_of(env.side),
        content=None,
        status="pending",
        name=label,
        prompt=env.prompt.name,
        depth=env.depth,
        parent_id=env.parent_message_id,
    )
    env.pending_id = env.pending_candidate.id
    try:
        result = await call_model(env, assembly, env.pending_id)
    except asyncio.CancelledError:
        await env.release_hold(raising=False)  # the settlement fails what is stored
        env.held = None
        raise
    except Exception:
        await env.release_hold(raising=False)
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
    try:
        message = await finalise(env, pending, result, guard, encoded)
    finally:
        env.held = None  # the hold is over (and no cycle is left between the two)
    run.partial.pop(pending.id, None)
    run.partial_reasoning.pop(pending.id, None)
    stored_calls = _stored_calls(message, calls, encoded, env.original_arguments)
    record_calls = [c for c in stored_calls if guard is None or c.id != guard]
    round_ = await run_tools(env, record_calls)
    for stored in round_.stored:
        run.tool_rows.append(stored)
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
        run.tool_rows.append(stored)
        return StepOutcome(result=result, message=message, round=round_, guard=True)
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
                env.publish_chunk("message_chunk", env.pending_id, text, 0)
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


async def finalise(
    env: StepEnv,
    pending: Message,
    result: ModelResult,
    guard: str | None,
    encoded: str | None,
) -> Message:
    """Store the model's answer in its pending message (spec 04 §4.13 step 4);
    ``encoded``: the stored text of its tool calls (``post_process``)."""
    pending_id = pending.id
    content: str | None = result.content or None
    hooks = env.hooks_for("before_create_message")
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
    reason = env.run.ends_with(env, result) if guard is None else None
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
            await env.release_hold()
            assert env.pending is not None
            pending = env.pending
        if reason is not None and result.log_row is not None:
            # the run ends with this message: one commit with the end-of-run check
            return await env.run.manager.finish_run(
                env.run, copy_with(pending, fields), result.log_row, reason
            )
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
                env.state.thread_id, result.log_row, bodies=("response",)
            )
        if "already used" in str(exc):
            raise StepError(f"Duplicate tool call id: {exc}") from exc
        raise


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
        stored, event = await env.state.hub.store.update_message(env.state.thread_id, updated)
        env.state.hub.publish_message(event, stored)
