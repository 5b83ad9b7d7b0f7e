"""The tool playground (spec 08 §8.10.7): an admin calls one tool of the project with
arguments typed into a form, in a scratch thread or a given one, and sees its result and
the log row that records it.

The call goes the way ``ThreadState.invoke_tool`` goes (spec 04 §4.14.6): the tool's
argument schema is checked, the tool runs with the thread's state, its value is normalised
into a ``ToolResult``. What the model's calls pass through before a tool runs applies too
where it can: a tool that needs a person's approval for these arguments (spec 14 §14.1)
is refused, not run — the playground is no way round an approval. Nothing is added to the
thread's messages: the ``app`` log row is the record of the call.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import Depends, Request

from threadloom.engine.step.approvals import definition_needs_approval
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError
from threadloom.server.routes.approvals import decider
from threadloom.server.routing import Router
from threadloom.thread.state import ThreadState
from threadloom.wire.playground import PLAYGROUND_TAG, CallTool, ToolCallAnswer

router = Router(prefix="/api/tools", tags=["catalog"])


@router.post("/{name}/call", summary="Call a tool in the playground (admin)")
async def call_tool(
    name: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    runtime = deps.runtime(request)
    defs = runtime.definitions
    body = await deps.body_of(request, CallTool)
    resolved = defs.resolve_name(name)
    if resolved is None:
        raise ApiError(404, "tool_not_found", f'Tool "{name}" is not defined')
    if resolved.kind != "tool":
        # a sub-prompt, subagent or handoff needs a run of a model to mean anything
        raise ApiError(
            404,
            "tool_not_found",
            f'"{name}" is a {resolved.kind}, not a tool: only tools run in the playground',
        )
    created = body.thread_id is None
    if body.thread_id is not None:
        row = await deps.accessible_thread(request, body.thread_id, who)
        state = deps.state_of(request, row)
    else:
        agent = body.agent_id or _default_agent(runtime)
        state = await runtime.create_thread(
            agent, user_id=who.owner_id, tags=(PLAYGROUND_TAG, f"tool:{name}")
        )
    definition = getattr(resolved.target, "tool_definition", resolved.target)
    if await definition_needs_approval(definition, name, dict(body.arguments), state):
        if created:
            await runtime.delete_thread(state.thread_id)
        raise ApiError(
            409,
            "approval_required",
            f'Tool "{name}" needs a person\'s approval for these arguments: the playground'
            " does not run it (ask the agent to call it, and approve the call)",
        )
    return (await _run(state, name, body.arguments, who, created)).to_wire()


def _default_agent(runtime: Any) -> str:
    primary = runtime.definitions.primary_agents()
    if not primary:
        raise ApiError(400, "invalid_request", "agent_id is required: the project has no agent")
    name: str = primary[0].name
    return name


async def _run(
    state: ThreadState, name: str, arguments: dict[str, Any], who: Principal, created: bool
) -> ToolCallAnswer:
    began = time.perf_counter()
    result = await state.invoke_tool(name, arguments)
    duration_ms = round((time.perf_counter() - began) * 1000, 3)
    row = await state.log(
        name=f"playground:{name}",
        message=f"{name} called from the tool playground",
        status=result.status,
        trigger={"kind": "playground", "id": decider(who)},
        request=arguments,
        response=result.result,
        error=result.error,
        duration_ms=duration_ms,
    )
    return ToolCallAnswer(
        thread_id=state.thread_id,
        created=created,
        tool=name,
        status=result.status,
        result=result.result,
        error=result.error,
        duration_ms=duration_ms,
        log_id=row.id if row is not None else None,
    )
