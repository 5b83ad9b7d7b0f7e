"""The runtime tools of subagents that the engine adds to a prompt's own (spec 06 §6.3):
``subagent_create``, ``subagent_message`` and ``subagents``, with their offer rules.

Resumable relationships are reached only through these tools, never by name
(``engine.step.tools.NOT_DIRECT``). The tools check their own arguments (spec 04 §4.14.3):
their definitions take the arguments as they came, and each failing check is an error
result with the spec's text. Creation and sending live in ``children``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from threadloom.define.prompt import Prompt
from threadloom.define.registry import ResolvedTool
from threadloom.define.schema import empty_object_schema
from threadloom.define.tool import ToolDefinition, ToolResult, build_tool_definition
from threadloom.engine.env import RunView
from threadloom.engine.run.children import (
    Request,
    SubagentToolError,
    argument_problems,
    check_paths,
    child_prompt,
    create,
    note_child,
    send,
)
from threadloom.records import SubagentRegistryEntry
from threadloom.thread.family import set_registry_status

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


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _paths(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return value
    return None


async def _subagent_message(state: Any, arguments: _AsGiven) -> ToolResult:
    """§6.3.3: checks, then the message queued in the child; a blocking relationship
    waits for the child's next session result."""
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
    if entry is not None:
        note_child(state, reference)
    if entry is None or entry.status == "terminated" or child is None or child.terminated:
        if entry is not None and entry.status != "terminated":
            await set_registry_status(hub, parent_id, reference, "terminated", fence=state.fence)
        raise SubagentToolError(f'Subagent reference "{reference}" is not active.')
    if not entry.resumable:
        raise SubagentToolError(f'Subagent reference "{reference}" is not resumable.')
    await check_paths(state, attachments)
    return await send(state, entry, message, attachments, blocking=entry.blocking)


async def _subagent_create(state: Any, arguments: _AsGiven) -> ToolResult:
    """§6.3.2: checks 1-7 here, 8-10 and the creation in ``children.create``."""
    args = arguments.model_extra or {}
    agent = args.get("agent")
    if not isinstance(agent, str):
        raise SubagentToolError("subagent_create requires agent.")
    initial = args.get("arguments", {})
    if not isinstance(initial, dict):
        raise SubagentToolError("subagent_create arguments must be an object when provided.")
    message = _text(args.get("message"))
    if message is None:
        raise SubagentToolError("subagent_create requires message.")
    attachments = _paths(args.get("attachments"))
    if attachments is None:
        raise SubagentToolError("subagent_create requires attachments (use [] when none).")
    name = _text(args.get("name"))
    if name is None:
        raise SubagentToolError("subagent_create requires name.")
    step = getattr(state.execution, "step", None)
    relationships = resumable_relationships(step.tools if step is not None else [])
    chosen = next((r for r in relationships if r.name == agent), None)
    if chosen is None or step is None:
        names = ", ".join(r.name for r in relationships) or "(none)"
        raise SubagentToolError(
            f'Subagent "{agent}" is not available for this prompt. Use one of: {names}.'
        )
    problems = argument_problems(child_prompt(step.run.definitions, chosen), initial)
    if problems:
        raise SubagentToolError(
            f'subagent_create arguments for "{chosen.name}" failed validation: '
            + "; ".join(problems)
        )
    origin = step.pending_id or None
    request = Request(
        relationship=chosen,
        owner=step.side,
        name=name,
        message=message,
        attachments=attachments,
        arguments=initial,
        spawn_group_id=origin,
        origin_message_id=origin,
        blocking=bool(getattr(chosen.options, "blocking", False)),
        continue_existing=True,
    )
    return await create(state, request)


def resumable_relationships(tools: Sequence[ResolvedTool]) -> list[ResolvedTool]:
    """The prompt's resumable relationships, in entry order (``subagent_create``'s enum)."""
    return [t for t in tools if t.kind == "subagent" and not t.direct]


_ATTACHMENTS = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Paths of files in this thread to give the subagent. Use [] for none.",
}

SUBAGENT_CREATE_TOOL = replace(
    build_tool_definition(
        _subagent_create,
        name="subagent_create",
        description="Create a subagent.",
    ),
    arguments_model=_AsGiven,
    fields=(("arguments", "arguments", False),),
    model_parameter=True,
    problems=(),
)


