"""One AG-UI event stream of ``POST /api/agui/{agent}`` (spec 13 §13.2, §13.3).

The thread's own stream (spec 09: ``stream.session.Session`` — replay from the durable
``thread_events`` rows after a ``seq``, the text being generated, then live frames) is turned
into AG-UI events by the client's exporter (``client.convert.agui.AguiExporter``, spec 11
§11.7.3), which knows the event shapes; this module frames them as one AG-UI run:

``RUN_STARTED`` (the caller's ``threadId`` and ``runId``), the content events of the run,
then, once the thread's run has settled, a ``MESSAGES_SNAPSHOT`` read from the database, a
``CUSTOM`` ``threadloom.cost`` event and ``RUN_FINISHED`` — or ``RUN_ERROR`` whose ``code`` is
the run's reason code when it failed. The records of the request's own input messages are
not sent back (the client has them).

Each event carries its resume cursor (``cursor.py``) as the SSE ``id`` and in
``metadata.threadloomCursor``; a stream that starts from a cursor sends only what that
client does not have.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Final

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
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
)

from threadloom.client.convert.agui import AguiExporter
from threadloom.client.convert.agui.messages import REASONING_SUFFIX
from threadloom.client.reduce import Snapshot, empty_view, reduce
from threadloom.engine.run.runtime import Runtime
from threadloom.records import SharedState, ThreadStatus
from threadloom.server.agui.approvals import pending
from threadloom.server.agui.cursor import Cursor, Tracker
from threadloom.server.agui.state import StateStream
from threadloom.server.deps import ServerContext
from threadloom.server.stream.frames import Close
from threadloom.server.stream.session import Grant, Session

log = logging.getLogger("threadloom.server.agui")

DURABLE: Final = frozenset(
    {
        "message_data",
        "message_deleted",
        "thread_status",
        "subagent_updated",
        "subagent_removed",
        "approval_requested",
        "approval_decided",
        "state_updated",
    }
)
"""Frames of the thread's durable events (the others are chunks, telemetry, heartbeats)."""
LIFECYCLE: Final = (RunStartedEvent, RunFinishedEvent, RunErrorEvent, MessagesSnapshotEvent)
"""The exporter's own run framing, replaced here by this run's."""
CANCELLED: Final = frozenset({"aborted_by_user", "terminated"})
RUN_KEY: Final = "agui_run_id"
"""``metadata`` of a message stored from an AG-UI request: the run it came with."""
ID_KEY: Final = "agui_message_id"
"""``metadata`` of a message stored from an AG-UI request: its AG-UI id, which is the id
AG-UI clients see it under (their own)."""
CURSOR_KEY: Final = "threadloomCursor"
"""The key of an event's ``metadata`` that holds its cursor."""
SNAPSHOT_LIMIT: Final = 1000
SERVER_CLOSES: Final = frozenset({1000, 1001, 1011, 4001, 4003})
"""Close codes of the thread's stream that are the server's doing (deleted, shutting
down, an internal error, the credential or the access gone); the others (a slow reader)
drop the response (§13.2.8)."""
KEEP_ALIVE: Final = b": keep-alive\n\n"
REASONING: Final = (
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningEndEvent,
)


def served(event: BaseEvent) -> BaseEvent:
    """An exporter event as this endpoint sends it: reasoning under the reasoning message's
    own id (``<id>:reasoning``, the id of the snapshot's ``ReasoningMessage``), so a client
    holds the reasoning and the assistant's text as two messages while they stream, as the
    snapshot does (the exporter's events share the assistant message's id)."""
    if isinstance(event, REASONING):
        return event.model_copy(update={"message_id": event.message_id + REASONING_SUFFIX})
    return event


def speaks_1_0(protocol: str | None) -> bool:
    """Whether a request's ``protocolVersion`` is AG-UI 1.0 or later (clients before 1.0
    send none)."""
    major = (protocol or "").strip().split(".")[0]
    return major.isdigit() and int(major) >= 1


