"""AG-UI frontend tools (spec 13 §13.7) against a real server on SQLite and PostgreSQL: the
request's ``tools`` offered to the model, a call of one ending the run for the client, the
next request's ``tool`` message stored as the call's result and reaching the model. Every
event is checked against the ``ag-ui-protocol`` models (``test_c13_agui.run``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    RunFinishedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from test_c13_agui import run, run_input, types, until, user

from conftest import USERS, Api, last_user_text
from threadloom import Agent, Side
from threadloom.client import AsyncClient
from threadloom.client.convert.agui import agui_events
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

ToolCallEvents = (ToolCallStartEvent, ToolCallArgsEvent, ToolCallEndEvent)

CARD = {
    "name": "show_card",
    "description": "Show a card to the user in the page.",
    "parameters": {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    },
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Desk:
    """The ``desk`` agent's model: asked to show a card, it calls ``add`` and the frontend
    tool ``show_card`` in one response; given the card's result, it answers with it."""

    def __init__(self) -> None:
        self.requests: list[ProviderRequest] = []

    def __call__(self, request: ProviderRequest) -> Reply:
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return Reply.text(f"The page says: {last.text}", chunk_size=6)
        if "card" in last_user_text(request):
            return Reply.tool_calls(
                Call("add", {"a": 2, "b": 3}, id="call_add"),
                Call("show_card", {"title": "Hello"}, id="call_card"),
            )
        return Reply.text(f"echo: {last_user_text(request)}")


def desk_agents(desk: Desk) -> tuple[Any, ...]:
    return (
        add,
        Model(name="desk_model", provider=ScriptedProvider(desk), model="scripted-desk"),
        Prompt(name="desk_prompt", model="desk_model", system="You help.", tools=["add"]),
        Agent(name="desk", side_a=Side(prompt="desk_prompt"), side_b=Side(label="User")),
    )


def with_tools(body: dict[str, Any], *tools: dict[str, Any]) -> dict[str, Any]:
    return {**body, "tools": list(tools)}


def offered(request: ProviderRequest) -> list[str]:
    return [t.name for t in request.tools]


async def first_run(api: Api, thread: str) -> tuple[str, list[dict[str, Any]]]:
    """Run 1: the user asks for a card; returns the user message's id and the events."""
    ask = user("Show me a card", "m-ask")
    response, events = await run(api, "desk", with_tools(run_input(thread, ask), CARD))
    assert response.status_code == 200
    return ask["id"], [e for _, e in events]


async def test_c13_060_frontend_tools_are_offered_to_the_run_of_the_request(
    make_api: Any,
) -> None:
    """The model's request lists the agent's tools, then the request's frontend tools with
    their description and parameters; a REST send to the same thread offers none."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    hello = with_tools(run_input(thread, user("hello")), CARD)
    response, events = await run(api, "desk", hello)
    assert response.status_code == 200 and types(events)[-1] == "RUN_FINISHED"
    request = desk.requests[-1]
    assert offered(request) == ["add", "show_card"]
    card = request.tools[1]
    assert card.description == CARD["description"] and card.parameters == CARD["parameters"]
    sent = await api.client("alice").post(
        f"/api/threads/{thread}/messages", json={"role": "user", "content": "again"}
    )
    assert sent.status_code in (200, 201, 202), sent.text
    await api.runtime.wait_idle(thread)
    assert offered(desk.requests[-1]) == ["add"]


async def test_c13_061_a_frontend_tool_that_clashes_or_is_malformed_is_refused(
    make_api: Any,
) -> None:
    """A name of a server tool, a name given twice, a name no provider takes, parameters
    that are not an object → 400 naming the field; nothing is created."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    bad = [
        ([{**CARD, "name": "add"}], "tools[0].name"),
        ([CARD, CARD], "tools[1].name"),
        ([{**CARD, "name": "show card!"}], "tools[0].name"),
        ([{**CARD, "name": "subagent_create"}], "tools[0].name"),
        ([{**CARD, "parameters": [1, 2]}], "tools[0].parameters"),
    ]
    for tools, field in bad:
        response, _ = await run(api, "desk", with_tools(run_input(thread, user("hi")), *tools))
        assert response.status_code == 400, (tools, response.text)
        body = response.json()
        assert body["code"] == "invalid_request" or body["error"], body
        assert field in json.dumps(body), (field, body)
    missing = await api.client("alice").get(f"/api/threads/{thread}")
    assert missing.status_code == 404
    assert desk.requests == []