def _arguments_text(schema: dict[str, Any] | None) -> str:
    properties = list((schema or {}).get("properties") or {})
    required = [p for p in (schema or {}).get("required") or () if p in properties]
    optional = [p for p in properties if p not in required]
    parts = []
    if required:
        parts.append("required arguments: " + ", ".join(required))
    if optional:
        parts.append("optional arguments: " + ", ".join(optional))
    return "; ".join(parts) or "no arguments"


def create_offer(relationships: Sequence[ResolvedTool], definitions: Any) -> ResolvedTool:
    """``subagent_create`` for a prompt's resumable relationships (§6.3.2): the enum, the
    description with one line per relationship, ``arguments`` when a child has a schema."""
    schemas: list[dict[str, Any] | None] = []
    lines = [
        "Create a subagent: a separate, persistent thread that works on a task and reports back.",
        "Available subagents:",
    ]
    for relationship in relationships:
        options = relationship.options
        prompt = child_prompt(definitions, relationship)
        schema = prompt.safe_arguments_schema() if prompt is not None else None
        schemas.append(schema)
        mode = (
            "blocking: waits for the result"
            if options is not None and getattr(options, "blocking", False)
            else "non-blocking: returns a reference at once, the result arrives later"
        )
        limit = getattr(options, "max_instances", None)
        cap = f", at most {limit} instances" if limit is not None else ""
        lines.append(
            f"- {relationship.name}: {relationship.description} ({mode}{cap}; "
            f"{_arguments_text(schema)})"
        )
    lines.append(
        "Call `subagents` to see existing instances; use `subagent_message` to continue one "
        "instead of creating a new one."
    )
    properties: dict[str, Any] = {
        "agent": {
            "type": "string",
            "enum": [r.name for r in relationships],
            "description": "Which subagent to create.",
        },
        "name": {"type": "string", "description": "A short, stable name for this instance."},
        "message": {"type": "string", "description": "The first instruction for the subagent."},
        "attachments": dict(_ATTACHMENTS),
    }
    described = "Initial arguments of the subagent (see the tool description)."
    if any(s is not None for s in schemas):
        distinct: list[dict[str, Any]] = []
        for schema in schemas:
            item = schema if schema is not None else empty_object_schema()
            if item not in distinct:
                distinct.append(item)
        if len(distinct) == 1 and all(s is not None for s in schemas):
            properties["arguments"] = {**distinct[0], "description": described}
        else:
            properties["arguments"] = {"anyOf": distinct, "description": described}
    parameters = {
        "type": "object",
        "properties": properties,
        "required": ["agent", "name", "message", "attachments"],
        "additionalProperties": False,
    }
    return ResolvedTool(
        "subagent_create", "tool", "\n".join(lines), parameters, SUBAGENT_CREATE_TOOL
    )


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
            "attachments": dict(_ATTACHMENTS),
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
    tools: list[ResolvedTool],
    entries: Sequence[SubagentRegistryEntry],
    definitions: Any = None,
) -> list[ResolvedTool]:
    """The prompt's resolved entries followed by the runtime tools it is offered (§6.3.1):
    ``subagent_create`` when the prompt has a resumable relationship; ``subagent_message``
    when the registry has a resumable entry that is not terminated; ``subagents`` when the
    prompt has a subagent entry or the registry is not empty."""
    offered = list(tools)
    relationships = resumable_relationships(tools)
    if relationships:
        offered.append(create_offer(relationships, definitions))
    if any(e.resumable and e.status != "terminated" for e in entries):
        offered.append(_offer(SUBAGENT_MESSAGE_TOOL))
    if entries or any(t.kind == "subagent" for t in tools):
        offered.append(_offer(SUBAGENTS_TOOL))
    return offered


async def runtime_tools(run: RunView, prompt: Prompt) -> list[ResolvedTool]:
    """``with_runtime_tools`` for a step of ``run``: the registry is read only when the
    thread has one (``ThreadRow.has_children``), so a thread without children pays nothing."""
    entries = await run.hub.store.get_registry(run.thread_id) if run.has_registry else []
    return with_runtime_tools(run.definitions.offered_tools(prompt), entries, run.definitions)


__all__ = [
    "NO_INSTANCES",
    "SUBAGENTS_TOOL",
    "SUBAGENT_CREATE_TOOL",
    "SUBAGENT_MESSAGE_TOOL",
    "SubagentToolError",
    "create_offer",
    "registry_listing",
    "resumable_relationships",
    "runtime_tools",
    "with_runtime_tools",
]
