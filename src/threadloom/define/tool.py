"""The ``@tool`` decorator, tool definitions and tool results (spec 04 §4.5).

A tool is a plain function. ``@tool`` derives its JSON argument schema with pydantic
(§4.5.2) and attaches a :class:`ToolDefinition` as ``fn.tool_definition``; the function
itself is returned, so it stays directly callable in tests. Problems that make a schema
impossible (missing annotations, ``*args``, no description) are recorded on the definition
and reported by ``Definitions.validate()`` as V21, so that discovery can list every error of
a project at once. This module must not import the thread, store or engine packages.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from threadloom.define import docstrings
from threadloom.define.agent import NAME_PATTERN
from threadloom.define.schema import (
    derive_arguments,
    empty_object_schema,
    format_validation_error,
)
from threadloom.errors import DefinitionError, ThreadloomError
from threadloom.records import AttachmentRef

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
Problem = tuple[str, str]


ApprovalRule = Callable[[dict[str, Any], Any], "bool | Awaitable[bool]"]
"""Decides per call whether a person must approve it: ``(arguments, state)`` (``state``
the call's ``ThreadState``: its thread, user and properties)."""


class WorkerThreads(Protocol):
    """Worker threads that run a plain ``def`` tool (the engine's ``ToolThreads``,
    ``engine/step/threads.py``)."""

    def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]: ...


# --- results (§4.5.3, §4.5.4) -------------------------------------------------------------


class Attachment(BaseModel):
    """A file a tool returns; the engine writes it to the thread's files (§4.5.4)."""

    model_config = ConfigDict(extra="forbid")

    data: bytes
    name: str
    mime_type: str
    width: int | None = Field(default=None, gt=0)
    height: int | None = Field(default=None, gt=0)
    description: str | None = None


