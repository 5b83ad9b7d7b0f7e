"""Argument schemas of tools and prompts (spec 04 §4.5.2), derived with pydantic.

A tool's non-state parameters become a generated pydantic model (or the single
``BaseModel`` parameter is used as is); its JSON schema is post-processed: no top-level
``title``, and ``additionalProperties: false`` on every object schema that does not say
otherwise. Failures are appended to a ``problems`` list (reported as V21), never raised.
"""

from __future__ import annotations

import copy
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo


def empty_object_schema() -> dict[str, Any]:
    """The schema of a tool without parameters (§4.5.2): a fresh dict each call."""
    return {"type": "object", "properties": {}, "additionalProperties": False}


_SCHEMA_MAPS: Final = (
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
)
_SCHEMA_LISTS: Final = ("anyOf", "allOf", "oneOf", "prefixItems", "items")
_SCHEMA_ONE: Final = (
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
)


def _is_object_schema(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _close(node: Any) -> None:
    """In place: ``additionalProperties: false`` on every object schema lacking the key."""
    if not isinstance(node, dict):
        return
    for key in _SCHEMA_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            for child in children.values():
                _close(child)
    for key in _SCHEMA_LISTS:
        children = node.get(key)
        if isinstance(children, list):
            for child in children:
                _close(child)
    for key in _SCHEMA_ONE:
        _close(node.get(key))
    if _is_object_schema(node) and "additionalProperties" not in node:
        node["additionalProperties"] = False


def close_object_schemas(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` where every object schema says ``additionalProperties`` (§4.5.2).

    Only schema positions are visited (``properties``, ``items``, ``anyOf``, ``$defs`` …),
    never values such as ``default`` or ``enum``; an explicit ``additionalProperties`` is kept.
    """
    result = copy.deepcopy(dict(schema))
    _close(result)
    return result


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A pydantic model's JSON schema as offered to models: no top-level title, closed objects."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return close_object_schemas(schema)


def format_validation_error(exc: ValidationError) -> str:
    """``[<loc>] <msg>`` per pydantic error joined by ``; `` (§4.14.3 step 2)."""
    issues = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"]) or "root"
        issues.append(f"[{loc}] {error['msg']}")
    return "; ".join(issues)


def resolve_annotation(
    fn: Callable[..., Any], name: str, raw: Any, localns: Mapping[str, Any]
) -> Any:
    """Evaluate one (possibly string) annotation in the function's module and defining scope."""
    target = inspect.unwrap(fn)
    while isinstance(target, functools.partial):
        target = target.func
    globalns = getattr(target, "__globals__", None) or {}
    shim = types.SimpleNamespace(__annotations__={name: raw})
    return typing.get_type_hints(
        shim, globalns=globalns, localns=dict(localns), include_extras=True
    )[name]


def _has_description(annotation: Any) -> bool:
    """Whether ``annotation`` is ``Annotated[…]`` with a ``Field`` that has a description."""
    if get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(extra, FieldInfo) and extra.description for extra in get_args(annotation)[1:]
    )


def derive_arguments(
    fn: Callable[..., Any],
    tool_name: str,
    parameters: list[inspect.Parameter],
    localns: Mapping[str, Any],
    problems: list[str],
    documented: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Arguments model, field map and JSON schema for the non-state parameters (§4.5.2);
    ``documented`` describes parameters whose annotation has no description of its own."""
    known_problems = len(problems)
    resolved: list[tuple[inspect.Parameter, Any]] = []
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            star = "*" if parameter.kind == parameter.VAR_POSITIONAL else "**"
            problems.append(
                f'parameter "{star}{parameter.name}" is not supported (no *args/**kwargs)'
            )
        elif parameter.annotation is parameter.empty:
            problems.append(f'parameter "{parameter.name}" has no type annotation')
        else:
            try:
                annotation = resolve_annotation(fn, parameter.name, parameter.annotation, localns)
            except Exception as exc:
                problems.append(
                    f'cannot resolve the annotation of parameter "{parameter.name}": '
                    f"{type(exc).__name__}: {exc}"
                )
                continue
            resolved.append((parameter, annotation))
    if len(problems) > known_problems:
        return {}

    positional_only = inspect.Parameter.POSITIONAL_ONLY
    if len(resolved) == 1:
        parameter, annotation = resolved[0]
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            try:
                schema = model_schema(annotation)
            except Exception as exc:
                problems.append(f"cannot build the argument schema: {type(exc).__name__}: {exc}")
                return {}
            field = (parameter.name, parameter.name, parameter.kind == positional_only)
            return {
                "arguments_model": annotation,
                "fields": (field,),
                "model_parameter": True,
                "parameters": schema,
            }

    definitions: dict[str, Any] = {}
    fields: list[tuple[str, str, bool]] = []
    for index, (parameter, annotation) in enumerate(resolved):
        field_name = f"p{index}"  # aliases carry the real names: any identifier is allowed
        described = (documented or {}).get(parameter.name)
        if described is not None and _has_description(annotation):
            described = None  # Annotated[..., Field(description=...)] wins
        default = ... if parameter.default is parameter.empty else parameter.default
        if described is None:  # no description=None: it would hide an Annotated one
            info = Field(default, alias=parameter.name)
        else:
            info = Field(default, alias=parameter.name, description=described)
        definitions[field_name] = (annotation, info)
        fields.append((field_name, parameter.name, parameter.kind == positional_only))
    try:
        model = create_model(
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **definitions
        )
        schema = model_schema(model) if definitions else empty_object_schema()
    except Exception as exc:
        problems.append(f"cannot build the argument schema: {type(exc).__name__}: {exc}")
        return {}
    return {"arguments_model": model, "fields": tuple(fields), "parameters": schema}
