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
