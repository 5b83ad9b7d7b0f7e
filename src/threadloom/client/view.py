"""What the reducer works on (spec 11 §11.3.8, §11.6.2): the events it takes and the
``ThreadView`` it returns. The reducer itself is ``threadloom.client.reduce``, which
re-exports every name of this module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from threadloom.client.chat import (
    AgentError,
    Message,
    Outcome,
    Phase,
    ToolCall,
    no_values,
)
from threadloom.client.frames import (
    Frame,
)
from threadloom.client.models import Approval, LogRow, SharedState, SubagentEntry
from threadloom.records import Message as Record
from threadloom.records import ThreadStatus

LOCAL = "local:"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An authoritative reload over REST."""

    records: Sequence[Record]
    status: ThreadStatus | None
    terminated: int | None
    seq: int
    subagents: Sequence[SubagentEntry] = ()
    approvals: Sequence[Approval] = ()
    """The pending approvals the thread read showed (``ThreadDetail.approvals``)."""


@dataclass(frozen=True, slots=True)
class FrameEvent:
    frame: Frame | Mapping[str, Any]
    received_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class LocalSend:
    local_id: str
    content: str
    role: Literal["user", "assistant", "system"] = "user"
    attachments: tuple[Any, ...] = ()
    silent: bool = False
    metadata: Mapping[str, Any] | None = None
    at_ms: int = 0


@dataclass(frozen=True, slots=True)
class SendAccepted:
    local_id: str
    message_id: str
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class SendFailed:
    local_id: str
    error: AgentError
    terminated: int | None = None


@dataclass(frozen=True, slots=True)
class StatusChecked:
    records: Sequence[Record]


ReducerEvent = Snapshot | FrameEvent | LocalSend | SendAccepted | SendFailed | StatusChecked


@dataclass(frozen=True, slots=True)
class ThreadView:
    thread_id: str
    status: ThreadStatus | None = None
    terminated: int | None = None
    seq: int = 0
    generation: str | None = None
    messages: tuple[Message, ...] = ()
    tool_calls: Mapping[str, ToolCall] = field(default_factory=no_values)
    subagents: Mapping[str, SubagentEntry] = field(default_factory=no_values)
    logs: Mapping[str, LogRow] = field(default_factory=no_values)
    approvals: Mapping[str, Approval] = field(default_factory=no_values)
    """Tool-call approvals by tool call id (spec 14): the pending ones of the last snapshot,
    then as ``approval_requested`` / ``approval_decided`` frames show them."""
    shared_state: SharedState | None = None
    """The thread's shared state (spec 02 §2.20) as the last ``state_updated`` frame showed
    it (``None``: no frame yet; read it with ``client.threads.state``)."""
    error: AgentError | None = None
    extra: Mapping[str, Any] = field(default_factory=no_values)
    """Reducer bookkeeping: ``snapshot_seq``, ``aliases`` (local id → server id),
    ``provisional`` (ids completed ERROR by their own record in the running generation),
    ``reasoning_started`` (id → ms), ``malformed`` (frames dropped whole)."""

    def visible(self, *, include_silent: bool = False, max_depth: int = 0) -> tuple[Message, ...]:
        return tuple(
            m for m in self.messages if (include_silent or not m.silent) and m.depth <= max_depth
        )

    @property
    def queue(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.delivery.phase in (Phase.SENDING, Phase.QUEUED))

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.state == "running"

    @property
    def pending_approvals(self) -> tuple[Approval, ...]:
        """The approvals waiting for a decision, oldest first."""
        waiting = (a for a in self.approvals.values() if a.state == "pending")
        return tuple(sorted(waiting, key=lambda a: a.requested_at))

    def by_id(self, message_id: str) -> Message | None:
        return next((m for m in self.messages if m.id == message_id), None)

    def by_key(self, key: str) -> Message | None:
        return next((m for m in self.messages if m.key == key), None)


def empty_view(thread_id: str) -> ThreadView:
    return ThreadView(thread_id=thread_id)


def outcome_of(status: ThreadStatus | None) -> Outcome:
    """The outcome a status gives the messages of the generation it ends (§11.5.4 rule 4)."""
    if status is None:
        return Outcome.SUCCESS
    reason = status.reason
    if reason in ("aborted_by_user", "terminated"):
        return Outcome.ABORTED
    if reason in ("awaiting_human", "forced_human_turn", "awaiting_approval"):
        return Outcome.PAUSED
    if reason in ("execution_lost", "interrupted", "aborted"):
        return Outcome.INTERRUPTED
    if status.state == "failed":
        return Outcome.ERROR
    return Outcome.SUCCESS
