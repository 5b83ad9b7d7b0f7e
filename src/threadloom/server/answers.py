"""The response bodies of the HTTP API as named schemas, for ``/openapi.json`` only (spec 08
§8.11.2). Routes build their answers as plain dicts (wire compatibility, speed); these
models describe them, and the schemathesis test (``tests/attack/test_schemathesis.py``)
checks every answer against them. Records that are already wire shapes (``Message``,
``AttachmentRef``, ``ThreadStatus``, ``LogRow``, the file and cost records) are used as
they are, so each of those shapes is written once.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from threadloom.records import LOG_LIST_KEYS, FileRecord, GrepResult, LogRow, Message, ThreadStatus

Backing = Literal["human", "prompt", "handler"]


class _Doc(BaseModel):
    """A documented answer: keys beyond those listed may be added later (forward
    compatibility, spec 08 §8.1.1 rule 5), so extra keys stay allowed."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


# -- threads (§8.3) --------------------------------------------------------------------------


class AgentSummary(_Doc):
    """The ``agent`` of a thread item: ``{name, title}`` only when the agent no longer
    loads."""

    name: str
    title: str
    side_a_backing: Backing | None = None
    side_b_backing: Backing | None = None
    description: str | None = None
    icon: str | None = None


class ThreadItem(_Doc):
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


class ThreadList(_Doc):
    threads: list[ThreadItem]
    total: int
    hasMore: bool


class ThreadCreated(_Doc):
    threadId: str
    agent_id: str
    message: str
    initialMessageIds: list[str]
    thread: ThreadItem


class Owner(_Doc):
    user_id: str | None
    username: str | None
    display_name: str | None
    email: str | None
    thread_count: int


class OwnerList(_Doc):
    owners: list[Owner]


class ThreadFields(_Doc):
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


class AgentDetail(_Doc):
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


class ThreadStats(_Doc):
    message_count: int
    log_count: int
    queued_count: int


class ThreadDetail(_Doc):
    """``GET /api/threads/{id}`` (§8.3.4); ``agent`` is null when it no longer loads."""

    thread: ThreadFields
    agent: AgentDetail | None
    stats: ThreadStats
    status: ThreadStatus
    seq: int


class ThreadUpdated(_Doc):
    id: str
    agent_id: str
    user_id: str | None
    tags: list[str]
    env_types: dict[str, str] | None
    created_at: int
    overlap: str | None


class ThreadDeleted(_Doc):
    success: bool
    threadId: str
    deletedThreadIds: list[str]
    deletedCount: int
    message: str


# -- messages (§8.4) -------------------------------------------------------------------------


class MessagePage(_Doc):
    """A page of messages in history order, queue entries as pending records (§8.4.1)."""

    messages: list[Message]
    total: int
    hasMore: bool
    seq: int


class SendAccepted(_Doc):
    """202 ``queued``; 200 ``duplicate`` for a repeated ``client_message_id`` (§8.4.2)."""

    status: Literal["queued", "duplicate"]
    queueId: str | None
    messageId: str
    message: str


class MessageUpdated(_Doc):
    success: bool
    message: Message


class MessagesDeleted(_Doc):
    success: bool
    deletedIds: list[str]


# -- execution control (§8.5) ----------------------------------------------------------------


class ContinuedAfter(_Doc):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    status: Literal["pending", "completed", "failed"]


class ContinuePlan(_Doc):
    """What a continue starts (§8.5.1 step 4)."""

    side: Literal["a", "b"]
    queued: int
    after: ContinuedAfter | None
    again: bool


class ContinueAccepted(_Doc):
    status: Literal["queued"]
    queueId: str
    message: str
    run: ContinuePlan


class Stopped(_Doc):
    status: Literal["stopped"]
    message: str
    wasRunning: bool
    settled: bool


class Terminated(_Doc):
    success: bool
    threadId: str
    terminated: int
    alreadyTerminated: bool


# -- logs, cost, subagents (§8.6, §8.7, §8.9) ------------------------------------------------

_TIMING = ("latency_ms", "time_to_first_token_ms", "finish_reason")
_LOG_FIELDS = LogRow.model_fields

_LIST_FIELDS: dict[str, Any] = {
    k: (_LOG_FIELDS[k].annotation, _LOG_FIELDS[k]) for k in (*LOG_LIST_KEYS, *_TIMING)
}
LogListRow = create_model(
    "LogListRow",
    __base__=_Doc,
    __doc__="A row of the log list (§8.2.6); the timing keys only with ``timing=true``.",
    **_LIST_FIELDS,
)


class LogDetail(LogRow):
    """One log row with its detail (§8.6.2): every column, the heavy ones last."""

    model_config = ConfigDict(title="LogDetail")

    source_message_content: str | None = None
    source_message_role: str | None = None
    source_message_created_at: int | None = None
    source_message_metadata: Any = None
    scheduled_effects: Any = None


class LogPage(_Doc):
    logs: list[LogListRow]
    total: int
    hasMore: bool


class SubagentEntry(_Doc):
    """A child of the thread's registry (§8.2.7)."""

    id: str
    relationship: str
    agent_name: str
    title: str | None
    threadName: str | None
    status: str
    blocking: bool
    resumable: bool
    owner: Literal["a", "b"]
    description: str | None
    createdAt: int
    spawnGroupId: str | None


class SubagentList(_Doc):
    subagents: list[SubagentEntry]


