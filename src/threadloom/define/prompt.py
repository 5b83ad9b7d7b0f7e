"""Prompt definitions and their options (spec 04 §4.4, §4.17; spec 06 §6.2), and system text.

``Prompt``, ``Reasoning``, ``Subprompt``, ``Subagent`` and ``Immediate`` are immutable
pydantic models whose construction checks field types only; value rules run in
``Definitions.validate()`` (§4.2.4). This module also renders a prompt's system text:
include parts and ``{{name}}`` variables (§4.4.2).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from threadloom.define.agent import NAME_PATTERN, Agent
from threadloom.define.mcp import MCPServer
from threadloom.define.output import NAME_PATTERN as OUTPUT_NAME_PATTERN
from threadloom.define.output import OutputType, compiled_output
from threadloom.define.schema import model_schema
from threadloom.define.tool import tool_definition_of
from threadloom.errors import DefinitionError

Problem = tuple[str, str]
#: ``name -> (found, value)``: how rendering looks up a ``{{name}}`` variable.
Lookup = Callable[[str], tuple[bool, Any]]

TOOL_CHOICES: Final = ("auto", "none", "required")
REASONING_EFFORTS: Final = ("low", "medium", "high")
INIT_PROPERTIES: Final = (
    "init_user_message_property",
    "init_attachments_property",
    "init_agent_name_property",
)
VARIABLE_PATTERN: Final = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
VARIABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Definition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Definition):
    """A literal piece of system text."""

    type: Literal["text"] = "text"
    content: str


class IncludePart(_Definition):
    """The rendered system text of another prompt (§4.4.2)."""

    type: Literal["include"] = "include"
    prompt: str


SystemPart = Annotated[TextPart | IncludePart, Field(discriminator="type")]


class Reasoning(_Definition):
    """Reasoning options of a prompt (§4.4.4); ranges are checked by V15."""

    effort: str | None = None
    max_tokens: int | None = None
    exclude: bool = False
    include: bool = True

    @property
    def requested(self) -> bool:
        """Reasoning is requested from the provider iff ``effort`` or ``max_tokens`` is set."""
        return self.effort is not None or self.max_tokens is not None


class Subprompt(_Definition):
    """A prompt offered as a tool, with the options of its result (§4.17)."""

    name: str
    include_text_response: bool = True
    include_tool_calls: bool = True
    include_errors: bool = True
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None

    def __init__(self, name: Any = None, /, **data: Any) -> None:
        """``Subprompt("summary")`` or ``Subprompt(name="summary")``."""
        if name is not None:
            data["name"] = name
        super().__init__(**data)


class Immediate(_Definition):
    """What an immediate subagent spawn sends (spec 06 §6.9); all None = ``immediate=True``."""

    message: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None


class Subagent(_Definition):
    """A child agent offered to a prompt: one subagent relationship (spec 06 §6.2)."""

    agent: str
    relationship: str | None = None
    description: str | None = None
    blocking: bool = False
    resumable: bool = True
    parent_communication: Literal["implicit", "explicit"] = "implicit"
    max_instances: int | None = None
    immediate: bool | Immediate = False
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None
    init_agent_name_property: str | None = None

    def __init__(self, agent: Any = None, /, **data: Any) -> None:
        """``Subagent("researcher", ...)`` or ``Subagent(agent="researcher", ...)``."""
        if agent is not None:
            data["agent"] = agent
        super().__init__(**data)

    @property
    def relationship_name(self) -> str:
        """The tool-facing name and registry identity: ``relationship``, else the agent name."""
        return self.relationship if self.relationship is not None else self.agent

    @property
    def immediate_spawn(self) -> Immediate | None:
        """The spawn to perform at the owning side's turn start, or ``None`` (spec 06 §6.9)."""
        if isinstance(self.immediate, Immediate):
            return self.immediate
        return Immediate() if self.immediate else None

    def init_properties(self) -> list[tuple[str, str]]:
        """``(option, property)`` for each ``init_*_property`` that is set."""
        found = [(option, getattr(self, option)) for option in INIT_PROPERTIES]
        return [(option, value) for option, value in found if value is not None]


ToolEntry = str | Subprompt | Subagent


def entry_name(entry: ToolEntry) -> str:
    """The name an entry of ``Prompt.tools`` refers to or is offered under (§4.4.3)."""
    if isinstance(entry, Subprompt):
        return entry.name
    if isinstance(entry, Subagent):
        return entry.relationship_name
    return entry


def given_name(entry: object) -> str | None:
    """The name of a definition given as an entry of ``Prompt.tools`` itself — a ``@tool``
    function, a prompt, an agent, an MCP server — else ``None`` (a name, ``Subprompt``,
    ``Subagent`` or a value the field's type check reports)."""
    if isinstance(entry, str | Subprompt | Subagent):
        return None
    if isinstance(entry, Prompt | Agent | MCPServer):
        return entry.name
    definition = tool_definition_of(entry)
    return definition.name if definition is not None else None


