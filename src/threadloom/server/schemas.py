"""Request bodies, query parameters and the error body of the HTTP API as ``/openapi.json``
declares them (spec 08 §8.1.3, §8.1.5, §8.11.2).

Routes read their JSON bodies and query strings themselves (to give the spec's exact error
texts, status 400, and report every problem at once), so what they accept is declared
here, for the description only; ``openapi.py`` puts it on each operation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from threadloom.server.auth.accounts import APP_ROLE, USERNAME
from threadloom.server.auth.passwords import MIN_PASSWORD_LENGTH
from threadloom.server.uploads import (
    BASE64_OR_EMPTY_PATTERN,
    BASE64_PATTERN,
    END,
    MIME_PATTERN,
    MIME_TYPE,
    WHITESPACE,
)

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

    model_config = ConfigDict(
        extra="allow", json_schema_extra=_no_null_defaults, regex_engine="python-re"
    )


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
#
# What a route refuses, the schema refuses too, where JSON Schema can say it: the server's
# own patterns (MIME types, base64), "not blank" as a pattern (a character that is not
# whitespace), "at least one of these fields" as ``anyOf`` of ``required``. What it cannot
# say is listed in spec 08 §8.11.3 rule 3 (and excused, precisely, by the schemathesis test).

NOT_BLANK = f"[^{WHITESPACE}]"
"""Holds a character that is not whitespace (a pattern is a search, not a full match)."""
FILE_NAME = f"^[^/\\\\\\x00]*[^/\\\\\\x00{WHITESPACE}][^/\\\\\\x00]*$"
"""Not blank, without ``/``, ``\\`` or NUL."""
UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}" + END
"""A canonical UUID (lowercase, hyphenated), as ids are."""

Overlap = Literal["enqueue", "reject", "interrupt"]
Tags = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(max_length=50)]
EnvKeys = {"propertyNames": {"pattern": NOT_BLANK}}
Env = Annotated[dict[str, str], Field(json_schema_extra=EnvKeys)]
"""Variables: names not blank (trimmed), text values."""
EnvTypes = Annotated[
    dict[str, Any],
    Field(description='`"text"` marks a variable as text; any other value as secret'),
]
EnvTypePatch = Annotated[
    dict[str, Any],
    Field(
        json_schema_extra=EnvKeys,
        description='`"text"` marks a variable as text, any other value as secret; each must'
        " exist after the patch",
    ),
]
RESERVED_METADATA = ("queued", "queue_status", "queue_source")


def _metadata(schema: dict[str, Any]) -> None:
    schema["not"] = {"anyOf": [{"required": [key]} for key in RESERVED_METADATA]}
    schema["properties"] = {
        "client_message_id": {
            "anyOf": [{"type": "string", "minLength": 1, "maxLength": 128}, {"type": "null"}]
        }
    }


Metadata = Annotated[
    dict[str, Any],
    Field(
        json_schema_extra=_metadata,
        description="At most 16 KiB as JSON; `queued`, `queue_status`, `queue_source` are reserved",
    ),
]


class Upload(_Object):
    """An attachment sent inline (§8.2.5); stored as a thread file."""

    name: str = Field(min_length=1, max_length=255, pattern=FILE_NAME)
    mimeType: str = Field(pattern=MIME_PATTERN)
    data: str = Field(pattern=BASE64_PATTERN, description="base64 of 1 byte to 20 MiB")
    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)
    thumbnail: str | None = Field(
        None, pattern=BASE64_OR_EMPTY_PATTERN, description="base64 of at most 1 MiB"
    )
    description: str | None = Field(None, max_length=2000)


Uploads = Annotated[list[Upload], Field(max_length=20)]


class InitialToolCallFunction(_Object):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(
        "{}", description="an object, or its JSON text (blank: `{}`)"
    )


class InitialToolCall(_Object):
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: InitialToolCallFunction
    extra_content: dict[str, Any] | None = None


NOT_ACCEPTED = (
    "id",
    "created_at",
    "status",
    "depth",
    "parent_id",
    "prompt",
    "reasoning_content",
    "reasoning_details",
    "log_id",
    "subagent_id",
)
"""Keys an initial message may not set (the store sets them)."""


def _initial_message(schema: dict[str, Any]) -> None:
    """§8.3.2's rules of one item: a user or system item says something; ``tool_calls``
    only on user and assistant items; a tool item names its call and has text,
    ``tool_status`` only there; ``content`` null only beside calls or attachments; none of
    the store's own keys."""
    said = {"properties": {"content": {"type": "string", "pattern": NOT_BLANK}}}
    attached = {"properties": {"attachments": {"type": "array", "minItems": 1}}}
    schema["not"] = {"anyOf": [{"required": [key]} for key in NOT_ACCEPTED]}
    schema["allOf"] = [
        {
            "if": {"properties": {"role": {"enum": ["user", "system"]}}},
            "then": {
                "anyOf": [
                    {"required": ["content"], **said},
                    {"required": ["attachments"], **attached},
                ]
            },
        },
        {
            "if": {"properties": {"role": {"enum": ["system", "tool"]}}},
            "then": {"properties": {"tool_calls": {"type": "null"}}},
        },
        {
            "if": {"properties": {"role": {"const": "tool"}}},
            "then": {
                "required": ["tool_call_id", "content"],
                "properties": {"tool_call_id": {"minLength": 1}, "content": {"type": "string"}},
            },
            "else": {"properties": {"tool_status": {"type": "null"}}},
        },
        {  # content may be null (or left out) only beside calls or attachments
            "anyOf": [
                {"required": ["content"], "properties": {"content": {"type": "string"}}},
                {
                    "required": ["tool_calls"],
                    "properties": {"tool_calls": {"type": ["array", "string"]}},
                },
                attached | {"required": ["attachments"]},
            ]
        },
    ]