# -- files (§8.8) ----------------------------------------------------------------------------


class FileListing(_Doc):
    """A directory's entries (``GET /fs``, ``GET /fs/{dir}``)."""

    files: list[FileRecord]
    path: str


class FileSearch(_Doc):
    """``GET /fs?grep=``: the files whose text matches, with a marked snippet."""

    results: list[GrepResult]
    pattern: str


class FileFound(_Doc):
    """``GET /fs?find=``: the entries whose name matches the pattern."""

    files: list[FileRecord]
    pattern: str


class FileLink(_Doc):
    file: FileRecord
    external: bool
    location: str | None


class FileAnswer(_Doc):
    file: FileRecord


class DirectoryMade(_Doc):
    directory: FileRecord


# -- catalog and service (§8.10, §8.11) ------------------------------------------------------


class AgentEntry(_Doc):
    """An agent of ``GET /api/agents``; the keys after ``packed`` are shown to admins."""

    id: str
    name: str
    title: str
    description: str | None
    tool_description: str | None
    icon: str | None
    side_a_backing: Backing
    side_b_backing: Backing
    primary: bool
    parentHooks: list[str]
    created_at: int
    packed: bool
    default_prompt: str | None = None
    default_model: str | None = None
    tools: list[str] | None = None
    side_a_label: str | None = None
    side_a_agent_prompt: str | None = None
    side_a_handler: None = None
    side_a_subagents: list[str] | None = None
    side_b_label: str | None = None
    side_b_agent_prompt: str | None = None
    side_b_handler: None = None
    side_b_subagents: list[str] | None = None


class AgentList(_Doc):
    agents: list[AgentEntry]


class PromptEntry(_Doc):
    id: str
    name: str
    tool_description: str | None
    prompt: str
    required_schema: dict[str, Any] | None
    model_id: str
    model_name: str | None
    model_provider: str
    include_chat: bool
    include_past_tools: bool
    parallel_tool_calls: bool
    tool_choice: str | dict[str, Any]
    tools: list[str]
    reasoning: dict[str, Any] | None
    created_at: int


class PromptList(_Doc):
    prompts: list[PromptEntry]


class ToolEntry(_Doc):
    """A tool, a prompt or an agent callable as a tool (§8.10.3)."""

    description: str | None
    schema_: dict[str, Any] | None = Field(alias="schema")
    variables: list[Any]
    hasError: bool
    type: Literal["tool", "prompt", "agent"]
    model: str | None = None
    error: str | None = None


class ToolCatalog(RootModel[dict[str, ToolEntry]]):
    """Every entry by name."""


class Fallback(_Doc):
    id: str
    name: str
    model: str | None
    provider: str | None
    iconId: None
    order: int


class Capabilities(_Doc):
    tools: bool
    images: bool


class ModelEntry(_Doc):
    id: str
    name: str
    provider: str
    provider_id: str
    model: str
    iconId: None
    input_price: float | None
    output_price: float | None
    cached_price: float | None
    pricing_range: None
    included_providers: None
    fallbacks: list[Fallback]
    providerTools: list[Any]
    capabilities: Capabilities
    created_at: int


class ModelList(_Doc):
    models: list[ModelEntry]


class HookEntry(_Doc):
    id: str
    hook: str


class HookList(_Doc):
    hooks: list[HookEntry]


class Health(_Doc):
    status: Literal["ok"]
    version: str
    node: str
    store: Literal["sqlite", "postgres"]


class HealthUnavailable(_Doc):
    """503: the store cannot be reached, or the node drains or is fenced."""

    status: Literal["unavailable"]
    error: str
    code: Literal["unavailable"]
    node: str


class ServerSentEvent(_Doc):
    """One event of a ``text/event-stream`` answer (the stream of spec 09 §9.13, AG-UI's
    events): ``data`` is a JSON text."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


# -- accounts (spec 10 §10.5) ----------------------------------------------------------------


class LoginUser(_Doc):
    id: str
    username: str
    role: str


class LoggedIn(_Doc):
    token: str
    user: LoginUser


class Success(_Doc):
    success: bool


class Caller(_Doc):
    id: str | None
    username: str | None
    role: str
    permissions: list[str] | None
    roles: list[str]
    display_name: str | None
    email: str | None
    avatar_url: str | None


class Me(_Doc):
    user: Caller
    authType: str


class AuthConfig(_Doc):
    localPassword: bool
    authRequired: bool
    localMode: bool
    hosted: bool
    github: bool
    google: bool
    platformConnected: bool


class Ticket(_Doc):
    ticket: str
    expires_in: int


class Revoked(_Doc):
    revoked: bool


class ApiKey(_Doc):
    """An API key as listed: never the key itself."""

    id: str
    name: str
    key_prefix: str
    last_five: str
    user_id: str
    created_at: int | None
    last_used_at: int | None
    expires_at: int | None


class ApiKeyList(_Doc):
    keys: list[ApiKey]


class ApiKeyCreated(_Doc):
    """The new key, shown this once."""

    key: str
    id: str
    name: str
    key_prefix: str
    last_five: str
    user_id: str
    created_at: int | None
    expires_at: int | None


class User(_Doc):
    id: str
    username: str
    role: str
    permissions: list[str] | None
    roles: list[str]
    display_name: str | None
    email: str | None
    avatar_url: str | None
    created_at: int | None


class UserList(_Doc):
    users: list[User]


class UserAnswer(_Doc):
    user: User
