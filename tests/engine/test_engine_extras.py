"""Smaller engine rules: generation telemetry and session-binding result text."""

from __future__ import annotations

import math
from typing import Any

from threadloom.define import SessionBinding, tool
from threadloom.providers.script import Call, Reply


async def test_generation_telemetry_about_every_80_characters(make_chat: Any) -> None:
    """Spec 04 §4.12.2: roughly every 80 characters of output a `generation` record
    `{outputTokens: ceil(chars / 4)}` is published."""
    text = "x" * 250
    chat = await make_chat([Reply.text(text, chunk_size=10)])
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["telemetry"])
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    tokens = [e.data["outputTokens"] for e in sub.drain() if e.data["type"] == "generation"]
    assert tokens == [math.ceil(n / 4) for n in (80, 160, 240)]


@tool
def finish(summary: str) -> str:
    """Finish the session."""
    return "finished"


async def test_session_binding_message_property_is_the_stored_result(make_chat: Any) -> None:
    """Spec 04 §4.14.5: a successful `session_stop` binding with `message_property` stores
    that argument's value as the tool result text; the run ends `session_stop`."""
    chat = await make_chat(
        [Reply.tool_calls(Call("finish", {"summary": "All three tasks done."}))],
        prompt={"tools": ["finish"]},
        side_a={"session_stop": SessionBinding(name="finish", message_property="summary")},
        extra=[finish],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    page = await state.get_messages(order="asc", limit=None)
    result = next(m for m in page.messages if m.role == "tool")
    assert (result.content, result.tool_status) == ("All three tasks done.", "success")
    status = await state.status()
    assert status.reason == "session_stop"