class InitialMessage(_Object):
    model_config = examples({"role": "user", "content": "Hello"}, extra=_initial_message)

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    name: str | None = Field(None, max_length=255)
    tool_calls: Annotated[list[InitialToolCall], Field(min_length=1)] | str | None = Field(
        None, description="the calls, or their JSON text"
    )
    tool_call_id: str | Absent = Field(None, description="a call of an earlier assistant item")
    tool_status: Literal["success", "error"] | None = None
    silent: bool = False
    metadata: Metadata | None = None
    attachments: Uploads | None = None


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

    agent_id: str = Field(min_length=1)
    user_id: str | None = None
    tags: Tags | None = None
    arguments: dict[str, Any] | None = None
    data: dict[str, Any] | None = Field(None, description="another name of `arguments`")
    initial_messages: Annotated[list[InitialMessage], Field(max_length=1000)] | None = None
    env: Env | None = None
    tenvs: Env | None = Field(None, description="another name of `env`", deprecated=True)
    env_types: EnvTypes | None = None
    properties: dict[str, Any] | None = None
    overlap: Overlap | None = None


def _thread_patch(schema: dict[str, Any]) -> None:
    """At least one field that changes something (else 400 "No valid fields to update");
    ``env_types`` only with ``env``."""
    schema["anyOf"] = [
        {"required": ["tags"], "properties": {"tags": {"type": "array"}}},
        {"required": ["agent_id"], "properties": {"agent_id": {"type": "string"}}},
        {"required": ["env"]},
        {"required": ["tenvs"]},
        {"required": ["env_patch"], "properties": {"env_patch": {"minProperties": 1}}},
        {"required": ["env_type_patch"], "properties": {"env_type_patch": {"minProperties": 1}}},
        {"required": ["env_delete"], "properties": {"env_delete": {"minItems": 1}}},
        {"required": ["overlap"]},
    ]
    schema["allOf"] = [
        {
            "if": {"required": ["env_types"], "properties": {"env_types": {"type": "object"}}},
            "then": {"anyOf": [{"required": ["env"]}, {"required": ["tenvs"]}]},
        }
    ]


class PatchThread(_Object):
    model_config = examples({"tags": ["name:Renamed"]}, {"overlap": "enqueue"}, extra=_thread_patch)

    tags: Tags | None = None
    agent_id: str | None = Field(None, description="an agent with a human-backed side")
    env: Env | None = None
    tenvs: Env | None = Field(None, description="another name of `env`", deprecated=True)
    env_types: EnvTypes | None = Field(None, description="only together with `env`")
    env_patch: Env | Absent = None
    env_type_patch: EnvTypePatch | Absent = None
    env_delete: list[Annotated[str, Field(pattern=NOT_BLANK)]] | Absent = None
    overlap: Overlap | None = None


def _something_said(schema: dict[str, Any]) -> None:
    """Non-blank ``content`` or at least one attachment (§8.4.2)."""
    schema["anyOf"] = [
        {
            "required": ["content"],
            "properties": {"content": {"type": "string", "pattern": NOT_BLANK}},
        },
        {
            "required": ["attachments"],
            "properties": {"attachments": {"type": "array", "minItems": 1}},
        },
    ]


