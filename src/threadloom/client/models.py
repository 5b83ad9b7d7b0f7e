"""Typed response models of the HTTP client (spec 11 §11.2.3).

Field names are snake_case; where the wire spells a key in camelCase (spec 08) the field has that
alias. Every model keeps unknown keys (``extra="allow"``) so that a newer server does not break
an older client; message records are ``threadloom.records.Message``. Where the server's answer
model (``threadloom.wire``) has the client's shape, it is the client's model too, under the
client's name: ``MessagePage``, ``HookInfo`` (``wire.catalog.HookEntry``), ``WebSocketTicket``
(``wire.auth.Ticket``), ``Approval`` (``wire.approvals.ApprovalItem``), ``ApprovalList``,
``UserQuota`` (``wire.budgets.QuotaAnswer``), ``SharedState`` (``wire.state.StateAnswer``),
``Webhook`` and ``WebhookDelivery`` (``wire.webhooks.Webhook``, ``Delivery``).
``ScheduleInfo`` and ``ScheduleFire`` (``wire.schedules.ScheduleOut``, ``FireOut``).
``TriggerInfo`` (``wire.triggers.TriggerOut``).
The others differ on purpose: snake_case names for camelCase keys, and defaults where the
server always sends a key (a client reads an older server's answers).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from threadloom.records import AttachmentRef, Compaction, FileRecord, ThreadStatus
from threadloom.wire.approvals import ApprovalItem as Approval
from threadloom.wire.approvals import ApprovalList
from threadloom.wire.auth import Ticket as WebSocketTicket
from threadloom.wire.budgets import QuotaAnswer as UserQuota
from threadloom.wire.catalog import HookEntry as HookInfo
from threadloom.wire.messages import MessagePage
from threadloom.wire.schedules import FireOut as ScheduleFire
from threadloom.wire.schedules import ScheduleOut as ScheduleInfo
from threadloom.wire.state import StateAnswer as SharedState
from threadloom.wire.triggers import TriggerOut as TriggerInfo
from threadloom.wire.webhooks import Delivery as WebhookDelivery
from threadloom.wire.webhooks import Webhook as Webhook

__all__ = [
    "Accepted",
    "AgentInfo",
    "ApiKey",
    "Approval",
    "ApprovalList",
    "AttachmentRef",
    "AuthConfig",
    "AuthUser",
    "Compaction",
    "CompactionList",
    "CostReport",
    "CreatedApiKey",
    "CreatedThread",
    "DeletedThreads",
    "FileRecord",
    "FileStats",
    "GrepHit",
    "Health",
    "HookInfo",
    "ImportedThreads",
    "LogDetail",
    "LogPage",
    "LogRow",
    "LoginResult",
    "Me",
    "MessagePage",
    "ModelInfo",
    "Owner",
    "PromptInfo",
    "ScheduleFire",
    "ScheduleInfo",
    "SendResult",
    "SharedState",
    "StopResult",
    "SubagentEntry",
    "TerminateResult",
    "ThreadDetail",
    "ThreadItem",
    "ThreadPage",
    "ThreadUpdated",
    "ToolInfo",
    "TriggerInfo",
    "User",
    "UserQuota",
    "WebSocketTicket",
    "Webhook",
    "WebhookDelivery",
]


class Wire(BaseModel):
    """Base of the response models: unknown keys kept, fields filled by name or alias."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ThreadItem(Wire):
    """A thread of ``GET /api/threads`` (spec 08 §8.2.2)."""

    id: str
    agent_id: str
    origin_agent_id: str | None = None
    user_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    parent: str | None = None
    terminated: int | None = None
    created_at: int = 0
    last_activity_at: int | None = None
    executing: bool = False
    status: ThreadStatus | None = None
    last_message_preview: str | None = None
    last_message_at: int | None = None
    agent: dict[str, Any] | None = None


class ThreadPage(Wire):
    threads: list[ThreadItem]
    total: int
    has_more: bool = Field(alias="hasMore")


class CreatedThread(Wire):
    thread_id: str = Field(alias="threadId")
    agent_id: str
    initial_message_ids: list[str] = Field(default_factory=list, alias="initialMessageIds")
    thread: ThreadItem | None = None


class ThreadDetail(Wire):
    """``GET /api/threads/{id}`` (spec 08 §8.3.4)."""

    thread: dict[str, Any]
    agent: dict[str, Any] | None = None
    stats: dict[str, Any] = Field(default_factory=dict)
    status: ThreadStatus
    seq: int = 0
    approvals: list[Approval] = Field(default_factory=list)
    """The pending tool-call approvals of a thread parked for them (spec 14 §14.3)."""

    @property
    def terminated(self) -> int | None:
        value = self.thread.get("terminated")
        return value if isinstance(value, int) else None


class ThreadUpdated(Wire):
    id: str
    agent_id: str
    user_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    env_types: dict[str, str] | None = None
    created_at: int = 0
    overlap: str | None = None


class DeletedThreads(Wire):
    thread_id: str = Field(alias="threadId")
    deleted_thread_ids: list[str] = Field(alias="deletedThreadIds")
    deleted_count: int = Field(alias="deletedCount")


class ImportedThreads(Wire):
    """``POST /api/threads/import`` (spec 21 §21.6): the root thread stored and every
    thread's id, parents first."""

    thread_id: str = Field(alias="threadId")
    thread_ids: list[str] = Field(alias="threadIds")