async def test_c13_062_c13_063_a_frontend_call_ends_the_run_and_its_result_goes_on(
    make_api: Any,
) -> None:
    """Run 1: ``add`` runs, ``show_card`` is announced (START/ARGS/END, no RESULT) and the
    run finishes ``success`` with the thread idle ``awaiting_client_tool``. Run 2 carries
    the client's ``tool`` message: stored as the call's result, the model's next request
    holds it right after the call, the answer streams, and the snapshot keeps it."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    ask_id, events = await first_run(api, thread)
    kinds = [e["type"] for e in events]
    starts = {e["toolCallName"]: e for e in events if e["type"] == "TOOL_CALL_START"}
    assert set(starts) == {"add", "show_card"}
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == ["call_add"]
    card_events = [e["type"] for e in events if e.get("toolCallId") == "call_card"]
    assert card_events == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert kinds[-1] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success"}  # (§13.7.3: no pendingToolCallIds)
    assert len(desk.requests) == 1
    status = (await api.client("alice").get(f"/api/threads/{thread}")).json()["status"]
    assert status["state"] == "idle" and status["reason"] == "awaiting_client_tool"
    assistant_id = starts["show_card"]["parentMessageId"]

    # the REST view: the assistant message with both calls, one tool result
    page = (await api.client("alice").get(f"/api/threads/{thread}/messages")).json()
    rows = page["messages"] if isinstance(page, dict) else page
    tool_rows = [m for m in rows if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_rows] == ["call_add"]

    # run 2: the client's history, its assistant message (calls, no text) and the result
    history = [
        user("Show me a card", ask_id),
        {
            "id": assistant_id,
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "call_card",
                    "type": "function",
                    "function": {"name": "show_card", "arguments": '{"title":"Hello"}'},
                }
            ],
        },
        {"id": "t-card", "role": "tool", "toolCallId": "call_card", "content": "card shown"},
    ]
    body = with_tools(run_input(thread, *history), CARD)
    response, second = await run(api, "desk", body)
    assert response.status_code == 200
    kinds2 = types(second)
    assert kinds2[0] == "RUN_STARTED" and kinds2[-1] == "RUN_FINISHED"
    text = "".join(e["delta"] for _, e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "The page says: card shown"
    assert "TOOL_CALL_RESULT" not in kinds2  # the client's own result is not echoed
    request = desk.requests[-1]
    issued, add_result, card_result = request.messages[-3:]
    assert [c.id for c in getattr(issued, "tool_calls", [])] == ["call_add", "call_card"]
    assert isinstance(add_result, ToolMessage) and add_result.tool_call_id == "call_add"
    assert isinstance(card_result, ToolMessage) and card_result.tool_call_id == "call_card"
    assert card_result.content == "card shown" and not card_result.is_error
    snapshot = next(e for _, e in second if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    tool_messages = [m for m in snapshot if m["role"] == "tool"]
    assert [(m["id"], m["toolCallId"]) for m in tool_messages] == [
        (tool_messages[0]["id"], "call_add"),
        ("t-card", "call_card"),
    ]
    assert tool_messages[1]["content"] == "card shown"
    state = await api.runtime.thread(thread)
    page2 = await state.get_messages(limit=50)
    stored = [m for m in page2.messages if m.tool_call_id == "call_card"]
    assert len(stored) == 1
    assert stored[0].name == "show_card" and stored[0].tool_status == "success"
    status = (await api.client("alice").get(f"/api/threads/{thread}")).json()["status"]
    assert status["reason"] == "stop_on_response"

    # the same request again: nothing stored twice, no model call
    calls = len(desk.requests)
    response, again = await run(api, "desk", body)
    assert response.status_code == 200 and types(again)[-1] == "RUN_FINISHED"
    assert len(desk.requests) == calls
    page3 = await state.get_messages(limit=50)
    assert len([m for m in page3.messages if m.tool_call_id == "call_card"]) == 1


async def test_c13_063_an_error_result_of_the_client(make_api: Any) -> None:
    """A ``tool`` message with ``error`` → an error result ``Failed to execute tool: …``."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    await first_run(api, thread)
    failed = {
        "id": "t-err",
        "role": "tool",
        "toolCallId": "call_card",
        "content": "",
        "error": "the page is closed",
    }
    response, events = await run(api, "desk", with_tools(run_input(thread, failed), CARD))
    assert response.status_code == 200 and types(events)[-1] == "RUN_FINISHED"
    last = desk.requests[-1].messages[-1]
    assert isinstance(last, ToolMessage) and last.is_error
    assert last.content == "Failed to execute tool: the page is closed"


