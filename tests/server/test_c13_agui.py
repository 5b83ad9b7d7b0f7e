"""``POST /api/agui/{agent}`` (spec 13 §13.2, §13.3) against a real server on SQLite and
PostgreSQL, read as raw Server-Sent Events; every response is checked with the
``ag-ui-protocol`` models and AG-UI's sequence rules (``tests/interop/agui_events.py``).
(The real TypeScript client drives the same endpoint in ``tests/interop/test_c13_agui_node.py``.)"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from conftest import USERS, Api, last_user_text
from interop.agui_events import check_events, parse_sse
from threadloom import Agent, Side
from threadloom.define import Model, Prompt, tool
from threadloom.errors import ProviderError
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage
from threadloom.server.settings import ServerSettings

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


@tool
def approve(verdict: str) -> str:
    """Approve the draft."""
    return verdict


def writer_reply(request: ProviderRequest) -> Reply:
    drafts = sum(1 for m in request.messages if m.role == "assistant")
    return Reply.reasoning(f"Draft {drafts + 1} is ready.", "Plan it.", chunk_size=4)


def critic_reply(request: ProviderRequest) -> Reply:
    # side b: the writer's drafts are presented to it as user messages, its own as assistant
    if sum(1 for m in request.messages[2:] if m.role == "assistant") >= 1:
        return Reply.tool_calls(Call("approve", {"verdict": "Good."}))
    return Reply.text("Add one concrete example, please.", chunk_size=4, chunk_delay=0.02)


def dual_agents() -> tuple[Any, ...]:
    """``writer_critic``: a dual_ai agent whose side b (the critic) reviews once in text,
    then approves with a tool call that ends the session."""
    from threadloom import SessionBinding

    return (
        approve,
        Model(name="writer_model", provider=ScriptedProvider(writer_reply), model="w"),
        Model(name="critic_model", provider=ScriptedProvider(critic_reply), model="c"),
        Prompt(name="writer_prompt", model="writer_model", system="You write."),
        Prompt(name="critic_prompt", model="critic_model", system="You judge.", tools=["approve"]),
        Agent(
            name="writer_critic",
            type="dual_ai",
            side_a=Side(prompt="writer_prompt", label="Writer"),
            side_b=Side(
                prompt="critic_prompt",
                label="Critic",
                session_stop=SessionBinding(name="approve", message_property="verdict"),
            ),
            max_session_turns=4,
        ),
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
                check_events(events)  # what the client had when it dropped
                return response, events
    events = parse_sse(buffer)
    check_events(events)  # AG-UI's models and sequence rules (tests/interop/agui_events.py)
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


async def _stopped_run(api: Api, protocol: str | None) -> list[dict[str, Any]]:
    """The events of a `gate` run stopped with POST …/stop while its model waits."""
    api.gate.entered.clear()
    thread = str(uuid.uuid4())
    body = run_input(thread, user("wait"))
    if protocol is not None:
        body["protocolVersion"] = protocol
    streaming = asyncio.create_task(run(api, "gate", body))
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    stopped = await api.client().post(f"/api/threads/{thread}/stop", json={})
    assert stopped.status_code == 200, stopped.text
    _, events = await asyncio.wait_for(streaming, 20)
    statuses = [e for _, e in events if e.get("name") == "threadloom.thread_status"]
    assert statuses[-1]["value"]["reason"] == "aborted_by_user"
    return [e for _, e in events]


async def test_c13_006_a_run_stopped_by_the_user_finishes_cancelled(make_api: Any) -> None:
    """C13-006 (with C13-054): an AG-UI 1.0 client (``protocolVersion`` 1.0) gets the
    outcome ``cancelled``; a client before 1.0 (no ``protocolVersion``) RUN_FINISHED
    without an outcome; both carry ``result.threadloom`` cancelled with the reason."""
    api: Api = await make_api(extra=agents())
    said = {"threadloom": {"outcome": "cancelled", "reason": "aborted_by_user"}}
    last = (await _stopped_run(api, "1.0"))[-1]
    assert last["type"] == "RUN_FINISHED" and last["outcome"] == {"type": "cancelled"}
    assert last["result"] == said
    last = (await _stopped_run(api, None))[-1]
    assert last["type"] == "RUN_FINISHED" and "outcome" not in last
    assert last["result"] == said


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


DUAL = [  # (role, name, text, tool calls) of the dual_ai turn's messages, as AG-UI shows them
    ("user", None, "Write about threads.", []),
    ("reasoning", None, "Plan it.", []),
    ("assistant", "Writer", "Draft 1 is ready.", []),
    ("assistant", "Critic", "Add one concrete example, please.", []),
    ("reasoning", None, "Plan it.", []),
    ("assistant", "Writer", "Draft 2 is ready.", []),
    ("assistant", "Critic", None, ["approve"]),
    ("tool", None, "Good.", []),
]


def shown(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            m["role"],
            m.get("name"),
            m.get("content"),
            [c["function"]["name"] for c in m.get("toolCalls") or ()],
        )
        for m in messages
    ]


def texts(events: list[dict[str, Any]]) -> dict[str, str]:
    """Each streamed text message's text, by id (in order of their starts)."""
    out: dict[str, str] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_START":
            out.setdefault(e["messageId"], "")
        elif e["type"] == "TEXT_MESSAGE_CONTENT":
            out[e["messageId"]] += e["delta"]
    return out


