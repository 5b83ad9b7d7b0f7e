"""The run loop on a chat agent: sends, answers, tool rounds, status (spec 04)."""

from __future__ import annotations

from typing import Any

from threadloom.providers.script import Call, Reply


async def _messages(state: Any) -> list[Any]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return page.messages


async def test_c04_019_send_gets_an_answer(make_chat: Any) -> None:
    """C04-019: script [text "Hi"] → send "Hello" → user "Hello" (prompt None), assistant
    "Hi" (name = side a label, prompt P, log id set); status idle / stop_on_response."""
    chat = await make_chat([Reply.text("Hi")])
    state = await chat.thread()
    sent = await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    user, assistant = await _messages(state)
    assert (user.id, user.role, user.content, user.status, user.prompt) == (
        sent.id,
        "user",
        "Hello",
        "completed",
        None,
    )
    assert (assistant.role, assistant.content, assistant.status) == ("assistant", "Hi", "completed")
    assert assistant.name == "Agent" and assistant.prompt == "P" and assistant.log_id
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")
    log = await chat.runtime.store.get_log(state.thread_id, assistant.log_id)
    assert log is not None and log.is_complete and log.message_id == user.id


async def test_c04_021_tool_round(make_chat: Any) -> None:
    """C04-021: script [toolcall echo {"v":1}, text "done"] → user, assistant(tool_calls,
    content null), tool(echo, success), assistant "done"; request 2 = [system, user,
    assistant(tool_calls), tool]."""
    chat = await make_chat([Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "go"),
        ("assistant", None),
        ("tool", "echo 1"),
        ("assistant", "done"),
    ]
    call = rows[1].decoded_tool_calls()[0]
    assert call.function.name == "echo" and call.function.arguments == '{"v":1}'
    assert (rows[2].tool_call_id, rows[2].tool_status, rows[2].name) == (call.id, "success", "echo")
    second = chat.provider.requests[1]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")
