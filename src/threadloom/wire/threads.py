"""Threads (spec 08 §8.3): the list, create, the owner facet, read, patch and delete — their
query parameters, bodies and answers (a thread item §8.2.2, the detail §8.3.4).

The create and patch bodies are checked by the spec's rules, with its texts, reporting
every problem (``problems.Refusals``: an item's or a key's problems, the calls named across
the initial messages); their types and constraints say the same for ``/openapi.json``.
A field's other name (``data`` of ``arguments``, ``tenvs`` of ``env``) is read as that
field before the rules run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from threadloom.errors import ThreadloomError
from threadloom.records import ThreadStatus, normalize_tool_calls
from threadloom.wire.approvals import ApprovalItem
from threadloom.wire.budgets import BudgetField
from threadloom.wire.catalog import Backing
from threadloom.wire.messages import Metadata, Upload, Uploads, message_metadata
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import NOT_BLANK
from threadloom.wire.problems import Refusals, check, problems_of, refuse
from threadloom.wire.query import LIMIT, OFFSET, boolean, choice, choices, integer, text

MAX_DATE_S = (2**63 - 1 - 999_999) // 1_000_000
"""The largest ``startDate``/``endDate`` (seconds) whose microseconds, ``end`` with its
last µs, still fit the stores' 64-bit integers (year 294,000 or so)."""

LIST_QUERY = (
    LIMIT,
    OFFSET,
    integer("startDate", "Created at or after (Unix seconds)", maximum=MAX_DATE_S),
    integer("endDate", "Created at or before (Unix seconds)", maximum=MAX_DATE_S),
    text("parent", "Children of this thread; `none`: top-level threads only"),
    text("user_id", "Owner (admins; ignored for others)"),
    text("agent_id", "Agent"),
    text("tag", "Only threads carrying exactly this tag"),
    boolean("include_children", "Include child threads"),
    text("search", "Text in the id, tags or preview"),
    boolean("executing", "Running or not"),
    boolean("terminated", "Terminated or not"),
    choices("status", ("idle", "running", "failed"), "Comma-separated run states"),
    choice("sort", ("activity", "created", "oldest"), "Order (default activity)"),
)

# -- parts of the bodies ---------------------------------------------------------------------

Overlap = Literal["enqueue", "reject", "interrupt"]
OVERLAPS = ("enqueue", "reject", "interrupt")
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


class InitialToolCallFunction(Body):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(
        "{}", description="an object, or its JSON text (blank: `{}`)"
    )


class InitialToolCall(Body):
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


# -- the rules of the fields (§8.3.2, §8.3.5) ------------------------------------------------


