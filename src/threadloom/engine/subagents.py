"""The runtime tools of subagents that the engine adds to a prompt's own (spec 06 §6.3).

Built so far: the ``subagents`` listing and its offer rule. ``subagent_create`` and
``subagent_message`` (child creation and session results) are the subagents issue's
remaining work; until they exist, resumable relationships are neither offered nor callable
by name (``engine.tools.NOT_DIRECT``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.define.registry import ResolvedTool
from threadloom.define.tool import build_tool_definition
from threadloom.records import SubagentRegistryEntry

NO_INSTANCES = "No active subagent instances."


def registry_listing(entries: Sequence[SubagentRegistryEntry]) -> str:
    """The ``subagents`` tool's text (§6.3.5): one line per entry in creation order."""
    if not entries:
        return NO_INSTANCES
    lines = ["Active subagent instances:"]
    for entry in entries:
        name = f' "{entry.thread_name}"' if entry.thread_name else ""
        about = f" ({entry.description})" if entry.description else ""
        lines.append(f"- {entry.reference}: {entry.relationship}{name} — {entry.status}{about}")
    lines.append("Message one with subagent_message(referenceId, message).")
    return "\n".join(lines)


async def _subagents(state: Any) -> str:
    return registry_listing(await state.get_children())


SUBAGENTS_TOOL = build_tool_definition(
    _subagents,
    name="subagents",
    description=(
        "List this thread's subagent instances: reference, relationship, name and status."
    ),
)


def with_runtime_tools(tools: list[ResolvedTool], *, has_registry: bool) -> list[ResolvedTool]:
    """The prompt's resolved entries followed by the runtime tools it is offered (§6.3.1):
    ``subagents`` when the prompt has a subagent entry or the thread's registry is not
    empty."""
    if has_registry or any(t.kind == "subagent" for t in tools):
        definition = SUBAGENTS_TOOL
        tools = [
            *tools,
            ResolvedTool(
                definition.name,
                "tool",
                definition.description,
                dict(definition.parameters),
                definition,
            ),
        ]
    return tools


__all__ = ["NO_INSTANCES", "SUBAGENTS_TOOL", "registry_listing", "with_runtime_tools"]
