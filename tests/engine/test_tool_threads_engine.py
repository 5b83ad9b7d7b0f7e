"""Plain ``def`` tools in a run use the runtime's worker threads (``engine/step/threads.py``):
parallel calls run at once, each in a worker of its own, and closing the runtime ends
the workers."""

from __future__ import annotations

import threading
from typing import Any

from threadloom.define import tool
from threadloom.providers.scripted import Call, Reply

MEETING = threading.Barrier(2, timeout=5)


@tool
def meet(n: int) -> str:
    """Wait for the other call, then name the worker thread."""
    MEETING.wait()  # both calls must be running at once for either to return
    return threading.current_thread().name


async def test_parallel_plain_tools_run_at_once_in_worker_threads(make_chat: Any) -> None:
    MEETING.reset()
    chat = await make_chat(
        [
            Reply.tool_calls(Call("meet", {"n": 1}, id="c1"), Call("meet", {"n": 2}, id="c2")),
            Reply.text("done"),
        ],
        prompt={"tools": ["meet"]},
        extra=[meet],
    )
    runtime = chat.runtime
    state = await chat.thread()
    await runtime.send_message(state.thread_id, "go")
    await runtime.wait_idle(state.thread_id, timeout=10)
    messages = (await state.get_messages(order="asc", limit=None)).messages
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    assert {m.tool_status for m in results.values()} == {"success"}
    names = {results["c1"].content, results["c2"].content}
    assert len(names) == 2
    assert all(name.startswith("threadloom-tool-") for name in names)
    assert runtime.runs.threads.threads == 2
    workers = [t for t in threading.enumerate() if t.name in names]
    await runtime.close(drain=0)
    assert runtime.runs.threads.threads == 0
    assert not any(t.is_alive() for t in workers)


async def test_invoke_tool_at_rest_uses_the_worker_threads(make_chat: Any) -> None:
    chat = await make_chat([Reply.text("hi")], extra=[meet])
    state = await chat.thread()

    @tool
    def name_of() -> str:
        """The worker's name."""
        return threading.current_thread().name

    chat.runtime.definitions.add(name_of)
    result = await state.invoke_tool("name_of", {})
    assert result.status == "success"
    assert result.result is not None and result.result.startswith("threadloom-tool-")
