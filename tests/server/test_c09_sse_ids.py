"""Spec 09 §9.13: the ``id:`` of every SSE event is unique and increasing on its response,
ephemeral frames included, and a ``Last-Event-ID`` taken from any of them resumes; §9.9.7:
a tool call's start comes as the ``tool_call_started`` event (what a client shows) and as
the ``tool_started`` telemetry frame (run telemetry), each once."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from test_c09_frames import add_tool_agent

from conftest import Api
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply

Event = dict[str, Any]
DURABLE = ("message_data", "message_deleted", "log_data", "subagent_updated")


def settled(event: Event) -> bool:
    data = event["data"]
    if data.get("type") != "thread_status" or data.get("snapshot"):
        return False
    return data["status"]["state"] == "idle" and data["status"]["reason"] is not None


async def events_until(lines: AsyncIterator[str], done: Callable[[Event], bool]) -> list[Event]:
    """SSE events as {id, event, data} up to the first for which ``done`` is true."""
    events: list[Event] = []
    current: Event = {}
    async with asyncio.timeout(10):
        async for line in lines:
            if line:
                key, _, value = line.partition(": ")
                current[key] = json.loads(value) if key == "data" else value
                continue
            if not current or "data" not in current:
                current = {}
                continue  # the leading ``retry:``
            events.append(current)
            current = {}
            if done(events[-1]):
                return events
    raise AssertionError(f"the response ended before the awaited event: {events}")


def sse(api: Api, thread: str, **headers: str) -> Any:
    client = api.client()
    headers = {"Accept": "text/event-stream", **headers}
    return client.stream("GET", f"/api/threads/{thread}/stream", headers=headers)


def position(event_id: str) -> tuple[int, int]:
    whole, _, part = event_id.partition(".")
    return int(whole), int(part or 0)


async def a_run_over_sse(api: Api) -> tuple[str, list[Event]]:
    """A ``tooler`` thread's turn with one tool call, read over SSE from its start."""
    add_tool_agent(api)
    api.echo.reset([Reply.tool_calls(Call("slow_lookup", {"key": "a"})), Reply.text("done")])
    thread = await api.thread("tooler")
    async with sse(api, thread, **{"Last-Event-ID": "0"}) as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        first = await events_until(lines, lambda e: True)
        sent = await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        assert sent.status_code == 202
        events = first + await events_until(lines, settled)
    return thread, events


async def test_c09_048_every_sse_event_id_is_unique_and_increasing(api: Api) -> None:
    """C09-048: ids are distinct and increase as (seq, n); a durable frame's id is its
    ``seq``; a frame that carries the ``seq`` of the one before (an ephemeral frame) has
    ``<seq>.<n>``."""
    _, events = await a_run_over_sse(api)
    ids = [e["id"] for e in events]
    assert len(set(ids)) == len(ids)
    places = [position(i) for i in ids]
    assert places == sorted(places)
    for event in events:
        assert position(event["id"])[0] == event["data"]["seq"]
        if event["event"] in DURABLE:
            assert event["id"] == str(event["data"]["seq"])
    # frames after one with the same seq (the chunks and tool events of a step): n-th
    repeated = [e for p, e in itertools.pairwise(events) if e["data"]["seq"] == p["data"]["seq"]]
    assert len(repeated) >= 3 and all("." in e["id"] for e in repeated)
    assert {e["event"] for e in repeated} >= {"message_chunk", "event"}


async def test_c09_049_last_event_id_of_an_ephemeral_frame_resumes(api: Api) -> None:
    """C09-049: reconnecting with ``Last-Event-ID: <seq>.<n>`` (a chunk's id) resumes
    from ``seq``: the snapshot carries it, then every durable change after it, as with
    ``Last-Event-ID: <seq>``; an id of another form counts as none."""
    thread, events = await a_run_over_sse(api)
    chunk = next(e for e in events if e["event"] == "message_chunk" and "." in e["id"])
    seq = chunk["data"]["seq"]
    missed = {
        e["data"]["message_id"]: e["data"]["data"]
        for e in events
        if e["event"] == "message_data" and e["data"]["seq"] > seq
    }
    assert missed  # the answer that followed the chunk, at least
    resumed: dict[str, list[Event]] = {}
    for last in (chunk["id"], str(seq)):
        async with sse(api, thread, **{"Last-Event-ID": last}) as response:
            resumed[last] = await events_until(response.aiter_lines(), settled)
    for got in resumed.values():
        assert got[0]["event"] == "thread_status" and got[0]["id"] == str(seq)
        assert got[0]["data"]["snapshot"] is True
        assert all(e["data"]["seq"] > seq for e in got[1:])
        replayed = {
            e["data"]["message_id"]: e["data"]["data"] for e in got if e["event"] == "message_data"
        }
        assert replayed == {mid: record for mid, record in missed.items() if mid in replayed}
        assert set(replayed) == set(missed)
    strip = [[(e["id"], e["event"]) for e in got] for got in resumed.values()]
    assert strip[0] == strip[1]
    async with sse(api, thread, **{"Last-Event-ID": f"{seq}.x"}) as response:
        lines = response.aiter_lines()
        snapshot = (await events_until(lines, lambda e: True))[0]
    head = (await api.client().get(f"/api/threads/{thread}")).json()["seq"]
    assert snapshot["id"] == str(head)  # no resume point: the snapshot is at the head


async def test_c09_050_a_tool_call_starts_once_as_an_event_and_once_as_telemetry(
    api: Api,
) -> None:
    """C09-050: one ``event`` ``tool_call_started`` carrying the call's id and message,
    before one ``tool_started`` telemetry frame naming only the tool; ``tool_call_done``
    ends it by the same id."""
    thread, events = await a_run_over_sse(api)
    page = (await api.client().get(f"/api/threads/{thread}/messages?order=asc")).json()
    caller = next(m for m in page["messages"] if m["tool_calls"])
    call_id = json.loads(caller["tool_calls"])[0]["id"]
    kinds = [
        (e["event"], e["data"].get("eventType"))
        for e in events
        if e["event"] in ("event", "tool_started", "tool_completed")
        and e["data"].get("eventType") != "generation"
    ]
    assert kinds == [
        ("event", "tool_call_started"),
        ("tool_started", None),
        ("event", "tool_call_done"),
        ("tool_completed", None),
    ] or kinds == [
        ("event", "tool_call_started"),
        ("tool_started", None),
        ("tool_completed", None),
        ("event", "tool_call_done"),
    ]
    started = next(e["data"] for e in events if e["data"].get("eventType") == "tool_call_started")
    assert started["data"]["id"] == call_id and started["data"]["message_id"] == caller["id"]
    telemetry = next(e["data"] for e in events if e["event"] == "tool_started")
    assert telemetry["tool"] == "slow_lookup" and "id" not in telemetry
    done = next(e["data"] for e in events if e["data"].get("eventType") == "tool_call_done")
    assert done["data"]["id"] == call_id
