"""``POST /api/agui/{agent}`` (spec 13 §13.2, §13.3) against a real server on SQLite and
PostgreSQL, read as raw Server-Sent Events; every event is checked against the
``ag-ui-protocol`` models. (The real TypeScript client drives the same endpoint in
``tests/interop/test_c13_agui_node.py``.)"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

from conftest import USERS, Api, last_user_text
from threadloom import Agent, Side
from threadloom.define import Model, Prompt, tool
from threadloom.errors import ProviderError
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
STORY = "Once upon a time there was a durable thread that never lost a message."


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def calc_reply(request: ProviderRequest) -> Reply:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if results and request.messages[-1] is results[-1]:
        return Reply.text(f"The sum is {results[-1].text}.", chunk_size=5)
    return Reply.tool_calls(Call("add", {"a": 2, "b": 3}))


def failing(request: ProviderRequest) -> Reply:
    raise ProviderError("the model is down", code="invalid_request", retryable=False)


def agents() -> tuple[Any, ...]:
    """``calc`` (one tool call, then text), ``story`` (text streamed slowly, with
    reasoning) and ``broken`` (its model fails)."""
    story = ScriptedProvider(
        lambda r: Reply.reasoning(STORY, "Think first.", chunk_size=6, chunk_delay=0.02)
    )
    return (
        add,
        Model(
            name="calc_model",
            provider=ScriptedProvider(calc_reply),
            model="scripted-calc",
            input_price=3.0,
            output_price=15.0,
        ),
        Model(name="story_model", provider=story, model="scripted-story"),
        Model(name="bad_model", provider=ScriptedProvider(failing), model="scripted-bad"),
        Prompt(name="calc_prompt", model="calc_model", system="You add.", tools=["add"]),
        Prompt(name="story_prompt", model="story_model", system="You tell stories."),
        Prompt(name="bad_prompt", model="bad_model", system="You fail."),
        Agent(name="calc", side_a=Side(prompt="calc_prompt"), side_b=Side(label="User")),
        Agent(name="story", side_a=Side(prompt="story_prompt"), side_b=Side(label="User")),
        Agent(name="broken", side_a=Side(prompt="bad_prompt"), side_b=Side(label="User")),
    )


def run_input(thread: str, *messages: dict[str, Any], run: str | None = None) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run or str(uuid.uuid4()),
        "messages": list(messages),
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


def user(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or str(uuid.uuid4()), "role": "user", "content": text}


def parse_sse(text: str) -> list[tuple[str | None, dict[str, Any]]]:
    """``(id, event)`` of each SSE event carrying data (comments are keep-alives)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for block in text.split("\n\n"):
        event_id, data = None, []
        for line in block.split("\n"):
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            out.append((event_id, json.loads("\n".join(data))))
    return out


