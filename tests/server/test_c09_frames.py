"""Spec 09 §9.5, §9.9, §9.12, §9.13: frame kinds and filters, the log socket, SSE."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

from family import add_family
from test_c09_stream import exchange, head_of, open_ws, quiet, recv, settled_idle, until

from conftest import USERS, Api, spawning
from threadloom.define import Prompt, tool
from threadloom.define.agent import Agent, Side
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply
from threadloom.records import LOG_LIST_KEYS, SubagentRegistryEntry
from threadloom.store.base import NewThread


@tool
async def slow_lookup(state: Any, key: str = "k") -> str:
    """Look a key up slowly (200 ms) and log a cache miss."""
    await state.log({"name": "cache.miss", "key": key})
    await asyncio.sleep(0.2)
    return f"value of {key}"


def add_tool_agent(api: Api) -> None:
    """Agent ``tooler``: the echo model with ``slow_lookup`` and the sub-prompt ``helper``."""
    api.runtime.definitions.add(
        slow_lookup,
        Prompt(name="helper", model="echo_model", system="You help."),
        Prompt(
            name="tool_prompt",
            model="echo_model",
            system="You look up.",
            tools=["slow_lookup", "helper"],
        ),
        Agent(
            name="tooler",
            side_a=Side(prompt="tool_prompt", label="Agent"),
            side_b=Side(label="Customer"),
        ),
    )


def of(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == kind]


async def test_c09_012_silent_messages_need_include_silent(api: Api) -> None:
    thread = await api.thread()
    async with (
        await open_ws(api, thread) as plain,
        await open_ws(api, thread, includeSilent="true") as loud,
    ):
        await recv(plain)
        await recv(loud)
        response = await api.client().post(
            f"/api/threads/{thread}/messages", json={"content": "psst", "silent": True}
        )
        silent_id = response.json()["messageId"]
        plain_frames = await until(plain, settled_idle)
        loud_frames = await until(loud, settled_idle)
    assert not [f for f in plain_frames if f.get("message_id") == silent_id]
    mine = [f for f in of(loud_frames, "message_data") if f["message_id"] == silent_id]
    assert mine and all(f["data"]["silent"] is True for f in mine)


async def test_c09_013_sub_prompt_frames_need_depth(api: Api) -> None:
    add_tool_agent(api)
    api.echo.reset([Reply.tool_calls(Call("helper", {})), Reply.text("nested"), Reply.text("top")])
    thread = await api.thread("tooler")
    async with await open_ws(api, thread) as top, await open_ws(api, thread, depth=1) as deep:
        await recv(top)
        await recv(deep)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        top_frames = await until(top, settled_idle)
        deep_frames = await until(deep, settled_idle)
    assert all(f.get("depth", 0) == 0 for f in top_frames)
    nested = [f for f in of(deep_frames, "message_data") if f["depth"] == 1]
    assert nested and nested[-1]["data"]["content"] == "nested"
    nested_chunks = [f for f in of(deep_frames, "message_chunk") if f["depth"] == 1]
    assert nested_chunks and {f["message_id"] for f in nested_chunks} == {nested[-1]["message_id"]}


async def test_c09_014_reasoning_chunks_need_reasoning(api: Api) -> None:
    api.echo.reset(lambda request: Reply(content="answer", reasoning_content="r1 r2", chunk_size=3))
    thread = await api.thread()
    async with (
        await open_ws(api, thread) as plain,
        await open_ws(api, thread, reasoning="true") as thinking,
    ):
        await recv(plain)
        await recv(thinking)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        plain_frames = await until(plain, settled_idle)
        frames = await until(thinking, settled_idle)
    assert of(plain_frames, "reasoning_chunk") == []
    text = ""
    for chunk in of(frames, "reasoning_chunk"):
        text = text[: chunk["offset"]] + chunk["chunk"]
    assert text == "r1 r2"
    final = of(frames, "message_data")[-1]["data"]
    assert final["reasoning_content"] == "r1 r2"
    duration = final["metadata"]["reasoning_duration_ms"]
    assert isinstance(duration, int) and duration >= 0


async def test_c09_015_cascade_delete_sends_consecutive_message_deleted(api: Api) -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}},
    ]
    thread = await api.thread(
        initial_messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "content": "r1", "tool_call_id": "c1"},
            {"role": "tool", "content": "r2", "tool_call_id": "c2"},
        ]
    )
    messages = (await api.client().get(f"/api/threads/{thread}/messages?order=asc")).json()[
        "messages"
    ]
    assistant, r1, r2 = (m["id"] for m in messages[1:])
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        response = await api.client().delete(f"/api/threads/{thread}/messages/{assistant}")
        assert response.status_code == 200
        frames = await until(ws, lambda f: f.get("message_id") == r2)
    deleted = of(frames, "message_deleted")
    assert [f["message_id"] for f in deleted] == [assistant, r1, r2]
    seqs = [f["seq"] for f in deleted]
    assert seqs == [seqs[0], seqs[0] + 1, seqs[0] + 2]
    assert all(f["depth"] == 0 for f in deleted)


async def test_c09_016_deleting_a_queue_entry_sends_message_deleted(api: Api) -> None:
    thread = await api.thread("gate")
    client = api.client()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 5)
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        queued = await client.post(f"/api/threads/{thread}/messages", json={"content": "later"})
        q = queued.json()["messageId"]
        created = await until(ws, lambda f: f.get("message_id") == q)
        assert created[-1]["data"]["metadata"]["queued"] is True
        assert (await client.delete(f"/api/threads/{thread}/messages/{q}")).status_code == 200
        frames = await until(ws, lambda f: f["type"] == "message_deleted")
    assert frames[-1]["message_id"] == q
    assert frames[-1]["seq"] > created[-1]["seq"]
    api.gate.open()


async def test_c09_017_log_frames_need_logs(api: Api) -> None:
    thread = await api.thread()
    async with (
        await open_ws(api, thread) as plain,
        await open_ws(api, thread, logs="true") as logged,
    ):
        await recv(plain)
        await recv(logged)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
        plain_frames = await until(plain, settled_idle)
        frames = await until(logged, settled_idle)
    assert of(plain_frames, "log_data") == []
    rows = of(frames, "log_data")
    assert rows
    llm = [f for f in rows if f["data"]["kind"] is None]
    assert llm and llm[-1]["data"]["is_complete"] is True
    for frame in rows:
        assert frame["log_id"] == frame["data"]["id"]
        assert set(LOG_LIST_KEYS) <= set(frame["data"])


async def test_c09_018_app_log_from_a_tool_is_a_log_frame_only(api: Api) -> None:
    add_tool_agent(api)
    api.echo.reset([Reply.tool_calls(Call("slow_lookup", {"key": "a"})), Reply.text("done")])
    thread = await api.thread("tooler")
    async with await open_ws(api, thread, logs="true") as ws:
        await recv(ws)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        frames = await until(ws, settled_idle)
    app = [
        i for i, f in enumerate(frames) if f["type"] == "log_data" and f["data"]["kind"] == "app"
    ]
    assert len(app) == 1
    row = frames[app[0]]["data"]
    assert row["model"] == "cache.miss"
    # what follows it before the tool result is stored: no message or status frame
    after = frames[app[0] + 1 :]
    nxt = next(f for f in after if f["type"] in ("message_data", "thread_status"))
    assert nxt["type"] == "message_data" and nxt["data"]["role"] == "tool"


async def test_c09_019_app_log_before_any_message_has_no_message_id(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread, logs="true") as ws:
        await recv(ws)
        state = await api.runtime.thread(thread)
        await state.log({"name": "boot"})
        frames = await until(ws, lambda f: f["type"] == "log_data")
        assert await quiet(ws) == []
    assert frames[-1]["data"]["message_id"] is None
    assert frames[-1]["data"]["kind"] == "app"


async def test_c09_020_stop_settles_records_before_status(api: Api) -> None:
    thread = await api.thread("gate")
    client = api.client()
    async with await open_ws(api, thread, logs="true") as ws:
        await recv(ws)
        await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
        await asyncio.wait_for(api.gate.entered.wait(), 5)
        pending = await until(
            ws, lambda f: f["type"] == "message_data" and f["data"]["role"] == "assistant"
        )
        pending_id = pending[-1]["message_id"]
        assert (await client.post(f"/api/threads/{thread}/stop", json={})).status_code == 200
        frames = await until(ws, settled_idle)
        stopped = await until(ws, lambda f: f["type"] == "stopped_by_user")
    messages = of(frames, "message_data")
    failed = next(f for f in messages if f["message_id"] == pending_id)
    note = next(f for f in messages if f["data"]["content"] == "Execution stopped by user")
    status = frames[-1]
    assert failed["data"]["status"] == "failed"
    assert failed["seq"] < note["seq"] < status["seq"]
    assert status["status"]["reason"] == "aborted_by_user"
    assert stopped[-1]["seq"] == status["seq"]


async def test_c09_022_file_write_sends_an_event_frame(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        # the /fs routes are not served yet: the same write through ThreadState
        state = await api.runtime.thread(thread)
        await state.write_file("/a.txt", "hello", "text/plain")
        frames = await until(ws, lambda f: f["type"] == "event")
    event = frames[-1]
    assert event["eventType"] == "file_created"
    assert event["data"]["path"] == "/a.txt"
    assert isinstance(event["timestamp"], int)
    assert event["seq"] == await head_of(api, thread)


async def test_c09_023_tool_events_carry_the_call_and_its_message(api: Api) -> None:
    add_tool_agent(api)
    api.echo.reset([Reply.tool_calls(Call("slow_lookup", {"key": "a"})), Reply.text("done")])
    thread = await api.thread("tooler")
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        frames = await until(ws, settled_idle)
    events = [f for f in of(frames, "event") if f["eventType"].startswith("tool_call")]
    assert [f["eventType"] for f in events] == ["tool_call_started", "tool_call_done"]
    started, done = events
    caller = next(
        f
        for f in of(frames, "message_data")
        if f["data"]["role"] == "assistant" and f["data"]["tool_calls"]
    )
    assert started["data"]["id"] == done["data"]["id"]
    assert started["data"]["message_id"] == done["data"]["message_id"] == caller["message_id"]
    assert done["data"]["status"] == "success"


async def test_c09_040_log_socket_carries_log_frames_only(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread, path="logs") as ws:
        first = await recv(ws)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
        frames = await until(ws, settled_idle)
    assert first["type"] == "thread_status"
    assert of(frames, "log_data")
    assert {f["type"] for f in frames} <= {"log_data", "thread_status", "stopped_by_user"}


async def test_c09_040_log_socket_needs_the_logs_permission(api: Api) -> None:
    from websockets.exceptions import InvalidStatus

    thread = await api.thread(user="apiu")
    try:
        await open_ws(api, thread, "apiu", path="logs")
    except InvalidStatus as refused:
        assert refused.response.status_code == 403
    else:
        raise AssertionError("the upgrade was accepted")


async def test_c09_044_each_socket_in_order_and_the_unfiltered_one_without_gaps(api: Api) -> None:
    thread = await api.thread()
    start = await head_of(api, thread)
    async with (
        await open_ws(api, thread) as plain,
        await open_ws(api, thread, includeSilent="true", depth=99, logs="true") as full,
    ):
        await recv(plain)
        await recv(full)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "a"})
        await api.client().post(
            f"/api/threads/{thread}/messages", json={"content": "b", "silent": True}
        )
        plain_frames = await until(plain, settled_idle, timeout=10)
        full_frames = await until(full, settled_idle, timeout=10)
        await api.settle(thread)
        plain_frames += await quiet(plain)
        full_frames += await quiet(full)
    for frames in (plain_frames, full_frames):
        seqs = [f["seq"] for f in frames]
        assert seqs == sorted(seqs)
    durable = [
        f["seq"]
        for f in full_frames
        if f["type"] in ("message_data", "message_deleted", "thread_status", "log_data")
    ]
    assert durable == list(range(start + 1, start + 1 + len(durable)))
    assert durable[-1] == await head_of(api, thread)


async def test_c08_079_patched_message_reaches_the_stream(api: Api) -> None:
    thread = await api.thread(initial_messages=[{"role": "user", "content": "orig"}])
    message = (await api.client().get(f"/api/threads/{thread}/messages")).json()["messages"][0]
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        response = await api.client().patch(
            f"/api/threads/{thread}/messages/{message['id']}", json={"content": "edited"}
        )
        assert response.status_code == 200
        body = response.json()
        assert body["success"] is True and body["message"]["content"] == "edited"
        frames = await until(ws, lambda f: f["type"] == "message_data")
    assert frames[-1]["message_id"] == message["id"]
    assert frames[-1]["data"] == body["message"]


# -- Server-Sent Events (§9.13) ----------------------------------------------------------------


async def read_events(lines: Any, count: int) -> list[dict[str, Any]]:
    """``count`` SSE events as {id, event, data}."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async with asyncio.timeout(10):
        async for line in lines:
            if not line:
                if current:
                    events.append(current)
                    current = {}
                    if len(events) == count:
                        return events
                continue
            key, _, value = line.partition(": ")
            current[key] = json.loads(value) if key == "data" else value
    return events


