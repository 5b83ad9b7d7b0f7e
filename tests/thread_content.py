"""Test helper: a thread filled with one of everything a thread stores."""

from __future__ import annotations

from typing import Any

from threadloom import Runtime
from threadloom.records import Message, new_id


async def fill_thread(rt: Runtime, state: Any, tag: str) -> str:
    """A user message, an assistant tool call and its result, a nested message under the
    result, a silent system message, a queue entry and an app log row on ``state``'s
    thread (texts and ids made from ``tag``); returns the user message's id."""
    user = await state.inject_message(role="user", content=f"{tag} hi")
    await state.inject_message(
        role="assistant",
        content=None,
        tool_calls=[{"id": f"{tag}-c1", "function": {"name": "echo", "arguments": "{}"}}],
    )
    result = await state.inject_message(
        role="tool", content="ok", name="echo", tool_call_id=f"{tag}-c1", tool_status="success"
    )
    await rt.store.insert_message(
        state.thread_id,
        Message(id=new_id(), role="assistant", content="inner", depth=1, parent_id=result.id),
    )
    await state.inject_message(role="system", content="quiet", silent=True)
    await state.queue_message(role="user", content=f"{tag} later")
    await state.log({"name": f"{tag}.app", "cost": 0.001})
    return str(user.id)