def cancelled(thread_id: str, run_id: str, reason: str, protocol: str | None) -> BaseEvent:
    """The terminal event of a cancelled run (§13.2.6): ``RUN_FINISHED`` with ``result``
    ``{"threadloom": {"outcome": "cancelled", "reason": …}}``, and the outcome
    ``cancelled`` for a client of AG-UI 1.0 or later. A client before 1.0 (CopilotKit's
    runtime bundles ``@ag-ui/client`` 0.0.x) knows only the outcomes ``success`` and
    ``interrupt`` and refuses the event with ``cancelled``; without an outcome it accepts
    it, and the result still says what happened."""
    result = {"threadloom": {"outcome": "cancelled", "reason": reason}}
    if speaks_1_0(protocol):
        return RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            outcome=RunFinishedCancelledOutcome(),
            result=result,
        )
    return RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result)


def agui_id(record: Mapping[str, Any] | Any) -> str | None:
    """The AG-UI id of a message an AG-UI request stored (``None`` for the others)."""
    metadata = record.get("metadata") if isinstance(record, Mapping) else record.metadata
    value = (metadata or {}).get(ID_KEY)
    return value if isinstance(value, str) and value else None


def sse(event: BaseEvent, cursor: str) -> bytes:
    """One SSE event: the cursor as its ``id`` and in ``metadata.threadloomCursor`` (a key
    of its own: AG-UI clients fold an event's metadata into its message key by key)."""
    metadata = dict(event.metadata or {})
    metadata[CURSOR_KEY] = cursor
    data = event.model_copy(update={"metadata": metadata}).model_dump_json(by_alias=True)
    return f"id: {cursor}\ndata: {data}\n\n".encode()


async def cost_now(runtime: Runtime, thread_id: str) -> tuple[float, int, dict[str, Any]]:
    """The thread's cost (with its descendants): total, requests and the report's wire form."""
    state = await runtime.thread(thread_id)
    report = await state.cost()
    wire = report.model_dump(mode="json", by_alias=True)
    return report.total_cost, report.request_count, wire


