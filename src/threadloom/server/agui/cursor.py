"""Where an AG-UI stream stands, as its client saw it: the resume cursor (spec 13 §13.3).

Every event of ``/api/agui/{agent}`` carries a cursor (the SSE ``id`` and
``metadata.threadloomCursor``). It says what the client has, in terms of the thread's
durable history rather than of the stream's bytes, so a stream resumed from it — on any
node, after a restart — is rebuilt from the database:

- ``seq``: every event of the thread's durable frames (spec 09) up to this event number;
- for each message whose events were only partly sent: how many characters of its text and
  of its reasoning, whether each was closed, and how far each of its tool calls got
  (``Progress``);
- whether the run's end was sent (with its status), and the thread's cost when it began;
- which run of which thread it belongs to (a digest of ``threadId`` and ``runId``).

``Tracker`` applies a cursor to a new stream: it lets through only what the client does not
have — a text or reasoning stream it had begun is opened again and continued after the
characters it has, a tool call it had is not announced twice — and keeps the cursor of each
event it lets through.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

VERSION = 1
MAX_CURSOR = 64 * 1024
"""The longest cursor accepted from a client (characters)."""

# how far a tool call got: START, then ARGS, then END sent
CALL_STARTED, CALL_ARGS, CALL_ENDED = 1, 2, 3


class CursorError(ValueError):
    """A cursor this server did not write (or cannot read any more)."""


def run_key(thread_id: str, run_id: str) -> str:
    """What binds a cursor to its run: a short digest of the thread and run ids."""
    return hashlib.sha256(f"{thread_id}\n{run_id}".encode()).hexdigest()[:16]


@dataclass
class Progress:
    """How much of one message the client has."""

    text: int = 0
    text_closed: bool = False
    thought: int = 0
    thought_closed: bool = False
    calls: dict[str, int] = field(default_factory=dict)

    def wire(self) -> list[Any]:
        return [
            self.text,
            int(self.text_closed),
            self.thought,
            int(self.thought_closed),
            self.calls,
        ]

    @staticmethod
    def of(raw: Any) -> Progress:
        if not (isinstance(raw, list) and len(raw) == 5):
            raise CursorError("bad message progress")
        text, text_closed, thought, thought_closed, calls = raw
        numbers = (text, text_closed, thought, thought_closed)
        if not all(type(n) is int and n >= 0 for n in numbers) or not isinstance(calls, dict):
            raise CursorError("bad message progress")
        if not all(isinstance(k, str) and v in (1, 2, 3) for k, v in calls.items()):
            raise CursorError("bad tool call progress")
        return Progress(text, bool(text_closed), thought, bool(thought_closed), dict(calls))


@dataclass
class Cursor:
    """What the client of one AG-UI run has (the module docstring)."""

    seq: int
    run: str = ""
    """``run_key`` of the run the cursor belongs to."""
    partial: dict[str, Progress] = field(default_factory=dict)
    cost: float = 0.0
    requests: int = 0
    end: dict[str, Any] | None = None
    """The thread status the run ended with, once the client was told."""

    def encode(self) -> str:
        body: dict[str, Any] = {
            "v": VERSION,
            "r": self.run,
            "s": self.seq,
            "b": [self.cost, self.requests],
        }
        if self.partial:
            body["p"] = {mid: p.wire() for mid, p in self.partial.items()}
        if self.end is not None:
            body["e"] = self.end
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def decode(text: str) -> Cursor:
        if not text or len(text) > MAX_CURSOR:
            raise CursorError("empty or too long")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            body = json.loads(raw)
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise CursorError("not a cursor") from None
        if not isinstance(body, dict) or body.get("v") != VERSION:
            raise CursorError("not a cursor of this version")
        seq, base, partial, end = body.get("s"), body.get("b"), body.get("p", {}), body.get("e")
        run = body.get("r")
        if type(seq) is not int or seq < 0:
            raise CursorError("bad seq")
        if not isinstance(run, str):
            raise CursorError("bad run")
        if not (isinstance(base, list) and len(base) == 2):
            raise CursorError("bad cost")
        cost, requests = base
        if not isinstance(cost, int | float) or type(requests) is not int:
            raise CursorError("bad cost")
        if not isinstance(partial, dict) or not all(isinstance(k, str) for k in partial):
            raise CursorError("bad progress")
        if end is not None and not isinstance(end, dict):
            raise CursorError("bad end")
        progress = {mid: Progress.of(p) for mid, p in partial.items()}
        return Cursor(seq, run, progress, float(cost), requests, end)


_TEXT = (TextMessageStartEvent, TextMessageContentEvent, TextMessageEndEvent)
_THOUGHT = (
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningEndEvent,
)


class Tracker:
    """A stream's cursor, and the filter that resumes from the cursor it started with."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.had = {mid: _copy(p) for mid, p in cursor.partial.items()}
        """What the client had when this stream began (consumed as the stream goes)."""
        self._seen_text: dict[str, int] = {}
        self._seen_thought: dict[str, int] = {}
        self._call_message: dict[str, str] = {}
        for mid, progress in self.had.items():
            for call in progress.calls:
                self._call_message[call] = mid

    def _progress(self, mid: str) -> Progress:
        return self.cursor.partial.setdefault(mid, Progress())

    def admit(self, event: BaseEvent) -> BaseEvent | None:
        """``event`` as this stream sends it (a text delta may be cut), or ``None`` when the
        client has it already; the cursor then counts it."""
        if isinstance(event, _TEXT):
            return self._text(event)
        if isinstance(event, _THOUGHT):
            return self._thought(event)
        if isinstance(event, ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent):
            return self._call(event)
        return event

    def _text(
        self, event: TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent
    ) -> BaseEvent | None:
        mid = event.message_id
        had = self.had.get(mid)
        if had is not None and had.text_closed:
            return None
        if isinstance(event, TextMessageContentEvent):
            seen = self._seen_text.get(mid, 0)
            upto = self._seen_text[mid] = seen + len(event.delta)
            cut = max(0, (had.text if had else 0) - seen)
            if cut >= len(event.delta):
                return None
            if cut:
                event = event.model_copy(update={"delta": event.delta[cut:]})
            progress = self._progress(mid)
            progress.text = max(progress.text, upto)
        elif isinstance(event, TextMessageEndEvent):
            self._progress(mid).text_closed = True
        else:
            self._progress(mid)
        return event

    def _thought(self, event: BaseEvent) -> BaseEvent | None:
        mid: str = event.message_id  # type: ignore[attr-defined]
        had = self.had.get(mid)
        if had is not None and had.thought_closed:
            return None
        if isinstance(event, ReasoningMessageContentEvent):
            seen = self._seen_thought.get(mid, 0)
            upto = self._seen_thought[mid] = seen + len(event.delta)
            cut = max(0, (had.thought if had else 0) - seen)
            if cut >= len(event.delta):
                return None
            if cut:
                event = event.model_copy(update={"delta": event.delta[cut:]})
            progress = self._progress(mid)
            progress.thought = max(progress.thought, upto)
        elif isinstance(event, ReasoningEndEvent):
            self._progress(mid).thought_closed = True
        else:
            self._progress(mid)
        return event

    def _call(
        self, event: ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent
    ) -> BaseEvent | None:
        call = event.tool_call_id
        if isinstance(event, ToolCallStartEvent) and event.parent_message_id:
            self._call_message.setdefault(call, event.parent_message_id)
        mid = self._call_message.get(call, call)
        had = self.had.get(mid)
        reached = had.calls.get(call, 0) if had is not None else 0
        step = (
            CALL_STARTED
            if isinstance(event, ToolCallStartEvent)
            else CALL_ARGS
            if isinstance(event, ToolCallArgsEvent)
            else CALL_ENDED
        )
        if reached >= CALL_ENDED or (step == CALL_ARGS and reached >= CALL_ARGS):
            return None
        calls = self._progress(mid).calls
        calls[call] = max(calls.get(call, 0), step)
        return event

    def settled(self, seq: int, message_ids: list[str]) -> None:
        """Every event of the durable frame ``seq`` was sent; the messages it completed
        (or deleted) need no progress any more."""
        self.cursor.seq = max(self.cursor.seq, seq)
        for mid in message_ids:
            self.cursor.partial.pop(mid, None)

    def forget(self) -> None:
        """A messages snapshot replaced what the client had."""
        self.cursor.partial.clear()
        self.had.clear()
        self._seen_text.clear()
        self._seen_thought.clear()


def _copy(progress: Progress) -> Progress:
    return Progress(
        progress.text,
        progress.text_closed,
        progress.thought,
        progress.thought_closed,
        dict(progress.calls),
    )
