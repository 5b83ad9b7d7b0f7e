"""Tool execution for one model response (spec 04 §4.14, spec 03 §3.6.10–§3.6.14).

Calls run concurrently by default (decision D12), each as one task: execute →
``tool_call_done`` → ``after_tool_call_*``. Results are stored in call order, whatever
order the calls finish in. ``parallel_tool_calls=False`` runs each call's whole chain,
storage included, before the next starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from threadloom.define import DROP
from threadloom.define.tool import Attachment, ToolArgumentsError, ToolResult
from threadloom.engine.env import StepEnv
from threadloom.engine.step import approvals, session_tools
from threadloom.engine.step.outcome import CallOutcome, ToolRound
from threadloom.engine.step.pending import publish_event
from threadloom.engine.step.threads import ToolThreads
from threadloom.errors import FileError, InvalidArgument, InvalidMessage
from threadloom.metrics import UNOFFERED_TOOL
from threadloom.records import (
    Approval,
    AttachmentRef,
    LogRow,
    Message,
    ToolCall,
    ToolCallFunction,
    copy_with,
    json_compact,
    new_call_id,
    new_id,
)
from threadloom.thread import files as thread_files
from threadloom.thread import messages as thread_messages
from threadloom.thread.filetypes import attachment_problem

logger = logging.getLogger("threadloom.tools")
"""Every exception a tool raises is logged here with its traceback, at WARNING (the model
gets the message, spec 04 §4.14.4; the developer gets the trace)."""

NOT_OFFERED = (
    'Tool "{name}" is not available for this prompt. You can only use tools that were '
    "explicitly configured for this prompt."
)
NOT_DIRECT = (
    'Tool "{name}" is not directly callable. Use subagent_create with agent="{name}" to '
    "create a subagent, or subagent_message to message an existing reference."
)


def progress_argument(env: StepEnv, name: str) -> str | None:
    """The argument a tool reports as progress in ``tool_call_started`` (§4.26)."""
    resolved = env.offered.get(name)
    target = getattr(resolved, "target", None)
    definition = getattr(target, "tool_definition", target)
    value = getattr(definition, "progress_argument", None)
    return value if isinstance(value, str) else None


def announce_call(
    env: StepEnv, call_id: str, name: str, arguments: str, progress: str | None
) -> None:
    """Announce a model tool call once: the ``tool_call_started`` event now, its hooks
    in a background task the call waits for before it runs (spec 03 §3.6.12)."""
    if call_id in env.announced:
        return
    if env.state.hub.bus.listened:
        publish_event(
            env,
            "tool_call_started",
            {
                "id": call_id,
                "name": name,
                "message_id": env.pending_id,
                "depth": env.depth,
                "progress": progress,
            },
        )
    hooks = env.run.hooks_for("tool_call_started", env.execution)
    if not hooks:
        env.announced[call_id] = None
        return
    call = ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=arguments))
    env.announced[call_id] = asyncio.get_running_loop().create_task(
        env.state.hub.hooks.run_event(hooks, env.state, call, progress)
    )


async def started(env: StepEnv, call_id: str) -> None:
    """Wait until the call's ``tool_call_started`` hooks have finished."""
    task = env.announced.get(call_id)
    if task is not None:
        await asyncio.wait([task])


def tool_result_row(env: StepEnv, outcome: CallOutcome, stored: Message) -> LogRow | None:
    """The step's LLM row with this result appended to ``tool_results`` (and the tool
    error fields on an error, spec 04 §4.14.3 step 8); committed with the result."""
    row = env.current_log
    if row is None:
        return None
    env.tool_results = [
        *env.tool_results,
        {
            "tool_call_id": outcome.call.id,
            "tool_name": outcome.call.function.name,
            "content": stored.content,
            "status": outcome.result.status,
            "timestamp": int(time.time() * 1000),
            **({"error_detail": outcome.detail} if outcome.detail else {}),
        },
    ]
    update: dict[str, Any] = {"tool_results": json_compact(env.tool_results)}
    if env.queued_tools:
        update["queued_tools"] = json_compact(env.queued_tools)
    if outcome.result.status == "error":
        name = outcome.call.function.name
        update.update(
            error=f'Tool "{name}" failed: {outcome.result.error or ""}',
            error_type="tool_execution_error",
            error_origin=f"tool:{name}",
        )
    env.current_log = copy_with(row, update)
    return env.current_log


