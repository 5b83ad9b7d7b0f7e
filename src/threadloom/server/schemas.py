"""Request bodies, query parameters and the error body of the HTTP API as ``/openapi.json``
declares them (spec 08 §8.1.3, §8.1.5, §8.11.2).

Routes read their JSON bodies and query strings themselves (to give the spec's exact error
texts, status 400, and report every problem at once), so what they accept is declared
here, for the description only; ``openapi.py`` puts it on each operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from threadloom.server.accounts import APP_ROLE, USERNAME
from threadloom.server.passwords import MIN_PASSWORD_LENGTH

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
    """A model's ``examples``: documentation, and the first requests the fuzzer sends;
    ``extra`` completes the model's schema further."""

    def complete(schema: dict[str, Any]) -> None:
        _no_null_defaults(schema)
        schema["examples"] = list(values)
        if extra is not None:
            extra(schema)

    return ConfigDict(json_schema_extra=complete)


class _Object(BaseModel):
    """A JSON object of a request: unknown keys are ignored (spec 08 §8.1.1 rule 5)."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_no_null_defaults)


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
    415: "Content-Type must be application/json",
    423: "Thread is terminated",
    429: "Too many attempts; `Retry-After` says when to try again",
    500: "Server fault (`requestId` names it in the server log)",
    501: "The endpoint needs an optional package that is not installed",
    503: "The store cannot be reached, or the node is draining",
}


# -- shared parts of bodies ------------------------------------------------------------------

Overlap = Literal["enqueue", "reject", "interrupt"]
Tags = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=50)]


class Upload(_Object):
    """An attachment sent inline (§8.2.5); stored as a thread file."""

    name: str
    mimeType: str
    data: str = Field(description="base64")
    width: int | None = None
    height: int | None = None
    thumbnail: str | None = None
    description: str | None = None


class InitialMessage(_Object):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    name: str | None = None
    tool_calls: list[Any] | str | None = None
    tool_call_id: str | Absent = None
    tool_status: Literal["success", "error"] | None = None
    silent: bool = False
    metadata: dict[str, Any] | None = None
    attachments: list[Upload] | None = None


# -- thread, message and control bodies (§8.3–§8.5) ------------------------------------------


def _arguments_or_data(schema: dict[str, Any]) -> None:
    """``arguments`` and ``data`` (its other name) are not both objects (§8.3.2)."""
    schema["not"] = {
        "required": ["arguments", "data"],
        "properties": {"arguments": {"type": "object"}, "data": {"type": "object"}},
    }


class CreateThread(_Object):
    model_config = examples(
        {"agent_id": "support", "tags": ["name:Demo"]},
        {"agent_id": "support", "initial_messages": [{"role": "user", "content": "Hello"}]},
        {"agent_id": "support", "arguments": {"order_id": "42"}, "overlap": "enqueue"},
        extra=_arguments_or_data,
    )

    agent_id: str
    user_id: str | None = None
    tags: Tags | None = None
    arguments: dict[str, Any] | None = None
    data: dict[str, Any] | None = Field(None, description="another name of `arguments`")
    initial_messages: list[InitialMessage] | None = None
    env: dict[str, str] | None = None
    env_types: dict[str, Literal["text", "secret"]] | None = None
    properties: dict[str, Any] | None = None
    overlap: Overlap | None = None


class PatchThread(_Object):
    model_config = examples({"tags": ["name:Renamed"]}, {"overlap": "enqueue"})

    tags: Tags | None = None
    agent_id: str | None = None
    env: dict[str, str] | None = None
    env_types: dict[str, Literal["text", "secret"]] | None = None
    env_patch: dict[str, str] | Absent = None
    env_type_patch: dict[str, Literal["text", "secret"]] | Absent = None
    env_delete: list[str] | Absent = None
    overlap: Overlap | None = None


class SendMessage(_Object):
    model_config = examples(
        {"content": "Hello"},
        {"content": "Hello once", "metadata": {"client_message_id": "example-1"}},
    )

    content: str | None = None
    role: Literal["user", "assistant", "system"] = "user"
    attachments: list[Upload] | None = None
    silent: bool = False
    metadata: dict[str, Any] | None = None


class PatchMessage(_Object):
    model_config = examples({"content": "Edited"}, {"metadata": {"label": "kept"}})

    content: str | Absent = None
    metadata: dict[str, Any] | Absent = None
    silent: bool | Absent = None


class ContinueThread(_Object):
    model_config = examples({"side": "a"}, {"side": "a", "ifUnanswered": True})

    side: Literal["a", "b"] | None = None
    ifUnanswered: bool = False


class Cascade(_Object):
    model_config = examples({"cascade": False})

    cascade: bool = False


# -- file bodies (§8.8) ----------------------------------------------------------------------


class FileData(_Object):
    """Write a file from base64 data."""

    model_config = examples({"data": "aGVsbG8K", "mimeType": "text/plain"})

    data: str = Field(description="base64")
    mimeType: str | None = None
    metadata: dict[str, Any] | None = None
    thumbnail: str | None = Field(None, description="base64")
    width: int | None = None
    height: int | None = None


class MakeDirectory(_Object):
    model_config = examples({"type": "directory"})

    type: Literal["directory"]


class MoveFile(_Object):
    model_config = examples({"action": "move", "destination": "/notes/moved.txt"})

    action: Literal["move"]
    destination: str


class RenameFile(_Object):
    model_config = examples({"action": "rename", "newName": "renamed.txt"})

    action: Literal["rename"]
    newName: str


# -- accounts (spec 10 §10.5) ----------------------------------------------------------------


class Login(_Object):
    username: str = Field(min_length=1)
    password: str = Field(min_length=1)


class TicketRequest(_Object):
    model_config = examples({"pathname": "/api/events"})

    pathname: str = Field(description="the normalized /api/* path the ticket opens")


class CreateApiKey(_Object):
    model_config = examples({"name": "ci", "expires_in_days": 30})

    name: str = Field(min_length=1, max_length=100)
    expires_in_days: int | None = Field(None, ge=1, le=3650)
    user_id: str | None = None


class PatchUser(_Object):
    model_config = examples({"display_name": "Example"}, {"role": "user"})

    password: str | None = Field(None, min_length=MIN_PASSWORD_LENGTH)
    role: Literal["admin", "user", "api"] | Absent = None
    permissions: list[Literal["logs"]] | None = None
    roles: (
        Annotated[list[Annotated[str, Field(pattern=APP_ROLE.pattern)]], Field(max_length=64)]
        | Absent
    ) = None
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None


class CreateUser(PatchUser):
    model_config = examples(
        {"username": "example", "password": "long enough secret", "role": "user"}
    )

    username: str = Field(pattern=USERNAME.pattern)


# -- protocols -------------------------------------------------------------------------------


class RunAgentInput(_Object):
    """AG-UI's RunAgentInput (docs/interop.md)."""

    model_config = examples(
        {
            "threadId": "5b0c3c0e-3f0e-4c4e-9d55-0c3e0f9a7b21",
            "runId": "run-1",
            "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
        }
    )

    threadId: str
    runId: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    context: list[dict[str, Any]] | None = None
    state: Any = None
    forwardedProps: Any = None


# -- query parameters (§8.1.5) ---------------------------------------------------------------


def _param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def integer(name: str, description: str) -> dict[str, Any]:
    """Decimal digits only, below 2^63 (§8.1.5 rule 1)."""
    return _param(name, {"type": "integer", "minimum": 0}, description)


def boolean(name: str, description: str) -> dict[str, Any]:
    """``true``/``false``/``1``/``0`` in any case (§8.1.5 rule 3)."""
    return _param(name, {"type": "boolean"}, description)


def choice(name: str, values: tuple[str, ...], description: str) -> dict[str, Any]:
    """One of ``values``, in any letter case (§8.1.5 rule 4)."""
    return _param(name, {"type": "string", "enum": list(values)}, description)


def text(name: str, description: str) -> dict[str, Any]:
    return _param(name, {"type": "string"}, description)


LIMIT = integer("limit", "Page size; values above 1000 read as 1000")
OFFSET = integer("offset", "Items to skip")