class SendMessage(_Object):
    model_config = examples(
        {"content": "Hello"},
        {"content": "Hello once", "metadata": {"client_message_id": "example-1"}},
        extra=_something_said,
    )

    content: str | None = None
    role: Literal["user", "assistant", "system"] = "user"
    attachments: Uploads | None = None
    silent: bool = False
    metadata: Metadata | None = None


def _some_field(*names: str) -> Callable[[dict[str, Any]], None]:
    def extra(schema: dict[str, Any]) -> None:
        schema["anyOf"] = [{"required": [name]} for name in names]

    return extra


class PatchMessage(_Object):
    model_config = examples(
        {"content": "Edited"},
        {"metadata": {"label": "kept"}},
        extra=_some_field("content", "metadata", "silent"),
    )

    content: str | Absent = None
    metadata: Metadata | Absent = None
    silent: bool | Absent = None


class ContinueThread(_Object):
    model_config = examples({"side": "a"}, {"side": "a", "ifUnanswered": True})

    side: Literal["a", "b"] | None = None
    ifUnanswered: bool = False


class Cascade(_Object):
    model_config = examples({"cascade": False})

    cascade: bool = False


# -- file bodies (§8.8) ----------------------------------------------------------------------


FILE_MIME = rf"^ *{MIME_TYPE} *(?:;[ -~]*)?{END}"
"""A file's MIME type: ``type/subtype``, parameters allowed, printable ASCII."""
_NAME_CHAR = r"[^/\x00-\x1f\x7f\\]"
SEGMENT = (
    rf"(?:[^/.\x00-\x1f\x7f\\]{_NAME_CHAR}{{0,254}}|\.[^/.\x00-\x1f\x7f\\]{_NAME_CHAR}{{0,253}}"
    rf"|\.\.{_NAME_CHAR}{{1,253}})"
)
"""One segment of a thread path (spec 07 §7.2): 1-255 characters, no control character,
``/`` or ``\\``, not ``.`` or ``..``."""
THREAD_PATH = rf"^/*(?:{SEGMENT}(?:/+{SEGMENT})*)?/*{END}"
"""A thread path (spec 07 §7.2): runs of ``/`` collapse, the whole at most 1,024
characters once normalised (a length JSON Schema cannot measure)."""
BELOW_ROOT = rf"^/*{SEGMENT}(?:/+{SEGMENT})*/*{END}"
"""A thread path other than the root."""


def _not_an_action(schema: dict[str, Any]) -> None:
    schema.setdefault("properties", {})["action"] = {"type": "null"}


class FileData(_Object):
    """Write a file from base64 data."""

    model_config = examples({"data": "aGVsbG8K", "mimeType": "text/plain"}, extra=_not_an_action)

    data: str = Field(pattern=BASE64_OR_EMPTY_PATTERN, description="base64")
    mimeType: str | None = Field(None, pattern=FILE_MIME)
    metadata: dict[str, Any] | None = None
    thumbnail: str | None = Field(None, pattern=BASE64_OR_EMPTY_PATTERN, description="base64")
    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)


class MakeDirectory(_Object):
    model_config = examples({"type": "directory"}, extra=_not_an_action)

    type: Literal["directory"]


class MoveFile(_Object):
    model_config = examples({"action": "move", "destination": "/notes/moved.txt"})

    action: Literal["move"]
    destination: str = Field(pattern=BELOW_ROOT)


class RenameFile(_Object):
    model_config = examples({"action": "rename", "newName": "renamed.txt"})

    action: Literal["rename"]
    newName: str = Field(pattern=f"^{SEGMENT}{END}")


# -- accounts (spec 10 §10.5) ----------------------------------------------------------------


class Login(_Object):
    username: str = Field(pattern=NOT_BLANK, description="trimmed")
    password: str = Field(min_length=1)


_SEGMENT = r"(?:[^/?#.][^/?#]*|\.[^/?#.][^/?#]*|\.\.[^/?#]+)"
API_PATH = rf"^/api(?:/{_SEGMENT})+$"
"""A normalized ``/api/*`` path: no empty, ``.`` or ``..`` segment, no ``?``, ``#`` or
trailing ``/`` (spec 10 §10.5.6)."""


class TicketRequest(_Object):
    model_config = examples({"pathname": "/api/events"})

    pathname: str = Field(
        pattern=API_PATH, description="the normalized /api/* path the ticket opens"
    )


