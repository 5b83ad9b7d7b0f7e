"""A live thread → AG-UI events (spec 11 §11.7.3, "Export of a live thread").

``AguiExporter.feed(frame)`` turns each stream frame of spec 09 into the AG-UI events it means,
keeping what it already emitted so that a replayed record or a catch-up chunk after a reconnect
emits nothing twice. ``agui_events(client, thread_id)`` does the whole job over a real
connection: load, stream, reload on ``resync``. ``encode_sse`` writes events as SSE.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from threadloom.client.chat import AttachmentRef, parse_tool_calls
from threadloom.client.convert.agui.interrupts import approval_interrupts
from threadloom.client.convert.agui.messages import to_agui_messages
from threadloom.client.frames import (
    ApprovalDecidedFrame,
    ApprovalRequestedFrame,
    Frame,
    MessageChunkFrame,
    MessageDataFrame,
    MessageDeletedFrame,
    ReasoningChunkFrame,
    ResyncFrame,
    SubagentUpdatedFrame,
    ThreadStatusFrame,
    parse_frame,
)
from threadloom.client.models import SubagentEntry
from threadloom.client.reduce import FrameEvent, Snapshot, ThreadView, empty_view, reduce
from threadloom.records import Message as Record
from threadloom.records import ThreadStatus

if TYPE_CHECKING:
    from threadloom.client.http import AsyncClient

__all__ = ["AguiExporter", "agui_events", "encode_sse"]


def by_side_b(record: Record) -> bool:
    """A message side b's model wrote (a ``dual_ai`` agent): stored ``user`` (spec 04
    §4.8.1) with the prompt that wrote it, where a person's message has none."""
    return record.role == "user" and record.prompt is not None


_CANCELLED = frozenset({"aborted_by_user", "terminated"})
_FINISHED = frozenset({"idle", "terminated"})