class CallExecution:
    """The execution seen by one tool call: the run's, with this call as current."""

    __slots__ = ("_base", "current_tool_call", "parent_notifications", "subagent_id")
    current_tool_call: ToolCall
    parent_notifications: Sequence[dict[str, Any]]
    subagent_id: str | None

    def __init__(self, base: Any, call: ToolCall) -> None:
        init = object.__setattr__  # not through __setattr__ below: one call per field
        init(self, "_base", base)
        init(self, "current_tool_call", call)
        init(self, "parent_notifications", ())  # a new list for each one added
        init(self, "subagent_id", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_base", "current_tool_call", "parent_notifications", "subagent_id"):
            object.__setattr__(self, name, value)
        else:  # requests such as stop_session reach the run's execution
            setattr(self._base, name, value)

    def record_parent_notification(self, content: str) -> None:
        self.parent_notifications = [
            *self.parent_notifications,
            {
                "content": content,
                "tool_call_id": self.current_tool_call.id,
                "tool_name": self.current_tool_call.function.name,
                "created_at": int(time.time() * 1_000_000),
            },
        ]


def _result_from(previous: ToolResult, returned: object) -> ToolResult:
    if isinstance(returned, ToolResult):
        return returned
    if isinstance(returned, Mapping):
        return ToolResult.model_validate({**previous.model_dump(), **dict(returned)})
    raise InvalidMessage("tool hooks must return a ToolResult, a mapping, DROP or None")


def _binding_message(env: StepEnv, call: ToolCall) -> tuple[str | None, bool]:
    """For side X's session bindings: the ``message_property`` value as stored text, and
    whether the call is its ``session_stop``/``session_fail`` binding (spec 04 §4.14.5)."""
    side_def = env.side_def
    for field_name in ("session_stop", "session_fail", "session_status"):
        binding = getattr(side_def, field_name, None)
        if binding is None or getattr(binding, "name", binding) != call.function.name:
            continue
        ends = field_name != "session_status"
        prop = getattr(binding, "message_property", None)
        if not prop:
            return None, ends
        try:
            value = json.loads(call.function.arguments or "{}").get(prop)
        except (ValueError, AttributeError):
            return None, ends
        if isinstance(value, str):
            return (value if value.strip() else None), ends
        return (json_compact(value) if value is not None else None), ends
    return None, False


def result_content(
    result: ToolResult, bound_text: str | None = None, ends_session: bool = False
) -> str:
    """The stored text of a tool result (spec 04 §4.14.5)."""
    if result.status == "success":
        text = bound_text or (result.result or "").strip() or "Tool executed successfully"
    else:
        error = (result.error or result.result or "").strip() or "Tool execution failed"
        text = f"Failed to execute tool: {error}"
    refs = [a for a in result.attachments if hasattr(a, "path")]
    if refs and not ends_session:
        lines = "\n".join(f'Attachment path for "{a.name}": {a.path}' for a in refs)
        text = f"{text}\n\n{lines}"
    return text


async def _execute(env: StepEnv, call: ToolCall, *, queued: bool = False) -> CallOutcome:
    """Steps 1-6 of the per-call pipeline (spec 04 §4.14.3); a call queued by code bypasses
    the allow-list (§4.14.6)."""
    name = call.function.name
    offered = env.offered.get(name)
    if offered is None and queued:
        offered = env.run.definitions.resolve_name(name)
    reserved = new_id()  # the id of this call's result message (a sub-prompt nests under it)
    refusal = None
    if offered is None:
        refusal = NOT_OFFERED
    elif not queued and not getattr(offered, "direct", True):  # a resumable relationship
        refusal = NOT_DIRECT
    if refusal is not None:
        return CallOutcome(
            call,
            ToolResult(status="error", error=refusal.format(name=name)),
            executed=False,
            message_id=reserved,
        )
    assert offered is not None  # refused above
    await started(env, call.id)  # its tool_call_started hooks run first (spec 03 §3.6.12)
    state = env.run.state(CallExecution(env.execution, call), arguments=env.state.arguments)
    detail: str | None = None
    try:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError as exc:
            result = ToolResult(status="error", error=f"Tool arguments are not valid JSON: {exc}")
        else:
            if not isinstance(arguments, dict):
                result = ToolResult(status="error", error="Tool arguments must be a JSON object")
            else:
                result = await env.dispatch(env, offered, state, arguments, reserved)
    except ToolArgumentsError as exc:
        result = ToolResult(status="error", error=str(exc))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        result = ToolResult(status="error", error=str(exc) or type(exc).__name__)
        detail = "".join(traceback.format_exception(exc))
        logger.warning(
            "tool %s raised %s in thread %s: %s",
            name,
            type(exc).__name__,
            env.state.thread_id,
            exc,
            exc_info=exc,
        )
    files: list[AttachmentRef] = []
    if result.attachments:  # step 4: the files it returned, before any hook sees it
        result, files = await written(state, result)
    outcome = CallOutcome(
        call,
        result,
        executed=True,
        kind=getattr(offered, "kind", "tool"),
        message_id=reserved,
        detail=detail,
        notifications=state.execution.parent_notifications,
        subagent_id=state.execution.subagent_id,
    )
    hub = env.state.hub
    bare = env.run.hookless(
        env.execution
    )  # then neither hook below runs: nothing is awaited in between
    done = () if bare else env.run.hooks_for("tool_call_done", env.execution)
    if done:
        await hub.hooks.run_event(done, state, call.model_copy(), result.model_copy())
    if hub.bus.listened:  # else publish_event drops it: build nothing
        publish_event(
            env,
            "tool_call_done",
            {
                "id": call.id,
                "name": name,
                "message_id": env.pending_id,
                "depth": env.depth,
                "status": result.status,
            },
        )
    after = (
        ()
        if bare
        else env.run.hooks_for(
            "after_tool_call_success" if result.status == "success" else "after_tool_call_failure",
            env.execution,
        )
    )
    if after:
        final = await _transformed(hub, after, state, call, result)
        if final is DROP:
            outcome.dropped = True
            await thread_files.remove_attachments(state, files)  # no message refers to them
        else:
            outcome.result = final
    if not outcome.dropped:  # step 7: the side's session bindings (spec 06 §6.5, §6.8.5)
        outcome.result = await session_tools.apply(env, state, call, outcome.result)
    return outcome


async def _traced(env: StepEnv, call: ToolCall, *, queued: bool = False) -> CallOutcome:
    """:func:`_execute` inside the call's ``execute_tool`` span, the current span while
    it runs (``engine/telemetry.py``; used only when the runtime traces)."""
    tracing = env.run.manager.tracing
    assert tracing is not None
    span, token = tracing.start_tool(env, call)
    try:
        outcome = await _execute(env, call, queued=queued)
    except BaseException:
        tracing.cancel(span, token)
        raise
    tracing.end_tool(span, token, outcome)
    return outcome


def _refused(result: ToolResult, why: str) -> ToolResult:
    """The error result of a tool whose attachment cannot be stored: why, then the
    tool's own text (spec 04 §4.5.4)."""
    own = ((result.error or result.result) if result.status == "error" else result.result) or ""
    return ToolResult(status="error", error=f"{why}\n\n{own.strip()}" if own.strip() else why)


async def written(state: Any, result: ToolResult) -> tuple[ToolResult, list[AttachmentRef]]:
    """``result`` with each ``Attachment`` written to the thread's files
    (``write_attachment``, spec 07 §7.6) and replaced by its ref, in place; refs are kept
    as given (spec 04 §4.5.4); and the refs of the files written. An attachment that cannot
    be stored — a MIME type that is not one, an image models are not given or whose bytes
    are not of its type, a file over the limits — makes the result an error that names it
    and says why, and the files this result had written are removed again."""
    if not any(isinstance(item, Attachment) for item in result.attachments):
        return result, []
    refs: list[AttachmentRef] = []
    new: list[AttachmentRef] = []
    try:
        for item in result.attachments:
            if not isinstance(item, Attachment):
                refs.append(item)
                continue
            problem = attachment_problem(item.mime_type, item.data)
            if problem is not None:
                await thread_files.remove_attachments(state, new)
                return _refused(result, f'Attachment "{item.name}" {problem}'), []
            try:
                ref = await thread_files.write_attachment(
                    state,
                    item.data,
                    name=item.name,
                    mime_type=item.mime_type,
                    width=item.width,
                    height=item.height,
                    description=item.description,
                )
            except (FileError, InvalidArgument) as exc:
                await thread_files.remove_attachments(state, new)
                why = f'Attachment "{item.name}" could not be stored: {exc}'
                return _refused(result, why), []
            new.append(ref)
            refs.append(ref)
    except BaseException:  # cancelled (or the store failed): no file left without its result
        await asyncio.shield(thread_files.remove_attachments(state, new))
        raise
    return result.model_copy(update={"attachments": refs}), new


async def _store(env: StepEnv, outcome: CallOutcome) -> Message | None:
    """Step 8: ``before_store_tool_result`` → create lifecycle; the log row's results."""
    if outcome.dropped:
        return None
    state, hub = env.state, env.state.hub
    hooks = env.run.hooks_for("before_store_tool_result", env.execution)
    result = outcome.result
    if hooks:
        result = await _transformed(hub, hooks, state, outcome.call, result)
    if result.attachments:  # those a hook added (the tool's were written at step 4)
        result, _ = await written(state, result)
    outcome.result = result
    metadata: dict[str, Any] | None = None
    if outcome.notifications:
        metadata = {
            "parent_notification": True,
            "parent_notifications": outcome.notifications,
            "parent_notification_content": outcome.notifications[-1]["content"],
        }
    if outcome.subagent_id is not None:  # the result's subagent_id derives from it
        metadata = {**(metadata or {}), "subagent_id": outcome.subagent_id}
    refs = [a for a in result.attachments if hasattr(a, "path")]
    candidate = Message(
        id=outcome.message_id or new_id(),
        role="tool",
        content=result_content(result, *_binding_message(env, outcome.call)),
        name=outcome.call.function.name,
        tool_call_id=outcome.call.id,
        tool_status="success" if result.status == "success" else "error",
        attachments=refs or None,
        metadata=metadata,
        depth=env.depth,
        parent_id=env.parent_message_id,
        prompt=env.prompt.name,
    )
    return await thread_messages.create(
        state,
        candidate,
        propagate=False,
        require_live=False,
        log_for=partial(tool_result_row, env, outcome),
    )


async def _transformed(
    hub: Any, hooks: Sequence[Any], state: Any, call: ToolCall, result: ToolResult
) -> Any:
    """``result`` through the tool-result hooks ``hooks`` (``DROP``: dropped). A function
    of its own, as ``tool_result_row`` is given through ``partial``: a variable a lambda
    reads is a cell in its function's frame, made on every call whether or not the
    lambda is (one more object a tool call holds across its awaits, issue 40)."""
    return await hub.hooks.run_transform(
        hooks,
        state,
        result,
        args_builder=lambda value: (state, call.model_copy(), value),
        validate=lambda prev, ret, hook: _result_from(prev, ret),
        propagate=False,
    )


async def _gate(env: StepEnv, calls: list[ToolCall], round_: ToolRound) -> list[ToolCall]:
    """The calls that run now; those that need approval are parked (a top-level step) or
    refused (a nested one cannot wait), spec 14 §14.2."""
    now: list[ToolCall] = []
    gated: list[ToolCall] = []
    for call in calls:
        (gated if await approvals.needs_approval(env, call) else now).append(call)
    if not gated:
        return calls
    if env.depth == 0 and env.nested is None:
        await approvals.park(env, gated)
        round_.awaiting = [c.id for c in gated]
        return now
    for call in gated:
        result = approvals.nested_refusal(call.function.name)
        outcome = CallOutcome(call, result, executed=False, message_id=new_id())
        round_.outcomes.append(outcome)
        _finish(env, round_, outcome, await _store(env, outcome))
    return now


async def run_decided(
    env: StepEnv, decided: list[Approval], issued: dict[str, Message]
) -> ToolRound:
    """The decided calls of a run parked for approval, in the order they were requested
    (spec 14 §14.4): an approved one runs once its approval is consumed, a rejected one
    gets its rejection as an error result; each result is stored as any call's."""
    round_ = ToolRound()
    execute = _execute if env.run.manager.tracing is None else _traced
    for approval in decided:
        call = ToolCall(
            id=approval.tool_call_id,
            function=ToolCallFunction(
                name=approval.tool, arguments=json_compact(approval.arguments)
            ),
        )
        if approval.state == "approved":
            ready = await approvals.consume(env, approval, issued.get(approval.message_id))
            if isinstance(ready, ToolCall):
                if env.run.listened:
                    env.run.publish_telemetry("tool_started", tool=ready.function.name)
                outcome = await execute(env, ready)
            else:
                result = ToolResult(status="error", error=ready)
                outcome = CallOutcome(call, result, executed=False, message_id=new_id())
        else:
            result = approvals.rejection(approval)
            outcome = CallOutcome(call, result, executed=False, message_id=new_id())
        round_.outcomes.append(outcome)
        _finish(env, round_, outcome, await _store(env, outcome))
    return round_


def is_idempotent(env: StepEnv, name: str) -> bool:
    """Whether ``name`` is a tool of the step declared ``idempotent`` (spec 16 §16.2)."""
    resolved = env.offered.get(name)
    if resolved is None or getattr(resolved, "kind", "tool") != "tool":
        return False
    target = resolved.target
    return getattr(getattr(target, "tool_definition", target), "idempotent", False) is True


async def _record_starts(env: StepEnv, calls: list[ToolCall]) -> None:
    """The effect ledger of an agent that resumes lost runs (spec 16 §16.2): the start of
    each top-level call that is offered and not an idempotent tool, in one write before
    any of them runs."""
    if env.depth != 0 or env.nested is not None:
        return
    starting = [
        c
        for c in calls
        if c.function.name in env.offered and not is_idempotent(env, c.function.name)
    ]
    if starting:
        await env.run.store.record_tool_starts(env.state.thread_id, env.pending_id, starting)


async def run_resumed(
    env: StepEnv, calls: list[ToolCall], errors: Mapping[str, str], again: set[str]
) -> ToolRound:
    """The open calls of a lost run that a resumed run answers (spec 16 §16.4), one at a
    time in call order: a call in ``errors`` gets that error as its result; one in
    ``again`` runs without its start being recorded again (an idempotent tool that had
    started); any other runs as in a model step (approval gate, recorded start)."""
    round_ = ToolRound()
    execute = _execute if env.run.manager.tracing is None else _traced
    for call in calls:
        if call.id in errors:
            result = ToolResult(status="error", error=errors[call.id])
            outcome = CallOutcome(call, result, executed=False, message_id=new_id())
        elif call.id in again:
            if env.run.listened:
                env.run.publish_telemetry("tool_started", tool=call.function.name)
            outcome = await execute(env, call)
        else:
            ran = await run_tools(env, [call])
            round_.outcomes += ran.outcomes
            round_.stored += ran.stored
            if ran.awaiting:
                round_.awaiting = [*round_.awaiting, *ran.awaiting]
            continue
        round_.outcomes.append(outcome)
        _finish(env, round_, outcome, await _store(env, outcome))
    return round_


def _left_to_client(
    calls: list[ToolCall], client: frozenset[str]
) -> tuple[Sequence[str], list[ToolCall]]:
    """The ids of the calls the client runs, and the others (a function of its own: a
    comprehension reading ``env`` in ``run_tools`` would make it a cell there, issue 40)."""
    return [c.id for c in calls if c.function.name in client] or (), [
        c for c in calls if c.function.name not in client
    ]


async def run_tools(env: StepEnv, calls: list[ToolCall]) -> ToolRound:
    """Execute the response's calls and store their results in call order."""
    round_ = ToolRound()
    if env.client and calls:  # the client runs these (spec 13 §13.7): no result here
        round_.client, calls = _left_to_client(calls, env.client)
    if calls and approvals.has_rules(env):
        calls = await _gate(env, calls, round_)
    if calls and env.run.agent.on_lost == "resume":
        await _record_starts(env, calls)
    execute = _execute if env.run.manager.tracing is None else _traced
    if len(calls) == 1:  # the common case, sequential or not: no task to schedule and
        # wait for, and no _run_calls coroutine around it
        call = calls[0]
        if env.run.listened:
            env.run.publish_telemetry("tool_started", tool=call.function.name)
        outcome = await execute(env, call)
        round_.outcomes.append(outcome)
        _finish(env, round_, outcome, await _store(env, outcome))
    elif calls:
        await _run_calls(env, calls, round_, execute)
    while env.execution.queued_calls and not env.run.stop_requested():
        call, *rest = env.execution.queued_calls  # queued by code: one at a time, FIFO
        env.execution.queued_calls = rest
        env.queued_tools = [*env.queued_tools, call.to_wire()]
        env.run.publish_telemetry("tool_started", tool=call.function.name)
        outcome = await execute(env, call, queued=True)
        round_.outcomes.append(outcome)
        _finish(env, round_, outcome, await _store(env, outcome))
    return round_


async def _run_calls(
    env: StepEnv, calls: list[ToolCall], round_: ToolRound, execute: Any = _execute
) -> None:
    sequential = getattr(env.prompt, "parallel_tool_calls", None) is False
    if sequential:
        for call in calls:
            env.run.publish_telemetry("tool_started", tool=call.function.name)
            outcome = await execute(env, call)
            round_.outcomes.append(outcome)
            stored = await _store(env, outcome)
            _finish(env, round_, outcome, stored)
            if env.run.stop_requested():
                break
        return
    tasks = []
    for call in calls:
        env.run.publish_telemetry("tool_started", tool=call.function.name)
        tasks.append(asyncio.create_task(execute(env, call)))
    try:
        for task in tasks:
            outcome = await task
            round_.outcomes.append(outcome)
            stored = await _store(env, outcome)
            _finish(env, round_, outcome, stored)
    finally:
        for task in tasks:
            task.cancel()


def _finish(env: StepEnv, round_: ToolRound, outcome: CallOutcome, stored: Message | None) -> None:
    if stored is not None:
        round_.stored.append(stored)
        name = outcome.call.function.name
        env.run.manager.metrics.tool_calls.add(
            (name if name in env.offered else UNOFFERED_TOOL, stored.tool_status or "success")
        )
    if env.run.listened:
        env.run.publish_telemetry(
            "tool_completed", tool=outcome.call.function.name, status=outcome.result.status
        )


class ToolInvoker:
    """``ThreadState.invoke_tool`` and ``queue_tool`` (spec 04 §4.14.6), installed on the
    hub by the engine."""

    def __init__(self, hub: Any, threads: ToolThreads | None = None) -> None:
        self.hub = hub
        self.threads = threads
        self._background: set[asyncio.Task[Any]] = set()

    async def invoke(self, state: Any, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Steps 2-4 of the pipeline: validate, dispatch, normalise; nothing stored."""
        env = getattr(state.execution, "step", None)
        resolved = (env.offered.get(name) if env is not None else None) or (
            self.hub.definitions.resolve_name(name)
        )
        if resolved is None:
            return ToolResult(status="error", error=f'Tool "{name}" is not defined')
        try:
            if env is not None:
                result: ToolResult = await env.dispatch(env, resolved, state, arguments, new_id())
                return result
            if resolved.kind != "tool":
                return ToolResult(
                    status="error", error=f'"{name}" can only be invoked during a run'
                )
            definition = getattr(resolved.target, "tool_definition", resolved.target)
            invoked: ToolResult = await definition.invoke(state, arguments, self.threads)
            return invoked
        except ToolArgumentsError as exc:
            return ToolResult(status="error", error=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning(
                "tool %s raised %s in thread %s: %s",
                name,
                type(exc).__name__,
                state.thread_id,
                exc,
                exc_info=exc,
            )
            return ToolResult(status="error", error=str(exc) or type(exc).__name__)

    def queue(self, state: Any, name: str, arguments: dict[str, Any]) -> str:
        """In a run, add a call to the current step; at rest, run it in the background."""
        call = ToolCall(
            id=new_call_id(),
            function=ToolCallFunction(name=name, arguments=json_compact(arguments)),
        )
        queued = getattr(state.execution, "queued_calls", None)
        if queued is not None:
            state.execution.queued_calls = [*queued, call]
            return call.id
        task = asyncio.get_running_loop().create_task(self.invoke(state, name, arguments))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return call.id


def canonical_arguments(text: str) -> str:
    """Compact re-serialisation of a JSON object, else ``"{}"`` (spec 04 §4.13 step 4)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return "{}"
    return json_compact(value) if isinstance(value, dict) else "{}"
