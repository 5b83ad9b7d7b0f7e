"""The calls a step runs are the finalised message's (spec 04 §4.13 step 4, §4.14): with
the arguments text the model sent, the ``extra_content`` it sent, and whatever a
``before_update_message`` hook stored instead."""

from __future__ import annotations

import json
from typing import Any

from threadloom.define import hook
from threadloom.providers.scripted import Call, Reply
from threadloom.records import Message

SEEN: list[tuple[str, str, dict[str, Any] | None]] = []


@hook("tool_call_done")
def seen(state: Any, call: Any, result: Any) -> None:
    SEEN.append((call.id, call.function.arguments, call.extra_content))


async def _turn(chat: Any) -> list[Message]:
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=10)
    return (await state.get_messages(order="asc", limit=None)).messages


async def test_calls_run_with_the_sent_arguments_text_and_extra_content(make_chat: Any) -> None:
    SEEN.clear()
    extra = {"signature": "abc", "parts": [1, 2]}
    chat = await make_chat(
        [
            Reply.tool_calls(
                Call("echo", '{ "v" : 7 }', id="c1", extra_content=extra),
                Call("echo", {"v": 8}, id="c2"),
            ),
            Reply.text("done"),
        ],
        agent={"hooks": ("seen",)},
        extra=[seen],
    )
    messages = await _turn(chat)
    assert sorted(SEEN) == [("c1", '{ "v" : 7 }', extra), ("c2", '{"v":8}', None)]
    call = next(m for m in messages if m.tool_calls)
    stored = json.loads(call.tool_calls or "[]")
    assert [c["function"]["arguments"] for c in stored] == ['{"v":7}', '{"v":8}']
    assert stored[0]["extra_content"] == extra and "extra_content" not in stored[1]
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert results == {"c1": "echo 7", "c2": "echo 8"}


async def test_calls_a_before_update_message_hook_stored_are_the_ones_run(make_chat: Any) -> None:
    SEEN.clear()
    replaced = [
        {"id": "c9", "type": "function", "function": {"name": "echo", "arguments": '{"v":9}'}}
    ]

    @hook("before_update_message")
    def swap(state: Any, message_id: str, updates: dict[str, Any]) -> dict[str, Any] | None:
        if updates.get("tool_calls"):
            return {**updates, "tool_calls": json.dumps(replaced, separators=(",", ":"))}
        return None

    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}, id="c1")), Reply.text("done")],
        agent={"hooks": ("seen", "swap")},
        extra=[seen, swap],
    )
    messages = await _turn(chat)
    assert SEEN == [("c9", '{"v":9}', None)]
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert results == {"c9": "echo 9"}
