"""AG-UI event streams as the protocol's own models and rules judge them (spec 13 §13.2).

``parse_sse`` reads an SSE body into ``(id, event)`` pairs; ``check_events`` validates each
event with ``ag_ui.core``'s event models (the ``ag-ui-protocol`` package, AG-UI 1.0) and the
sequence with the rules ``@ag-ui/client``'s ``verifyEvents`` enforces before a client applies
anything (the first event is RUN_STARTED; nothing after RUN_ERROR, nothing but a new run
after RUN_FINISHED; a text message, tool call, reasoning message or subagent is started
before its content or end and not started again while open; RUN_FINISHED with nothing
open), plus what a client needs to make sense of the messages (issue 34): a message's
text starts once per response, a tool result's call was announced (in this response, a
snapshot of it, or ``known_calls`` a resumed client already has), and a messages
snapshot's every tool message has its call on an assistant message. Every AG-UI test reads
its streams through here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ag_ui.core import Event
from pydantic import TypeAdapter

EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def parse_sse(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, event)`` of each SSE event carrying data (comments are keep-alives)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event_id, data = None, []
        for line in block.split("\n"):
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((event_id, json.loads("\n".join(data))))
    return out


def check_snapshot(messages: list[dict[str, Any]]) -> None:
    """Every tool message's call is carried by an assistant message of the snapshot."""
    calls = {
        call["id"]
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("toolCalls") or ()
    }
    for m in messages:
        if m.get("role") == "tool":
            assert m["toolCallId"] in calls, f"tool message {m['id']} answers an unknown call"


class Verifier:
    """The sequence rules of one response (the module docstring), event by event."""

    def __init__(self, known_calls: Iterable[str] = ()) -> None:
        self.seen = 0
        self.run_active = False
        self.finished = False
        self.errored = False
        self.texts: set[str] = set()  # open text messages
        self.started_texts: set[str] = set()
        self.calls: set[str] = set()  # open tool calls
        self.announced: set[str] = set(known_calls)
        self.reasoning: set[str] = set()
        self.steps: set[str] = set()
        self.subagents: set[str] = set()

    def fail(self, index: int, event: dict[str, Any], why: str) -> None:
        raise AssertionError(f"event {index} {event['type']}: {why}\n{event}")

    def feed(self, event: dict[str, Any]) -> None:
        index, kind = self.seen, event["type"]
        self.seen += 1
        EVENT.validate_python(event)  # the protocol's own model
        if self.errored and kind != "RUN_STARTED":
            self.fail(index, event, "after RUN_ERROR")
        if self.finished and kind not in ("RUN_STARTED", "RUN_ERROR"):
            self.fail(index, event, "after RUN_FINISHED")
        if index == 0 and kind not in ("RUN_STARTED", "RUN_ERROR"):
            self.fail(index, event, "the first event must be RUN_STARTED")
        if kind == "RUN_STARTED":
            if self.run_active and not (self.finished or self.errored):
                self.fail(index, event, "a run is still active")
            self.run_active, self.finished, self.errored = True, False, False
        elif kind == "TEXT_MESSAGE_START":
            mid = event["messageId"]
            if mid in self.texts:
                self.fail(index, event, "already in progress")
            if mid in self.started_texts:
                self.fail(index, event, "the message was started before in this response")
            self.texts.add(mid)
            self.started_texts.add(mid)
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            if event["messageId"] not in self.texts:
                self.fail(index, event, "no text message in progress with that id")
            if kind == "TEXT_MESSAGE_END":
                self.texts.discard(event["messageId"])
        elif kind == "TOOL_CALL_START":
            if event["toolCallId"] in self.calls:
                self.fail(index, event, "already in progress")
            self.calls.add(event["toolCallId"])
            self.announced.add(event["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            if event["toolCallId"] not in self.calls:
                self.fail(index, event, "no tool call in progress with that id")
            if kind == "TOOL_CALL_END":
                self.calls.discard(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            if event["toolCallId"] not in self.announced:
                self.fail(index, event, "a result for a call never announced")
        elif kind in ("REASONING_START", "REASONING_MESSAGE_START"):
            self.reasoning.add(event["messageId"])
        elif kind == "REASONING_END":
            self.reasoning.discard(event["messageId"])
        elif kind == "STEP_STARTED":
            if event["stepName"] in self.steps:
                self.fail(index, event, "step already active")
            self.steps.add(event["stepName"])
        elif kind == "STEP_FINISHED":
            if event["stepName"] not in self.steps:
                self.fail(index, event, "step not started")
            self.steps.discard(event["stepName"])
        elif kind == "SUBAGENT_STARTED":
            self.subagents.add(event["subagentRunId"])
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            if event["subagentRunId"] not in self.subagents:
                self.fail(index, event, "no active subagent with that id")
            self.subagents.discard(event["subagentRunId"])
        elif kind == "MESSAGES_SNAPSHOT":
            check_snapshot(event["messages"])
            for m in event["messages"]:
                if m.get("role") == "assistant":
                    self.announced.update(c["id"] for c in m.get("toolCalls") or ())
        elif kind == "RUN_FINISHED":
            open_now = self.texts | self.calls | self.steps | self.subagents
            if open_now:
                self.fail(index, event, f"still open: {sorted(open_now)}")
            self.finished = True
        elif kind == "RUN_ERROR":
            self.errored = True


def check_events(
    events: Iterable[dict[str, Any] | tuple[str | None, dict[str, Any]]],
    *,
    known_calls: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """``events`` (plain, or ``(id, event)`` pairs) checked as one response: each with the
    protocol's model, the sequence with its rules (AssertionError naming the first
    offence); returns the plain events."""
    plain = [e[1] if isinstance(e, tuple) else e for e in events]
    verifier = Verifier(known_calls)
    for event in plain:
        verifier.feed(event)
    return plain
