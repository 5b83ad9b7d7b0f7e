"""Spec 08 §8.4.4 logs kept, §8.5.2 stop during a tool call and the stop flag."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import Api
from threadloom import Agent, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.records import LogRow, ToolCall, ToolCallFunction, new_id
from threadloom.thread.queue import check_queue, enqueue


async def stored(api: Api, thread: str) -> list[dict[str, Any]]:
    response = await api.client().get(
        f"/api/threads/{thread}/messages?order=asc&includeSilent=true&limit=1000"
    )
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def test_c08_086_deleted_message_keeps_its_log_rows_and_cost(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    call = ToolCall(id="c1", function=ToolCallFunction(name="lookup", arguments="{}"))
    assistant = await state.inject_message(role="assistant", content=None, tool_calls=[call])
    await state.inject_message(role="tool", content="r", tool_call_id="c1")
    row, _ = await api.runtime.store.insert_log(
        thread,
        LogRow(
            id=new_id(),
            provider="scripted",
            model="m",
            created_at=0,
            cost_total=0.02,
            message_id=assistant.id,
            endpoint="chat.completions",
        ),
    )
    before = (await client.get(f"/api/threads/{thread}/cost")).json()["totalCost"]
    deleted = await client.delete(f"/api/threads/{thread}/messages/{assistant.id}")
    assert deleted.status_code == 200
    logs = (await client.get(f"/api/threads/{thread}/logs?ids={row.id}")).json()["logs"]
    assert [r["id"] for r in logs] == [row.id] and logs[0]["message_id"] is None
    assert (await client.get(f"/api/threads/{thread}/cost")).json()["totalCost"] == before


def add_slow_tool_agent(api: Api) -> tuple[asyncio.Event, asyncio.Event]:
    """Agent ``tooler``: its model calls ``slow`` once; ``slow`` sets ``entered`` and waits
    for ``release``."""
    release = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "finished"

    def reply(request: Any) -> Reply:
        if any(m.role == "tool" for m in request.messages):
            return Reply.text("after the tool")
        return Reply.tool_calls(("slow", {}))

    api.runtime.definitions.add(
        slow,
        Model(name="tool_model", provider=ScriptedProvider(reply), model="scripted-tool"),
        Prompt(name="tool_prompt", model="tool_model", system="Use the tool.", tools=["slow"]),
        Agent(name="tooler", side_a=Side(prompt="tool_prompt"), side_b=Side(label="Customer")),
    )
    return entered, release


async def test_c08_093_stop_during_a_tool_call_answers_it_once(api: Api) -> None:
    entered, release = add_slow_tool_agent(api)
    client = api.client()
    thread = await api.thread("tooler")
    await client.post(f"/api/threads/{thread}/messages", json={"content": "go"})
    await asyncio.wait_for(entered.wait(), 10)
    stopped = await client.post(f"/api/threads/{thread}/stop")
    assert stopped.json()["wasRunning"] is True
    release.set()
    await asyncio.sleep(0.2)
    results = [m for m in await stored(api, thread) if m["role"] == "tool"]
    assert len(results) == 1
    assert results[0]["content"] == "Execution stopped by user"
    assert results[0]["tool_status"] == "error"


async def park(api: Api, thread: str, text: str) -> str:
    """A queue entry as subagent traffic leaves it (``queue_source`` ``subagent``)."""
    view = await enqueue(
        api.runtime.hub, thread, check_queue({"role": "user", "content": text}), "subagent"
    )
    return view.id


async def test_c08_095_a_send_clears_the_stop_flag_and_delivers_parked_entries(
    api: Api,
) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/stop")
    parked = await park(api, thread, "from a child")
    await asyncio.sleep(0.1)
    assert not api.runtime.running(thread)
    sent = await client.post(
        f"/api/threads/{thread}/messages", json={"content": "m", "role": "assistant"}
    )
    assert sent.status_code == 202
    await api.settle(thread)
    order = [m["id"] for m in await stored(api, thread)]
    assert order.index(parked) < order.index(sent.json()["messageId"])
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.stopped is False


async def test_c08_096_stop_flag_and_queue_message(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/stop")
    parked = await park(api, thread, "child traffic")
    await asyncio.sleep(0.2)
    status = (await client.get(f"/api/threads/{thread}")).json()["status"]
    assert status["state"] == "idle" and status["reason"] is None
    entry = next(m for m in await stored(api, thread) if m["id"] == parked)
    assert entry["status"] == "pending"
    state = await api.runtime.thread(thread)
    await state.queue_message(role="user", content="from code")
    await api.settle(thread)
    messages = await stored(api, thread)
    assert [m["status"] for m in messages if m["role"] == "user"] == ["completed", "completed"]
    assert messages[-1]["role"] == "assistant"
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.stopped is False