class CompactionList(Wire):
    """``GET /api/threads/{id}/compactions`` (spec 23 §23.6): the thread's compactions,
    oldest first, undone ones included; ``active``: the id of the one the next request
    uses, or None."""

    compactions: list[Compaction]
    active: str | None = None


class Owner(Wire):
    user_id: str | None = None
    username: str | None = None
    display_name: str | None = None
    email: str | None = None
    thread_count: int = 0


class Accepted(Wire):
    """202 of ``continue``."""

    status: str = "queued"
    queue_id: str = Field(alias="queueId")


class StopResult(Wire):
    was_running: bool = Field(alias="wasRunning")
    settled: bool = True


class TerminateResult(Wire):
    terminated: int
    already_terminated: bool = Field(alias="alreadyTerminated")


class CostReport(Wire):
    total_cost: float = Field(alias="totalCost")
    llm_cost: float = Field(0.0, alias="llmCost")
    app_cost: float = Field(0.0, alias="appCost")
    own_cost: float = Field(0.0, alias="ownCost")
    request_count: int = Field(0, alias="requestCount")
    unpriced_request_count: int = Field(0, alias="unpricedRequestCount")
    message_count: int = Field(0, alias="messageCount")
    model_breakdown: list[dict[str, Any]] = Field(default_factory=list, alias="modelBreakdown")
    threads: list[dict[str, Any]] = Field(default_factory=list)
    truncated: bool = False


class SubagentEntry(Wire):
    """One child of ``GET /subagents`` and of ``subagent_updated`` frames (spec 08 §8.2.7)."""

    id: str
    relationship: str | None = None
    agent_name: str | None = None
    title: str | None = None
    thread_name: str | None = Field(None, alias="threadName")
    status: str | None = None
    blocking: bool | None = None
    resumable: bool | None = None
    owner: str | None = None
    description: str | None = None
    created_at: int | None = Field(None, alias="createdAt")
    spawn_group_id: str | None = Field(None, alias="spawnGroupId")


class SendResult(Wire):
    """``POST /messages``: 202 queued, or 200 ``duplicate`` (spec 08 §8.4.2 step 3)."""

    message_id: str = Field(alias="messageId")
    queue_id: str | None = Field(None, alias="queueId")
    status: str = "queued"

    @property
    def duplicate(self) -> bool:
        return self.status == "duplicate"


class LogRow(Wire):
    id: str
    kind: str | None = None
    message_id: str | None = None
    provider: str | None = None
    model: str | None = None
    created_at: int = 0
    is_complete: bool = True
    error: str | None = None
    cost_total: float | None = None


class LogDetail(LogRow):
    request_body: str | None = None
    response_body: str | None = None


class LogPage(Wire):
    logs: list[LogRow]
    total: int
    has_more: bool = Field(alias="hasMore")


class FileStats(Wire):
    total_size: int = Field(alias="totalSize")
    file_count: int = Field(alias="fileCount")


class GrepHit(Wire):
    path: str
    name: str | None = None
    snippet: str | None = None


class AgentInfo(Wire):
    id: str
    name: str | None = None
    title: str | None = None
    description: str | None = None
    primary: bool = True


class PromptInfo(Wire):
    id: str
    name: str | None = None


class ModelInfo(Wire):
    id: str
    name: str | None = None
    provider: str | None = None
    model: str | None = None


class ToolInfo(Wire):
    description: str | None = None
    schema_: Any = Field(None, alias="schema")
    type: str | None = None
    has_error: bool = Field(False, alias="hasError")


class Health(Wire):
    status: Literal["ok", "unavailable"] | str
    version: str | None = None
    node: str | None = None
    store: str | None = None


# -- spec 10: auth, API keys, users ------------------------------------------------------------


class AuthUser(Wire):
    """The caller as ``GET /api/auth/me`` and ``POST /api/auth/login`` show it (§10.5.2/4)."""

    id: str
    username: str | None = None
    role: str | None = None
    permissions: list[str] | None = None
    roles: list[str] = Field(default_factory=list)
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None


class Me(Wire):
    """``GET /api/auth/me``: the principal and how it authenticated."""

    user: AuthUser
    auth_type: str = Field(alias="authType")


class AuthConfig(Wire):
    """``GET /api/auth/config`` (public): how this server authenticates."""

    local_password: bool = Field(alias="localPassword")
    auth_required: bool = Field(alias="authRequired")
    local_mode: bool = Field(alias="localMode")
    hosted: bool = False
    github: bool = False
    google: bool = False
    platform_connected: bool = Field(False, alias="platformConnected")


class LoginResult(Wire):
    """``POST /api/auth/login``: a session token (the client uses it from then on)."""

    token: str = Field(repr=False)
    user: AuthUser


class ApiKey(Wire):
    """An API key as listed (§10.5.7): never the key itself; times in seconds."""

    id: str
    name: str
    key_prefix: str | None = None
    last_five: str | None = None
    user_id: str | None = None
    created_at: int | None = None
    last_used_at: int | None = None
    expires_at: int | None = None


class CreatedApiKey(ApiKey):
    """``POST /api/api-keys``: the only answer that shows the key."""

    key: str = Field(repr=False)


class User(Wire):
    """A user row of ``/api/users`` (§10.5.8); ``created_at`` in seconds."""

    id: str
    username: str
    role: str
    permissions: list[str] | None = None
    roles: list[str] = Field(default_factory=list)
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None
    created_at: int | None = None