class Prompt(_Definition):
    """What a side says and can do: model, system text, tools and request options (§4.4).

    An entry of ``tools`` is a name, a ``Subprompt``, a ``Subagent``, or the definition
    itself — the ``@tool`` function, a ``Prompt``, an ``Agent``, an ``MCPServer`` — which
    stands for its name; ``Definitions.add`` of the prompt adds those definitions too."""

    _given: tuple[Any, ...] = PrivateAttr(default=())

    def __init__(self, **data: Any) -> None:
        tools = data.get("tools")
        given: list[Any] = []
        if isinstance(tools, list | tuple):
            entries: list[Any] = []
            for entry in tools:
                name = given_name(entry)
                entries.append(entry if name is None else name)
                if name is not None:
                    given.append(entry)
            data["tools"] = tuple(entries)
        super().__init__(**data)
        self._given = tuple(given)

    @property
    def given_definitions(self) -> tuple[Any, ...]:
        """The definitions ``tools`` was given as objects (not names), in order."""
        return self._given

    name: str
    model: str
    system: str | tuple[SystemPart, ...] = ""
    tool_description: str = ""
    tools: tuple[ToolEntry, ...] = ()
    include_chat: bool = True
    include_past_tools: bool = True
    parallel_tool_calls: bool | None = None
    tool_choice: str | dict[str, Any] = "auto"
    required_schema: type[BaseModel] | dict[str, Any] | None = None
    reasoning: Reasoning | None = None
    hooks: tuple[str, ...] = ()
    recent_image_threshold: int = 10
    provider_options: dict[str, Any] = Field(default_factory=dict)
    output_type: type[BaseModel] | dict[str, Any] | None = None
    """The type of the prompt's final answer (spec 24): a pydantic model class or a JSON
    schema dict. Sent as the provider's native structured output, checked, retried."""
    output_retries: int = 2
    """How many times an answer that does not match ``output_type`` is sent back with the
    problem before the run fails (spec 24 §24.3)."""
    output_name: str | None = None
    """The name providers get for the output format; default: the model class's name or
    the schema's ``title``, else ``output``."""
    output_strict: bool = False
    """Ask for the provider's strict schema mode (OpenAI ``strict``), which accepts only a
    subset of JSON Schema (every property required, closed objects) (spec 24 §24.2)."""
    variables: dict[str, str] = Field(default_factory=dict)
    """The ``{{name}}`` variables the system text needs from the thread's ``arguments``,
    each with a description for whoever starts a thread: a thread of an agent whose prompt
    declares one is refused without it (§4.4.2)."""

    @field_validator("variables")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not VARIABLE_NAME.fullmatch(name):
                raise ValueError(f"variable name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
        return value

    @property
    def output(self) -> OutputType | None:
        """The compiled ``output_type`` (built on first use and kept), ``None`` when the
        prompt declares none. Raises what the schema's check raises for a broken schema
        (``Definitions.validate()`` reports it as V24 first)."""
        if self.output_type is None:
            return None
        return compiled_output(self.output_type, self.output_name)

    def parse_output(self, message: Any) -> Any:
        """The parsed output a message of this prompt carries (``message.output``) as the
        declared type gives it — a model instance for a model class —, ``None`` when it
        carries none (spec 24 §24.5)."""
        output = self.output
        value = getattr(message, "output", None)
        if output is None or value is None:
            return None
        return output.parse(value)

    @property
    def offered_description(self) -> str:
        """The description when offered as a sub-prompt tool (§4.4.1)."""
        return self.tool_description or f"Run the {self.name} prompt"

    @property
    def includes(self) -> list[str]:
        """Names of the prompts this prompt's system text includes, in order."""
        if isinstance(self.system, str):
            return []
        return [part.prompt for part in self.system if isinstance(part, IncludePart)]

    @property
    def tool_choice_name(self) -> str | None:
        """The tool named by a ``{"name": ...}`` choice, else ``None``."""
        if isinstance(self.tool_choice, dict):
            name = self.tool_choice.get("name")
            return name if isinstance(name, str) else None
        return None

    def arguments_schema(self) -> dict[str, Any] | None:
        """``required_schema`` as JSON schema: a model class post-processed (§4.5.2), a dict
        as given (copied), ``None`` when unset."""
        schema = self.required_schema
        if schema is None:
            return None
        if isinstance(schema, dict):
            return copy.deepcopy(schema)
        return model_schema(schema)

    def safe_arguments_schema(self) -> dict[str, Any] | None:
        """``arguments_schema()``, or ``None`` when it is unset or does not describe an object
        (V14 reports that case)."""
        try:
            schema = self.arguments_schema()
        except Exception:  # a model class pydantic cannot render
            return None
        return schema if schema is not None and schema.get("type") == "object" else None

    def self_problems(self) -> list[Problem]:
        """Checks that need no other definition: V1, V14, V15, V16 (shape), ranges."""
        where = f'Prompt "{self.name}"'
        problems: list[Problem] = []
        if not NAME_PATTERN.fullmatch(self.name):
            problems.append(("V1", f'Prompt name "{self.name}" is invalid'))
        if self.safe_arguments_schema() is None and self.required_schema is not None:
            problems.append(("V14", f"{where}: required_schema must describe an object"))
        reasoning = self.reasoning
        if reasoning is not None:
            if reasoning.effort is not None and reasoning.effort not in REASONING_EFFORTS:
                problems.append(("V15", f"{where}: invalid reasoning option effort"))
            if reasoning.max_tokens is not None and reasoning.max_tokens < 1:
                problems.append(("V15", f"{where}: invalid reasoning option max_tokens"))
        choice = self.tool_choice
        if isinstance(choice, str):
            valid_choice = choice in TOOL_CHOICES
        else:
            valid_choice = set(choice) == {"name"} and self.tool_choice_name is not None
        if not valid_choice:
            problems.append(("V16", f"{where}: invalid tool_choice"))
        if self.recent_image_threshold < 0:
            problems.append(("V15", f"{where}: recent_image_threshold must be >= 0"))
        problems.extend(self._output_problems(where))
        return problems

    def _output_problems(self, where: str) -> list[Problem]:
        """V24 (spec 24 §24.1): the output type renders as a valid JSON schema, the retries
        are >= 0, the name is one providers accept."""
        problems: list[Problem] = []
        if self.output_retries < 0:
            problems.append(("V24", f"{where}: output_retries must be >= 0"))
        if self.output_name is not None and not OUTPUT_NAME_PATTERN.fullmatch(self.output_name):
            problems.append(("V24", f"{where}: output_name must match [A-Za-z0-9_-]{{1,64}}"))
        if self.output_type is not None:
            try:
                self.output  # noqa: B018 - compiles the schema, which may refuse it
            except Exception as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                problems.append(("V24", f"{where}: output_type is not a valid schema: {text}"))
        return problems


# --- system text (§4.4.2) -----------------------------------------------------------------


def include_problems(prompts: Mapping[str, Prompt]) -> list[tuple[str, Problem]]:
    """V13 for every prompt: ``(prompt name, problem)`` for missing includes and cycles.

    Each cycle is reported once, at the prompt where the depth-first walk (in registration
    order) first enters it: ``Prompt "a": include cycle a -> b -> a``.
    """
    found: list[tuple[str, Problem]] = []
    for prompt in prompts.values():
        for target in dict.fromkeys(prompt.includes):
            if target not in prompts:
                message = f'Prompt "{prompt.name}": included prompt "{target}" is not defined'
                found.append((prompt.name, ("V13", message)))
    done: set[str] = set()
    for start in prompts:
        if start in done:
            continue
        stack: list[tuple[str, list[str]]] = [(start, list(dict.fromkeys(prompts[start].includes)))]
        on_path = [start]
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                on_path.pop()
                done.add(node)
                continue
            target = pending.pop(0)
            if target not in prompts or target in done:
                continue
            if target in on_path:
                cycle = [*on_path[on_path.index(target) :], target]
                message = f'Prompt "{target}": include cycle {" -> ".join(cycle)}'
                found.append((target, ("V13", message)))
                continue
            on_path.append(target)
            stack.append((target, list(dict.fromkeys(prompts[target].includes))))
    return found


def system_text(prompt: Prompt, prompts: Callable[[str], Prompt | None]) -> str:
    """The prompt's system parts concatenated, includes expanded, variables not yet replaced."""
    return _expand(prompt, (prompt.name,), prompts)


def _expand(current: Prompt, path: tuple[str, ...], prompts: Callable[[str], Prompt | None]) -> str:
    # a module function, not a closure calling itself: that would be a reference cycle
    # left to the garbage collector at every model request
    if isinstance(current.system, str):
        return current.system
    pieces: list[str] = []
    for part in current.system:
        if isinstance(part, TextPart):
            pieces.append(part.content)
            continue
        if part.prompt in path:
            cycle = " -> ".join((*path[path.index(part.prompt) :], part.prompt))
            raise DefinitionError(f'Prompt "{part.prompt}": include cycle {cycle}')
        included = prompts(part.prompt)
        if included is None:
            raise DefinitionError(
                f'Prompt "{current.name}": included prompt "{part.prompt}" is not defined'
            )
        pieces.append(_expand(included, (*path, part.prompt), prompts))
    return "".join(pieces)


def variable_lookup(
    arguments: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None
) -> Lookup:
    """Look a variable up in the thread's ``arguments`` first, then in the run's ``context``."""

    def lookup(name: str) -> tuple[bool, Any]:
        for source in (arguments, context):
            if source is not None and name in source:
                return True, source[name]
        return False, None

    return lookup


def format_variable(value: Any) -> str:
    """Strings verbatim; anything else as compact JSON, non-ASCII kept (§4.4.2)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def substitute_variables(text: str, lookup: Lookup) -> str:
    """Replace every ``{{name}}`` found by ``lookup``; unknown names stay as written."""
    if "{{" not in text:  # the common system prompt: no variable to look for
        return text

    def replace(match: re.Match[str]) -> str:
        found, value = lookup(match.group(1))
        return format_variable(value) if found else match.group(0)

    return VARIABLE_PATTERN.sub(replace, text)