async def test_c13_064_an_assistant_message_with_calls_and_no_text_is_accepted(
    make_api: Any,
) -> None:
    """A new assistant message with tool calls and no text → 200, not stored; a tool
    message answering a call the thread does not wait for is not stored either."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    history = [
        user("hello", "m-1"),
        {
            "id": "a-own",
            "role": "assistant",
            "content": "",
            "toolCalls": [
                {"id": "c-own", "type": "function", "function": {"name": "x", "arguments": "{}"}}
            ],
        },
        {"id": "t-own", "role": "tool", "toolCallId": "c-own", "content": "done"},
        user("and now?", "m-2"),
    ]
    response, events = await run(api, "desk", run_input(thread, *history))
    assert response.status_code == 200, response.text
    assert types(events)[-1] == "RUN_FINISHED"
    state = await api.runtime.thread(thread)
    page = await state.get_messages(limit=50)
    assert [m.role for m in reversed(page.messages)] == ["user", "user", "assistant"]


async def test_c13_065_a_rest_send_while_a_frontend_call_waits(make_api: Any) -> None:
    """A REST send while the call waits → a run as any send: the model's request shows the
    call's missing result (spec 04 §4.11.7); a late ``tool`` message is then not stored."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    await first_run(api, thread)
    sent = await api.client("alice").post(
        f"/api/threads/{thread}/messages", json={"role": "user", "content": "never mind"}
    )
    assert sent.status_code in (200, 201, 202), sent.text
    await api.runtime.wait_idle(thread)
    request = desk.requests[-1]
    missing = [
        m for m in request.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_card"
    ]
    assert len(missing) == 1 and missing[0].is_error
    assert "Tool result missing" in missing[0].content
    assert offered(request) == ["add"]
    assert await api.runtime.client_calls(thread) == []
    late = {"id": "t-late", "role": "tool", "toolCallId": "call_card", "content": "late"}
    calls = len(desk.requests)
    response, events = await run(api, "desk", with_tools(run_input(thread, late), CARD))
    assert response.status_code == 200 and types(events)[-1] == "RUN_FINISHED"
    assert len(desk.requests) == calls
    state = await api.runtime.thread(thread)
    page = await state.get_messages(limit=50)
    assert not [m for m in page.messages if m.tool_call_id == "call_card"]


