"""One tool call run by its kind (spec 04 §4.14.3 step 3): a tool, a sub-prompt (one
nested step, ``subprompt.py``), a direct subagent call (``run/children.py``) or a handoff.

A step reaches this function through its ``StepEnv.dispatch`` (the run sets it): a
sub-prompt runs a nested step, whose tool calls dispatch again, so the step's modules
do not import this one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from threadloom.define.registry import ResolvedTool
from threadloom.define.tool import ToolResult
from threadloom.engine.env import StepEnv
from threadloom.engine.run.children import direct_call
from threadloom.engine.step.subprompt import run_subprompt
from threadloom.thread.state import ThreadState


async def dispatch(
    env: StepEnv,
    resolved: ResolvedTool,
    state: ThreadState,
    arguments: dict[str, Any],
    reserved_id: str,
) -> ToolResult:
    """Run one call by its kind (spec 04 §4.14.3 step 3)."""
    kind = getattr(resolved, "kind", "tool")
    if kind == "subprompt":
        return await run_subprompt(env, resolved, arguments, reserved_id)
    if kind == "subagent":
        return await direct_call(env, resolved, state, arguments)
    if kind == "handoff":
        if env.run.agent.type != "ai_human":
            return ToolResult(status="error", error="Handoff requires an ai_human agent")
        return ToolResult(status="success", result="Handoff complete")
    if kind != "tool":
        return ToolResult(
            status="error", error=f"Tool kind {kind!r} is not supported by this runtime yet"
        )
    definition: Any = getattr(resolved.target, "tool_definition", resolved.target)
    timeout = getattr(definition, "timeout", None)
    threads = env.run.manager.threads
    if timeout:
        try:
            async with asyncio.timeout(timeout):
                result: ToolResult = await definition.invoke(state, arguments, threads)
                return result
        except TimeoutError:
            return ToolResult(status="error", error=f"Tool timed out after {timeout:g} s")
    result = await definition.invoke(state, arguments, threads)
    return result