class ToolResult(BaseModel):
    """What a tool call produced, for the model and for storage (§4.5.3)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["success", "error"] = "success"
    result: str | None = None
    error: str | None = None
    attachments: list[AttachmentRef | Attachment] = Field(default_factory=list)


class ToolArgumentsError(ThreadloomError, ValueError):
    """The call's arguments do not match the tool's schema (§4.14.3 step 2)."""


def _not_serialisable(value: object) -> ToolResult:
    text = f"Tool returned a value that is not JSON-serialisable: {type(value).__name__}"
    return ToolResult(status="error", error=text)


def normalize_tool_result(value: object) -> ToolResult:
    """Turn whatever a tool returned into a ``ToolResult`` (§4.5.3 table)."""
    if isinstance(value, ToolResult):
        if value.status == "error" and not value.error and value.result:
            return value.model_copy(update={"error": value.result})
        return value
    if value is None:
        return ToolResult()
    if isinstance(value, str):
        return ToolResult(result=value)
    if isinstance(value, BaseModel):
        try:
            return ToolResult(result=value.model_dump_json(indent=2))
        except Exception:  # a field pydantic cannot serialise
            return _not_serialisable(value)
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return _not_serialisable(value)
    return ToolResult(result=text)


def error_result(exc: BaseException) -> ToolResult:
    """The result of a tool that raised: its text, or the class name when empty (§4.5.3)."""
    return ToolResult(status="error", error=str(exc) or type(exc).__name__)


# --- the definition -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ToolDefinition:
    """A tool as the engine sees it: name, description, schema, options and how to call it.

    ``arguments_model`` validates call arguments; ``fields`` maps each of its fields to the
    function parameter it feeds and whether that parameter is positional-only. ``problems``
    holds the reasons the schema could not be derived (V21); such a tool cannot be invoked.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = None
    progress_argument: str | None = None
    takes_state: bool = False
    is_async: bool = False
    arguments_model: type[BaseModel] | None = None
    fields: tuple[tuple[str, str, bool], ...] = ()
    model_parameter: bool = False
    problems: tuple[str, ...] = ()
    requires_approval: bool | ApprovalRule = False
    """A person approves each call before it runs (spec 14 §14.1): ``True``, or a function
    of the call ``(arguments, state) -> bool`` (may be async) deciding per call; a
    function that raises is read as ``True``."""
    idempotent: bool = False
    """Running the call twice has the effect of running it once: a resumed run may run a
    call again whose start was recorded without a result (spec 14 §14.6)."""

    def self_problems(self) -> list[Problem]:
        """V1 (name syntax) and V21 (schema and option problems) of this tool."""
        found: list[Problem] = []
        if not NAME_PATTERN.fullmatch(self.name):
            found.append(("V1", f'Tool name "{self.name}" is invalid'))
        found.extend(("V21", f'Tool "{self.name}": {reason}') for reason in self.problems)
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            found.append(("V21", f'Tool "{self.name}": timeout must be a number > 0'))
        rule = self.requires_approval
        if not isinstance(rule, bool) and not callable(rule):
            found.append(
                ("V21", f'Tool "{self.name}": requires_approval must be a bool or a function')
            )
        if (
            self.progress_argument is not None
            and self.progress_argument not in self.parameter_names
        ):
            reason = f'progress_argument "{self.progress_argument}" is not a parameter'
            found.append(("V21", f'Tool "{self.name}": {reason}'))
        return found

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The names of the schema's top-level properties."""
        properties = self.parameters.get("properties")
        return tuple(properties) if isinstance(properties, dict) else ()

    def bind_arguments(self, arguments: object) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``arguments`` against the schema; the positional and keyword arguments."""
        if self.problems or self.arguments_model is None:
            lines = [f'Tool "{self.name}": {reason}' for reason in self.problems]
            raise DefinitionError(problems=lines or [f'Tool "{self.name}" has no argument model'])
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError("Tool arguments must be a JSON object")
        try:
            validated = self.arguments_model.model_validate(
                arguments if type(arguments) is dict else dict(arguments)
            )
        except ValidationError as exc:
            raise ToolArgumentsError(
                f"Tool argument validation failed: {format_validation_error(exc)}"
            ) from None
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field, parameter, positional in self.fields:
            value = validated if self.model_parameter else getattr(validated, field)
            if positional:
                args.append(value)
            else:
                kwargs[parameter] = value
        return args, kwargs

    async def invoke(
        self, state: Any, arguments: Mapping[str, Any], threads: WorkerThreads | None = None
    ) -> ToolResult:
        """Validate, call the function and normalise its return value.

        ``state`` is the in-flow ``ThreadState`` (typed ``Any``: define/ sits below thread/),
        passed as the first argument when the tool takes it.

        ``async def`` tools run on the event loop, plain ones in a worker thread: one of
        ``threads`` (the runtime's, ``engine/step/threads.py``), else ``asyncio.to_thread``'s.
        Exceptions raised by the function propagate: the engine turns them into error results.
        """
        args, kwargs = self.bind_arguments(arguments)
        if self.takes_state:
            args.insert(0, state)
        if self.is_async:
            value = await self.fn(*args, **kwargs)
        else:
            if threads is not None:
                value = await threads.run(self.fn, *args, **kwargs)
            else:
                value = await asyncio.to_thread(self.fn, *args, **kwargs)
            if type(value) is not str and inspect.isawaitable(value):
                value = await value
        return normalize_tool_result(value)


def tool_definition_of(obj: object) -> ToolDefinition | None:
    """The definition ``@tool`` attached to ``obj`` (or ``obj`` itself), else ``None``."""
    if isinstance(obj, ToolDefinition):
        return obj
    definition = getattr(obj, "tool_definition", None)
    return definition if isinstance(definition, ToolDefinition) else None


# --- deriving a definition from a function ------------------------------------------------

_STATE_NAME = re.compile(r"\bThreadState\b")


def _is_state_parameter(parameter: inspect.Parameter) -> bool:
    """The first parameter receives the ThreadState when annotated so or named ``state``."""
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
        return False
    if parameter.name == "state":
        return True
    annotation = parameter.annotation
    if annotation is parameter.empty:
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None)
    return bool(_STATE_NAME.search(text if isinstance(text, str) else repr(annotation)))


def _description(fn: Callable[..., Any], description: str | None) -> tuple[str, dict[str, str]]:
    """The tool's description and its parameters' descriptions (§4.5.1): ``description``
    when given, else the docstring; a docstring with a parameter section (Google ``Args:``,
    NumPy ``Parameters``, reST ``:param x:``) gives the text before its sections as the
    tool's description and each documented parameter's text as that parameter's."""
    doc = getattr(fn, "__doc__", None)
    text = inspect.cleandoc(doc).strip() if isinstance(doc, str) else ""
    documented = docstrings.parameters(text)
    if description is not None and description.strip():
        return description.strip(), documented.descriptions
    if documented.descriptions:
        return documented.summary, documented.descriptions
    return text, {}


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an async __call__ on an object
    return inspect.iscoroutinefunction(call)


def build_tool_definition(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    progress_argument: str | None = None,
    localns: Mapping[str, Any] | None = None,
    requires_approval: bool | ApprovalRule = False,
    idempotent: bool = False,
) -> ToolDefinition:
    """Derive a ``ToolDefinition`` from ``fn`` (§4.5.1, §4.5.2) without raising for V21."""
    if not callable(fn):
        raise TypeError(f"@tool expects a function, not {fn!r}")
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if not isinstance(tool_name, str):
        raise TypeError("@tool: name must be a string")
    if description is not None and not isinstance(description, str):
        raise TypeError("@tool: description must be a string")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise TypeError("@tool: timeout must be a number of seconds or None")
    if progress_argument is not None and not isinstance(progress_argument, str):
        raise TypeError("@tool: progress_argument must be a string")

    problems: list[str] = []
    text, documented = _description(fn, description)
    if not text:
        problems.append("has no description (write a docstring or pass description=)")
    base = ToolDefinition(
        name=tool_name,
        description=text,
        parameters=empty_object_schema(),
        fn=fn,
        timeout=float(timeout) if timeout is not None else None,
        progress_argument=progress_argument,
        is_async=_is_async(fn),
        requires_approval=requires_approval,
        idempotent=bool(idempotent),
    )
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        problems.append(f"cannot read the signature: {exc}")
        return replace(base, problems=tuple(problems))
    takes_state = bool(parameters) and _is_state_parameter(parameters[0])
    if takes_state:
        parameters = parameters[1:]
    schema = derive_arguments(fn, tool_name, parameters, localns or {}, problems, documented)
    return replace(base, takes_state=takes_state, problems=tuple(problems), **schema)


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    progress_argument: str | None = None,
    requires_approval: bool | ApprovalRule = False,
    idempotent: bool = False,
) -> Callable[[F], F]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    progress_argument: str | None = None,
    requires_approval: bool | ApprovalRule = False,
    idempotent: bool = False,
) -> Any:
    """Mark a function as a tool, bare (``@tool``) or with options (``@tool(name=...)``).

    ``requires_approval``: a person approves each call before it runs (``True``, or a
    function ``(arguments, state) -> bool`` deciding per call, spec 14); ``idempotent``:
    a resumed run may run a call again whose start was recorded but whose result was lost.

    The function is returned unchanged, carrying its ``ToolDefinition`` as
    ``.tool_definition``. Annotations are resolved in the function's module and in the
    scope that applies the decorator.
    """
    caller = sys._getframe(1)
    localns = dict(caller.f_locals) if caller.f_locals is not caller.f_globals else {}

    def decorate(target: F) -> F:
        definition = build_tool_definition(
            target,
            name=name,
            description=description,
            timeout=timeout,
            progress_argument=progress_argument,
            localns=localns,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )
        try:
            target.tool_definition = definition  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            raise TypeError(f"@tool cannot decorate {target!r}: attributes cannot be set") from None
        return target

    if fn is None:
        return decorate
    if not callable(fn):
        raise TypeError(f"@tool expects a function, not {fn!r}; pass options as keywords")
    return decorate(fn)
