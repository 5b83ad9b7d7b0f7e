"""The pure reducer: server records, stream frames and local sends → ``ThreadView``
(spec 11 §11.3.8, §11.5.4, §11.6.2–§11.6.3).

No I/O, no clock, no randomness: times and ids come in through the events. Views are never
mutated; a change gives a new view in which unchanged messages are the same objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from threadloom.client.chat import (
    AgentError,
    AttachmentUrl,
    ContentBlock,
    Delivery,
    Message,
    Outcome,
    Phase,
    TextBlock,
    ToolCall,
    decode_json,
    from_record,
    frozen,
    upload_blocks,
)
from threadloom.client.frames import (
    ApprovalDecidedFrame,
    ApprovalRequestedFrame,
    EventFrame,
    Frame,
    LogDataFrame,
    MalformedFrame,
    MessageChunkFrame,
    MessageDataFrame,
    MessageDeletedFrame,
    ReasoningChunkFrame,
    StateUpdatedFrame,
    SubagentRemovedFrame,
    SubagentUpdatedFrame,
    ThreadStatusFrame,
    parse_frame,
)
from threadloom.client.models import SharedState
from threadloom.client.view import (
    LOCAL,
    FrameEvent,
    LocalSend,
    ReducerEvent,
    SendAccepted,
    SendFailed,
    Snapshot,
    StatusChecked,
    ThreadView,
    empty_view,
    outcome_of,
)
from threadloom.records import Message as Record
from threadloom.records import ThreadStatus

__all__ = [
    "LOCAL",
    "FrameEvent",
    "LocalSend",
    "ReducerEvent",
    "SendAccepted",
    "SendFailed",
    "Snapshot",
    "StatusChecked",
    "ThreadView",
    "empty_view",
    "outcome_of",
    "reduce",
    "reduce_all",
]


# ---------------------------------------------------------------------------------------------
# The working state of one reduction: plain copies, turned back into an immutable view at the end.


class _Work:
    def __init__(self, view: ThreadView, attachment_url: AttachmentUrl | None = None) -> None:
        self.view = view
        self.attachment_url = attachment_url
        self.messages = list(view.messages)
        self.tool_calls = dict(view.tool_calls)
        self.extra = dict(view.extra)
        self.aliases: dict[str, str] = dict(self.extra.get("aliases", {}))
        self.provisional: set[str] = set(self.extra.get("provisional", ()))
        self.reasoning_started: dict[str, int] = dict(self.extra.get("reasoning_started", {}))
        self.fields: dict[str, Any] = {}

    @property
    def generation(self) -> str | None:
        value: str | None = self.fields.get("generation", self.view.generation)
        return value

    @property
    def status(self) -> ThreadStatus | None:
        value: ThreadStatus | None = self.fields.get("status", self.view.status)
        return value

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.state == "running"

    def index_of(self, message_id: str) -> int | None:
        for i, m in enumerate(self.messages):
            if m.id == message_id:
                return i
        return None

    def correlate(self, record: Record) -> int | None:
        """§11.6.3: same id, then the alias table, then ``metadata.client_message_id``."""
        found = self.index_of(record.id)
        if found is not None:
            return found
        for local_id, server_id in self.aliases.items():
            if server_id == record.id:
                found = self.index_of(LOCAL + local_id)
                if found is not None:
                    return found
        cmid = (record.metadata or {}).get("client_message_id")
        if isinstance(cmid, str):
            for i, m in enumerate(self.messages):
                if m.key == LOCAL + cmid and m.id.startswith(LOCAL):
                    return i
        return None

    def finish(self) -> ThreadView:
        extra = dict(self.extra)
        extra["aliases"] = frozen(self.aliases)
        extra["provisional"] = frozenset(self.provisional)
        extra["reasoning_started"] = frozen(self.reasoning_started)
        messages = tuple(_ordered(self.messages))
        new = replace(
            self.view,
            messages=messages,
            tool_calls=frozen(self.tool_calls),
            extra=frozen({k: v for k, v in extra.items() if v or k == "snapshot_seq"}),
            **self.fields,
        )
        return _same(self.view, new)


def _same(old: ThreadView, new: ThreadView) -> ThreadView:
    """``old`` itself when nothing changed."""
    return old if new == old else new


def _queue_region(m: Message) -> bool:
    if m.delivery.phase in (Phase.SENDING, Phase.QUEUED):
        return True
    if m.id.startswith(LOCAL):
        return True
    return bool(m.metadata.get("queued"))


def _ordered(messages: list[Message]) -> list[Message]:
    """Canonical order: stored messages by ``created_at``, then queue entries and local sends by
    the time they were queued or sent (stable for ties)."""

    def key(item: tuple[int, Message]) -> tuple[int, float, int]:
        index, m = item
        at = m.created_at_us if m.created_at_us is not None else math.inf
        return (1 if _queue_region(m) else 0, at, index)

    return [m for _, m in sorted(enumerate(messages), key=key)]


def _with_text(m: Message, text: str) -> Message:
    if isinstance(m.content, str):
        return replace(m, content=text)
    blocks: list[ContentBlock] = [b for b in m.content if not isinstance(b, TextBlock)]
    head: list[ContentBlock] = [TextBlock(text=text)] if text else []
    return replace(m, content=tuple(head + blocks))


def _delivery_for(work: _Work, record: Record, old: Message | None) -> Delivery:
    """Rule 3 of §11.5.4."""
    meta = record.metadata or {}
    if old is not None and old.delivery.is_complete:
        locally_failed = old.delivery.generation.startswith("send:") and old.delivery.outcome in (
            Outcome.ERROR,
            Outcome.REJECTED,
        )
        if not locally_failed:
            return old.delivery
    if record.status == "pending" and meta.get("queued"):
        if meta.get("queue_status") == "cancelled":
            return Delivery.complete(f"queue:{record.id}", Outcome.ABORTED)
        return Delivery.queued(f"queue:{record.id}")
    if record.status == "pending":
        if work.running:
            return Delivery.streaming(work.generation or "run:?")
        return Delivery.complete(record.id, outcome_of(work.status))
    failed = record.status == "failed"
    if old is not None and old.delivery.phase is Phase.STREAMING:
        generation = old.delivery.generation
        if failed:
            if work.running and generation == work.generation:
                work.provisional.add(record.id)
            return Delivery.complete(generation, Outcome.ERROR)
        return Delivery.complete(generation, Outcome.SUCCESS)
    return Delivery.complete(record.id, Outcome.ERROR if failed else Outcome.SUCCESS)


def _apply_tools(work: _Work, record: Record, message: Message) -> None:
    for block in message.tool_uses:
        known = work.tool_calls.get(block.id)
        if known is None:
            work.tool_calls[block.id] = ToolCall(
                id=block.id,
                name=block.name,
                args=block.args,
                status="pending",
                args_raw=block.args_raw,
                message_id=message.id,
            )
        else:
            work.tool_calls[block.id] = replace(
                known,
                name=block.name or known.name,
                args=block.args,
                args_raw=block.args_raw,
                message_id=message.id,
            )
    if record.role == "tool" and record.tool_call_id:
        call_id = record.tool_call_id
        known = work.tool_calls.get(call_id)
        ok = record.tool_status in ("success", None)
        result = decode_json(record.content)
        settled_fields: dict[str, Any] = {
            "status": "complete" if ok else "error",
            "result": result,
            "error": None if ok else (record.content or ""),
        }
        if known is None:
            work.tool_calls[call_id] = ToolCall(
                id=call_id, name=record.name or "", args=None, **settled_fields
            )
        else:
            work.tool_calls[call_id] = replace(known, **settled_fields)


def _upsert(work: _Work, record: Record, received_at_ms: int | None, *, live: bool) -> None:
    """Rule 2: replace the correlated message (keeping its key), or insert."""
    index = work.correlate(record)
    old = work.messages[index] if index is not None else None
    delivery = _delivery_for(work, record, old)
    message = from_record(
        record,
        delivery,
        key=old.key if old is not None else None,
        thread_id=work.view.thread_id,
        attachment_url=work.attachment_url,
    )
    if old is not None:
        if record.status == "pending" and old.delivery.phase is Phase.STREAMING:
            message = replace(message, reasoning=message.reasoning or old.reasoning)
        if message.reasoning_duration_ms is None and old.reasoning_duration_ms is not None:
            message = replace(message, reasoning_duration_ms=old.reasoning_duration_ms)
    if (
        live
        and message.reasoning_duration_ms is None
        and record.status != "pending"
        and record.id in work.reasoning_started
        and received_at_ms is not None
    ):
        message = replace(
            message, reasoning_duration_ms=received_at_ms - work.reasoning_started[record.id]
        )
    if record.status != "pending":
        work.reasoning_started.pop(record.id, None)
    if old is not None and message == old:
        message = old
    if index is None:
        work.messages.append(message)
    else:
        work.messages[index] = message
    _apply_tools(work, record, message)


def _status(work: _Work, frame_status: ThreadStatus, terminated: int | None) -> None:
    """Rule 4."""
    old = work.status
    if old == frame_status and terminated == work.view.terminated:
        return
    work.fields["terminated"] = terminated
    if old == frame_status:
        return
    work.fields["status"] = frame_status
    was_running = old is not None and old.state == "running"
    old_generation = work.view.generation
    new_generation = f"run:{frame_status.since}" if frame_status.state == "running" else None
    if was_running and old_generation is not None and old_generation != new_generation:
        outcome = outcome_of(frame_status)
        for i, m in enumerate(work.messages):
            if m.delivery.generation != old_generation:
                continue
            if m.delivery.phase is Phase.STREAMING or (
                m.id in work.provisional and outcome is not Outcome.SUCCESS
            ):
                work.messages[i] = replace(m, delivery=Delivery.complete(old_generation, outcome))
        work.provisional.clear()
    work.fields["generation"] = new_generation
    if frame_status.state == "running" and not was_running:
        work.fields["error"] = None
    if frame_status.state == "failed":
        cause = frame_status.error  # why it failed (spec 01 §1.7.4); None from older servers
        work.fields["error"] = AgentError(
            kind="server",
            message=cause.message if cause is not None else frame_status.reason or "failed",
            retryable=cause.retryable if cause is not None else True,
            recovery="retry" if cause is not None and cause.retryable else "check",
            detail=cause,
        )


def _chunk(work: _Work, frame: MessageChunkFrame | ReasoningChunkFrame, at_ms: int | None) -> bool:
    """Rule 5; False when the chunk changes nothing."""
    index = work.index_of(frame.message_id)
    if index is None:
        placeholder = Message(
            id=frame.message_id,
            key=frame.message_id,
            role="assistant",
            content="",
            delivery=Delivery.streaming(work.generation or "run:?"),
            status="pending",
            depth=frame.depth,
        )
        work.messages.append(placeholder)
        index = len(work.messages) - 1
    m = work.messages[index]
    if m.delivery.is_complete:
        return False
    reasoning = isinstance(frame, ReasoningChunkFrame)
    current = (m.reasoning or "") if reasoning else m.text
    if frame.offset <= len(current):
        updated = current[: frame.offset] + frame.chunk
        m = replace(m, reasoning=updated) if reasoning else _with_text(m, updated)
    else:
        m = replace(m, extra=frozen({**m.extra, "gap": True}))
    if at_ms is not None and m.reasoning_duration_ms is None:
        if reasoning:
            work.reasoning_started.setdefault(m.id, at_ms)
        elif frame.chunk and m.id in work.reasoning_started:
            m = replace(m, reasoning_duration_ms=at_ms - work.reasoning_started[m.id])
    work.messages[index] = m
    return True


def _event(work: _Work, frame: EventFrame, at_ms: int | None) -> bool:
    data = frame.data if isinstance(frame.data, Mapping) else {}
    call_id = data.get("id")
    if not isinstance(call_id, str):
        return False
    message_id = data.get("message_id") if isinstance(data.get("message_id"), str) else None
    if frame.event_type == "tool_call_started":
        known = work.tool_calls.get(call_id)
        if known is None:
            work.tool_calls[call_id] = ToolCall(
                id=call_id,
                name=str(data.get("name") or ""),
                args=None,
                status="running",
                message_id=message_id,
            )
        elif not known.settled:
            work.tool_calls[call_id] = replace(known, status="running")
        index = work.index_of(message_id) if message_id else None
        if index is not None and at_ms is not None:
            m = work.messages[index]
            if m.reasoning_duration_ms is None and m.id in work.reasoning_started:
                work.messages[index] = replace(
                    m, reasoning_duration_ms=at_ms - work.reasoning_started[m.id]
                )
        return True
    if frame.event_type == "tool_call_done":
        index = work.index_of(message_id) if message_id else None
        if index is None:
            return False
        m = work.messages[index]
        done = dict(m.extra.get("done_status", {}))
        done[call_id] = data.get("status")
        work.messages[index] = replace(m, extra=frozen({**m.extra, "done_status": frozen(done)}))
        return True
    return False


def _frame(
    view: ThreadView, frame: Frame, at_ms: int | None, attachment_url: AttachmentUrl | None
) -> ThreadView:
    if isinstance(frame, MalformedFrame):
        return replace(view, extra=frozen({**view.extra, "malformed": _malformed(view) + 1}))
    snapshot_seq = view.extra.get("snapshot_seq")
    if frame.durable and snapshot_seq is not None and frame.seq <= view.seq:
        return view  # rule 11: already contained in the snapshot or applied
    work = _Work(view, attachment_url)
    changed = True
    if isinstance(frame, ThreadStatusFrame):
        _status(work, frame.status, frame.terminated)
    elif isinstance(frame, MessageDataFrame):
        _upsert(work, frame.data, at_ms, live=True)
    elif isinstance(frame, MessageChunkFrame | ReasoningChunkFrame):
        changed = _chunk(work, frame, at_ms)
    elif isinstance(frame, MessageDeletedFrame):
        index = work.index_of(frame.message_id)
        if index is not None:
            removed = work.messages.pop(index)
            work.tool_calls = {
                k: c for k, c in work.tool_calls.items() if c.message_id != removed.id
            }
    elif isinstance(frame, SubagentUpdatedFrame):
        work.fields["subagents"] = frozen({**view.subagents, frame.subagent_id: frame.data})
    elif isinstance(frame, SubagentRemovedFrame):
        work.fields["subagents"] = frozen(
            {k: v for k, v in view.subagents.items() if k != frame.subagent_id}
        )
    elif isinstance(frame, LogDataFrame):
        work.fields["logs"] = frozen({**view.logs, frame.log_id: frame.data})
    elif isinstance(frame, ApprovalRequestedFrame | ApprovalDecidedFrame):
        work.fields["approvals"] = frozen({**view.approvals, frame.tool_call_id: frame.data})
    elif isinstance(frame, StateUpdatedFrame):  # the newest version wins (spec 09 §9.9.8)
        held = view.shared_state
        changed = held is None or frame.version > held.version
        if changed:
            work.fields["shared_state"] = SharedState(
                state=frame.state, version=frame.version, updated_at=frame.updated_at
            )
    elif isinstance(frame, EventFrame):
        changed = _event(work, frame, at_ms)
    else:
        changed = False  # rule 12: unknown, telemetry, heartbeat, error, resync
    if not changed:
        return view
    if frame.durable and frame.seq > view.seq:
        work.fields["seq"] = frame.seq
    return work.finish()


def _malformed(view: ThreadView) -> int:
    count = view.extra.get("malformed", 0)
    return count if isinstance(count, int) else 0


def _snapshot(
    view: ThreadView, event: Snapshot, attachment_url: AttachmentUrl | None
) -> ThreadView:
    """Rule 13."""
    work = _Work(view, attachment_url)
    generation = view.generation
    present = {r.id for r in event.records}
    cmids = {(r.metadata or {}).get("client_message_id") for r in event.records if r.metadata}
    kept: list[Message] = []
    for m in view.messages:
        if m.id in present:
            kept.append(m)
        elif m.id.startswith(LOCAL) and m.key[len(LOCAL) :] not in cmids:
            kept.append(m)  # local send without server evidence
        elif (
            m.delivery.phase is Phase.STREAMING
            and generation is not None
            and m.delivery.generation == generation
        ):
            kept.append(m)  # still being generated
    work.messages = kept
    keep_ids = {m.id for m in kept}
    work.tool_calls = {
        k: c for k, c in work.tool_calls.items() if c.message_id is None or c.message_id in keep_ids
    }
    if event.status is not None:
        work.fields["status"] = event.status
        work.fields["generation"] = (
            f"run:{event.status.since}" if event.status.state == "running" else None
        )
    work.fields["terminated"] = event.terminated
    work.fields["seq"] = event.seq
    work.extra["snapshot_seq"] = event.seq
    work.fields["subagents"] = frozen({s.id: s for s in event.subagents})
    work.fields["approvals"] = frozen({a.tool_call_id: a for a in event.approvals})
    for record in event.records:
        _upsert(work, record, None, live=False)
    return work.finish()


def _local_send(view: ThreadView, event: LocalSend) -> ThreadView:
    work = _Work(view)
    for i, m in enumerate(work.messages):
        if m.key == LOCAL + event.local_id:  # a retry (§11.6.2): sending again
            work.messages[i] = replace(m, delivery=Delivery.sending(f"send:{event.local_id}"))
            work.fields["error"] = None
            return work.finish()
    metadata = dict(event.metadata or {})
    metadata["client_message_id"] = event.local_id
    content: str | tuple[ContentBlock, ...] = event.content
    if event.attachments:
        text = (TextBlock(text=event.content),) if event.content else ()
        content = text + upload_blocks(event.attachments)
    work.messages.append(
        Message(
            id=LOCAL + event.local_id,
            key=LOCAL + event.local_id,
            role=event.role,
            content=content,
            delivery=Delivery.sending(f"send:{event.local_id}"),
            silent=event.silent,
            created_at_us=event.at_ms * 1000,
            metadata=frozen(metadata),
        )
    )
    return work.finish()


def _accepted(view: ThreadView, event: SendAccepted) -> ThreadView:
    work = _Work(view)
    work.aliases[event.local_id] = event.message_id
    for i, m in enumerate(work.messages):
        if m.key != LOCAL + event.local_id:
            continue
        updated = m
        if m.id.startswith(LOCAL):
            updated = replace(updated, id=event.message_id)
        if m.delivery.phase is Phase.SENDING:
            updated = replace(updated, delivery=Delivery.queued(f"queue:{event.message_id}"))
        work.messages[i] = updated
    return work.finish()


def _failed(view: ThreadView, event: SendFailed) -> ThreadView:
    work = _Work(view)
    outcome = Outcome.REJECTED if event.error.kind == "rejected" else Outcome.ERROR
    for i, m in enumerate(work.messages):
        if m.key == LOCAL + event.local_id and m.delivery.phase is Phase.SENDING:
            work.messages[i] = replace(
                m, delivery=Delivery.complete(f"send:{event.local_id}", outcome)
            )
    work.fields["error"] = event.error
    if event.terminated is not None:
        work.fields["terminated"] = event.terminated
    return work.finish()


def _checked(
    view: ThreadView, event: StatusChecked, attachment_url: AttachmentUrl | None
) -> ThreadView:
    work = _Work(view, attachment_url)
    for record in event.records:
        _upsert(work, record, None, live=False)
    return work.finish()


def reduce(
    view: ThreadView, event: ReducerEvent, *, attachment_url: AttachmentUrl | None = None
) -> ThreadView:
    """The next view (spec 11 §11.5.4). Pure; ``view`` and ``event`` are never mutated.
    ``attachment_url`` builds the URLs of the image/file blocks of records (§11.4)."""
    if isinstance(event, FrameEvent):
        frame = event.frame
        if not isinstance(frame, Frame):
            frame = parse_frame(dict(frame))
        return _frame(view, frame, event.received_at_ms, attachment_url)
    if isinstance(event, Snapshot):
        return _snapshot(view, event, attachment_url)
    if isinstance(event, LocalSend):
        return _local_send(view, event)
    if isinstance(event, SendAccepted):
        return _accepted(view, event)
    if isinstance(event, SendFailed):
        return _failed(view, event)
    return _checked(view, event, attachment_url)


def reduce_all(
    view: ThreadView,
    events: Iterable[ReducerEvent],
    *,
    attachment_url: AttachmentUrl | None = None,
) -> ThreadView:
    for event in events:
        view = reduce(view, event, attachment_url=attachment_url)
    return view
