"""Typed stream frames of spec 09 (spec 11 §11.5.1): one pydantic model per frame type, plus
``UnknownFrame`` for types this client does not know (never an exception)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from threadloom.client.models import Approval, LogRow, SubagentEntry
from threadloom.records import Message, ThreadStatus

DURABLE = frozenset(
    {
        "thread_status",
        "message_data",
        "message_deleted",
        "log_data",
        "subagent_updated",
        "subagent_removed",
        "approval_requested",
        "approval_decided",
        "state_updated",
    }
)
FILE_EVENTS = frozenset({"file_created", "file_updated", "file_deleted", "file_moved"})


class Frame(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: str
    seq: int = 0

    @property
    def durable(self) -> bool:
        return self.type in DURABLE


class ThreadStatusFrame(Frame):
    type: Literal["thread_status"] = "thread_status"
    thread_id: str | None = None
    status: ThreadStatus
    terminated: int | None = None
    snapshot: bool = False
    head: int | None = None

    @property
    def durable(self) -> bool:
        return not self.snapshot


class MessageDataFrame(Frame):
    type: Literal["message_data"] = "message_data"
    message_id: str
    depth: int = 0
    data: Message


class MessageChunkFrame(Frame):
    type: Literal["message_chunk"] = "message_chunk"
    message_id: str
    depth: int = 0
    chunk: str
    offset: int = 0


class ReasoningChunkFrame(Frame):
    type: Literal["reasoning_chunk"] = "reasoning_chunk"
    message_id: str
    depth: int = 0
    chunk: str
    offset: int = 0


class MessageDeletedFrame(Frame):
    type: Literal["message_deleted"] = "message_deleted"
    message_id: str
    depth: int = 0


class LogDataFrame(Frame):
    type: Literal["log_data"] = "log_data"
    log_id: str
    data: LogRow


class StoppedByUserFrame(Frame):
    type: Literal["stopped_by_user"] = "stopped_by_user"
    timestamp: int | None = None


class SubagentUpdatedFrame(Frame):
    type: Literal["subagent_updated"] = "subagent_updated"
    subagent_id: str
    data: SubagentEntry


class SubagentRemovedFrame(Frame):
    type: Literal["subagent_removed"] = "subagent_removed"
    subagent_id: str


class ApprovalRequestedFrame(Frame):
    """A tool call waits for a person's decision (spec 14 §14.3): ``data`` is the approval."""

    type: Literal["approval_requested"] = "approval_requested"
    tool_call_id: str
    data: Approval


class ApprovalDecidedFrame(Frame):
    """An approval was decided (approved, rejected) or cancelled: ``data`` as it is now."""

    type: Literal["approval_decided"] = "approval_decided"
    tool_call_id: str
    data: Approval


class StateUpdatedFrame(Frame):
    """The thread's shared state changed (spec 09 §9.9.8): the whole state, its version."""

    type: Literal["state_updated"] = "state_updated"
    state: dict[str, Any]
    version: int
    updated_at: int | None = None


class EventFrame(Frame):
    type: Literal["event"] = "event"
    event_type: str = Field(alias="eventType")
    data: Any = None
    timestamp: int | None = None

    @property
    def durable(self) -> bool:
        return self.event_type in FILE_EVENTS


class TelemetryFrame(Frame):
    fields: dict[str, Any] = Field(default_factory=dict)


class HeartbeatFrame(Frame):
    type: Literal["heartbeat"] = "heartbeat"


class ResyncFrame(Frame):
    type: Literal["resync"] = "resync"


class ErrorFrame(Frame):
    type: Literal["error"] = "error"
    error: str | None = None
    code: str | None = None


class UnknownFrame(Frame):
    raw: dict[str, Any] = Field(default_factory=dict)


class MalformedFrame(Frame):
    """A frame of a known type that did not validate: dropped whole by the reducer."""

    raw: dict[str, Any] = Field(default_factory=dict)
    problem: str = ""


_TYPED: dict[str, type[Frame]] = {
    "thread_status": ThreadStatusFrame,
    "message_data": MessageDataFrame,
    "message_chunk": MessageChunkFrame,
    "reasoning_chunk": ReasoningChunkFrame,
    "message_deleted": MessageDeletedFrame,
    "log_data": LogDataFrame,
    "stopped_by_user": StoppedByUserFrame,
    "subagent_updated": SubagentUpdatedFrame,
    "subagent_removed": SubagentRemovedFrame,
    "approval_requested": ApprovalRequestedFrame,
    "approval_decided": ApprovalDecidedFrame,
    "state_updated": StateUpdatedFrame,
    "event": EventFrame,
    "heartbeat": HeartbeatFrame,
    "resync": ResyncFrame,
    "error": ErrorFrame,
}
TELEMETRY = frozenset(
    {
        "step_started",
        "step_completed",
        "llm_request",
        "llm_response",
        "fallback_triggered",
        "tool_started",
        "tool_completed",
        "stopped",
        "agent_handoff",
        "budget_warning",
    }
)


def parse_frame(raw: dict[str, Any]) -> Frame:
    """The typed frame of one decoded JSON object."""
    kind = raw.get("type")
    seq = raw.get("seq") if isinstance(raw.get("seq"), int) else 0
    if not isinstance(kind, str):
        return MalformedFrame(type="?", seq=seq, raw=raw, problem="no type")
    cls = _TYPED.get(kind)
    if cls is None:
        if kind in TELEMETRY:
            return TelemetryFrame(type=kind, seq=seq, fields=raw)
        return UnknownFrame(type=kind, seq=seq, raw=raw)
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        return MalformedFrame(type=kind, seq=seq, raw=raw, problem=str(exc))
