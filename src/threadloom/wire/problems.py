"""A request body's problems in the spec's words (spec 08 §8.1.3): how a model refuses a
value, and the one mapper from pydantic's ``ValidationError`` to the 400's details.

A field of a request model declares its shape with its type and constraints (what
``/openapi.json`` says) and is checked by ``check(rule)``: the spec's own rule, which
refuses with the spec's exact text (``refuse``), in place of pydantic's checks and
messages. ``problems_of`` turns the refusals of one validation into ``Problem``s in field
order; the server answers the first one's ``message`` with every problem as ``details``.
A rule that checks across the items or keys of its value reports each problem it finds
(``Refusals``), as one validation error of several refusals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

REFUSED = "threadloom_refused"
"""The error type of a refusal with the spec's text."""


@dataclass(frozen=True)
class Problem:
    field: str
    """Where: ``content``, ``metadata.queued``, ``attachments[0].name``, ``body``."""
    problem: str
    """What, after the field's name: ``must be a boolean``."""
    message: str
    """The sentence of the 400 when this is the first problem (``error``)."""


def refuse(
    problem: str, message: str | None = None, *, at: str | None = None, key: str | None = None
) -> PydanticCustomError:
    """A value's refusal: ``problem`` follows the field's name in the details; ``message``
    is the answer's sentence (default ``"<field> <problem>"``); ``at`` names a part below
    the field (``metadata`` → ``metadata.queued``), or the field of a whole-model rule;
    ``key`` an object's key below that, named as it is (``env_patch.0``, not ``[0]``)."""
    # the text is the context's last value, so braces in it (a caller's id) stay as written
    context = {"message": message, "at": at, "key": key, "problem": problem}
    return PydanticCustomError(REFUSED, "{problem}", context)


class Refusals:
    """The problems one rule finds in its value, each where it is (``loc`` below the
    field: ``(0, "content")`` → ``initial_messages[0].content``), reported together."""

    def __init__(self) -> None:
        self.items: list[tuple[tuple[int | str, ...], PydanticCustomError]] = []

    def add(self, refusal: PydanticCustomError, *loc: int | str) -> None:
        self.items.append((loc, refusal))

    def refuse(
        self, problem: str, message: str | None = None, *loc: int | str, key: str | None = None
    ) -> None:
        """``refuse(problem, message, key=key)`` at ``loc``."""
        self.add(refuse(problem, message, key=key), *loc)

    def extend(self, error: ValidationError, *loc: int | str) -> None:
        """Every problem of a validation of a part of the value (at ``loc``), in its words."""
        for item in error.errors(include_url=False):
            ctx = item.get("ctx") or {}
            if item["type"] == REFUSED:
                refusal = refuse(item["msg"], ctx.get("message"), at=ctx.get("at"))
            else:
                refusal = refuse(_PLAIN.get(item["type"], item["msg"]))
            self.add(refusal, *loc, *item["loc"])

    def __len__(self) -> int:
        return len(self.items)

    def raise_if_any(self, value: Any) -> None:
        if self.items:
            raise ValidationError.from_exception_data(
                "refused",
                [{"type": refusal, "loc": loc, "input": value} for loc, refusal in self.items],
            )


def check(rule: Callable[[Any], Any]) -> WrapValidator:
    """The field is checked by ``rule`` (which returns the value, or raises ``refuse``)
    instead of by its declared type and constraints, which describe it in the schema."""

    def validate(value: Any, _handler: ValidatorFunctionWrapHandler) -> Any:
        return rule(value)

    return WrapValidator(validate)


def check_then(rule: Callable[[Any], Any]) -> WrapValidator:
    """``rule`` first, then the declared type's own validation of what it returns (a list
    of nested models: the rule checks the list, each item's model checks the item)."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        checked = rule(value)
        return None if checked is None else handler(checked)

    return WrapValidator(validate)


# -- rules many bodies share ----------------------------------------------------------------


def boolean_value(value: Any) -> bool:
    if not isinstance(value, bool):
        raise refuse("must be a boolean")
    return value


def integer_from(low: int, high: int) -> Callable[[Any], int | None]:
    """An integer from ``low`` to ``high`` or null; ``3.0`` is the integer 3, as in JSON
    Schema; ``true`` is not an integer."""

    def rule(value: Any) -> int | None:
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise refuse(f"must be an integer from {low} to {high}")
        return value

    return rule


# -- the mapper ------------------------------------------------------------------------------


def field_name(loc: Sequence[int | str], prefix: str = "") -> str:
    """``("attachments", 0, "name")`` → ``attachments[0].name``; below ``prefix`` (a field
    already rendered) when one is given."""
    out = prefix
    for part in loc:
        text = str(part)
        if isinstance(part, int) or text.isdigit():
            out += f"[{text}]"
        else:
            out += f".{text}" if out else text
    return out


_PLAIN = {
    "missing": "is required",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
}
"""pydantic's own errors, for the few a rule leaves to the declared type."""


def _problem(kind: str, loc: Sequence[int | str], text: str, ctx: Any, prefix: str) -> Problem:
    refused = kind == REFUSED
    at = (ctx or {}).get("at") if refused else None
    key = (ctx or {}).get("key") if refused else None
    field = field_name([*loc, *([at] if at else [])], prefix) or "body"
    if key is not None:
        field += f".{key}"
    problem = text if refused else _PLAIN.get(kind, text)
    message = ((ctx or {}).get("message") if refused else None) or f"{field} {problem}"
    return Problem(field, problem, message)


def problems_of(error: ValidationError, prefix: str = "") -> list[Problem]:
    """Every refusal of one validation, in the order the fields are declared; fields
    named below ``prefix`` when the value validated was one part of a body."""
    return [
        _problem(item["type"], item["loc"], item["msg"], item.get("ctx"), prefix)
        for item in error.errors(include_url=False)
    ]
