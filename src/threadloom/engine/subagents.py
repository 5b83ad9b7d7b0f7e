"""The runtime tools of subagents that the engine adds to a prompt's own (spec 06 §6.3).

Built so far: ``subagents`` (the registry listing) and ``subagent_message`` for
non-blocking relationships, with their offer rules. ``subagent_create`` and session
results (child creation, delivery to the parent, blocking waits) are the subagents issue's
remaining work; until they exist, resumable relationships are neither offered nor callable
by name (``engine.tools.NOT_DIRECT``).

``subagent_message`` checks its own arguments (spec 04 §4.14.3): its definition takes the
arguments as they came, and each failing check is an error result with the spec's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from threadloom.define.registry import ResolvedTool
from threadloom.define.tool import ToolDefinition, build_tool_definition
from threadloom.records import SubagentRegistryEntry
from threadloom.thread.family import set_registry_status
from threadloom.thread.queue import enqueue
from threadloom.thread.transfer import copy_attachments

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


class _AsGiven(BaseModel):
    """Accepts any object: the tools of this module check their own arguments."""

    model_config = ConfigDict(extra="allow")


class SubagentToolError(Exception):
    """A failed check of a subagent tool; its text is the error result."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _paths(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return value
    return None


async def _subagent_message(state: Any, arguments: _AsGiven) -> str:
    """§6.3.3, non-blocking relationships."""
    args = arguments.model_extra or {}
    reference, message = _text(args.get("referenceId")), _text(args.get("message"))
    if reference is None or message is None:
        raise SubagentToolError("subagent_message requires referenceId and message.")
    attachments = _paths(args.get("attachments"))
    if attachments is None:
        raise SubagentToolError("subagent_message requires attachments (use [] when none).")
    hub, parent_id = state.hub, state.thread_id
    entry = next((e for e in await state.get_children() if e.reference == reference), None)
    child = await state.get_child_thread(reference) if entry is not None else None
    if entry is None or entry.status == "terminated" or child is None or child.terminated:
        if entry is not None and entry.status != "terminated":
            await set_registry_status(hub, parent_id, reference, "terminated")
        raise SubagentToolError(f'Subagent reference "{reference}" is not active.')
    if not entry.resumable:
        raise SubagentToolError(f'Subagent reference "{reference}" is not resumable.')
    if entry.blocking:
        raise SubagentToolError(
            "subagent_message to a blocking subagent is not supported by this runtime yet."
        )
    for path in attachments:
        record = await state.stat_file(path)
        if record is None or record.is_directory:
            raise SubagentToolError(f"Attachment not found in this thread: {path}")
    refs = await copy_attachments(state, child, attachments)
    step = getattr(state.execution, "step", None)
    origin = {"thread_id": parent_id, "message_id": getattr(step, "pending_id", None) or None}
    await enqueue(
        hub,
        reference,
        {
            "role": "user",
            "content": message,
            "attachments": refs or None,
            "silent": False,
            "metadata": {"forwarded_from": origin},
        },
        "parent",
    )
    await set_registry_status(hub, parent_id, reference, "running")
    return f"Message sent to subagent {reference}."


SUBAGENT_MESSAGE_TOOL = replace(
    build_tool_definition(
        _subagent_message,
        name="subagent_message",
        description=(
            "Send a message to an existing subagent instance (see `subagents` for references)."
        ),
    ),
    parameters={
        "type": "object",
        "properties": {
            "referenceId": {"type": "string", "description": "Reference of the subagent instance."},
            "message": {"type": "string", "description": "The message to send."},
            "attachments": {
                "type": "array",
                "items": {"type": "string"},
                "description": (
                    "Paths of files in this thread to give the subagent. Use [] for none."
                ),
            },
        },
        "required": ["referenceId", "message", "attachments"],
        "additionalProperties": False,
    },
    arguments_model=_AsGiven,
    fields=(("arguments", "arguments", False),),
    model_parameter=True,
    problems=(),
)


def _offer(definition: ToolDefinition) -> ResolvedTool:
    return ResolvedTool(
        definition.name, "tool", definition.description, dict(definition.parameters), definition
    )


def with_runtime_tools(
    tools: list[ResolvedTool], entries: Sequence[SubagentRegistryEntry]
) -> list[ResolvedTool]:
    """The prompt's resolved entries followed by the runtime tools it is offered (§6.3.1):
    ``subagent_message`` when the registry has a resumable entry that is not terminated;
    ``subagents`` when the prompt has a subagent entry or the registry is not empty."""
    offered = list(tools)
    if any(e.resumable and e.status != "terminated" for e in entries):
        offered.append(_offer(SUBAGENT_MESSAGE_TOOL))
    if entries or any(t.kind == "subagent" for t in tools):
        offered.append(_offer(SUBAGENTS_TOOL))
    return offered


async def runtime_tools(run: Any, prompt: Any) -> list[ResolvedTool]:
    """``with_runtime_tools`` for a step of ``run``: the registry is read only when the
    thread has one (``ThreadRow.has_children``), so a thread without children pays nothing."""
    entries = await run.hub.store.get_registry(run.thread_id) if run.has_registry else []
    return with_runtime_tools(run.definitions.resolve_tools(prompt), entries)


__all__ = [
    "NO_INSTANCES",
    "SUBAGENTS_TOOL",
    "SUBAGENT_MESSAGE_TOOL",
    "registry_listing",
    "runtime_tools",
    "with_runtime_tools",
]
