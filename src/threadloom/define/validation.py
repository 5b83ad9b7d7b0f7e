"""Load-time validation across definitions (spec 04 §4.2.4, V1–V21).

Checks that need one definition only live with that definition (``self_problems``); this
module adds the ones that relate definitions to each other: names and namespaces, model
references and fallbacks, prompt tool entries, side prompts and bindings, includes and
hook ids. Every finding carries the origin of the definition at fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Final

from threadloom.define.agent import NAME_PATTERN, Agent
from threadloom.define.mcp import MCPServer
from threadloom.define.model import Model
from threadloom.define.prompt import Prompt, Subagent, Subprompt, entry_name, include_problems
from threadloom.define.tool import ToolDefinition

if TYPE_CHECKING:
    from threadloom.define.registry import Definitions

#: Names of the runtime subagent tools (spec 06 §6.3); no definition may use them (§4.2.3).
RESERVED_NAMES: Final = frozenset({"subagent_create", "subagent_message", "subagents"})

#: One finding: (origin, check id such as ``"V5"``, message without the origin prefix).
Finding = tuple[str, str, str]

IN_CODE: Final = "defined in code"
"""The origin of a definition added in Python (``Definitions.add``, ``Runtime.open(hooks=…)``)
rather than found in a project file, whose origin is its path (``prompts/p.py``)."""


def place(origin: str) -> str:
    """Where a definition came from, after its kind: ``in prompts/p.py`` or ``defined in
    code``."""
    return origin if origin == IN_CODE else f"in {origin}"


def cross_checks(defs: Definitions, providers: Collection[str] | None) -> list[Finding]:
    """All findings of ``defs``: names, then models, tools, prompts and agents."""

    def origin(obj: Model | Prompt | Agent | ToolDefinition | MCPServer) -> str:
        return defs.origin_of(obj) or IN_CODE

    findings: list[Finding] = _name_findings(defs)
    for model in defs.models():
        found = [*model.self_problems(), *_model_problems(defs, model, providers)]
        findings.extend((origin(model), code, message) for code, message in found)
    for tool in defs.tools():
        findings.extend((origin(tool), code, message) for code, message in tool.self_problems())
    for server in defs.mcp_servers():
        findings.extend((origin(server), code, text) for code, text in server.self_problems())
    prompts = {p.name: p for p in defs.prompts()}
    includes = include_problems(prompts)
    for prompt in prompts.values():
        found = [*prompt.self_problems(), *_prompt_problems(defs, prompt)]
        found.extend(problem for name, problem in includes if name == prompt.name)
        findings.extend((origin(prompt), code, message) for code, message in found)
    for agent in defs.agents():
        found = [
            *agent.self_problems(require_prompts=defs.has_prompts),
            *_agent_problems(defs, agent),
        ]
        findings.extend((origin(agent), code, message) for code, message in found)
    return findings


def _name_findings(defs: Definitions) -> list[Finding]:
    """V2: names used twice within a namespace, and reserved names."""
    findings: list[Finding] = []
    for name, kind, first_origin, other_kind, other_origin in defs.conflicts():
        first, other = place(first_origin), place(other_origin)
        message = f'Duplicate name "{name}": {kind} {first} and {other_kind} {other}'
        findings.append((other_origin, "V2", message))
    named: list[Model | Prompt | Agent | ToolDefinition] = [
        *defs.models(),
        *defs.tools(),
        *defs.prompts(),
        *defs.agents(),
    ]
    for obj in named:
        if obj.name in RESERVED_NAMES:
            findings.append(
                (defs.origin_of(obj) or IN_CODE, "V2", f'Name "{obj.name}" is reserved')
            )
    for hook in defs.hooks:
        if hook.id in RESERVED_NAMES:
            origin = defs.hook_origin(hook.id) or IN_CODE
            findings.append((origin, "V2", f'Name "{hook.id}" is reserved'))
    return findings


def _hint(name: str, known: Iterable[str]) -> str:
    """``; did you mean "x"?`` when a known name is close to ``name`` (a typo), else ``""``."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.75)
    return f'; did you mean "{close[0]}"?' if close else ""


