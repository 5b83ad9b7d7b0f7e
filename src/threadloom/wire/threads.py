"""Threads (spec 08 §8.3): the list, create, the owner facet, read, patch and delete — their
query parameters, bodies and answers (a thread item §8.2.2, the detail §8.3.4)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from threadloom.records import ThreadStatus
from threadloom.wire.catalog import Backing
from threadloom.wire.messages import Metadata, Uploads
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import NOT_BLANK
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


# -- create (§8.3.2) -------------------------------------------------------------------------


def _arguments_or_data(schema: dict[str, Any]) -> None:
    """``arguments`` and ``data`` (its other name) are not both objects (§8.3.2)."""
    schema["not"] = {
        "required": ["arguments", "data"],
        "properties": {"arguments": {"type": "object"}, "data": {"type": "object"}},
    }


class CreateThread(Body):
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