async def run(
    api: Api,
    agent: str,
    body: dict[str, Any],
    user_name: str = "alice",
    stop: Callable[[list[dict[str, Any]]], bool] | None = None,
    **headers: str,
) -> tuple[httpx.Response, list[tuple[str | None, dict[str, Any]]]]:
    """POST an AG-UI run and read its events: to the end, or until ``stop(events)``
    (then the connection is dropped)."""
    client = api.client(user_name, Accept="text/event-stream", **headers)
    buffer = ""
    async with client.stream("POST", f"/api/agui/{agent}", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return response, []
        async for chunk in response.aiter_text():
            buffer += chunk
            complete = buffer[: buffer.rfind("\n\n") + 2] if "\n\n" in buffer else ""
            events = parse_sse(complete)
            if stop is not None and stop([e for _, e in events]):
                return response, events
    events = parse_sse(buffer)
    for _, event in events:
        EVENT.validate_python(event)  # a valid AG-UI event
    return response, events


def types(events: list[tuple[str | None, dict[str, Any]]]) -> list[str]:
    return [e["type"] for _, e in events]


async def test_c13_001_c13_004_a_run_in_protocol_order(make_api: Any) -> None:
    """RUN_STARTED with the caller's ids first, the tool call and its result, the text,
    then the snapshot, the cost and RUN_FINISHED; the caller's own message is not echoed."""
    api: Api = await make_api(extra=agents())
    thread, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    response, events = await run(api, "calc", run_input(thread, user("2+3?"), run=run_id))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    seen = types(events)
    assert seen[0] == "RUN_STARTED" and seen[-1] == "RUN_FINISHED"
    first, last = events[0][1], events[-1][1]
    assert (first["threadId"], first["runId"]) == (thread, run_id)
    assert (last["threadId"], last["runId"]) == (thread, run_id)
    assert last["outcome"] == {"type": "success"}
    assert seen[-3:-1] == ["MESSAGES_SNAPSHOT", "CUSTOM"]
    content = [t for t in seen if not t.startswith("CUSTOM")]
    assert content == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * 3,
        "TEXT_MESSAGE_END",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    by_type = {e["type"]: e for _, e in events}
    call = by_type["TOOL_CALL_START"]
    assert call["toolCallName"] == "add"
    assert json.loads(by_type["TOOL_CALL_ARGS"]["delta"]) == {"a": 2, "b": 3}
    assert by_type["TOOL_CALL_RESULT"]["toolCallId"] == call["toolCallId"]
    assert by_type["TOOL_CALL_RESULT"]["content"] == "5"
    text = "".join(e["delta"] for _, e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The sum is 5."
    assert by_type["TEXT_MESSAGE_START"]["role"] == "assistant"
    snapshot = by_type["MESSAGES_SNAPSHOT"]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "assistant"]
    assert snapshot[1]["toolCalls"][0]["id"] == call["toolCallId"]
    assert snapshot[-1]["content"] == "The sum is 5."
    ids = [event_id for event_id, _ in events]
    assert all(ids) and all(e["metadata"]["threadloomCursor"] == i for i, e in events)


async def test_c13_002_the_thread_is_made_on_first_use_for_the_agent_and_the_caller(
    make_api: Any,
) -> None:
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    response, _ = await run(api, "echo", run_input(thread, user("hi")))
    assert response.status_code == 200
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and (row.agent_id, row.user_id) == ("echo", USERS["alice"].id)
    other, _ = await run(api, "echo", run_input(thread, user("mine?")), user_name="bob")
    assert (other.status_code, other.json()["code"]) == (403, "forbidden")
    wrong, _ = await run(api, "calc", run_input(thread, user("hi")))
    assert (wrong.status_code, wrong.json()["code"]) == (409, "conflict")
    missing, _ = await run(api, "nobody", run_input(thread, user("hi")))
    assert (missing.status_code, missing.json()["code"]) == (404, "agent_not_found")
    bad, _ = await run(api, "echo", run_input("thread-1", user("hi")))
    assert bad.status_code == 400 and bad.json()["details"][0]["field"] == "threadId"
    async with httpx.AsyncClient(base_url=api.base) as anonymous:
        refused = await anonymous.post(
            "/api/agui/echo", json=run_input(str(uuid.uuid4()), user("hi"))
        )
    assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    empty, _ = await run(api, "echo", {"threadId": thread})
    assert empty.status_code == 400
    assert {d["field"] for d in empty.json()["details"]} == {"runId", "messages"}


async def test_c13_003_messages_the_thread_has_are_not_stored_again(make_api: Any) -> None:
    """By the AG-UI id a message was sent with, and by the ids of the snapshot."""
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    first = user("one")
    _, events = await run(api, "echo", run_input(thread, first))
    snapshot = next(e for _, e in events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [m["content"] for m in snapshot] == ["one", "echo: one"]
    # a client that kept its own ids, then one that adopted the snapshot's
    await run(api, "echo", run_input(thread, first, snapshot[1], user("two")))
    await run(api, "echo", run_input(thread, *snapshot, user("three")))
    state = await api.runtime.thread(thread)
    page = await state.get_messages(limit=100, order="asc")
    assert [m.content for m in page.messages] == [
        "one",
        "echo: one",
        "two",
        "echo: two",
        "three",
        "echo: three",
    ]
    assert page.messages[0].metadata["client_message_id"] == first["id"]
    # nothing new: the snapshot and the end, no run
    _, again = await run(api, "echo", run_input(thread, *snapshot))
    assert types(again) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
    assert api.echo.request_count == 3


async def test_c13_005_a_new_message_joins_the_running_execution(make_api: Any) -> None:
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    first = asyncio.create_task(run(api, "gate", run_input(thread, user("first"))))
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    second = asyncio.create_task(run(api, "gate", run_input(thread, user("second"))))
    await asyncio.sleep(0.2)
    assert api.runtime.running(thread)
    api.gate.open()
    (_, one), (_, two) = await asyncio.wait_for(asyncio.gather(first, second), 20)
    assert types(one)[-1] == types(two)[-1] == "RUN_FINISHED"
    assert [last_user_text(r) for r in api.gate.requests] == ["first", "second"]
    texts = [e["delta"] for _, e in two if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "echo: second" in texts
    snapshot = next(e for _, e in two if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert [m["content"] for m in snapshot] == ["first", "echo: first", "second", "echo: second"]


async def test_c13_006_c13_007_a_failed_run_ends_with_its_reason_code_and_its_cost(
    make_api: Any,
) -> None:
    api: Api = await make_api(extra=agents())
    _, events = await run(api, "broken", run_input(str(uuid.uuid4()), user("hi")))
    last = events[-1][1]
    assert last["type"] == "RUN_ERROR" and last["code"] == "step_error"
    assert "the model is down" in last["message"]
    _, ok = await run(api, "calc", run_input(str(uuid.uuid4()), user("2+3?")))
    cost = next(e for _, e in ok if e["type"] == "CUSTOM" and e["name"] == "threadloom.cost")
    assert cost["value"]["run"]["requestCount"] == 2
    assert cost["value"]["run"]["totalCost"] > 0
    assert cost["value"]["thread"]["requestCount"] == 2
    assert cost["value"]["thread"]["totalCost"] == cost["value"]["run"]["totalCost"]
    statuses = [e for _, e in ok if e.get("name") == "threadloom.thread_status"]
    assert statuses[-1]["value"]["reason"] == "stop_on_response"


async def test_c13_008_c13_009_c13_010_a_dropped_stream_resumes_from_its_last_event(
    make_api: Any,
) -> None:
    """The client drops the stream in the middle of the story; the run goes on; the same
    runId with the last event's id gets the rest, from the database, once: nothing twice,
    nothing missing, the model not asked again."""
    api: Api = await make_api(extra=agents())
    thread, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = run_input(thread, user("a story"), run=run_id)

    def half_told(events: list[dict[str, Any]]) -> bool:
        told = "".join(e.get("delta", "") for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        return len(told) >= 20

    _, head = await run(api, "story", body, stop=half_told)
    await api.settle(thread)  # the run finished without its client
    last_id = head[-1][0]
    assert last_id is not None
    _, tail = await run(api, "story", body, **{"Last-Event-ID": last_id})
    assert types(tail)[0] == "RUN_STARTED" and types(tail)[-1] == "RUN_FINISHED"
    assert tail[0][1]["runId"] == run_id
    whole = [e for _, e in head] + [e for _, e in tail[1:]]
    text = "".join(e["delta"] for e in whole if e["type"] == "TEXT_MESSAGE_CONTENT")
    thought = "".join(e["delta"] for e in whole if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert (text, thought) == (STORY, "Think first.")
    content = [t for t in types(tail) if t != "CUSTOM"]
    assert content[1] == "TEXT_MESSAGE_START"  # the open message is opened again
    assert "REASONING_START" not in types(tail)  # closed before the drop
    story = api.runtime.definitions.model("story_model")
    assert story is not None and story.provider.request_count == 1  # type: ignore[union-attr]
    # the same cursor again: the same rest; the last cursor: only the end
    _, again = await run(api, "story", body, **{"Last-Event-ID": last_id})
    assert [e for _, e in again[1:]] == [e for _, e in tail[1:]]
    _, end = await run(api, "story", body, **{"Last-Event-ID": tail[-1][0] or ""})
    assert types(end) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
    forwarded = {**body, "forwardedProps": {"threadloom": {"lastEventId": last_id}}}
    _, by_props = await run(api, "story", forwarded)
    assert [e for _, e in by_props[1:]] == [e for _, e in tail[1:]]
    bad, _ = await run(api, "story", body, **{"Last-Event-ID": "not-a-cursor"})
    assert bad.status_code == 400 and bad.json()["details"][0]["field"] == "Last-Event-ID"
    other = {**body, "runId": str(uuid.uuid4())}
    wrong_run, _ = await run(api, "story", other, **{"Last-Event-ID": last_id})
    assert wrong_run.status_code == 400
    assert "another run" in wrong_run.json()["details"][0]["problem"]


async def test_c13_006_a_run_stopped_by_the_user_finishes_cancelled(make_api: Any) -> None:
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    streaming = asyncio.create_task(run(api, "gate", run_input(thread, user("wait"))))
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    stopped = await api.client().post(f"/api/threads/{thread}/stop", json={})
    assert stopped.status_code == 200, stopped.text
    _, events = await asyncio.wait_for(streaming, 20)
    last = events[-1][1]
    assert last["type"] == "RUN_FINISHED" and last["outcome"] == {"type": "cancelled"}
    statuses = [e for _, e in events if e.get("name") == "threadloom.thread_status"]
    assert statuses[-1]["value"]["reason"] == "aborted_by_user"


async def test_c13_012_a_refused_request_creates_nothing(make_api: Any) -> None:
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    blank, _ = await run(api, "echo", run_input(thread, user("  ")))
    assert blank.status_code == 400
    assert blank.json()["details"] == [
        {
            "field": "messages[0].content",
            "problem": "must hold text or a media part (a new message)",
        }
    ]
    wrong = run_input(thread, {"id": "m", "role": "user", "content": 7})
    bad_type, _ = await run(api, "echo", wrong)
    assert bad_type.status_code == 400
    assert bad_type.json()["details"][0]["field"] == "messages[0].content"
    assert await api.runtime.store.get_thread(thread) is None


async def test_c13_002_a_thread_can_be_created_with_a_chosen_id(make_api: Any) -> None:
    """``Runtime.create_thread(thread_id=…)``, which the endpoint uses: a UUID or nothing."""
    from threadloom.errors import InvalidArgument

    api: Api = await make_api()
    chosen = str(uuid.uuid4())
    state = await api.runtime.create_thread("echo", thread_id=chosen)
    assert state.thread_id == chosen
    for bad in ("t-1", chosen.upper(), ""):
        try:
            await api.runtime.create_thread("echo", thread_id=bad)
        except InvalidArgument:
            continue
        raise AssertionError(f"{bad!r} was taken as a thread id")