async def test_c13_052_a_dual_ai_turn_is_valid_ag_ui_for_both_sides(make_api: Any) -> None:
    """C13-052: both sides' messages stream as assistant messages named after the sides'
    labels, each started and ended once; side b's tool call is announced by its assistant
    message before its result; the snapshot holds both sides as assistant messages (side
    b's with ``metadata.threadloom.side`` ``b``) and every tool message's call on one;
    every event passes AG-UI's models and sequence rules."""
    api: Api = await make_api(extra=dual_agents())
    thread = str(uuid.uuid4())
    _, pairs = await run(api, "writer_critic", run_input(thread, user("Write about threads.")))
    events = [e for _, e in pairs]
    starts = [(e["role"], e.get("name")) for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert starts == [("assistant", "Writer"), ("assistant", "Critic"), ("assistant", "Writer")]
    assert list(texts(events).values()) == [
        "Draft 1 is ready.",
        "Add one concrete example, please.",
        "Draft 2 is ready.",
    ]
    content = [e["type"] for e in events if e["type"] != "CUSTOM"]
    assert content[-6:] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "MESSAGES_SNAPSHOT",
        "RUN_FINISHED",
    ]
    snapshot = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert shown(snapshot) == DUAL
    critic = [m for m in snapshot if m.get("name") == "Critic"]
    assert all(m["metadata"]["threadloom"]["side"] == "b" for m in critic)
    call = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert call["parentMessageId"] == critic[1]["id"]
    assert events[-1]["outcome"] == {"type": "success"}


async def test_c13_053_a_dual_ai_stream_resumes_from_a_cursor(make_api: Any) -> None:
    """C13-053: a client drops the dual_ai stream in the middle of side b's text and
    resumes with the last cursor → the rest once: side b's message opened again (not twice
    within one response), its text completed, side b's call announced before its result;
    both responses valid AG-UI; together every message's text once."""
    api: Api = await make_api(extra=dual_agents())
    thread, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = run_input(thread, user("Write about threads."), run=run_id)

    def in_critique(events: list[dict[str, Any]]) -> bool:
        critic = [e for e in events if e.get("name") == "Critic"]
        if not critic:
            return False
        said = [e for e in events if e.get("messageId") == critic[0]["messageId"]]
        return sum(1 for e in said if e["type"] == "TEXT_MESSAGE_CONTENT") >= 2

    _, head = await run(api, "writer_critic", body, stop=in_critique)
    last_id = head[-1][0]
    assert last_id is not None
    _, tail = await run(api, "writer_critic", body, **{"Last-Event-ID": last_id})
    rest = [e for _, e in tail]
    assert rest[0]["type"] == "RUN_STARTED" and rest[-1]["type"] == "RUN_FINISHED"
    whole = [e for _, e in head] + rest[1:]
    told: dict[str, str] = {}
    for e in whole:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            told[e["messageId"]] = told.get(e["messageId"], "") + e["delta"]
    assert list(told.values()) == [
        "Draft 1 is ready.",
        "Add one concrete example, please.",
        "Draft 2 is ready.",
    ]
    snapshot = next(e for e in rest if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    assert shown(snapshot) == DUAL


async def until(check: Callable[[], bool], seconds: float = 10) -> None:
    """Wait until ``check()`` (a state the server reaches by itself), at most ``seconds``."""
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.01)


