"""Creating child threads and sending them work (spec 06 §6.3.2 checks 7-10, §6.3.4,
§6.6).

Every path that makes an instance — ``subagent_create``, a direct relationship call, a
relationship started by code — ends in :func:`create`: the checks every path shares, the
child thread and the parent's registry entry in one transaction, the
``after_subagent_created`` hooks, attachments copied parent → child, the invocation
messages, the child's run. A blocking request then waits for the child's session result
(``RunManager.waiters``, answered by ``results.finish``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from threadloom.define.tool import ToolResult
from threadloom.engine.env import StepEnv
from threadloom.engine.run.budget import lifetime_budgets
from threadloom.records import LogRow, Message, SubagentRegistryEntry, new_id
from threadloom.store.base import NewThread
from threadloom.thread import messages as thread_messages
from threadloom.thread.family import set_registry_status
from threadloom.thread.queue import enqueue
from threadloom.thread.state import ThreadState
from threadloom.thread.transfer import copy_attachments

NAME_LIMIT = 120


class SubagentToolError(Exception):
    """A failed check of a subagent call; its text is the error result."""


@dataclass
class Request:
    """One creation request in a parent thread (spec 06 §6.6.1)."""

    relationship: Any
    """The relationship's ``ResolvedTool`` (kind ``subagent``, ``options`` the Subagent)."""
    owner: str
    name: str | None = None
    message: str | None = None
    attachments: list[str] = field(default_factory=list)
    arguments: dict[str, Any] = field(default_factory=dict)
    spawn_group_id: str | None = None
    origin_message_id: str | None = None
    blocking: bool = False
    continue_existing: bool = False
    """``subagent_create``'s create-or-continue (§6.6.3) applies at check 8."""
    reference: str | None = None
    """The child's id when the caller chose it (an immediate spawn's note names it)."""


def normalise_name(name: object) -> str | None:
    """Whitespace runs → one space, trimmed, at most 120 characters; empty → None."""
    if not isinstance(name, str):
        return None
    text = " ".join(name.split())[:NAME_LIMIT].strip()
    return text or None


