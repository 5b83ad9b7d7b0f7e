"""One subscriber's session on a thread's stream (spec 09 §9.3–§9.10), independent of the
transport: the frames its filters admit, the opening sequence (snapshot, replay from the
durable ``thread_events`` rows or ``resync``, catch-up of text being generated), and the
bounded outbox live frames wait in. ``server/stream.py`` serves it over WebSocket and SSE.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from threadloom.errors import EventOverflow
from threadloom.server.deps import ServerContext
from threadloom.server.principal import Principal
from threadloom.server.settings import StreamSettings
from threadloom.server.stream_auth import StreamAuth, recheck
from threadloom.store.base import StoredEvent
from threadloom.thread.events import ThreadEvent
from threadloom.thread.hub import registry_wire

TOOL_EVENTS = ("tool_call_started", "tool_call_done")
LOG_SOCKET_TYPES = frozenset(
    ("log_data", "stopped_by_user", "thread_status", "heartbeat", "resync", "error")
)
REPLAY_PAGE = 1000
SETTLED_KEPT = 1024
CHUNK_TYPES = ("message_chunk", "reasoning_chunk")
KEEP_BODY = (*CHUNK_TYPES, "message_data")


@dataclass(frozen=True)
class Filters:
    include_silent: bool = False
    depth: int = 0
    reasoning: bool = False
    logs: bool = False
    log_socket: bool = False


@dataclass(frozen=True)
class Grant:
    """What a successful handshake established."""

    principal: Principal
    auth: StreamAuth
    """The credential to re-check (for a ticket, the one it was minted with)."""
    thread_id: str
    filters: Filters
    since: int | None


# -- frames ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    type: str
    seq: int
    text: str
    body: dict[str, Any] | None = None
    """Kept for chunk and ``message_data`` frames: the outbox may merge chunks (§9.10.2)."""


def _encode(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def merge_chunks(first: Frame, second: Frame) -> Frame | None:
    """One chunk frame that a client applies to the same text as ``first`` then ``second``
    (same type and message), at ``first``'s place and ``seq``; ``None`` when ``second``
    starts past the end of ``first`` (a gap stays a gap)."""
    a, b = first.body, second.body
    if a is None or b is None or first.type != second.type:
        return None
    if a["message_id"] != b["message_id"]:
        return None
    start, end = a["offset"], a["offset"] + len(a["chunk"])
    if b["offset"] > end:
        return None
    if b["offset"] <= start:  # the second rewrites everything the first wrote
        body = {**b, "seq": a["seq"]}
    else:
        body = {**a, "chunk": a["chunk"][: b["offset"] - start] + b["chunk"]}
    return Frame(first.type, first.seq, _encode(body), body)


@dataclass(frozen=True, slots=True)
class Close:
    code: int
    reason: str


SHUTTING_DOWN = Close(1001, "Server shutting down")
"""How every open stream ends when the server shuts down (spec 09 §9.10.1): after the frames
already queued for it; the client resumes with ``since``."""


Out = Frame | Close


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Framer:
    """Turns bus events into the frames one socket's filters admit, tracking the head."""

    def __init__(self, thread_id: str, filters: Filters, head: int) -> None:
        self.thread_id = thread_id
        self.filters = filters
        self.head = head
        self.silent: dict[str, bool] = {}  # messages pending now: their silent flag
        self.settled: OrderedDict[str, None] = OrderedDict()
        """Messages recently completed or failed: their late chunks are dropped (§9.5.3)."""

    def frame(self, body: dict[str, Any]) -> Frame | None:
        if self.filters.log_socket and body["type"] not in LOG_SOCKET_TYPES:
            return None
        kept = body["type"] in KEEP_BODY
        return Frame(body["type"], body["seq"], _encode(body), body if kept else None)

    def _visible(self, depth: Any, silent: Any) -> bool:
        deep = isinstance(depth, int) and depth > self.filters.depth
        return not deep and (self.filters.include_silent or silent is not True)

    def status(self, seq: int, status: Any, terminated: Any, *, snapshot: bool) -> dict[str, Any]:
        return {
            "type": "thread_status",
            "seq": seq,
            "thread_id": self.thread_id,
            "status": status,
            "terminated": terminated,
            "snapshot": snapshot,
        }

    def convert(
        self, kind: str, seq: int | None, data: Mapping[str, Any], at_us: int
    ) -> Out | None:
        """The frame for one event (``None`` when filtered out or not for streams)."""
        if seq is not None:
            self.head = max(self.head, seq)
        head = self.head if seq is None else seq
        if kind == "thread_deleted":
            return Close(1000, "Thread deleted")
        body = self._body(kind, head, data, at_us)
        return self.frame(body) if body is not None else None

    def _body(
        self, kind: str, seq: int, data: Mapping[str, Any], at_us: int
    ) -> dict[str, Any] | None:
        f = self.filters
        if kind == "message":
            wire = data.get("message")
            if not isinstance(wire, dict):
                return None
            mid = str(wire.get("id"))
            if wire.get("status") == "pending":
                self.silent[mid] = wire.get("silent") is True
            else:
                self.silent.pop(mid, None)
                self.settled[mid] = None
                if len(self.settled) > SETTLED_KEPT:
                    self.settled.popitem(last=False)
            if not self._visible(wire.get("depth", 0), wire.get("silent")):
                return None
            return {
                "type": "message_data",
                "seq": seq,
                "message_id": mid,
                "depth": wire.get("depth", 0),
                "data": wire,
            }
        if kind in ("message_chunk", "reasoning_chunk"):
            mid = str(data.get("message_id"))
            if kind == "reasoning_chunk" and not f.reasoning:
                return None
            if mid in self.settled:
                return None
            if not self._visible(data.get("depth", 0), self.silent.get(mid, False)):
                return None
            return {
                "type": kind,
                "seq": seq,
                "message_id": mid,
                "depth": data.get("depth", 0),
                "chunk": data.get("chunk", ""),
                "offset": data.get("offset", 0),
            }
        if kind == "message_deleted":
            mid = str(data.get("message_id"))
            self.silent.pop(mid, None)
            if not self._visible(data.get("depth", 0), data.get("silent")):
                return None
            return {
                "type": "message_deleted",
                "seq": seq,
                "message_id": mid,
                "depth": data.get("depth", 0),
            }
        if kind == "status":
            if data.get("status") is None:
                return None
            return self.status(seq, data["status"], data.get("terminated"), snapshot=False)
        if kind == "log":
            row = data.get("log")
            if not f.logs or not isinstance(row, dict):
                return None
            return {"type": "log_data", "seq": seq, "log_id": row.get("id"), "data": row}
        if kind == "stopped_by_user":
            if not f.logs:
                return None
            return {"type": "stopped_by_user", "seq": seq, "timestamp": at_us // 1000}
        if kind == "subagent":
            entry = data.get("entry")
            if not isinstance(entry, dict):
                return None
            return {
                "type": "subagent_updated",
                "seq": seq,
                "subagent_id": entry.get("id"),
                "data": entry,
            }
        if kind == "subagent_removed":
            return {"type": "subagent_removed", "seq": seq, "subagent_id": data.get("reference")}
        if kind in ("event", "file"):
            event_type = data.get("event_type")
            payload = data.get("data")
            depth = payload.get("depth", 0) if isinstance(payload, dict) else 0
            if event_type in TOOL_EVENTS and not self._visible(depth, False):
                return None
            return {
                "type": "event",
                "seq": seq,
                "eventType": event_type,
                "data": payload,
                "timestamp": at_us // 1000,
            }
        if kind == "telemetry":
            name = data.get("type")
            if not isinstance(name, str):
                return None
            if name == "generation":  # an estimate the stream carries as an event (§9.9.4)
                return {
                    "type": "event",
                    "seq": seq,
                    "eventType": "generation",
                    "data": {"outputTokens": data.get("outputTokens")},
                    "timestamp": data.get("timestamp", at_us // 1000),
                }
            return {**data, "type": name, "seq": seq}
        return None  # thread_updated and other bus-only kinds

    def heartbeat(self) -> Frame:
        body = {"type": "heartbeat", "seq": self.head, "ts": now_ms()}
        return Frame("heartbeat", self.head, _encode(body))

    def error(self, code: str, message: str) -> Frame:
        body = {"type": "error", "seq": self.head, "code": code, "error": message}
        return Frame("error", self.head, _encode(body))


def _merged(items: list[tuple[Out, int]]) -> list[tuple[Out, int]]:
    """The queue with chunks of the same message merged (§9.10.2 rule 3): each into the
    previous chunk of its message and type, unless a ``message_data`` of that message came
    in between or the second starts past the end of the first."""
    merged: list[tuple[Out, int]] = []
    last: dict[tuple[str, Any], int] = {}  # (type, message id) → index in merged
    for item, size in items:
        body = item.body if isinstance(item, Frame) else None
        if isinstance(item, Frame) and body is not None and item.type in CHUNK_TYPES:
            key = (item.type, body["message_id"])
            index = last.get(key)
            if index is not None:
                previous = merged[index][0]
                assert isinstance(previous, Frame)
                combined = merge_chunks(previous, item)
                if combined is not None:
                    merged[index] = (combined, len(combined.text.encode("utf-8")))
                    continue
            last[key] = len(merged)
        elif body is not None:  # message_data: no merging across it
            for kind in CHUNK_TYPES:
                last.pop((kind, body["message_id"]), None)
        merged.append((item, size))
    return merged


class Outbox:
    """A socket's send queue, bounded in frames and in encoded bytes (§9.10.2)."""

    def __init__(self, max_frames: int, max_bytes: int) -> None:
        self.max_frames = max_frames
        self.max_bytes = max_bytes
        self._items: deque[tuple[Out, int]] = deque()  # each with its encoded size
        self._bytes = 0
        self._ready = asyncio.Event()
        self.finished = False  # a Close is queued: nothing more is accepted

    def put(self, item: Out) -> bool:
        """Queue ``item``; ``False`` when it does not fit even after merging the queued
        chunks (the caller fails the socket)."""
        if self.finished:
            return True
        size = 0
        if isinstance(item, Frame):
            size = len(item.text.encode("utf-8"))
            if not self._fits(size):
                merged = _merged([*self._items, (item, size)])
                total = sum(size for _, size in merged)
                if len(merged) > self.max_frames or total > self.max_bytes:
                    return False
                self._items, self._bytes = deque(merged), total
                self._ready.set()
                return True
        else:
            self.finished = True
        self._items.append((item, size))
        self._bytes += size
        self._ready.set()
        return True

    def _fits(self, size: int) -> bool:
        return len(self._items) + 1 <= self.max_frames and self._bytes + size <= self.max_bytes

    def fail(self, *items: Out) -> None:
        """Discard the queue and end with ``items`` (an error frame, then a Close)."""
        self._items.clear()
        self._items.extend((item, 0) for item in items)
        self._bytes = 0
        self.finished = True
        self._ready.set()

    async def get(self, timeout: float) -> Out | None:
        """The next item, or ``None`` when nothing came within ``timeout`` seconds."""
        if not self._items:
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
            if not self._items:
                return None
        item, size = self._items.popleft()
        self._bytes -= size
        return item

    @property
    def size(self) -> tuple[int, int]:
        """Frames and encoded bytes queued now."""
        return len(self._items), self._bytes


# -- the session ----------------------------------------------------------------------------


class Session:
    """One subscriber's view of a thread: opening sequence, replay, catch-up, live frames."""

    def __init__(self, ctx: ServerContext, grant: Grant, settings: StreamSettings) -> None:
        self.ctx = ctx
        self.grant = grant
        self.settings = settings
        self.runtime = ctx.runtime
        self.thread_id = grant.thread_id
        self.framer = Framer(grant.thread_id, grant.filters, 0)
        self.outbox = Outbox(settings.buffer_frames, settings.buffer_bytes)
        # step 1: frames produced from now on are held for this subscriber
        self.subscription = self.runtime.events.subscribe(
            grant.thread_id, max_queue=settings.buffer_frames
        )
        self._pump: asyncio.Task[None] | None = None
        self._unregister = ctx.on_shutdown(lambda: self.outbox.put(SHUTTING_DOWN))

    def close(self) -> None:
        self._unregister()
        self.subscription.close()
        if self._pump is not None:
            self._pump.cancel()

    def fail(self, code: str, message: str, close: Close) -> None:
        self.outbox.fail(self.framer.error(code, message), close)

    def slow_consumer(self) -> None:
        self.fail(
            "slow_consumer",
            f"Send buffer overflow; reconnect with since={self.framer.head}",
            Close(4008, "Slow consumer"),
        )

    async def frames(self) -> AsyncIterator[Out]:
        """Everything this subscriber is sent, in order; ends after a Close."""
        store = self.runtime.store
        row = await store.get_thread(self.thread_id)  # step 2: one snapshot
        if row is None:
            yield Close(1000, "Thread deleted")
            return
        head = row.event_seq
        framer = self.framer
        framer.head = head
        since = self.grant.since
        resync: str | None = None
        if since is not None and since > head:
            resync = "ahead"
        elif since is not None and since < row.events_pruned_through:
            resync = "expired"
        replay: list[ThreadEvent] = []
        if since is not None and resync is None and since < head:
            replay_or_none = await self._replay(since, head)
            if replay_or_none is None:
                resync = "expired"
            else:
                replay = replay_or_none
        start = since if since is not None and resync is None else head
        snapshot = framer.status(start, row.status.model_dump(), row.terminated, snapshot=True)
        snapshot["head"] = head
        yield Frame("thread_status", start, json.dumps(snapshot, separators=(",", ":")))  # 3
        if resync is not None:
            body = {"type": "resync", "seq": head, "since": since, "reason": resync}
            yield Frame("resync", head, json.dumps(body, separators=(",", ":")))
        for event in replay:  # step 4
            item = framer.convert(event.kind, event.seq, event.data, event.at)
            if isinstance(item, Frame):
                yield item
        framer.head = head
        for item in await self._catch_up(head):  # steps 5 and 6
            yield item
        self._pump = asyncio.get_running_loop().create_task(self._forward())
        while True:
            next_item = await self.outbox.get(self.settings.heartbeat_s)
            if next_item is None:
                next_item = framer.heartbeat()
            yield next_item
            if isinstance(next_item, Close):
                return

    async def _replay(self, since: int, head: int) -> list[ThreadEvent] | None:
        """The durable frames after ``since`` up to ``head``, compacted (§9.7.2), built from
        the entities' current state; ``None`` when the rows are no longer all there."""
        store = self.runtime.store
        events: list[StoredEvent] = []
        after = since
        while after < head:
            batch = await store.read_events(self.thread_id, after, REPLAY_PAGE)
            if not batch or batch[0].seq != after + 1:
                return None  # pruned (or never written): the window is gone
            events.extend(e for e in batch if e.seq <= head)
            after = batch[-1].seq
            if len(batch) < REPLAY_PAGE:
                break
        last: dict[tuple[str, str], int] = {}
        for index, event in enumerate(events):
            key = _entity_key(event)
            if key is not None:
                last[key] = index
        out: list[ThreadEvent] = []
        for index, event in enumerate(events):
            key = _entity_key(event)
            if key is not None and last[key] != index:
                continue
            data = await self._current(event)
            out.append(ThreadEvent(self.thread_id, event.kind, event.seq, data, event.created_at))
        return out

    async def _current(self, event: StoredEvent) -> dict[str, Any]:
        """An event's data from its entity's state now (§9.6 rule 6)."""
        store, tid, entity = self.runtime.store, self.thread_id, event.entity_id or ""
        if event.kind == "message":
            message = await store.get_message(tid, entity)
            if message is None:
                return {"message": None}
            projected = await self.runtime.hub.project(tid, [message])
            return {"message": projected[0].to_wire()}
        if event.kind == "message_deleted":
            payload = event.payload or {}
            return {
                "message_id": entity,
                "depth": payload.get("depth", 0),
                "silent": payload.get("silent", False),
            }
        if event.kind == "status":
            row = await store.get_thread(tid)
            if row is None:
                return {"status": None}
            return {"status": row.status.model_dump(), "terminated": row.terminated}
        if event.kind == "log":
            found = await store.get_log(tid, entity)
            return {"log": found.to_list_wire() if found else None}
        if event.kind == "subagent":
            entries = {e.reference: e for e in await store.get_registry(tid)}
            entry = entries.get(entity)
            return {"entry": registry_wire(entry) if entry else None}
        if event.kind == "subagent_removed":
            return {"reference": entity}
        return dict(event.payload or {})

    async def _catch_up(self, head: int) -> list[Out]:
        """Step 5 (text generated so far) and step 6 (held frames after ``head``)."""
        run = self.runtime.runs.run_of(self.thread_id)
        known: dict[str, tuple[int, bool]] = {}
        for message_id in list(run.partial) if run is not None else []:
            message = await self.runtime.store.get_message(self.thread_id, message_id)
            if message is not None:
                known[message_id] = (message.depth, message.silent is True)
        # no await from here on: the partial texts and the held frames are one moment
        held = self.subscription.drain()
        partial = dict(run.partial) if run is not None else {}
        reasoning = dict(run.partial_reasoning) if run is not None else {}
        created_live = {
            str((e.data.get("message") or {}).get("id"))
            for e in held
            if e.kind == "message" and e.seq is not None and e.seq > head
        }
        framer = self.framer
        out: list[Out] = []
        covered: set[str] = set()
        for message_id, text in partial.items():
            if message_id in created_live or message_id not in known:
                continue
            depth, silent = known[message_id]
            framer.silent[message_id] = silent
            covered.add(message_id)
            for kind, so_far in (
                ("reasoning_chunk", reasoning.get(message_id, "")),
                ("message_chunk", text),
            ):
                if not so_far:
                    continue
                data = {"message_id": message_id, "depth": depth, "chunk": so_far, "offset": 0}
                item = framer.convert(kind, None, data, 0)
                if item is not None:
                    out.append(item)
        for event in held:
            if event.seq is not None and event.seq <= head:
                continue
            if event.kind in ("message_chunk", "reasoning_chunk"):
                message_id = str(event.data.get("message_id"))
                if message_id in covered:
                    continue  # the catch-up text already holds it
                if message_id not in created_live:
                    continue  # no longer being generated
            item = framer.convert(event.kind, event.seq, event.data, event.at)
            if item is not None:
                out.append(item)
        return out

    async def _forward(self) -> None:
        """Live frames: bus → outbox, never waiting for the socket (§9.10.2 rule 2)."""
        framer = self.framer
        try:
            async for event in self.subscription:
                item = framer.convert(event.kind, event.seq, event.data, event.at)
                if item is None:
                    continue
                if not self.outbox.put(item):
                    self.slow_consumer()
                    return
                if isinstance(item, Close):
                    return
        except EventOverflow:
            self.slow_consumer()

    async def revalidate(self) -> None:
        """Re-check the credential and the access at least every ``revalidate_s``, and at once
        when a route of this node revokes a credential or changes a user (§10.9 rule 5); a
        ticket-opened socket is re-checked against its minting credential. A socket that
        carries log frames also needs the ``logs`` permission still."""
        grant = self.grant
        seen = self.ctx.revocations.generation
        while True:
            seen = await self.ctx.revocations.wait(self.settings.revalidate_s, seen)
            who = await recheck(self.ctx, grant.auth)
            if who is None:
                self.fail("unauthorized", "Credentials expired", Close(4001, "Credentials expired"))
                return
            row = await self.runtime.store.get_thread(self.thread_id)
            lost_logs = grant.filters.logs and not who.has_permission("logs")
            if lost_logs or (row is not None and not who.may_access(row.user_id)):
                self.fail("forbidden", "Access revoked", Close(4003, "Access revoked"))
                return


def _entity_key(event: StoredEvent) -> tuple[str, str] | None:
    """What replay compaction groups by; ``None`` for file events (sent one by one)."""
    entity = event.entity_id or ""
    if event.kind in ("message", "message_deleted"):
        return ("message", entity)
    if event.kind in ("subagent", "subagent_removed"):
        return ("subagent", entity)
    if event.kind == "status":
        return ("status", "")
    if event.kind == "log":
        return ("log", entity)
    return None
