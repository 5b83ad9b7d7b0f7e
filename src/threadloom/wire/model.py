"""The two kinds of model of the HTTP API (spec 08 §8.1.1, §8.1.3), and its error body.

``Body`` is a JSON object a request sends: unknown keys are ignored (§8.1.1 rule 5).
``Answer`` is a JSON object the server answers: keys beyond those listed may be added
later (forward compatibility), so extra keys stay allowed. ``ErrorBody`` is every 4xx/5xx
answer. The route groups' modules (``threads``, ``messages`` …) build their models on these;
``routes.OPERATIONS`` names them per operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.json_schema import SkipJsonSchema

Absent = SkipJsonSchema[None]
"""``x: str | Absent = None``: ``x`` may be left out, but ``null`` is refused (a 400)."""


def _no_null_defaults(schema: dict[str, Any]) -> None:
    """A default of ``None`` means "may be absent", not a value to show."""
    for prop in schema.get("properties", {}).values():
        if prop.get("default", 0) is None:
            del prop["default"]


def examples(
    *values: dict[str, Any], extra: Callable[[dict[str, Any]], None] | None = None
) -> ConfigDict:
    """A request model's ``examples``: documentation, and the first requests the fuzzer
    sends; ``extra`` completes the model's schema further."""

    def complete(schema: dict[str, Any]) -> None:
        _no_null_defaults(schema)
        schema["examples"] = list(values)
        if extra is not None:
            extra(schema)

    return ConfigDict(json_schema_extra=complete)


class Body(BaseModel):
    """A JSON object of a request: unknown keys are ignored (spec 08 §8.1.1 rule 5). A
    required key that is absent is checked as ``null`` (its field's rule says what is
    wrong, in the spec's words, rather than "is required")."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra=_no_null_defaults, regex_engine="python-re"
    )

    one_problem: ClassVar[bool] = False
    """Answer only the first problem (a route whose spec checks one field at a time)."""

    @model_validator(mode="before")
    @classmethod
    def _absent_as_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            missing = [
                name
                for name, field in cls.model_fields.items()
                if field.is_required() and (field.alias or name) not in data
            ]
            if missing:
                return {**data, **dict.fromkeys(missing)}
        return data


def _open_object(schema: dict[str, Any]) -> None:
    """Extra keys are allowed, as JSON Schema's default says without stating it."""
    schema.pop("additionalProperties", None)


class Answer(BaseModel):
    """A documented answer: keys beyond those listed may be added later (forward
    compatibility, spec 08 §8.1.1 rule 5), so extra keys stay allowed, and a client reading
    one keeps them. Fields are filled by name or alias; the server answers ``to_wire()``."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", json_schema_extra=_open_object)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object answered: the keys the answer was built with (a key left out
        stays out), in the declared order, by alias."""
        return self.model_dump(by_alias=True, exclude_unset=True)


# -- errors (§8.1.3) -------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (spec 08 §8.1.3): a sentence, a stable code, the problems of a
    validation failure; a few answers add keys their section names (``terminated`` on 423,
    ``threadId`` on a failed delete, ``requestId`` on a 500)."""

    model_config = ConfigDict(title="Error")

    error: str
    code: str
    details: list[ErrorDetail] | None = None


ERROR_TEXTS: dict[int, str] = {
    400: "Invalid JSON or invalid request (`invalid_json`, `invalid_request` with `details`)",
    401: "No or invalid credentials",
    403: "Not allowed (thread of another user, admin or permission required, cross-origin)",
    404: "Not found",
    409: "State conflict",
    413: "Body too large",
    405: "Method not allowed: the path is another route's (`/api/threads/owners`)",
    415: "Content-Type must be application/json",
    423: "Thread is terminated",
    429: "Too many attempts; `Retry-After` says when to try again",
    500: "Server fault (`requestId` names it in the server log)",
    501: "The endpoint needs an optional package that is not installed",
    502: "The model failed to answer a request the route makes (`compaction_failed`)",
    503: "The store cannot be reached, or the node is draining",
}