def _model_problems(
    defs: Definitions, model: Model, providers: Collection[str] | None
) -> list[tuple[str, str]]:
    """V4 (fallbacks exist) and V18 (provider registered, only when names are given)."""
    where = f'Model "{model.name}"'
    problems: list[tuple[str, str]] = []
    for fallback in dict.fromkeys(model.fallbacks):
        if fallback != model.name and defs.model(fallback) is None:
            hint = _hint(fallback, (m.name for m in defs.models()))
            problems.append(("V4", f'{where}: fallback "{fallback}" is not defined{hint}'))
    name = model.provider_name
    if providers is not None and name is not None and name not in providers:
        registered = ", ".join(sorted(providers))
        hint = _hint(name, providers) or f" (registered: {registered})"
        problems.append(("V18", f'{where}: provider "{name}" is not registered{hint}'))
    return problems


def _prompt_problems(defs: Definitions, prompt: Prompt) -> list[tuple[str, str]]:
    """V3, V5, V6, V16 (names), V19 and V20 for one prompt."""
    where = f'Prompt "{prompt.name}"'
    problems: list[tuple[str, str]] = []
    if defs.model(prompt.model) is None:
        hint = _hint(prompt.model, (m.name for m in defs.models()))
        problems.append(("V3", f'{where}: model "{prompt.model}" is not defined{hint}'))
    seen: set[str] = set()
    for entry in prompt.tools:
        problems.extend(_entry_problems(defs, prompt, entry, seen))
    choice = prompt.tool_choice_name
    if choice is not None and choice not in defs.offered_names(prompt):
        problems.append(("V16", f"{where}: invalid tool_choice"))
    for hook_id in defs.hooks.unknown_ids(list(prompt.hooks)):
        problems.append(("V19", f'{where}: hook "{hook_id}" is not defined'))
    return problems


def _offerable(defs: Definitions) -> Iterator[str]:
    """The names a prompt's ``tools`` entry may take: tools, prompts, agents."""
    yield from (t.name for t in defs.tools())
    yield from (p.name for p in defs.prompts())
    yield from (a.name for a in defs.agents())


def _entry_problems(
    defs: Definitions, prompt: Prompt, entry: str | Subprompt | Subagent, seen: set[str]
) -> list[tuple[str, str]]:
    """Problems of one ``tools`` entry; ``seen`` collects the names offered so far."""
    where = f'Prompt "{prompt.name}"'
    name = entry_name(entry)
    subagent: Subagent | None = entry if isinstance(entry, Subagent) else None
    problems: list[tuple[str, str]] = []
    if isinstance(entry, Subagent):
        child = defs.agent(entry.agent)
        reason = _subagent_reason(child)
        if reason:
            message = f'{where}: agent "{entry.agent}" cannot be used as a subagent: {reason}'
            problems.append(("V6", message))
    elif isinstance(entry, Subprompt):
        if defs.prompt(entry.name) is None:
            problems.append(("V5", f'{where}: tool "{entry.name}" is not defined'))
    elif defs.mcp_entry(entry) is not None:
        return _mcp_entry_problems(defs, where, entry, seen)
    elif defs.tool(entry) is None and defs.prompt(entry) is None:
        agent = defs.agent(entry)
        if agent is None:
            hint = _hint(entry, _offerable(defs))
            problems.append(("V5", f'{where}: tool "{entry}" is not defined{hint}'))
        elif agent.type == "dual_ai":
            subagent = Subagent(agent=entry)
            if not agent.expose_as_tool:
                reason = "expose_as_tool is False"
                message = f'{where}: agent "{entry}" cannot be used as a subagent: {reason}'
                problems.append(("V6", message))
        elif not agent.expose_as_tool:
            message = (
                f'{where}: agent "{entry}" cannot be used as a handoff: expose_as_tool is False'
            )
            problems.append(("V6", message))
    if subagent is not None:
        problems.extend(_subagent_problems(defs, prompt, subagent, seen))
    elif name in seen:
        problems.append(("V5", f'{where}: tool "{name}" is listed twice'))
    seen.add(name)
    return problems