async def test_c13_062_the_client_exporter_ends_a_run_waiting_for_the_client(
    make_api: Any,
) -> None:
    """The Python client's exporter (spec 11 §11.7.3) ends a run that waits for the client
    as the endpoint does: the frontend call announced without a result, then RUN_FINISHED
    success (no interrupt)."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    await api.runtime.create_thread("desk", user_id=USERS["alice"].id, thread_id=thread)
    events: list[BaseEvent] = []
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        source = agui_events(client, thread)
        started: asyncio.Task[Any] | None = None
        async with asyncio.timeout(20):
            async for event in source:
                events.append(event)
                if len(events) == 2:  # the stream is open: start the AG-UI run
                    started = asyncio.create_task(first_run(api, thread))
                if event.type is EventType.RUN_FINISHED:
                    break
        await source.aclose()
        assert started is not None
        await started
    final = events[-1]
    assert isinstance(final, RunFinishedEvent)
    assert final.outcome is not None
    assert final.outcome.model_dump(by_alias=True, exclude_none=True) == {"type": "success"}
    calls = [(e.type, e.tool_call_id) for e in events if isinstance(e, ToolCallEvents)]
    assert ("TOOL_CALL_START", "call_card") in [(t.value, i) for t, i in calls]
    results = [e.tool_call_id for e in events if isinstance(e, ToolCallResultEvent)]
    assert results == ["call_add"]


async def test_c13_063_a_stopped_thread_stores_the_result_and_runs_nothing(
    make_api: Any,
) -> None:
    """The user stopped the thread while the client ran its tool: the client's result is
    stored, and no run starts (the response ends at once)."""
    desk = Desk()
    api: Api = await make_api(extra=desk_agents(desk))
    thread = str(uuid.uuid4())
    await first_run(api, thread)
    stopped = await api.client("alice").post(f"/api/threads/{thread}/stop")
    assert stopped.status_code in (200, 202), stopped.text
    answer = {"id": "t-card", "role": "tool", "toolCallId": "call_card", "content": "shown"}
    response, events = await run(api, "desk", with_tools(run_input(thread, answer), CARD))
    assert response.status_code == 200
    assert types(events) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
    assert len(desk.requests) == 1
    state = await api.runtime.thread(thread)
    page = await state.get_messages(limit=50)
    assert [m.content for m in page.messages if m.tool_call_id == "call_card"] == ["shown"]


async def test_c13_068_a_send_that_joins_a_running_execution_brings_its_tools(
    make_api: Any,
) -> None:
    """A run started over REST (no frontend tools) is running when an AG-UI request sends a
    message with ``show_card``: the execution offers it from its next step on, the model
    calls it, and the run ends ``awaiting_client_tool`` for that request's stream."""
    hold = asyncio.Event()
    requests: list[ProviderRequest] = []

    async def reply(request: ProviderRequest) -> Reply:
        requests.append(request)
        text = last_user_text(request)
        if text == "first":
            await hold.wait()
            return Reply.text("one")
        if text == "card please":
            return Reply.tool_calls(Call("show_card", {"title": "Hi"}, id="call_card"))
        return Reply.text("?")

    relay = (
        Model(name="relay_model", provider=ScriptedProvider(reply), model="scripted-relay"),
        Prompt(name="relay_prompt", model="relay_model", system="You relay."),
        Agent(name="relay", side_a=Side(prompt="relay_prompt"), side_b=Side(label="User")),
    )
    api: Api = await make_api(extra=relay)
    thread = str(uuid.uuid4())
    await api.runtime.create_thread("relay", user_id=USERS["alice"].id, thread_id=thread)
    sent = await api.client("alice").post(
        f"/api/threads/{thread}/messages", json={"role": "user", "content": "first"}
    )
    assert sent.status_code in (200, 201, 202), sent.text
    await until(lambda: len(requests) == 1)  # the REST run waits in its model request
    body = with_tools(run_input(thread, user("card please")), CARD)
    following = asyncio.create_task(run(api, "relay", body))
    async with asyncio.timeout(10):  # the AG-UI message joined the execution (queued)
        while not await api.runtime.store.list_queue(thread):
            await asyncio.sleep(0.01)
    hold.set()
    response, events = await asyncio.wait_for(following, 20)
    assert response.status_code == 200
    assert [t.name for t in requests[0].tools] == []
    assert [t.name for t in requests[-1].tools] == ["show_card"]
    card = [e for _, e in events if e.get("toolCallId") == "call_card"]
    assert [e["type"] for e in card] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert types(events)[-1] == "RUN_FINISHED"
    status = (await api.client("alice").get(f"/api/threads/{thread}")).json()["status"]
    assert status["reason"] == "awaiting_client_tool"