class AguiExporter:
    """Turns the frames of one thread's stream into AG-UI events.

    The first ``feed`` (and the first after a ``resync`` frame) starts with a
    ``MessagesSnapshotEvent`` of the exporter's view: the ``view`` given at construction (a
    ``Snapshot`` reduced onto an empty view), kept current by reducing every frame fed. After a
    resync the caller reloads and passes the new view to ``snapshot(view)``.

    With ``subagent_run_id`` (a child thread exported into its parent's event stream) every
    content event carries that id, and the run lifecycle events and the messages snapshot,
    which belong to the parent's run, are not emitted.
    """

    def __init__(
        self,
        thread_id: str,
        *,
        subagent_run_id: str | None = None,
        view: ThreadView | None = None,
        attachment_url: Callable[[AttachmentRef], str] | None = None,
        include_subprompts: bool = False,
    ) -> None:
        self.thread_id = thread_id
        self.subagent_run_id = subagent_run_id
        self.view = view if view is not None else empty_view(thread_id)
        self.attachment_url = attachment_url
        self.include_subprompts = include_subprompts
        self.run_id: str | None = None
        """The AG-UI run id of the execution in progress: ``<thread id>:<status.since>``."""
        self._status: ThreadStatus | None = None
        self._needs_snapshot = True
        self._text: dict[str, str] = {}  # message id → assistant text emitted so far
        self._text_open: set[str] = set()
        self._reasoning: dict[str, str] = {}  # message id → reasoning emitted so far
        self._reasoning_open: set[str] = set()
        self._done: set[str] = set()  # records whose events were emitted in full
        self._queued: set[str] = set()
        self._subagents: dict[str, bool] = {}  # child id → finished
        self._names: dict[str, str] = {}  # message id → its author's name (the side's label)

    # -- helpers -------------------------------------------------------------------------------

    def _child(self) -> dict[str, Any]:
        return {"subagent_run_id": self.subagent_run_id} if self.subagent_run_id else {}

    def _mark_known(self, view: ThreadView) -> None:
        """Settled messages of a snapshot are in it: their records emit nothing again."""
        for m in view.messages:
            if m.delivery.is_complete:
                self._done.add(m.id)
            if m.metadata.get("queued"):
                self._queued.add(m.id)

    def snapshot(self, view: ThreadView | None = None) -> list[BaseEvent]:
        """A ``MessagesSnapshotEvent`` of ``view`` (which becomes the exporter's view)."""
        if view is not None:
            self.view = view
        self._needs_snapshot = False
        self._mark_known(self.view)
        if self.subagent_run_id is not None:
            return []
        messages = to_agui_messages(
            self.view.messages,
            attachment_url=self.attachment_url,
            include_subprompts=self.include_subprompts,
        )
        return [MessagesSnapshotEvent(messages=messages)]

    def feed(self, frame: Frame | Mapping[str, Any]) -> list[BaseEvent]:
        """The AG-UI events of one frame, in order."""
        if not isinstance(frame, Frame):
            frame = parse_frame(dict(frame))
        events: list[BaseEvent] = []
        if self._needs_snapshot:
            events += self.snapshot()
        self.view = reduce(self.view, FrameEvent(frame))
        if isinstance(frame, ResyncFrame):
            self._needs_snapshot = True
        elif isinstance(frame, ThreadStatusFrame):
            events += self._status_events(frame)
        elif isinstance(frame, ReasoningChunkFrame):
            events += self._reasoning_chunk(frame)
        elif isinstance(frame, MessageChunkFrame):
            events += self._message_chunk(frame)
        elif isinstance(frame, MessageDataFrame):
            events += self._record(frame.data)
        elif isinstance(frame, MessageDeletedFrame):
            value = {"id": frame.message_id}
            events.append(
                CustomEvent(name="threadloom.message_deleted", value=value, **self._child())
            )
        elif isinstance(frame, SubagentUpdatedFrame):
            events += self._subagent(frame.data)
        elif isinstance(frame, ApprovalRequestedFrame | ApprovalDecidedFrame):
            value = frame.data.to_wire()
            events.append(CustomEvent(name="threadloom.approval", value=value, **self._child()))
        return events

    # -- run lifecycle -------------------------------------------------------------------------

    def _status_events(self, frame: ThreadStatusFrame) -> list[BaseEvent]:
        new, old = frame.status, self._status
        events: list[BaseEvent] = []
        was_running = old is not None and old.state == "running"
        running = new.state == "running"
        if was_running and (not running or old is None or new.since != old.since):
            events += self._close_all()
            events += self._finish(new)
        if running and (not was_running or old is None or new.since != old.since):
            self.run_id = f"{self.thread_id}:{new.since}"
            if self.subagent_run_id is None:
                events.append(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
        self._status = new
        events.append(
            CustomEvent(
                name="threadloom.thread_status",
                value=new.model_dump(mode="json"),
                **self._child(),
            )
        )
        return events

    def _finish(self, status: ThreadStatus) -> list[BaseEvent]:
        run_id = self.run_id or f"{self.thread_id}:?"
        self.run_id = None
        if self.subagent_run_id is not None:
            return []
        reason = status.reason or ""
        if reason in _CANCELLED:
            outcome: Any = RunFinishedCancelledOutcome()
        elif reason == "awaiting_human":
            outcome = RunFinishedInterruptOutcome(
                interrupts=[Interrupt(id=run_id, reason="awaiting_human")]
            )
        elif reason == "awaiting_approval":  # one interrupt per pending tool call (spec 14)
            interrupts = approval_interrupts(self.view.approvals.values())
            outcome = RunFinishedInterruptOutcome(
                interrupts=interrupts or [Interrupt(id=run_id, reason="awaiting_approval")]
            )
        elif status.state == "failed" or reason == "step_error":
            return [RunErrorEvent(message=reason or "failed", code=reason or "failed")]
        else:
            outcome = RunFinishedSuccessOutcome()
        return [RunFinishedEvent(thread_id=self.thread_id, run_id=run_id, outcome=outcome)]

    def close(self) -> list[BaseEvent]:
        """The END events of the text and reasoning streams still open, for a producer that
        ends its event stream itself (AG-UI wants every START ended before RUN_FINISHED)."""
        return self._close_all()

    def _close_all(self) -> list[BaseEvent]:
        """Ends the streams still open when a run ends (AG-UI wants every START ended)."""
        events: list[BaseEvent] = []
        for message_id in list(self._reasoning_open):
            events += self._close_reasoning(message_id)
        for message_id in list(self._text_open):
            self._text_open.discard(message_id)
            events.append(TextMessageEndEvent(message_id=message_id, **self._child()))
        return events

    # -- streaming -----------------------------------------------------------------------------

    def _delta(
        self, emitted: dict[str, str], frame: MessageChunkFrame | ReasoningChunkFrame
    ) -> str:
        """The part of a chunk beyond what was already emitted ("" for none, or a gap)."""
        before = emitted[frame.message_id]
        if frame.offset > len(before):
            return ""
        end = frame.offset + len(frame.chunk)
        if end <= len(before):
            return ""
        new = frame.chunk[len(before) - frame.offset :]
        emitted[frame.message_id] = before + new
        return new

    def _open_reasoning(self, message_id: str) -> list[BaseEvent]:
        self._reasoning[message_id] = ""
        self._reasoning_open.add(message_id)
        return [
            ReasoningStartEvent(message_id=message_id, **self._child()),
            ReasoningMessageStartEvent(message_id=message_id, role="reasoning", **self._child()),
        ]

    def _close_reasoning(self, message_id: str) -> list[BaseEvent]:
        if message_id not in self._reasoning_open:
            return []
        self._reasoning_open.discard(message_id)
        return [
            ReasoningMessageEndEvent(message_id=message_id, **self._child()),
            ReasoningEndEvent(message_id=message_id, **self._child()),
        ]

    def _reasoning_chunk(self, frame: ReasoningChunkFrame) -> list[BaseEvent]:
        mid = frame.message_id
        if mid in self._done or (mid in self._reasoning and mid not in self._reasoning_open):
            return []  # settled, or the text has begun and closed the reasoning
        events: list[BaseEvent] = []
        if mid not in self._reasoning:
            events += self._open_reasoning(mid)
        delta = self._delta(self._reasoning, frame)
        if delta:
            events.append(
                ReasoningMessageContentEvent(message_id=mid, delta=delta, **self._child())
            )
        return events

    def _message_chunk(self, frame: MessageChunkFrame) -> list[BaseEvent]:
        mid = frame.message_id
        if mid in self._done or (mid in self._text and mid not in self._text_open):
            return []
        events: list[BaseEvent] = []
        if mid not in self._text:
            if not frame.chunk:
                return []
            events += self._close_reasoning(mid)
            events.append(self._text_start(mid))
            self._text[mid] = ""
            self._text_open.add(mid)
        delta = self._delta(self._text, frame)
        if delta:
            events.append(TextMessageContentEvent(message_id=mid, delta=delta, **self._child()))
        return events

    # -- records -------------------------------------------------------------------------------

    def _record(self, record: Record) -> list[BaseEvent]:
        meta = record.metadata or {}
        if record.name and (record.role == "assistant" or by_side_b(record)):
            self._names[record.id] = record.name
        if record.status == "pending":
            if not meta.get("queued") or record.id in self._queued:
                return []  # being generated: its chunks and completing record follow
            self._queued.add(record.id)
            value = {
                "id": record.id,
                "content": record.content or "",
                "queue_source": meta.get("queue_source"),
            }
            return [CustomEvent(name="threadloom.queue", value=value, **self._child())]
        if record.id in self._done:
            return []
        self._done.add(record.id)
        if record.role == "assistant" or by_side_b(record):
            return self._assistant(record)  # side b's model writes as an assistant too
        if record.role == "tool":
            return [
                ToolCallResultEvent(
                    message_id=record.id,
                    tool_call_id=record.tool_call_id or "",
                    content=record.content or "",
                    role="tool",
                    **self._child(),
                )
            ]
        text = record.content or ""
        events: list[BaseEvent] = [
            TextMessageStartEvent(message_id=record.id, role=record.role, **self._child())
        ]
        if text:
            events.append(
                TextMessageContentEvent(message_id=record.id, delta=text, **self._child())
            )
        events.append(TextMessageEndEvent(message_id=record.id, **self._child()))
        return events

    def _assistant(self, record: Record) -> list[BaseEvent]:
        mid = record.id
        events: list[BaseEvent] = []
        thought = record.reasoning_content
        if mid not in self._reasoning and mid not in self._text and thought:
            events += self._open_reasoning(mid)
            events.append(
                ReasoningMessageContentEvent(message_id=mid, delta=thought, **self._child())
            )
        events += self._close_reasoning(mid)
        text = record.content or ""
        if mid in self._text_open:
            emitted = self._text[mid]
            if len(text) > len(emitted) and text.startswith(emitted):
                rest = text[len(emitted) :]
                events.append(TextMessageContentEvent(message_id=mid, delta=rest, **self._child()))
            self._text_open.discard(mid)
            events.append(TextMessageEndEvent(message_id=mid, **self._child()))
        elif mid not in self._text and text:
            events += [
                self._text_start(mid),
                TextMessageContentEvent(message_id=mid, delta=text, **self._child()),
                TextMessageEndEvent(message_id=mid, **self._child()),
            ]
        if record.status != "completed":
            return events  # a failed reply's calls are never run
        for call in parse_tool_calls(record.tool_calls) or ():
            events.append(
                ToolCallStartEvent(
                    tool_call_id=call.id,
                    tool_call_name=call.name,
                    parent_message_id=mid,
                    **self._child(),
                )
            )
            if call.args_raw:
                events.append(
                    ToolCallArgsEvent(tool_call_id=call.id, delta=call.args_raw, **self._child())
                )
            events.append(ToolCallEndEvent(tool_call_id=call.id, **self._child()))
        return events

    def _text_start(self, mid: str) -> TextMessageStartEvent:
        """The start of a model's text: an assistant message, named after its side's label
        (a ``dual_ai`` agent's two sides are told apart by it, spec 13 §13.2.10)."""
        name = self._names.get(mid)
        return TextMessageStartEvent(message_id=mid, role="assistant", name=name, **self._child())

    def _subagent(self, entry: SubagentEntry) -> list[BaseEvent]:
        child = entry.id
        events: list[BaseEvent] = []
        finished = self._subagents.get(child)
        if finished is None or (finished and entry.status == "running"):
            name = entry.relationship or entry.agent_name or "subagent"
            events.append(
                SubagentStartedEvent(
                    subagent_run_id=child, name=name, description=entry.description
                )
            )
            self._subagents[child] = False
        if self._subagents[child]:
            return events
        if entry.status in _FINISHED:
            self._subagents[child] = True
            events.append(
                SubagentFinishedEvent(
                    subagent_run_id=child, outcome=SubagentFinishedSuccessOutcome()
                )
            )
        elif entry.status == "failed":
            self._subagents[child] = True
            events.append(SubagentErrorEvent(subagent_run_id=child, message="failed"))
        return events


def encode_sse(events: Iterable[BaseEvent]) -> str:
    """Server-sent events text of ``events`` (``ag_ui.encoder.EventEncoder``)."""
    encoder = EventEncoder()
    return "".join(encoder.encode(event) for event in events)


async def _load(client: AsyncClient, thread_id: str, page_size: int) -> tuple[ThreadView, int]:
    page = await client.messages.list(thread_id, order="desc", limit=page_size, include_silent=True)
    detail = await client.threads.get(thread_id)
    subagents = await client.threads.subagents(thread_id)
    snapshot = Snapshot(page.messages, detail.status, detail.terminated, page.seq, subagents)
    return reduce(empty_view(thread_id), snapshot), page.seq


async def agui_events(
    client: AsyncClient,
    thread_id: str,
    *,
    page_size: int = 100,
    attachment_url: Callable[[AttachmentRef], str] | None = None,
) -> AsyncGenerator[BaseEvent, None]:
    """The AG-UI events of a thread, live: a ``MessagesSnapshotEvent`` of the newest
    ``page_size`` messages, then the events of every frame; on ``resync`` the thread is read
    again and a new snapshot follows. Ends when the stream ends for good."""
    view, seq = await _load(client, thread_id, page_size)
    exporter = AguiExporter(thread_id, view=view, attachment_url=attachment_url)
    for event in exporter.snapshot():
        yield event
    async with client.stream(thread_id, since=seq, include_silent=True) as stream:
        async for frame in stream:
            for event in exporter.feed(frame):
                yield event
            if isinstance(frame, ResyncFrame):
                view, _ = await _load(client, thread_id, page_size)
                for event in exporter.snapshot(view):
                    yield event