def _mcp_entry_problems(
    defs: Definitions, where: str, entry: str, seen: set[str]
) -> list[tuple[str, str]]:
    """V5 for an entry naming an MCP server or one of its tools: checked against what the
    server listed once a runtime opened it (before that, only the server's name is)."""
    found = defs.mcp_entry(entry)
    assert found is not None
    server, tool = found
    listed = defs.mcp_tools(server.name)
    if listed is None:
        return []
    names = [t.name for t in listed if tool is None or getattr(t, "remote_name", None) == tool]
    if tool is not None and not names:
        return [("V5", f'{where}: MCP server "{server.name}" has no tool "{tool}"')]
    problems: list[tuple[str, str]] = []
    for name in names:
        if name in seen:
            problems.append(("V5", f'{where}: tool "{name}" is listed twice (from "{entry}")'))
        elif name in RESERVED_NAMES:
            problems.append(("V5", f'{where}: tool "{name}" (from "{entry}") is reserved'))
        seen.add(name)
    return problems


def _subagent_reason(child: Agent | None) -> str | None:
    """Why ``child`` cannot be a subagent (V6), or ``None``."""
    if child is None:
        return "it is not defined"
    if child.type != "dual_ai":
        return "it is not a dual_ai agent"
    if not child.expose_as_tool:
        return "expose_as_tool is False"
    return None


def _subagent_problems(
    defs: Definitions, prompt: Prompt, entry: Subagent, seen: set[str]
) -> list[tuple[str, str]]:
    """V20: relationship name, uniqueness, ``max_instances`` and ``init_*_property`` options."""
    relationship = entry.relationship_name
    where = f'Prompt "{prompt.name}": subagent "{relationship}"'
    problems: list[tuple[str, str]] = []
    if not NAME_PATTERN.fullmatch(relationship):
        problems.append(("V20", f"{where}: relationship name is invalid"))
    elif relationship in RESERVED_NAMES:
        problems.append(("V20", f"{where}: relationship name is reserved"))
    if relationship in seen:
        problems.append(("V20", f"{where}: name is already offered by another tool entry"))
    if entry.max_instances is not None and entry.max_instances < 1:
        problems.append(("V20", f"{where}: max_instances must be >= 1"))
    child = defs.agent(entry.agent)
    side_a = defs.prompt(child.side_a.prompt) if child and child.side_a.prompt else None
    schema = side_a.safe_arguments_schema() if side_a is not None else None
    if side_a is not None and schema is not None:
        properties = schema.get("properties")
        names = properties if isinstance(properties, dict) else {}
        for option, value in entry.init_properties():
            if value not in names:
                reason = (
                    f'{option} "{value}" is not a property of the required_schema '
                    f'of prompt "{side_a.name}"'
                )
                problems.append(("V20", f"{where}: {reason}"))
    return problems


def _agent_problems(defs: Definitions, agent: Agent) -> list[tuple[str, str]]:
    """V8 (side prompts exist), V11 (stop tool and bindings offered), V19 (hook ids)."""
    where = f'Agent "{agent.name}"'
    problems: list[tuple[str, str]] = []
    for which, side in agent.prompt_sides():
        assert side.prompt is not None
        prompt = defs.prompt(side.prompt)
        if prompt is None:
            hint = _hint(side.prompt, (p.name for p in defs.prompts()))
            message = f'{where}: side {which} prompt "{side.prompt}" is not defined{hint}'
            problems.append(("V8", message))
            continue
        offered = defs.offered_names(prompt)
        named = [("stop_tool", side.stop_tool)] + [(f, b.name) for f, b in side.bindings()]
        for field, tool_name in named:
            if tool_name is not None and tool_name not in offered:
                message = (
                    f'{where}: side {which} {field} "{tool_name}" '
                    f'is not a tool of prompt "{prompt.name}"'
                )
                problems.append(("V11", message))
    hook_ids = [*agent.hooks, *(parent.hook for parent in agent.parent_hooks)]
    for hook_id in defs.hooks.unknown_ids(hook_ids):
        problems.append(("V19", f'{where}: hook "{hook_id}" is not defined'))
    return problems