async def test_c13_056_a_dropped_response_stops_its_run_unless_resumed(make_api: Any) -> None:
    """C13-056: a `gate` run whose client dropped the response waits out the grace period
    and is stopped (``aborted_by_user``) though nothing released its model; one whose client
    resumed from its cursor within the grace is not stopped and ends normally."""
    settings = ServerSettings(auth="required", agui_stop_grace_s=1.0)
    api: Api = await make_api(settings, extra=agents())
    drops = api.app.context.agui_drops

    def begun(events: list[dict[str, Any]]) -> bool:
        return any(e["type"] == "CUSTOM" for e in events)

    thread = str(uuid.uuid4())
    await run(api, "gate", run_input(thread, user("wait")), stop=begun)
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    await until(lambda: drops.waiting(thread))  # the server saw the drop
    await api.settle(thread)  # stopped by the server after the grace: nothing released it
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.status.reason == "aborted_by_user", row.status
    assert not drops.waiting(thread)

    api.gate.entered.clear()
    thread, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = run_input(thread, user("wait"), run=run_id)
    _, head = await run(api, "gate", body, stop=begun)
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    await until(lambda: drops.waiting(thread))
    resuming = asyncio.create_task(run(api, "gate", body, **{"Last-Event-ID": head[-1][0] or ""}))
    await until(lambda: not drops.waiting(thread))  # the resume took the pending stop back
    api.gate.open()
    _, tail = await asyncio.wait_for(resuming, 20)
    assert tail[-1][1]["outcome"] == {"type": "success"}
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.status.reason != "aborted_by_user"


async def test_c13_057_a_new_request_stops_the_dropped_run_first(make_api: Any) -> None:
    """C13-057: the client dropped a `gate` run's response and sends a new message (not a
    resume) within the grace → the dropped run is stopped at once (``aborted_by_user``)
    and the new message starts a run of its own, whose response follows it to its end."""
    settings = ServerSettings(auth="required", agui_stop_grace_s=60)
    api: Api = await make_api(settings, extra=agents())
    thread = str(uuid.uuid4())

    def begun(events: list[dict[str, Any]]) -> bool:
        return any(e["type"] == "CUSTOM" for e in events)

    await run(api, "gate", run_input(thread, user("wait")), stop=begun)
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    api.gate.entered.clear()
    second = asyncio.create_task(run(api, "gate", run_input(thread, user("now this"))))
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    api.gate.open()
    _, events = await asyncio.wait_for(second, 20)
    statuses = [e["value"] for _, e in events if e.get("name") == "threadloom.thread_status"]
    assert statuses[-1]["reason"] != "aborted_by_user"
    assert events[-1][1]["outcome"] == {"type": "success"}
    state = await api.runtime.thread(thread)
    page = await state.get_messages(limit=20, include_silent=True)
    notes = [m.content for m in page.messages if m.role == "system"]
    assert any("stopped by user" in (n or "") for n in notes), notes


async def test_c13_059_a_dual_ai_snapshot_converts_back_to_the_stored_roles(
    make_api: Any,
) -> None:
    """C13-059: the AG-UI snapshot of a dual_ai turn, read back with
    ``from_agui_messages``, gives side b's messages as ``user`` messages again (named
    ``Critic``, the call and its result kept), side a's as ``assistant``: the roles the
    thread stores."""
    from threadloom.client.convert.agui import from_agui_messages

    api: Api = await make_api(extra=dual_agents())
    thread = str(uuid.uuid4())
    _, pairs = await run(api, "writer_critic", run_input(thread, user("Write about threads.")))
    snapshot = next(e for _, e in pairs if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
    back = from_agui_messages(snapshot)
    assert [(m.role, m.name) for m in back] == [
        ("user", None),
        ("assistant", "Writer"),
        ("user", "Critic"),
        ("assistant", "Writer"),
        ("user", "Critic"),
        ("tool", None),
    ]
    assert [c.name for c in back[4].tool_uses] == ["approve"]
    assert back[5].tool_call_id == back[4].tool_uses[0].id
    state = await api.runtime.thread(thread)
    stored = (await state.get_messages(limit=20)).messages
    assert [m.role for m in reversed(stored)] == [m.role for m in back]


def test_c13_056_the_grace_period_is_seconds_or_off() -> None:
    """C13-056: ``THREADLOOM_AGUI_STOP_GRACE_S`` reads seconds (0 or more) or ``off``;
    10 s when unset; anything else refuses to start, naming the variable."""
    import pytest

    from threadloom.server.settings import SettingsError

    read = ServerSettings.from_env
    assert read({}).agui_stop_grace_s == 10.0
    assert read({"THREADLOOM_AGUI_STOP_GRACE_S": "0"}).agui_stop_grace_s == 0.0
    assert read({"THREADLOOM_AGUI_STOP_GRACE_S": "2.5"}).agui_stop_grace_s == 2.5
    assert read({"THREADLOOM_AGUI_STOP_GRACE_S": "OFF"}).agui_stop_grace_s is None
    for bad in ("-1", "soon", "inf"):
        with pytest.raises(SettingsError, match="THREADLOOM_AGUI_STOP_GRACE_S"):
            read({"THREADLOOM_AGUI_STOP_GRACE_S": bad})
