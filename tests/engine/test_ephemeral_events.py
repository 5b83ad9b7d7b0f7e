"""Ephemeral events (telemetry, chunks, tool events; spec 04 §4.12.2, §4.26) are built only
when the bus has a subscriber — the bus keeps no history, so an event nobody receives is
not observable. A subscription made between turns receives the next turn's events whole."""

from __future__ import annotations

from typing import Any

from threadloom.providers.script import Call, Reply


async def test_a_subscriber_made_between_turns_gets_the_next_turns_events(make_chat: Any) -> None:
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1})),
            Reply.text("done"),
            Reply.tool_calls(Call("echo", {"v": 2})),
            Reply.text("again", chunk_size=2),
        ]
    )
    state = await chat.thread()
    tid = state.thread_id
    assert chat.runtime.hub.bus.subscriber_count == 0
    await chat.runtime.send_message(tid, "first")  # nobody listens: nothing to receive
    await chat.runtime.wait_idle(tid, timeout=5)
    sub = chat.runtime.events.subscribe(tid, kinds=["telemetry", "message_chunk", "event"])
    await chat.runtime.send_message(tid, "second")
    await chat.runtime.wait_idle(tid, timeout=5)
    events = sub.drain()
    telemetry = [e.data["type"] for e in events if e.kind == "telemetry"]
    for kind in ("step_started", "llm_request", "llm_response", "tool_started", "tool_completed"):
        assert kind in telemetry, kind
    assert telemetry.count("llm_request") == 2  # the tool-call step and the answer step
    chunks = [e.data["chunk"] for e in events if e.kind == "message_chunk"]
    assert "".join(chunks) == "again" and len(chunks) == 3
    tool_events = [e.data["event_type"] for e in events if e.kind == "event"]
    assert tool_events == ["tool_call_started", "tool_call_done"]
    sub.close()


def _shape(event: Any) -> tuple[Any, ...]:
    data = dict(event.data)
    data.pop("timestamp", None)
    data.pop("latency", None)
    for key in ("message_id", "id"):
        if key in data:
            data[key] = "<id>"
    if isinstance(data.get("data"), dict):
        inner = dict(data["data"])
        for key in ("message_id", "id"):
            if key in inner:
                inner[key] = "<id>"
        data["data"] = inner
    return (event.kind, data)


async def test_listeners_get_every_ephemeral_event_of_a_turn_as_before(make_chat: Any) -> None:
    """Publishers skip building events only while nobody listens to any thread: a
    subscriber to another thread does not make this thread's events reach anyone, and a
    subscriber to every thread receives this turn's whole, unchanged sequence."""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1})),
            Reply.text("done"),
            Reply.tool_calls(Call("echo", {"v": 2})),
            Reply.text("done"),
        ]
    )
    state, other = await chat.thread(), await chat.thread()
    elsewhere = chat.runtime.events.subscribe(other.thread_id)
    await chat.runtime.send_message(state.thread_id, "first")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert elsewhere.drain() == []
    everyone = chat.runtime.events.subscribe(None, kinds=["telemetry", "message_chunk", "event"])
    await chat.runtime.send_message(state.thread_id, "second")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    shapes = [_shape(e) for e in everyone.drain()]
    assert shapes == EXPECTED_TURN
    everyone.close()
    elsewhere.close()
    assert not chat.runtime.hub.bus.listened


EXPECTED_TURN: list[tuple[Any, ...]] = [
    ("telemetry", {"type": "step_started", "step": 0, "side": "a"}),
    ("telemetry", {"type": "llm_request", "model": "M", "attempt": 1}),
    (
        "event",
        {
            "event_type": "tool_call_started",
            "data": {
                "id": "<id>",
                "name": "echo",
                "message_id": "<id>",
                "depth": 0,
                "progress": None,
            },
        },
    ),
    ("telemetry", {"type": "llm_response", "tokens": 12}),
    ("telemetry", {"type": "tool_started", "tool": "echo"}),
    (
        "event",
        {
            "event_type": "tool_call_done",
            "data": {
                "id": "<id>",
                "name": "echo",
                "message_id": "<id>",
                "depth": 0,
                "status": "success",
            },
        },
    ),
    ("telemetry", {"type": "tool_completed", "tool": "echo", "status": "success"}),
    ("telemetry", {"type": "step_completed", "step": 0, "stopped": False}),
    ("telemetry", {"type": "step_started", "step": 1, "side": "a"}),
    ("telemetry", {"type": "llm_request", "model": "M", "attempt": 1}),
    ("message_chunk", {"message_id": "<id>", "depth": 0, "chunk": "done", "offset": 0}),
    ("telemetry", {"type": "llm_response", "tokens": 17}),
    ("telemetry", {"type": "step_completed", "step": 1, "stopped": True}),
    ("telemetry", {"type": "stopped", "reason": "stop_on_response", "side": "a"}),
]
"""One tool round and an answer, as published before publishers skipped unheard events."""
