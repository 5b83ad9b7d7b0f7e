"""The frames of a thread's stream (spec 09 §9.4–§9.6, §9.10): what a subscriber's filters
admit of each bus event and how it is written (``Framer``), chunk frames merged while they
wait, and the bounded outbox live frames wait in (``Outbox``). ``session.py`` drives
one subscriber's session with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TOOL_EVENTS = ("tool_call_started", "tool_call_done")
LOG_SOCKET_TYPES = frozenset(
    ("log_data", "stopped_by_user", "thread_status", "heartbeat", "resync", "error")
)
SETTLED_KEPT = 1024
CHUNK_TYPES = ("message_chunk", "reasoning_chunk")


@dataclass(frozen=True)
class Filters:
    include_silent: bool = False
    depth: int = 0
    reasoning: bool = False
    logs: bool = False
    log_socket: bool = False


# -- frames ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    type: str
    seq: int
    text: str
    body: dict[str, Any] | None = None
    """What the outbox needs to merge queued chunks (§9.10.2): a chunk frame's body, a
    ``message_data`` frame's ``message_id`` alone (not its record: the outbox bounds the
    encoded text, and a kept record would hold the content a second time)."""


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
        kind = body["type"]
        kept: dict[str, Any] | None = None
        if kind in CHUNK_TYPES:
            kept = body
        elif kind == "message_data":
            kept = {"message_id": body["message_id"]}
        return Frame(kind, body["seq"], _encode(body), kept)

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
        if kind == "approval":  # spec 14 §14.3: requested while pending, then decided
            approval = data.get("approval")
            if not isinstance(approval, dict):
                return None
            pending = approval.get("state") == "pending"
            return {
                "type": "approval_requested" if pending else "approval_decided",
                "seq": seq,
                "tool_call_id": approval.get("tool_call_id"),
                "data": approval,
            }
        if kind == "shared_state":  # spec 09 §9.9.8: the whole state, with its version
            if not isinstance(data.get("state"), dict):
                return None
            return {
                "type": "state_updated",
                "seq": seq,
                "state": data["state"],
                "version": data.get("version"),
                "updated_at": data.get("updated_at"),
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
        if kind == "resync":  # continuity lost on a live socket (spec 09 §9.7.3)
            return {
                "type": "resync",
                "seq": data.get("seq", seq),
                "since": data.get("since"),
                "reason": data.get("reason", "expired"),
            }
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