class CreateApiKey(_Object):
    model_config = examples({"name": "ci", "expires_in_days": 30})

    name: str = Field(min_length=1, max_length=100, pattern=NOT_BLANK, description="trimmed")
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


_AGUI_EXAMPLE = {
    "threadId": "5b0c3c0e-3f0e-4c4e-9d55-0c3e0f9a7b21",
    "runId": "run-1",
    "messages": [{"id": "m1", "role": "user", "content": "Hello"}],
}

try:  # the agui extra: its own model says what a RunAgentInput is
    from ag_ui.core import RunAgentInput as _AgUiInput
except ImportError:  # pragma: no cover - the route answers 501 without it

    class RunAgentInput(_Object):
        """AG-UI's RunAgentInput (docs/interop.md; install ``threadloom[agui]``)."""

        model_config = examples(_AGUI_EXAMPLE)

        threadId: str = Field(pattern=UUID)
        runId: str = Field(max_length=128, pattern=NOT_BLANK)
        messages: list[dict[str, Any]]

else:

    class RunAgentInput(_AgUiInput):  # type: ignore[no-redef]
        """AG-UI's RunAgentInput (docs/interop.md), with Threadloom's rules of its ids:
        ``threadId`` is the Threadloom thread's id, ``runId`` not blank."""

        model_config = ConfigDict(
            json_schema_extra=lambda s: s.update(examples=[_AGUI_EXAMPLE]),
            regex_engine="python-re",
        )

        thread_id: str = Field(alias="threadId", pattern=UUID)
        run_id: str = Field(alias="runId", max_length=128, pattern=NOT_BLANK)


# -- query parameters (§8.1.5) ---------------------------------------------------------------

MAX_QUERY_INT = 2**63 - 1
"""Integers are below 2^63 (§8.1.5 rule 1)."""
MAX_DATE_S = (2**63 - 1 - 999_999) // 1_000_000
"""The largest ``startDate``/``endDate`` (seconds) whose microseconds, ``end`` with its
last µs, still fit the stores' 64-bit integers (year 294,000 or so)."""
FILES_LIMIT = 1000
"""The most hits of a file ``grep`` or ``find`` (§8.8): ``limit`` from 1 to it."""
NO_NUL = "^[^\\x00]*$"
"""No NUL character: a query value holding one is a 400, whatever the parameter."""


def _param(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A query parameter. A typed one (integer, boolean, enumeration) may be sent empty,
    which counts as absent (§8.1.5): ``allowEmptyValue``."""
    out: dict[str, Any] = {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }
    if schema.get("type") != "string" or "enum" in schema:
        out["allowEmptyValue"] = True
    return out


def integer(
    name: str, description: str, minimum: int = 0, maximum: int = MAX_QUERY_INT
) -> dict[str, Any]:
    """Decimal digits only, below 2^63 (§8.1.5 rule 1), within the route's bounds."""
    return _param(name, {"type": "integer", "minimum": minimum, "maximum": maximum}, description)


def boolean(name: str, description: str) -> dict[str, Any]:
    """``true``/``false``/``1``/``0`` in any case (§8.1.5 rule 3)."""
    return _param(name, {"type": "boolean"}, description)


def choice(name: str, values: tuple[str, ...], description: str) -> dict[str, Any]:
    """One of ``values``, in any letter case (§8.1.5 rule 4)."""
    return _param(name, {"type": "string", "enum": list(values)}, description)


def any_case(word: str) -> str:
    """A regular expression of ``word`` in any letter case, without flags (JSON Schema
    patterns are ECMA-262: no ``(?i)``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def choices(name: str, values: tuple[str, ...], description: str) -> dict[str, Any]:
    """A comma-separated list of ``values`` in any letter case; items are trimmed and empty
    ones dropped (§8.1.5 rules 4 and 6)."""
    item = f"[{WHITESPACE}]*(?:{'|'.join(any_case(v) for v in values)})?[{WHITESPACE}]*"
    return _param(name, {"type": "string", "pattern": f"^{item}(?:,{item})*$"}, description)


def text(name: str, description: str, min_length: int = 0) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
    if min_length:
        schema["minLength"] = min_length
    return _param(name, schema, description)


def path(name: str, description: str) -> dict[str, Any]:
    """A thread path (spec 07 §7.2)."""
    return _param(name, {"type": "string", "pattern": THREAD_PATH}, description)


LIMIT = integer("limit", "Page size; values above 1000 read as 1000")
OFFSET = integer("offset", "Items to skip")
