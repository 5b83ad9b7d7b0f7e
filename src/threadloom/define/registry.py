"""The ``Definitions`` registry: models, prompts, tools, agents and hooks by name (spec 04 §4.2).

``add`` never rejects a definition for its name: duplicates and reserved names are kept
aside and reported by ``validate()`` together with every other problem (V1–V21), so a
project shows all its errors at once. Lookups return the first definition of a name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from threadloom.define.agent import Agent
from threadloom.define.hook import HookDefinition, HookRegistry, hook_definition_of
from threadloom.define.mcp import MCPServer, split_entry
from threadloom.define.model import Model
from threadloom.define.prompt import (
    Lookup,
    Prompt,
    Subagent,
    Subprompt,
    ToolEntry,
    entry_name,
    substitute_variables,
    system_text,
    variable_lookup,
)
from threadloom.define.schema import empty_object_schema
from threadloom.define.tool import ToolDefinition, tool_definition_of
from threadloom.define.validation import IN_CODE, Finding, cross_checks
from threadloom.errors import AgentNotFound, DefinitionError, UnknownHookError
from threadloom.records import Schedule

Kind = Literal["model", "prompt", "tool", "agent", "mcp"]
ToolKind = Literal["tool", "subprompt", "handoff", "subagent"]
Definition = Model | Prompt | Agent | ToolDefinition | MCPServer

_DIRECT_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "attachments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["message"],
    "additionalProperties": False,
}
_MODE_SUFFIX: Final = {
    True: " (blocking: waits for the result)",
    False: " (non-blocking: returns a reference at once, the result arrives later)",
}


@dataclass(frozen=True)
class _Entry:
    kind: Kind
    obj: Definition
    origin: str


@dataclass(frozen=True)
class ResolvedTool:
    """One entry of a prompt's ``tools`` as the engine offers and dispatches it (§4.4.3).

    ``target`` is the tool, prompt or agent the entry names; ``options`` the normalised
    ``Subprompt`` / ``Subagent`` (relationship and description filled in). ``direct`` is
    False for resumable subagents, which the model reaches through ``subagent_create``.
    """

    name: str
    kind: ToolKind
    description: str
    parameters: dict[str, Any]
    target: ToolDefinition | Prompt | Agent
    options: Subprompt | Subagent | None = None
    direct: bool = True


def _offered(tool: ToolDefinition) -> ResolvedTool:
    """A tool as offered (fresh copies of its parameters: the caller may change them)."""
    return ResolvedTool(tool.name, "tool", tool.description, copy.deepcopy(tool.parameters), tool)


def _kind_of(obj: Definition) -> Kind:
    if isinstance(obj, Model):
        return "model"
    if isinstance(obj, Prompt):
        return "prompt"
    if isinstance(obj, MCPServer):
        return "mcp"
    return "agent" if isinstance(obj, Agent) else "tool"


class Definitions:
    """Everything a project defines, by name, with where each definition came from."""

    def __init__(self) -> None:
        self.hooks = HookRegistry()
        self._models: dict[str, _Entry] = {}
        self._named: dict[str, _Entry] = {}  # tools, prompts and agents share one namespace
        self._conflicts: list[tuple[_Entry, _Entry]] = []
        self._hook_origins: dict[str, str] = {}
        self._load_findings: list[Finding] = []
        self.generation = 0
        """Counts the models, prompts, tools and agents added (caches of lookups compare it)."""
        self._resolved: dict[str, tuple[Prompt, tuple[ResolvedTool, ...]]] = {}
        """``offered_tools`` per prompt name; any ``add`` clears it, since a prompt's entries
        name definitions by name."""
        self._mcp_tools: dict[str, tuple[ToolDefinition, ...]] = {}
        """The tools each MCP server listed, bound by the runtime that opened its session."""
        self._mcp_findings: dict[str, str] = {}
        """Why an MCP server could not be opened (reported by ``validate``, V22)."""
        self._schedules: dict[str, Schedule] = {}
        """The project's schedules by id (spec 18 §18.1), applied to the store at start."""

    # -- adding ------------------------------------------------------------------------
    def add(
        self,
        *definitions: Definition | HookDefinition | Schedule | Callable[..., Any],
        origin: str = IN_CODE,
    ) -> Definitions:
        """Register models, prompts, agents, MCP servers, schedules, ``@tool`` and ``@hook``
        functions.

        The same object twice is a no-op; another object under a used name is kept aside
        and reported by ``validate()`` (V2). Hook id conflicts raise ``HookIdConflict``
        at once (spec 03 §3.2 rule 6).
        """
        for item in definitions:
            if isinstance(item, Schedule):
                known = self._schedules.setdefault(item.id, item)
                if known != item:
                    raise DefinitionError(f"two different schedules named {item.id!r}")
                continue
            found = False
            obj: Definition | None = (
                item
                if isinstance(item, Model | Prompt | Agent | MCPServer)
                else tool_definition_of(item)
            )
            if obj is not None:
                self._add_named(_Entry(_kind_of(obj), obj, origin))
                found = True
                if isinstance(obj, Prompt) and obj.given_definitions:
                    self.add(*obj.given_definitions, origin=origin)  # tools=[fn] adds fn
            hook_def = item if isinstance(item, HookDefinition) else hook_definition_of(item)
            if hook_def is not None:
                self.hooks.register(hook_def)
                self._hook_origins.setdefault(hook_def.id, origin)
                found = True
            if not found:
                raise DefinitionError(f"not a definition: {item!r}")
        return self

    def _add_named(self, entry: _Entry) -> None:
        self.generation += 1
        self._resolved.clear()
        table = self._models if entry.kind == "model" else self._named
        name = entry.obj.name
        existing = table.get(name)
        if existing is None:
            table[name] = entry
            return
        same = existing.kind == entry.kind and (
            existing.obj is entry.obj or existing.obj == entry.obj
        )
        reported = any(a is existing and b.obj is entry.obj for a, b in self._conflicts)
        if not same and not reported:
            self._conflicts.append((existing, entry))

    def record_load_error(self, origin: str, message: str) -> None:
        """Record a problem found while loading (reported by ``validate``, §4.2.2 step 3)."""
        self._load_findings.append((origin, "load", message))

    def load_project(self, path: str | Path) -> Definitions:
        """Discover a project folder into this registry (§4.2.2); see ``discovery``."""
        from threadloom.define.discovery import load_project

        load_project(self, path)
        return self

    @classmethod
    def from_project(cls, path: str | Path) -> Definitions:
        """A fresh registry holding the project at ``path``."""
        return cls().load_project(path)

    # -- lookups -----------------------------------------------------------------------
    def _get(self, kind: Kind, name: str) -> Any:
        entry = (self._models if kind == "model" else self._named).get(name)
        return entry.obj if entry is not None and entry.kind == kind else None

    def model(self, name: str) -> Model | None:
        return self._get("model", name)  # type: ignore[no-any-return]

    def prompt(self, name: str) -> Prompt | None:
        return self._get("prompt", name)  # type: ignore[no-any-return]

    def tool(self, name: str) -> ToolDefinition | None:
        return self._get("tool", name)  # type: ignore[no-any-return]

    def agent(self, name: str) -> Agent | None:
        return self._get("agent", name)  # type: ignore[no-any-return]

    def mcp_server(self, name: str) -> MCPServer | None:
        return self._get("mcp", name)  # type: ignore[no-any-return]

    def _all(self, kind: Kind) -> list[Any]:
        table = self._models if kind == "model" else self._named
        return [e.obj for e in table.values() if e.kind == kind]

    def models(self) -> Iterator[Model]:
        return iter(self._all("model"))

    def prompts(self) -> Iterator[Prompt]:
        return iter(self._all("prompt"))

    def tools(self) -> Iterator[ToolDefinition]:
        return iter(self._all("tool"))

    def agents(self) -> Iterator[Agent]:
        return iter(self._all("agent"))

    def schedules(self) -> list[Schedule]:
        """The schedules the project declares (spec 18 §18.1), by id."""
        return [self._schedules[k] for k in sorted(self._schedules)]

    def mcp_servers(self) -> Iterator[MCPServer]:
        return iter(self._all("mcp"))

    def required_arguments(self, agent_name: str) -> dict[str, tuple[str, str]]:
        """The ``arguments`` a thread of the agent must be given: each variable its sides'
        prompts declare (``Prompt.variables``), with the prompt and the description."""
        agent = self.agent(agent_name)
        if agent is None:
            return {}
        needed: dict[str, tuple[str, str]] = {}
        for side in (agent.side_a, agent.side_b):
            prompt = self.prompt(side.prompt) if side is not None and side.prompt else None
            if prompt is not None:
                for name, description in prompt.variables.items():
                    needed.setdefault(name, (prompt.name, description))
        return needed

    def primary_agents(self) -> list[Agent]:
        """The agents a user starts threads of, by name: those no prompt lists as a
        subagent (a subagent-only agent is started by its parent's tool call)."""
        subagent_only = {
            entry.agent
            for prompt in self.prompts()
            for entry in prompt.tools
            if isinstance(entry, Subagent)
        }
        return sorted(
            (a for a in self.agents() if a.name not in subagent_only), key=lambda a: a.name
        )

    # -- MCP servers (docs/interop.md) ---------------------------------------------------
    def bind_mcp_tools(self, server: str, tools: Collection[ToolDefinition]) -> None:
        """The tools ``server`` listed, as the runtime that opened its session calls them."""
        self.generation += 1
        self._resolved.clear()
        self._mcp_tools[server] = tuple(tools)
        self._mcp_findings.pop(server, None)

    def mcp_failed(self, server: str, message: str) -> None:
        """``server`` could not be opened: ``validate`` reports ``message`` (V22)."""
        self._mcp_tools.pop(server, None)
        self._resolved.clear()
        self._mcp_findings[server] = message

    def mcp_finding(self, server: str) -> str | None:
        """Why ``server`` could not be opened, when it could not (``None`` otherwise)."""
        return self._mcp_findings.get(server)

    def mcp_tools(self, server: str) -> tuple[ToolDefinition, ...] | None:
        """The tools bound for ``server`` (``None`` while no runtime opened it)."""
        return self._mcp_tools.get(server)

    def mcp_entry(self, entry: ToolEntry) -> tuple[MCPServer, str | None] | None:
        """A prompt entry naming an MCP server (``"calc"``) or one of its tools
        (``"calc:add"``): the server and the tool's name; ``None`` for other entries."""
        if not isinstance(entry, str):
            return None
        name, tool = split_entry(entry)
        server = self.mcp_server(name)
        return (server, tool) if server is not None else None

    def _mcp_resolve(self, server: MCPServer, tool: str | None) -> list[ResolvedTool] | None:
        """The offered tools of an MCP entry; ``None`` when they are not known (the
        server is not bound, or has no such tool)."""
        bound = self._mcp_tools.get(server.name)
        if bound is None:
            return None
        chosen = [t for t in bound if tool is None or getattr(t, "remote_name", None) == tool]
        if tool is not None and not chosen:
            return None
        return [_offered(t) for t in chosen]

    @property
    def has_agents(self) -> bool:
        return any(e.kind == "agent" for e in self._named.values())

    @property
    def has_prompts(self) -> bool:
        return any(e.kind == "prompt" for e in self._named.values())

    def origin_of(self, definition: Definition) -> str | None:
        """Where ``definition`` was registered from (``agents/a.py`` or ``explicit``)."""
        table = self._models if isinstance(definition, Model) else self._named
        entry = table.get(definition.name)
        return entry.origin if entry is not None and entry.obj is definition else None

    def hook_origin(self, hook_id: str) -> str | None:
        """Where the hook ``hook_id`` was first registered from."""
        return self._hook_origins.get(hook_id)

    def conflicts(self) -> list[tuple[str, str, str, str, str]]:
        """Names used twice: ``(name, first kind, first origin, other kind, other origin)``."""
        return [
            (first.obj.name, first.kind, first.origin, other.kind, other.origin)
            for first, other in self._conflicts
        ]

    # -- engine helpers ----------------------------------------------------------------
    def side_prompt(self, agent: Agent | str, side: Literal["a", "b"]) -> Prompt | None:
        """The prompt backing ``side`` of ``agent``; ``None`` for the human side."""
        found = self.agent(agent) if isinstance(agent, str) else agent
        if found is None:
            raise AgentNotFound(str(agent))
        acting = found.side(side)
        if acting is None or acting.prompt is None:
            return None
        prompt = self.prompt(acting.prompt)
        if prompt is None:
            raise DefinitionError(
                f'Agent "{found.name}": side {side} prompt "{acting.prompt}" is not defined'
            )
        return prompt

    def render_system(
        self,
        prompt: Prompt | str,
        arguments: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        *,
        lookup: Lookup | None = None,
    ) -> str:
        """The prompt's system text: includes expanded, ``{{name}}`` variables replaced (§4.4.2).

        Variables come from ``lookup`` when given, else ``arguments`` then ``context``.
        """
        found = self._require_prompt(prompt)
        text = system_text(found, self.prompt)
        return substitute_variables(text, lookup or variable_lookup(arguments, context))

    def _require_prompt(self, prompt: Prompt | str) -> Prompt:
        if isinstance(prompt, Prompt):
            return prompt
        found = self.prompt(prompt)
        if found is None:
            raise DefinitionError(f'Prompt "{prompt}" is not defined')
        return found

    def resolve_tools(self, prompt: Prompt | str) -> list[ResolvedTool]:
        """The prompt's entries, in order, as offered tools with their targets (§4.4.3);
        each call returns fresh copies of the parameters (the caller may change them)."""
        found = self._require_prompt(prompt)
        resolved: list[ResolvedTool] = []
        for entry in found.tools:
            mcp = self.mcp_entry(entry)
            if mcp is not None:
                tools = self._mcp_resolve(*mcp)
                if tools is None:
                    raise DefinitionError(
                        f'Prompt "{found.name}": tool "{entry}" is not defined'
                        f' (MCP server "{mcp[0].name}" is not open or has no such tool)'
                    )
                resolved.extend(tools)
                continue
            item = self._resolve(entry)
            if item is None:
                raise DefinitionError(
                    f'Prompt "{found.name}": tool "{entry_name(entry)}" is not defined'
                )
            resolved.append(item)
        return resolved

    def offered_tools(self, prompt: Prompt | str) -> list[ResolvedTool]:
        """``resolve_tools`` for the engine, which asks once per step: resolved once per
        prompt and registry state, the entries shared between calls — read-only."""
        found = self._require_prompt(prompt)
        cached = self._resolved.get(found.name)
        if cached is not None and cached[0] is found:
            return list(cached[1])
        resolved = self.resolve_tools(found)
        self._resolved[found.name] = (found, tuple(resolved))
        return resolved

    def resolve_name(self, name: str) -> ResolvedTool | None:
        """The tool, prompt or agent named ``name`` as an offered tool, whatever prompt
        lists it (``queue_tool``/``invoke_tool`` bypass the allow-list, spec 04 §4.14.6); an
        MCP tool by ``"server:tool"`` or by the name it is offered under."""
        mcp = self.mcp_entry(name)
        if mcp is not None and mcp[1] is not None:
            found = self._mcp_resolve(*mcp)
            return found[0] if found else None
        item = self._resolve(name)
        if item is not None or not self._mcp_tools:
            return item
        for tools in self._mcp_tools.values():
            for t in tools:
                if t.name == name:
                    return ResolvedTool(
                        t.name, "tool", t.description, copy.deepcopy(t.parameters), t
                    )
        return None

    def _resolve(self, entry: ToolEntry) -> ResolvedTool | None:
        if isinstance(entry, Subagent):
            child = self.agent(entry.agent)
            return self._subagent(entry, child) if child is not None else None
        if isinstance(entry, Subprompt):
            target = self.prompt(entry.name)
            return self._subprompt(target, entry) if target is not None else None
        named = self._named.get(entry)
        if named is None:
            return None
        obj = named.obj
        if isinstance(obj, ToolDefinition):
            params = copy.deepcopy(obj.parameters)
            return ResolvedTool(obj.name, "tool", obj.description, params, obj)
        if isinstance(obj, Prompt):
            return self._subprompt(obj, Subprompt(obj.name))
        if isinstance(obj, Agent) and obj.type == "dual_ai":
            return self._subagent(Subagent(agent=obj.name), obj)
        if isinstance(obj, Agent):
            side_a = self.prompt(obj.side_a.prompt) if obj.side_a.prompt else None
            schema = side_a.safe_arguments_schema() if side_a else None
            params = schema or empty_object_schema()
            return ResolvedTool(obj.name, "handoff", obj.tool_description, params, obj)
        return None

    def _subprompt(self, target: Prompt, options: Subprompt) -> ResolvedTool:
        params = target.safe_arguments_schema() or empty_object_schema()
        return ResolvedTool(
            target.name, "subprompt", target.offered_description, params, target, options
        )

    def _subagent(self, entry: Subagent, child: Agent) -> ResolvedTool:
        side_a = self.prompt(child.side_a.prompt) if child.side_a.prompt else None
        schema = side_a.safe_arguments_schema() if side_a else None
        description = entry.description if entry.description is not None else child.tool_description
        update: dict[str, Any] = {
            "relationship": entry.relationship_name,
            "description": description,
        }
        if entry.resumable:
            params, offered = schema or empty_object_schema(), description
        else:
            offered = description + _MODE_SUFFIX[entry.blocking]
            params = schema or copy.deepcopy(_DIRECT_PARAMETERS)
            if schema is None:
                update["init_user_message_property"] = entry.init_user_message_property or "message"
                update["init_attachments_property"] = (
                    entry.init_attachments_property or "attachments"
                )
        options = entry.model_copy(update=update)
        return ResolvedTool(
            entry.relationship_name,
            "subagent",
            offered,
            params,
            child,
            options,
            not entry.resumable,
        )

    def offered_names(self, prompt: Prompt) -> list[str]:
        """Tool names a request of ``prompt`` can offer: direct entries, then runtime tools."""
        names: list[str] = []
        relationships: list[Subagent] = []
        for entry in prompt.tools:
            mcp = self.mcp_entry(entry)
            if mcp is not None:
                names += [t.name for t in self._mcp_resolve(*mcp) or ()]
                continue
            item = self._resolve(entry)
            if item is not None and isinstance(item.options, Subagent):
                relationships.append(item.options)
            if item is None or item.direct:
                names.append(entry_name(entry))
        if any(r.resumable for r in relationships):
            names += ["subagent_create", "subagent_message"]
        if relationships:
            names.append("subagents")
        return names

    # -- validation --------------------------------------------------------------------
    def problems(self, providers: Collection[str] | None = None) -> list[str]:
        """Every problem found (V1–V21 and load errors), each prefixed by its origin."""
        return [f"{origin}: {message}" for origin, _, message in self._findings(providers)]

    def validate(self, providers: Collection[str] | None = None) -> None:
        """Raise one ``DefinitionError`` listing all problems (§4.2.4); nothing when valid.

        ``providers`` are the registered provider names; without them V18 is skipped.
        When every problem is an unknown hook (V19), ``UnknownHookError`` is raised.
        """
        findings = self._findings(providers)
        if not findings:
            return
        lines = [f"{origin}: {message}" for origin, _, message in findings]
        error = (
            UnknownHookError if all(code == "V19" for _, code, _ in findings) else DefinitionError
        )
        raise error("\n".join(lines), problems=lines)

    def _findings(self, providers: Collection[str] | None) -> list[Finding]:
        mcp: list[Finding] = [
            (self.origin_of(server) or IN_CODE, "V22", self._mcp_findings[server.name])
            for server in self.mcp_servers()
            if server.name in self._mcp_findings
        ]
        schedules: list[Finding] = [  # spec 18 §18.1: a schedule's agent is defined
            (IN_CODE, "V23", f"schedule {s.id}: agent {s.agent!r} is not defined")
            for s in self._schedules.values()
            if s.agent is not None and self.has_agents and self.agent(s.agent) is None
        ]
        return [*self._load_findings, *cross_checks(self, providers), *mcp, *schedules]