class AguiRun:
    """The AG-UI events of one run of a thread, for one HTTP response."""

    def __init__(
        self,
        ctx: ServerContext,
        grant: Grant,
        run_id: str,
        cursor: Cursor,
        follow: bool,
        warnings: Sequence[str] = (),
        protocol: str | None = None,
        shared: SharedState | None = None,
    ) -> None:
        self.ctx = ctx
        self.protocol = protocol
        """The request's ``protocolVersion`` (``None``: a client older than AG-UI 1.0)."""
        self.grant = grant
        self.runtime = ctx.runtime
        self.thread_id = grant.thread_id
        self.run_id = run_id
        self.follow = follow
        """Whether a run is to be followed to its end (else the stream ends at once)."""
        self.warnings = list(warnings)
        """What the request asked that was left out (``threadloom.warning`` events)."""
        self.tracker = Tracker(cursor)
        self.head = 0
        """The thread's last event number when the stream opened (its snapshot's ``head``)."""
        self.ended_at_head = False
        """Whether the run had ended by then (the snapshot's status is not ``running``)."""
        self.state = StateStream(shared)
        """The thread's shared state as this client was sent it (spec 13 §13.2.9)."""
        self.closed_by_server = False
        """Whether the server ended the response (shutting down, an error, the thread
        deleted, the access gone): not a dropped response."""
        self.reader_gone = False
        """Whether the response ended because its client did not read it (a slow reader):
        a dropped response."""
        self.exporter = AguiExporter(self.thread_id)
        self.exporter.snapshot()  # its snapshot of what it saw is not sent: ours is read

    @property
    def cursor(self) -> Cursor:
        return self.tracker.cursor

    def _out(self, event: BaseEvent) -> bytes:
        return sse(event, self.cursor.encode())

    async def body(self) -> AsyncGenerator[bytes, None]:
        """The response's events. One that ends before its terminal event because the
        client went away (the connection closed, or it stopped reading) while it followed
        a run is a dropped response (§13.2.8, ``drops.py``): the run stops after the grace
        period unless a request resumes it; a server shutting down drops nothing."""
        drops = self.ctx.agui_drops
        following = self.follow and self.cursor.end is None
        ended = False
        if following:
            drops.follow(self.thread_id)
        try:
            async for chunk in self._body():
                yield chunk
            ended = not self.reader_gone
        finally:
            if following:
                drops.unfollow(self.thread_id)
                if not (ended or self.ctx.draining or self.closed_by_server):
                    drops.dropped(self.thread_id, self.cursor.run)

    async def _body(self) -> AsyncGenerator[bytes, None]:
        yield self._out(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
        state = self.state.snapshot()
        if state is not None:
            yield self._out(state)
        for warning in self.warnings:
            yield self._out(CustomEvent(name="threadloom.warning", value={"message": warning}))
        if self.cursor.end is not None or not self.follow:
            async for chunk in self._finish(None):
                yield chunk
            return
        session = Session(self.ctx, self.grant, self.ctx.settings.stream)
        revalidate = asyncio.create_task(session.revalidate())
        try:
            async for item in session.frames():
                if isinstance(item, Close):
                    async for chunk in self._closed(item):
                        yield chunk
                    if item.code in SERVER_CLOSES:
                        self.closed_by_server = True
                    else:  # a slow reader: the client did not take what it was sent
                        self.reader_gone = True
                    return
                if item.type == "heartbeat":
                    yield KEEP_ALIVE
                    continue
                if item.type == "resync":  # the cursor is older than the replay window
                    self.tracker.forget()
                    yield self._out(await self._snapshot())
                    continue
                frame = json.loads(item.text)
                end: ThreadStatus | None = None
                for chunk, ended in self._frame(item.type, item.seq, frame):
                    end = end or ended
                    if chunk:
                        yield chunk
                if end is not None:
                    async for chunk in self._finish(end):
                        yield chunk
                    return
        finally:
            revalidate.cancel()
            session.close()

    def _frame(
        self, kind: str, seq: int, frame: Mapping[str, Any]
    ) -> list[tuple[bytes, ThreadStatus | None]]:
        """The SSE events of one frame, each with the run's end status when this frame
        ended the run."""
        durable = kind in DURABLE and not frame.get("snapshot")
        record = frame.get("data") if kind == "message_data" else None
        own = isinstance(record, Mapping) and (record.get("metadata") or {}).get(RUN_KEY)
        if isinstance(record, Mapping) and (presented := agui_id(record)) is not None:
            record = {**record, "id": presented}
            frame = {**frame, "message_id": presented, "data": record}
        if kind == "state_updated":
            delta = self.state.delta(frame)
            events: list[BaseEvent] = [] if delta is None else [delta]
        else:
            events = [] if own == self.run_id else self.exporter.feed(dict(frame))
        done: list[str] = []  # the messages whose progress the cursor no longer needs
        if seq <= self.head:
            pass  # a replayed frame carries its entity as it is now, perhaps ahead of its
            # seq: the message's progress stays, so a resume from here never repeats it
        elif isinstance(record, Mapping) and record.get("status") != "pending":
            done += [str(record.get("id")), f"{record.get('id')}{REASONING_SUFFIX}"]
        elif kind == "message_deleted":
            done.append(str(frame.get("message_id")))
        end: ThreadStatus | None = None
        if kind == "thread_status" and isinstance(frame.get("status"), Mapping):
            status = ThreadStatus.model_validate(frame["status"])
            if frame.get("snapshot"):
                self.head = int(frame.get("head") or seq)
                self.ended_at_head = status.state != "running"
            elif status.state != "running" and (seq > self.head or self.ended_at_head):
                # a replayed status (seq <= head) carries the thread's status now, which
                # may be newer than the frames replayed: it ends the run only when the
                # run had ended by the head; otherwise its own status event comes later
                end = status
        kept: list[tuple[BaseEvent, str]] = []  # each with the cursor just after it
        for event in events:
            if isinstance(event, LIFECYCLE):
                continue
            admitted = self.tracker.admit(served(event))
            if admitted is not None:
                kept.append((admitted, self.cursor.encode()))
        if durable:  # its last event carries the frame's seq (and the run's end)
            self.tracker.settled(seq, done)
            if end is not None:
                self.cursor.end = end.model_dump(mode="json")
            if kept:
                kept[-1] = (kept[-1][0], self.cursor.encode())
        out: list[tuple[bytes, ThreadStatus | None]] = [(sse(e, c), None) for e, c in kept]
        if end is not None:
            out.append((b"", end))
        return out

    async def _snapshot(self) -> MessagesSnapshotEvent:
        """The thread's messages now, from the database, as AG-UI messages."""
        state = await self.runtime.thread(self.thread_id)
        page = await state.get_messages(limit=SNAPSHOT_LIMIT, include_silent=True)
        records = [  # the newest page, oldest first; AG-UI's messages under their own ids
            m if (presented := agui_id(m)) is None else m.model_copy(update={"id": presented})
            for m in reversed(page.messages)
        ]
        snap = Snapshot(records, await state.status(), None, 0)
        (event,) = self.exporter.snapshot(reduce(empty_view(self.thread_id), snap))
        assert isinstance(event, MessagesSnapshotEvent)
        return event

    async def _finish(self, end: ThreadStatus | None) -> AsyncIterator[bytes]:
        """The run's last events: streams still open ended, the messages snapshot, the
        cost, and RUN_FINISHED or RUN_ERROR."""
        if end is None and self.cursor.end is not None:
            end = ThreadStatus.model_validate(self.cursor.end)
        if end is None:
            row = await self.runtime.store.get_thread(self.thread_id)
            end = row.status if row is not None else None
        for event in self.exporter.close():
            admitted = self.tracker.admit(served(event))
            if admitted is not None:
                yield self._out(admitted)
        if end is not None:
            self.cursor.end = end.model_dump(mode="json")
        yield self._out(await self._snapshot())
        total, requests, report = await cost_now(self.runtime, self.thread_id)
        run = {
            "totalCost": round(max(0.0, total - self.cursor.cost), 10),
            "requestCount": max(0, requests - self.cursor.requests),
        }
        yield self._out(CustomEvent(name="threadloom.cost", value={"run": run, "thread": report}))
        yield self._out(await self._final(end))

    async def _final(self, end: ThreadStatus | None) -> BaseEvent:
        reason = end.reason if end is not None else None
        if end is not None and end.state == "failed":
            message = end.error.message if end.error is not None else reason or "failed"
            return RunErrorEvent(message=message, code=reason or "failed")
        if reason not in CANCELLED:
            # parked for approval (spec 14), or parking again (a message sent while parked
            # starts a run that parks at once): the interrupts of the pending calls
            interrupts = await pending(self.runtime, self.thread_id)
            if interrupts:
                paused = RunFinishedInterruptOutcome(interrupts=interrupts)
                return RunFinishedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, outcome=paused
                )
        if reason in CANCELLED:
            return cancelled(self.thread_id, self.run_id, reason or "", self.protocol)
        # awaiting_client_tool (§13.7.3) too: success, without ``pendingToolCallIds`` —
        # clients derive it from the calls announced without a result, and the AG-UI client
        # CopilotKit bundles (0.0.59) refuses the key
        outcome = RunFinishedSuccessOutcome()
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)

    async def _closed(self, close: Close) -> AsyncIterator[bytes]:
        """The thread's stream ended: deleted, or the credential or the access is gone
        (``RUN_ERROR``); a server shutting down or a slow reader just ends the response,
        and the client resumes from its last cursor."""
        if close.code == 1000:
            yield self._out(RunErrorEvent(message="The thread was deleted", code="thread_deleted"))
        elif close.code == 4001:
            yield self._out(RunErrorEvent(message="Credentials expired", code="unauthorized"))
        elif close.code == 4003:
            yield self._out(RunErrorEvent(message="Access revoked", code="forbidden"))