def argument_issues(prompt: Any, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(location, message)`` for each way ``arguments`` fail the prompt's
    ``required_schema`` (a pydantic model, or a JSON schema's required and closed keys)."""
    schema = getattr(prompt, "required_schema", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dict(arguments))
        except ValidationError as exc:
            return [
                (".".join(str(p) for p in err["loc"]) or "root", err["msg"]) for err in exc.errors()
            ]
        return []
    if isinstance(schema, Mapping):
        properties = schema.get("properties") or {}
        required = schema.get("required") or ()
        issues = [(key, "Field required") for key in required if key not in arguments]
        if schema.get("additionalProperties") is False:
            issues += [
                (key, "Extra inputs are not permitted")
                for key in arguments
                if key not in properties
            ]
        return issues
    return []


def argument_problems(prompt: Any, arguments: Mapping[str, Any]) -> list[str]:
    """``<loc>: <msg>`` per issue (the text of ``subagent_create`` check 7)."""
    return [f"{loc}: {msg}" for loc, msg in argument_issues(prompt, arguments)]


def child_prompt(definitions: Any, relationship: Any) -> Any:
    """The child agent's side a prompt (its ``required_schema`` governs the arguments)."""
    agent = relationship.target
    name = agent.side_a.prompt if agent.side_a is not None else None
    return definitions.prompt(name) if name and definitions is not None else None


async def nesting_depth(hub: Any, thread_id: str) -> int:
    """How many levels ``thread_id`` is below its root thread."""
    depth = 0
    row = await hub.store.get_thread(thread_id)
    while row is not None and row.parent_id is not None:
        depth += 1
        row = await hub.store.get_thread(row.parent_id)
    return depth


def _live(entries: list[SubagentRegistryEntry], relationship: str) -> list[SubagentRegistryEntry]:
    return [e for e in entries if e.relationship == relationship and e.status != "terminated"]


async def check_paths(state: ThreadState, paths: list[str]) -> None:
    """Check 9 / §6.3.3 check 5: each path names a file of this thread."""
    for path in paths:
        record = await state.stat_file(path)
        if record is None or record.is_directory:
            raise SubagentToolError(f"Attachment not found in this thread: {path}")


def _origin(state: ThreadState) -> str | None:
    step = getattr(state.execution, "step", None)
    return getattr(step, "pending_id", None) or None


def _manager(state: ThreadState) -> Any:
    step = getattr(state.execution, "step", None)
    if step is None:
        raise SubagentToolError("Subagents can only be messaged during a run.")
    return step.run.manager


def note_child(state: ThreadState, reference: str) -> None:
    """The call's stored result carries ``subagent_id`` (§6.3.1)."""
    execution = state.execution
    if execution is not None and hasattr(execution, "subagent_id"):
        execution.subagent_id = reference


async def wait_for(manager: Any, reference: str, waiter: asyncio.Future[ToolResult]) -> ToolResult:
    """The child's next session result for a blocking call (§6.8.2)."""
    try:
        return await waiter
    finally:
        if manager.waiters.get(reference) is waiter:
            del manager.waiters[reference]


def _register(manager: Any, reference: str) -> asyncio.Future[ToolResult]:
    waiter: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
    manager.waiters[reference] = waiter
    return waiter


async def send(
    state: ThreadState,
    entry: SubagentRegistryEntry,
    message: str,
    attachments: list[str],
    *,
    blocking: bool,
) -> ToolResult:
    """Queue ``message`` in an existing child (``subagent_message``, create-or-continue):
    attachments copied, ``queue_source`` ``"parent"``, the entry ``running``; a blocking
    call then waits for the child's next session result."""
    reference, hub = entry.reference, state.hub
    child = await state.get_child_thread(reference)
    if child is None:
        raise SubagentToolError(f'Subagent reference "{reference}" is not active.')
    note_child(state, reference)
    refs = await copy_attachments(state, child, attachments)
    manager = _manager(state) if blocking else None
    waiter = _register(manager, reference) if manager is not None else None
    try:
        await enqueue(
            hub,
            reference,
            {
                "role": "user",
                "content": message,
                "attachments": refs or None,
                "silent": False,
                "metadata": {
                    "forwarded_from": {"thread_id": state.thread_id, "message_id": _origin(state)}
                },
            },
            "parent",
        )
        await set_registry_status(hub, state.thread_id, reference, "running", fence=state.fence)
    except BaseException:
        if manager is not None:
            manager.waiters.pop(reference, None)
        raise
    if waiter is None:
        return ToolResult(status="success", result=f"Message sent to subagent {reference}.")
    return await wait_for(manager, reference, waiter)


async def create(state: ThreadState, request: Request, run: Any = None) -> ToolResult:
    """Checks 8-10, then the creation algorithm (§6.6.1 steps 2-8). ``run`` is the
    parent's run (by default that of the step ``state`` belongs to)."""
    if run is None:
        step = getattr(state.execution, "step", None)
        if step is None:
            raise SubagentToolError("Subagents can only be created during a run.")
        run = step.run
    manager = run.manager
    hub, parent_id = state.hub, state.thread_id
    options = request.relationship.options
    agent = request.relationship.target
    relationship = request.relationship.name
    live = _live(await hub.store.get_registry(parent_id), relationship)
    limit = options.max_instances
    if limit is not None and len(live) >= limit:
        if request.continue_existing and request.blocking and limit == 1 and len(live) == 1:
            await check_paths(state, request.attachments)
            return await send(
                state, live[0], request.message or "", request.attachments, blocking=True
            )
        active = ", ".join(e.reference for e in live)
        raise SubagentToolError(
            f'Subagent instance limit reached for "{relationship}" ({limit}). Use '
            "subagent_message with an existing reference instead. Active references: "
            f"{active}."
        )
    await check_paths(state, request.attachments)
    maximum = manager.options.max_subagent_depth
    if await nesting_depth(hub, parent_id) + 1 > maximum:
        raise SubagentToolError(f"Subagent nesting limit reached ({maximum}).")

    name = normalise_name(request.name)
    arguments = dict(request.arguments)
    title = agent.display_title
    description = options.description or agent.tool_description or f"Autonomous subagent {title}"
    reference = request.reference or new_id()
    parent_row = await hub.store.get_thread(parent_id)
    new = NewThread(
        id=reference,
        agent_id=agent.name,
        user_id=parent_row.user_id if parent_row is not None else None,
        tags=(f"name:{name}",) if name else (),
        parent_id=parent_id,
        arguments=arguments or None,
        overlap=getattr(agent, "overlap", None),
        # the parent agent's lifetime budgets count the child's spend (spec 15 §15.3)
        budgets=lifetime_budgets(getattr(run.agent, "budget", ()), parent_id),
    )
    entry = SubagentRegistryEntry(
        reference=reference,
        relationship=relationship,
        owner="b" if request.owner == "b" else "a",
        name=agent.name,
        title=title,
        description=description,
        blocking=bool(options.blocking),
        resumable=options.resumable,
        parent_communication=options.parent_communication,
        status="running",
        initial_arguments=arguments or None,
        thread_name=name,
        spawn_group_id=request.spawn_group_id,
    )
    hub.children_starting.add(reference)  # the reconciler waits for its first message
    try:
        async with hub.lock(parent_id):
            row, event = await hub.store.create_child(new, entry)
            await hub.publish_events([event])
        run.has_registry = True
        note_child(state, reference)
        child = ThreadState(hub, row)
        hooks = run.hooks_for("after_subagent_created")
        if hooks:
            await hub.hooks.run_event(hooks, state, child)
        refs = await copy_attachments(state, child, request.attachments)
        if arguments:
            await thread_messages.create(
                child,
                Message(
                    id=new_id(),
                    role="system",
                    content="Arguments for this subagent thread:\n\n"
                    + json.dumps(arguments, indent=2, ensure_ascii=False),
                    silent=True,
                    metadata={
                        "status_kind": "subagent_arguments",
                        "subagentInitialArguments": True,
                    },
                ),
                propagate=False,
            )
        waiter = _register(manager, reference) if request.blocking else None
        try:
            if request.message:
                origin = {"thread_id": parent_id, "message_id": request.origin_message_id}
                await enqueue(
                    hub,
                    reference,
                    {
                        "role": "user",
                        "content": request.message,
                        "attachments": refs or None,
                        "silent": False,
                        "metadata": {"forwarded_from": origin},
                    },
                    "parent",
                )  # wakes the child: its run starts on side a with this message
            else:
                await manager.start(reference, side="a", force=True)
        except BaseException:
            if waiter is not None:
                manager.waiters.pop(reference, None)
            raise
    finally:
        hub.children_starting.discard(reference)
    if waiter is None:
        return ToolResult(
            status="success",
            result=f"The subagent was initiated successfully. Reference: {reference}",
        )
    return await wait_for(manager, reference, waiter)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


async def direct_call(
    env: StepEnv, resolved: Any, state: ThreadState, arguments: dict[str, Any]
) -> ToolResult:
    """A call of a relationship by name (§6.3.4): a non-resumable relationship offered as
    a tool, or any relationship started by code (``queue_tool``/``invoke_tool``)."""
    options = resolved.options
    prompt = child_prompt(env.run.definitions, resolved)
    has_schema = prompt is not None and prompt.safe_arguments_schema() is not None
    if has_schema:
        issues = argument_issues(prompt, arguments)
    elif isinstance(arguments.get("message"), str):
        issues = []
    else:  # the default parameters: {message: string, attachments?: [string]}
        issues = [("message", "Field required")]
    if issues:  # the engine's validation text (spec 04 §4.14.3 step 2)
        raise SubagentToolError(
            "Tool argument validation failed: " + "; ".join(f"[{loc}] {msg}" for loc, msg in issues)
        )
    message_property = options.init_user_message_property or (None if has_schema else "message")
    attachments_property = options.init_attachments_property or (
        None if has_schema else "attachments"
    )
    if message_property is not None:
        value = arguments.get(message_property)
        message = None if value is None else _json_text(value)
    else:
        message = _json_text(arguments)
    paths: list[str] = []
    if attachments_property is not None:
        value = arguments.get(attachments_property)
        if isinstance(value, str):
            paths = [value]
        elif isinstance(value, list):
            paths = [p for p in value if isinstance(p, str)]
    name = None
    if options.init_agent_name_property:
        name = normalise_name(arguments.get(options.init_agent_name_property))
    request = Request(
        relationship=resolved,
        owner=env.side,
        name=name,
        message=message,
        attachments=paths,
        arguments=dict(arguments) if has_schema else {},
        spawn_group_id=env.pending_id or None,
        origin_message_id=env.pending_id or None,
        blocking=options.blocking,
    )
    return await create(state, request)


async def spawn_immediate(run: Any, side: str, prompt: Any) -> None:
    """Spawn the immediate relationships of ``prompt`` that ``side`` has not spawned yet
    in this thread (§6.9): non-blocking, announced by a silent system note whose id is the
    entry's ``spawn_group_id``; a failure is a runtime log row, never a step error."""
    if not any(getattr(entry, "immediate", False) for entry in prompt.tools):
        return
    due = [
        t
        for t in run.definitions.resolve_tools(prompt)
        if t.kind == "subagent" and t.options.immediate_spawn is not None
    ]
    if not due:
        return
    hub = run.hub
    entries = await hub.store.get_registry(run.thread_id) if run.has_registry else []
    state = run.state()
    for relationship in due:
        if any(e.relationship == relationship.name and e.owner == side for e in entries):
            continue
        spawn = relationship.options.immediate_spawn
        arguments = dict(spawn.arguments or {})
        note_id, reference = new_id(), new_id()
        try:
            problems = argument_problems(child_prompt(run.definitions, relationship), arguments)
            if problems:
                raise SubagentToolError(
                    f'Arguments for "{relationship.name}" failed validation: ' + "; ".join(problems)
                )
            request = Request(
                relationship=relationship,
                owner=side,
                name=spawn.name,
                message=spawn.message,
                arguments=arguments,
                spawn_group_id=note_id,
                reference=reference,
            )
            await create(state, request, run)
            await thread_messages.create(
                state,
                Message(
                    id=note_id,
                    role="system",
                    content=f'Subagent "{relationship.name}" started. Reference: {reference}',
                    silent=True,
                    metadata={
                        "status_kind": "subagent_event",
                        "subagent_event": "spawned",
                        "subagent_id": reference,
                    },
                ),
                propagate=False,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await hub.write_runtime_log(
                run.thread_id,
                LogRow(
                    id=new_id(),
                    kind=None,
                    provider="system",
                    model=f"Immediate subagent {relationship.name}",
                    created_at=0,
                    is_complete=True,
                    error=str(exc) or type(exc).__name__,
                    error_type="tool_execution_error",
                    error_origin=f"tool:{relationship.name}",
                ),
                run.root_message_id,
                fence=run.fence,
            )


__all__ = [
    "Request",
    "SubagentToolError",
    "argument_issues",
    "argument_problems",
    "check_paths",
    "child_prompt",
    "create",
    "direct_call",
    "nesting_depth",
    "normalise_name",
    "note_child",
    "send",
    "spawn_immediate",
]