async def test_c09_038_sse_variant(api: Api) -> None:
    thread = await api.thread()
    await exchange(api, thread, "before")
    head = await head_of(api, thread)
    client = api.client()
    async with client.stream(
        "GET", f"/api/threads/{thread}/stream", headers={"Accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-store"
        lines = response.aiter_lines()
        assert await anext(lines) == "retry: 1000"
        assert await anext(lines) == ""
        first = (await read_events(lines, 1))[0]
        assert first["event"] == "thread_status" and first["id"] == str(head)
        assert first["data"]["snapshot"] is True
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
        events = await read_events(lines, 3)
    assert events[0]["event"] == "message_data"
    assert all(e["id"] == str(e["data"]["seq"]) for e in events)


async def test_c09_039_sse_resumes_from_last_event_id(api: Api) -> None:
    thread = await api.thread()
    await exchange(api, thread, "one")
    s = await head_of(api, thread)
    await exchange(api, thread, "two")
    async with api.client().stream(
        "GET",
        f"/api/threads/{thread}/stream",
        headers={"Accept": "text/event-stream", "Last-Event-ID": str(s)},
    ) as response:
        lines = response.aiter_lines()
        await anext(lines)
        await anext(lines)
        events = await read_events(lines, 4)  # compacted: message, answer, status
    assert events[0]["event"] == "thread_status" and events[0]["id"] == str(s)
    contents = [e["data"]["data"]["content"] for e in events if e["event"] == "message_data"]
    assert contents == ["two", "echo: two"]
    assert all(int(e["id"]) > s for e in events[1:])


async def test_c09_021_a_spawned_child_is_running_then_idle_on_the_parents_stream(
    api: Api,
) -> None:
    """C09-021: the parent's model calls ``subagent_create`` (non-blocking), the engine
    creates and runs the child, the child ends its session → the parent's socket gets
    ``subagent_updated`` frames for that child, ``running`` first and then ``idle``, each
    carrying the whole §8.2.7 entry."""
    add_family(api)
    parent = await api.thread("lead")
    async with await open_ws(api, parent) as ws:
        await recv(ws)
        await api.client().post(f"/api/threads/{parent}/messages", json={"content": "north"})
        frames = await until(
            ws, lambda f: f["type"] == "subagent_updated" and f["data"]["status"] == "idle"
        )
    (entry,) = (await api.client().get(f"/api/threads/{parent}/subagents")).json()["subagents"]
    child = entry["id"]
    updates = of(frames, "subagent_updated")
    assert {f["subagent_id"] for f in updates} == {child}
    assert [f["data"]["status"] for f in updates] == ["running", "idle"]
    assert updates[0]["seq"] < updates[1]["seq"]
    assert all(f["data"]["id"] == child for f in updates)
    assert set(updates[0]["data"]) == set(entry)
    assert updates[-1]["data"] == entry | {"status": "idle"}
    detail = (await api.client().get(f"/api/threads/{child}")).json()
    assert detail["thread"]["parent"] == parent
    assert (detail["status"]["state"], detail["status"]["reason"]) == ("idle", "session_stop")


async def test_a_child_a_spawner_run_creates_is_followed_by_subagent_updated(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(extra=spawning())
    parent = await api.thread("spawner")
    async with await open_ws(api, parent) as ws:
        await recv(ws)
        sent = await api.client().post(f"/api/threads/{parent}/messages", json={"content": "go"})
        assert sent.status_code == 202
        frames = await until(
            ws,
            lambda f: f["type"] == "subagent_updated" and f["data"]["status"] != "running",
            timeout=20,
        )
    updates = [f for f in frames if f["type"] == "subagent_updated"]
    (child,) = {f["subagent_id"] for f in updates}
    assert updates[0]["data"]["status"] == "running"
    assert updates[-1]["data"]["status"] == "idle"
    assert updates[0]["data"]["id"] == child and updates[0]["data"]["relationship"] == "helper"
    seqs = [f["seq"] for f in updates]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    registry = (await api.client().get(f"/api/threads/{parent}/subagents")).json()
    assert [e["id"] for e in registry["subagents"]] == [child]


async def test_subagent_updated_frames_follow_registry_writes(api: Api) -> None:
    """§9.9.3 for registry writes outside a spawn: an entry committed with the parent's
    ``subagent`` event, then the child terminated over HTTP, update the entry."""
    parent = await api.thread()
    hub = api.runtime.hub
    child_id = str(uuid.uuid4())
    async with await open_ws(api, parent) as ws:
        await recv(ws)
        async with hub.lock(parent):
            _, event = await api.runtime.store.create_child(
                NewThread(
                    id=child_id, agent_id="echo", parent_id=parent, user_id=USERS["alice"].id
                ),
                SubagentRegistryEntry(
                    reference=child_id, relationship="helper", name="echo", status="running"
                ),
            )
            await hub.publish_events([event])
        created = await until(ws, lambda f: f["type"] == "subagent_updated")
        assert (
            await api.client().post(f"/api/threads/{child_id}/terminate", json={})
        ).status_code == 200
        terminated = await until(ws, lambda f: f["type"] == "subagent_updated")
    first, second = created[-1], terminated[-1]
    assert first["subagent_id"] == second["subagent_id"] == child_id
    assert first["data"]["id"] == child_id and first["data"]["relationship"] == "helper"
    assert first["data"]["status"] == "running"
    assert second["data"]["status"] == "terminated"
    assert second["seq"] > first["seq"]


async def test_generation_estimates_are_event_frames(api: Api) -> None:
    """§9.9.4: about every 80 streamed characters an ``event`` ``generation`` frame."""
    api.echo.reset(lambda request: Reply(content="z" * 200, chunk_size=20))
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        frames = await until(ws, settled_idle)
    estimates = [f for f in of(frames, "event") if f["eventType"] == "generation"]
    assert len(estimates) == 2  # at 80 and 160 characters
    assert [f["data"]["outputTokens"] for f in estimates] == [20, 40]
    assert all(isinstance(f["timestamp"], int) for f in estimates)
    assert not [f for f in frames if f["type"] == "generation"]


async def test_sse_thread_deleted_ends_the_response(api: Api) -> None:
    """§9.13: a deleted thread gets ``event: thread_deleted`` and the response ends."""
    thread = await api.thread()
    async with api.client().stream(
        "GET", f"/api/threads/{thread}/stream", headers={"Accept": "text/event-stream"}
    ) as response:
        lines = response.aiter_lines()
        await anext(lines)
        await anext(lines)
        assert (await read_events(lines, 1))[0]["event"] == "thread_status"
        assert (await api.client().delete(f"/api/threads/{thread}")).status_code == 200
        events = await read_events(lines, 2)  # the response ends after the first
    assert events == [
        {
            "id": events[0]["id"],
            "event": "thread_deleted",
            "data": {"type": "thread_deleted", "thread_id": thread},
        }
    ]
