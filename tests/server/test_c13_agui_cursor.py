"""The AG-UI resume cursor and the filter that resumes from it (spec 13 §13.3)."""

from __future__ import annotations

import pytest
from ag_ui.core import (
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from threadloom.server.agui.cursor import Cursor, CursorError, Progress, Tracker, run_key


def test_c13_008_a_cursor_round_trips_and_refuses_what_it_did_not_write() -> None:
    cursor = Cursor(
        12,
        run_key("t", "r"),
        {"m1": Progress(5, False, 3, True, {"c1": 2})},
        cost=0.25,
        requests=3,
        end={"state": "idle", "since": 1, "reason": "stop_on_response"},
    )
    assert Cursor.decode(cursor.encode()) == cursor
    for bad in ("", "not a cursor", "e30", "x" * 70_000):
        with pytest.raises(CursorError):
            Cursor.decode(bad)


def test_c13_009_the_tracker_sends_only_what_the_client_lacks() -> None:
    """The client had 5 characters of m1's text, its closed reasoning and the start and
    arguments of call c1: a new stream opens the text again and sends the rest, ends c1
    without its arguments, and sends c2 whole."""
    tracker = Tracker(Cursor(7, "run", {"m1": Progress(5, False, 3, True, {"c1": 2})}))
    events = [
        ReasoningStartEvent(message_id="m1"),
        ReasoningMessageContentEvent(message_id="m1", delta="Hmm"),
        ReasoningEndEvent(message_id="m1"),
        TextMessageStartEvent(message_id="m1", role="assistant"),
        TextMessageContentEvent(message_id="m1", delta="Hel"),
        TextMessageContentEvent(message_id="m1", delta="lo, world"),
        TextMessageEndEvent(message_id="m1"),
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="m1"),
        ToolCallArgsEvent(tool_call_id="c1", delta="{}"),
        ToolCallEndEvent(tool_call_id="c1"),
        ToolCallStartEvent(tool_call_id="c2", tool_call_name="g", parent_message_id="m1"),
        ToolCallArgsEvent(tool_call_id="c2", delta="{}"),
        ToolCallEndEvent(tool_call_id="c2"),
        CustomEvent(name="x", value=1),
    ]
    sent = [e for e in (tracker.admit(event) for event in events) if e is not None]
    shown = [(e.type.value, getattr(e, "delta", None)) for e in sent]
    assert shown == [
        ("TEXT_MESSAGE_START", None),
        ("TEXT_MESSAGE_CONTENT", ", world"),
        ("TEXT_MESSAGE_END", None),
        ("TOOL_CALL_START", None),
        ("TOOL_CALL_END", None),
        ("TOOL_CALL_START", None),
        ("TOOL_CALL_ARGS", "{}"),
        ("TOOL_CALL_END", None),
        ("CUSTOM", None),
    ]
    progress = tracker.cursor.partial["m1"]
    assert (progress.text, progress.text_closed) == (12, True)
    assert progress.calls == {"c1": 3, "c2": 3}
    tracker.settled(9, ["m1"])
    assert (tracker.cursor.seq, tracker.cursor.partial) == (9, {})