def _tags(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise refuse("must be an array of strings", "tags must be an array of strings")
    if not all(isinstance(t, str) for t in value):
        raise refuse("must be an array of strings", "All tags must be strings")
    if len(value) > 50:
        raise refuse("must have at most 50 tags")
    for i, tag in enumerate(value):
        if not 1 <= len(tag) <= 200:
            raise refuse("must be 1-200 characters", at=str(i))
    return value


def _agent_id(value: Any) -> str:
    if value is None:
        raise refuse("is required", "Missing required field: agent_id")
    if not isinstance(value, str) or not value:
        raise refuse("must be a string", "agent_id must be a string")
    return value


def _agent_id_or_null(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse("must be a string", "agent_id must be a string")
    return value


def _user_id(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse("must be a string or null")
    return value


def _object(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise refuse("must be an object")
    return value


def _read_as_other(_value: Any) -> None:
    """``data``, ``tenvs``: read as ``arguments``, ``env`` (``_other_names``)."""
    return None


@dataclass(frozen=True)
class _BothGiven:
    """``arguments`` when ``data`` is given too (a problem of ``arguments``)."""

    arguments: Any


def _arguments(value: Any) -> dict[str, Any] | None:
    found = Refusals()
    if isinstance(value, _BothGiven):
        found.refuse("conflicts with data", "Use either arguments or data, not both")
        value = value.arguments
    if value is not None and not isinstance(value, dict):
        found.refuse("must be an object", "arguments must be an object")
    found.raise_if_any(value)
    return dict(value) if value is not None else None


def _env(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.strip() and isinstance(v, str) for k, v in value.items()
    ):
        raise refuse("must be an object of string values")
    return {k.strip(): v for k, v in value.items()}


@dataclass(frozen=True)
class _WithoutEnv:
    """``env_types`` of a patch that replaces no ``env`` (a problem of ``env_types``)."""

    env_types: Any


def _env_types_with_env(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise refuse("must be an object given together with env")
    return value


def _overlap(value: Any) -> str | None:
    if value is not None and value not in OVERLAPS:
        raise refuse(
            "must be one of enqueue, reject, interrupt, or null",
            "overlap must be one of enqueue, reject, interrupt, or null",
        )
    return value if isinstance(value, str) else None


def _key_patch(field: str, value_rule: Any) -> Any:
    """``env_patch``/``env_type_patch``: an object with keys that are not blank (trimmed),
    each value as ``value_rule`` makes it (None: refused as not a string)."""

    def rule(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise refuse("must be an object", f"{field} must be an object")
        found = Refusals()
        out: dict[str, str] = {}
        for key, item in value.items():
            if not key.strip():
                found.refuse(
                    "keys must be non-empty strings", f"{field} keys must be non-empty strings"
                )
                continue
            kept = value_rule(item)
            if kept is None:
                found.refuse("must be a string", key=key)
            else:
                out[key.strip()] = kept
        found.raise_if_any(value)
        return out

    return rule


_env_patch = _key_patch("env_patch", lambda v: v if isinstance(v, str) else None)
_env_type_patch = _key_patch("env_type_patch", lambda v: "text" if v == "text" else "secret")


def _env_delete(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise refuse("must be an array of strings", "env_delete must be an array of strings")
    if not all(k.strip() for k in value):
        raise refuse(
            "entries must be non-empty strings", "env_delete entries must be non-empty strings"
        )
    return [k.strip() for k in value]


def _arguments_as_text(value: Any) -> Any:
    """Spec 08 §8.3.2: ``function.arguments`` may be an object; it is stored as JSON text."""
    if not isinstance(value, list):
        return value
    out = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), dict):
            call = {
                **call,
                "function": {**function, "arguments": json.dumps(function["arguments"])},
            }
        out.append(call)
    return out


_UPLOADS: TypeAdapter[list[Upload] | None] = TypeAdapter(Uploads | None)


def _uploads(value: Any, i: int, found: Refusals) -> tuple[list[Upload], bool]:
    """An item's ``attachments`` (the send's rules and texts), its problems added to
    ``found``; and whether it has one whose name, MIME type and data passed (which makes
    an item not blank, for its other rules, even when another attachment is refused)."""
    try:
        uploads = _UPLOADS.validate_python(value) or []
    except ValidationError as error:
        found.extend(error, i, "attachments")
        bad = {p.field for p in problems_of(error)}
        whole = isinstance(value, list) and "body" not in bad
        return [], whole and any(
            f"[{j}]" not in bad and all(f"[{j}].{key}" not in bad for key in _UPLOAD_KEYS)
            for j in range(len(value))
        )
    return uploads, bool(uploads)


_UPLOAD_KEYS = ("name", "mimeType", "data")


def _initial_messages(value: Any) -> list[InitialMessage]:
    """§8.3.2's rules of the items, each problem reported; a tool item names a call of an
    earlier item, call ids are not repeated across the items."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise refuse("must be an array", "initial_messages must be an array")
    if len(value) > 1000:
        raise refuse("must have at most 1000 items")
    found = Refusals()
    out: list[InitialMessage] = []
    calls_seen: set[str] = set()
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            found.refuse("must be an object", None, i)
            continue
        for key in NOT_ACCEPTED:
            if key in item:
                found.refuse("cannot be set on an initial message", None, i, key)
        role = item.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            found.refuse("must be one of system, user, assistant, tool", None, i, "role")
        content = item.get("content")
        if content is not None and not isinstance(content, str):
            found.refuse("must be a string or null", None, i, "content")
            content = None
        uploads, attached = _uploads(item.get("attachments"), i, found)
        if role in ("user", "system") and not (content and content.strip()) and not attached:
            found.refuse("must not be blank for a user or system message", None, i, "content")
        fields: dict[str, Any] = {"role": role, "content": content}
        name = item.get("name")
        if name is not None:
            if not isinstance(name, str) or len(name) > 255:
                found.refuse("must be a string of at most 255 characters", None, i, "name")
            fields["name"] = name
        if item.get("tool_calls") is not None:
            if role not in ("user", "assistant"):
                found.refuse("is only allowed on user or assistant items", None, i, "tool_calls")
            else:
                try:
                    calls = normalize_tool_calls(_arguments_as_text(item["tool_calls"]))
                except (ThreadloomError, ValueError, TypeError) as exc:
                    found.refuse(f"is invalid: {exc}", None, i, "tool_calls")
                else:
                    for call in calls:
                        if call.id in calls_seen:
                            found.refuse(f"repeats call id {call.id}", None, i, "tool_calls")
                        calls_seen.add(call.id)
                    fields["tool_calls"] = calls
        if role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in calls_seen:
                found.refuse(
                    "must name a call of an earlier assistant item", None, i, "tool_call_id"
                )
            fields["tool_call_id"] = call_id
            status = item.get("tool_status")
            if status is not None:
                if status not in ("success", "error"):
                    found.refuse("must be success or error", None, i, "tool_status")
                fields["tool_status"] = status
        elif item.get("tool_status") is not None:
            found.refuse("is only allowed on tool items", None, i, "tool_status")
        silent = item.get("silent", False)
        if not isinstance(silent, bool):
            found.refuse("must be a boolean", None, i, "silent")
        fields["silent"] = silent is True
        try:
            metadata = message_metadata(item.get("metadata"))
        except PydanticCustomError as refusal:
            found.add(refusal, i, "metadata")
        else:
            if metadata:
                fields["metadata"] = metadata
        if not found:
            out.append(InitialMessage.checked(fields, uploads))
    found.raise_if_any(value)
    return out


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


class InitialMessage(Body):
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

    _stored: dict[str, Any] = PrivateAttr(default_factory=dict)

    @classmethod
    def checked(cls, fields: dict[str, Any], attachments: list[Upload]) -> InitialMessage:
        """An item that passed ``CreateThread``'s rules: ``fields`` as the thread stores
        them (``stored``: the calls canonical, their arguments JSON text)."""
        item = cls.model_construct(
            **{k: v for k, v in fields.items() if k != "tool_calls"},
            attachments=attachments or None,
        )
        item._stored = fields
        return item

    @property
    def stored(self) -> dict[str, Any]:
        """The message to inject, its attachments not yet written (``attachments``)."""
        return dict(self._stored)


# -- create (§8.3.2) -------------------------------------------------------------------------


def _arguments_or_data(schema: dict[str, Any]) -> None:
    """``arguments`` and ``data`` (its other name) are not both objects (§8.3.2)."""
    schema["not"] = {
        "required": ["arguments", "data"],
        "properties": {"arguments": {"type": "object"}, "data": {"type": "object"}},
    }


class CreateThread(Body):
    # problems are reported in the order of these fields (``data`` as ``arguments``,
    # ``tenvs`` as ``env``)
    model_config = examples(
        {"agent_id": "support", "tags": ["name:Demo"]},
        {"agent_id": "support", "initial_messages": [{"role": "user", "content": "Hello"}]},
        {"agent_id": "support", "arguments": {"order_id": "42"}, "overlap": "enqueue"},
        extra=_arguments_or_data,
    )

    agent_id: Annotated[str, Field(min_length=1), check(_agent_id)]
    tags: Annotated[Tags | None, check(_tags)] = None
    user_id: Annotated[str | None, check(_user_id)] = None
    arguments: Annotated[dict[str, Any] | None, check(_arguments)] = None
    data: Annotated[dict[str, Any] | None, check(_read_as_other)] = Field(
        None, description="another name of `arguments`"
    )
    initial_messages: Annotated[
        Annotated[list[InitialMessage], Field(max_length=1000)] | None, check(_initial_messages)
    ] = None
    env: Annotated[Env | None, check(_env)] = None
    tenvs: Annotated[Env | None, check(_read_as_other)] = Field(
        None, description="another name of `env`", deprecated=True
    )
    env_types: Annotated[EnvTypes | None, check(_object)] = None
    properties: Annotated[dict[str, Any] | None, check(_object)] = None
    overlap: Annotated[Overlap | None, check(_overlap)] = None
    budget: BudgetField = None

    @model_validator(mode="before")
    @classmethod
    def _other_names(cls, data: Any) -> Any:
        """``data`` is ``arguments`` when that is null or absent (a client may send every
        key, nulls too), else a problem of ``arguments``; ``tenvs`` is ``env`` when the
        body has no ``env`` key."""
        if not isinstance(data, dict):
            return data
        arguments, other = data.get("arguments"), data.get("data")
        if other is not None:
            data = {**data, "arguments": other if arguments is None else _BothGiven(arguments)}
        if "env" not in data and "tenvs" in data:
            data = {**data, "env": data["tenvs"]}
        return data


# -- patch (§8.3.5) --------------------------------------------------------------------------


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


class PatchThread(Body):
    # problems are reported in the order of these fields (``tenvs`` as ``env``); a body
    # that changes nothing is refused once they pass
    model_config = examples({"tags": ["name:Renamed"]}, {"overlap": "enqueue"}, extra=_thread_patch)

    tags: Annotated[Tags | None, check(_tags)] = None
    agent_id: Annotated[str | None, check(_agent_id_or_null)] = Field(
        None, description="an agent with a human-backed side"
    )
    env: Annotated[Env | None, check(_env)] = None
    tenvs: Annotated[Env | None, check(_read_as_other)] = Field(
        None, description="another name of `env`", deprecated=True
    )
    env_types: Annotated[EnvTypes | None, check(_env_types_with_env)] = Field(
        None, description="only together with `env`"
    )
    env_patch: Annotated[Env | Absent, check(_env_patch)] = None
    env_type_patch: Annotated[EnvTypePatch | Absent, check(_env_type_patch)] = None
    env_delete: Annotated[
        list[Annotated[str, Field(pattern=NOT_BLANK)]] | Absent, check(_env_delete)
    ] = None
    overlap: Annotated[Overlap | None, check(_overlap)] = None

    @property
    def replaces_env(self) -> bool:
        """``env`` (or ``tenvs``) is given, null too: the variables are replaced."""
        return "env" in self.model_fields_set

    @property
    def sets_overlap(self) -> bool:
        return "overlap" in self.model_fields_set

    @model_validator(mode="before")
    @classmethod
    def _other_names(cls, data: Any) -> Any:
        """``tenvs`` is ``env`` when the body has no ``env`` key; ``env_types`` without
        either is a problem of ``env_types``."""
        if not isinstance(data, dict):
            return data
        if "env" not in data and "tenvs" in data:
            data = {**data, "env": data["tenvs"]}
        if data.get("env_types") is not None and "env" not in data:
            data = {**data, "env_types": _WithoutEnv(data["env_types"])}
        return data

    @model_validator(mode="after")
    def _changes_something(self) -> PatchThread:
        if not (
            self.tags is not None
            or self.agent_id is not None
            or self.replaces_env
            or self.env_patch
            or self.env_type_patch
            or self.env_delete
            or self.sets_overlap
        ):
            raise refuse("has no field to update", "No valid fields to update", at="body")
        return self


# -- answers ---------------------------------------------------------------------------------


class AgentSummary(Answer):
    """The ``agent`` of a thread item: ``{name, title}`` only when the agent no longer
    loads."""

    name: str
    title: str
    side_a_backing: Backing | None = None
    side_b_backing: Backing | None = None
    description: str | None = None
    icon: str | None = None


class ThreadItem(Answer):
    """One thread of the list (§8.2.2)."""

    id: str
    agent_id: str
    origin_agent_id: str
    user_id: str | None
    tags: list[str]
    parent: str | None
    terminated: int | None
    created_at: int
    last_activity_at: int
    executing: bool
    status: ThreadStatus
    last_message_preview: str | None
    last_message_at: int | None
    agent: AgentSummary
    orphaned: bool
    """The served project has no agent named ``agent_id`` (§8.1.9)."""
    forked_from_thread_id: str | None
    """The thread this one was forked from (§8.3.8); ``null`` for a thread that is no fork."""
    forked_from_message_id: str | None
    """The original's message the fork was made at."""


class ThreadList(Answer):
    threads: list[ThreadItem]
    total: int
    hasMore: bool


class ThreadCreated(Answer):
    threadId: str
    agent_id: str
    message: str
    initialMessageIds: list[str]
    thread: ThreadItem


class Owner(Answer):
    user_id: str | None
    username: str | None
    display_name: str | None
    email: str | None
    thread_count: int


class OwnerList(Answer):
    owners: list[Owner]


class ThreadFields(Answer):
    id: str
    agent_id: str
    origin_agent_id: str
    user_id: str | None
    tags: list[str]
    parent: str | None
    terminated: int | None
    created_at: int
    arguments: dict[str, Any]
    overlap: str | None
    orphaned: bool
    forked_from_thread_id: str | None
    forked_from_message_id: str | None


class AgentDetail(Answer):
    id: str
    title: str
    description: str | None
    icon: str | None
    side_a_backing: Backing
    side_b_backing: Backing
    side_a_label: str | None
    side_b_label: str | None
    side_a_agent_prompt: str | None
    side_b_agent_prompt: str | None
    side_a_handler: None
    side_b_handler: None


class ThreadStats(Answer):
    message_count: int
    log_count: int
    queued_count: int


class ThreadDetail(Answer):
    """``GET /api/threads/{id}`` (§8.3.4); ``agent`` is null when it no longer loads."""

    thread: ThreadFields
    agent: AgentDetail | None
    stats: ThreadStats
    status: ThreadStatus
    seq: int
    approvals: list[ApprovalItem] = Field(default_factory=list)
    """The pending approvals of a thread parked for them (spec 14 §14.3)."""


class ThreadUpdated(Answer):
    id: str
    agent_id: str
    user_id: str | None
    tags: list[str]
    env_types: dict[str, str] | None
    created_at: int
    overlap: str | None


class ThreadDeleted(Answer):
    success: bool
    threadId: str
    deletedThreadIds: list[str]
    deletedCount: int
    message: str


# -- forks (§8.3.8) ---------------------------------------------------------------------------


def _message_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise refuse("must be a non-empty string", "message_id must be a message id")
    return value


def _edit(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise refuse("must be a string")
    if not value.strip():
        raise refuse("must not be blank")
    if len(value) > MAX_FORK_CONTENT:
        raise refuse(f"must be at most {MAX_FORK_CONTENT} characters")
    return value


MAX_FORK_CONTENT = 1_000_000
"""The longest replacement text a fork takes (characters)."""


class ForkThread(Body):
    """``POST /api/threads/{id}/fork``: the message to fork at and, optionally, the text
    its copy has instead (edit and rerun)."""

    model_config = examples(
        {"message_id": "1f0e7c2a-5b3d-4e8f-9a0b-1c2d3e4f5a6b"},
        {"message_id": "1f0e7c2a-5b3d-4e8f-9a0b-1c2d3e4f5a6b", "content": "Try it in French"},
    )

    message_id: Annotated[str, check(_message_id)] = Field(min_length=1)
    content: Annotated[str | None, check(_edit)] = Field(
        None, min_length=1, max_length=MAX_FORK_CONTENT, pattern=NOT_BLANK
    )


class ThreadForked(Answer):
    """What a fork stored: the new thread (its list item, with its lineage), the copy of
    the fork point's message and how many messages were copied."""

    threadId: str
    messageId: str
    copiedCount: int
    thread: ThreadItem


class ForkList(Answer):
    """``GET /api/threads/{id}/forks``: the forks the caller may see, oldest first."""

    forks: list[ThreadItem]
