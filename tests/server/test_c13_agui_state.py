"""AG-UI shared state and context (spec 13 §13.2.9, §13.2.11) against a real server on
SQLite and PostgreSQL: a request's ``state`` becomes the thread's shared state, the
response snapshots it and sends each change of the run as a ``STATE_DELTA`` that, applied
to the snapshot, is the stored state; a request's ``context`` reaches the model's request
as one part of its system text and is stored as no message. Every event is checked
against the ``ag-ui-protocol`` models."""

from __future__ import annotations

import uuid
from typing import Any

import jsonpatch
from ag_ui.core import StateDeltaEvent, StateSnapshotEvent
from test_c13_agui import run, run_input, types, user

from conftest import Api
from threadloom import Agent, Side, ThreadState
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, SystemMessage, ToolMessage


@tool
async def add_todo(state: ThreadState, item: str) -> str:
    """Add an item to the shared todo list."""
    current = await state.get_shared_state()
    todos = [*current.get("todos", []), {"text": item, "done": False}]
    written = await state.update_shared_state({"todos": todos, "last": item})
    return f"version {written.version}"


def todo_reply(request: ProviderRequest) -> Reply:
    results = [m for m in request.messages if isinstance(m, ToolMessage)]
    if results and request.messages[-1] is results[-1]:
        return Reply.text("Added.")
    return Reply.tool_calls(Call("add_todo", {"item": "milk"}))


def agents() -> tuple[Any, ...]:
    """``todo``: its model calls ``add_todo`` (which changes the shared state), then
    answers."""
    provider = ScriptedProvider(todo_reply)
    return (
        add_todo,
        Model(name="todo_model", provider=provider, model="scripted-todo"),
        Prompt(
            name="todo_prompt", model="todo_model", system="You keep todos.", tools=["add_todo"]
        ),
        Agent(name="todo", side_a=Side(prompt="todo_prompt"), side_b=Side(label="User")),
    )


def provider_of(api: Api) -> ScriptedProvider:
    model = api.runtime.definitions.model("todo_model")
    assert model is not None and isinstance(model.provider, ScriptedProvider)
    return model.provider


def with_state(body: dict[str, Any], state: Any, context: Any = ()) -> dict[str, Any]:
    return {**body, "state": state, "context": list(context)}


async def test_c13_071_state_in_snapshot_out_and_the_tool_change_as_a_delta(make_api: Any) -> None:
    """C13-071: the request's state is stored before the run; STATE_SNAPSHOT (that state)
    comes right after RUN_STARTED; the tool's change comes as one STATE_DELTA (RFC 6902)
    which, applied to the snapshot, is the thread's stored state."""
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    given = {"todos": [{"text": "eggs", "done": True}], "filter": "all"}
    body = with_state(run_input(thread, user("add milk")), given)
    response, events = await run(api, "todo", body)
    assert response.status_code == 200
    seen = types(events)
    assert seen[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"], seen
    snapshot = StateSnapshotEvent.model_validate(events[1][1])
    assert snapshot.snapshot == given
    deltas = [StateDeltaEvent.model_validate(e) for _, e in events if e["type"] == "STATE_DELTA"]
    assert len(deltas) == 1, seen
    # the delta comes with the tool's result, before the answer's text
    assert seen.index("STATE_DELTA") < seen.index("TEXT_MESSAGE_START")
    applied = jsonpatch.apply_patch(
        snapshot.snapshot, events[seen.index("STATE_DELTA")][1]["delta"]
    )
    state = await (await api.runtime.thread(thread)).read_shared_state()
    assert (
        applied
        == state.value
        == {
            "todos": [{"text": "eggs", "done": True}, {"text": "milk", "done": False}],
            "filter": "all",
            "last": "milk",
        }
    )
    assert state.version == 2  # the request's write, then the tool's
    # the same state again is no write; the stream still snapshots it
    again = with_state(run_input(thread), state.value)
    response, events = await run(api, "todo", again)
    assert types(events)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert events[1][1]["snapshot"] == state.value
    assert (await (await api.runtime.thread(thread)).read_shared_state()).version == 2


async def test_c13_072_no_state_keeps_the_threads_and_a_bad_state_is_refused(
    make_api: Any,
) -> None:
    """C13-072: a thread whose state was never written sends no snapshot, and the run's
    change comes as a delta from ``{}``; ``state`` ``{}`` or null leaves the thread's state
    as it is; a state that is not an object is a 400 naming ``state``, one over the limit a
    413; neither stores anything."""
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    _, events = await run(api, "todo", with_state(run_input(thread, user("go")), {}))
    seen = types(events)
    assert "STATE_SNAPSHOT" not in seen
    (delta,) = [e for _, e in events if e["type"] == "STATE_DELTA"]
    state = await (await api.runtime.thread(thread)).get_shared_state()
    assert jsonpatch.apply_patch({}, delta["delta"]) == state
    for kept in ({}, None):
        _, events = await run(api, "todo", with_state(run_input(thread), kept))
        assert events[1][1] == {**events[1][1], "type": "STATE_SNAPSHOT", "snapshot": state}
    other = str(uuid.uuid4())
    bad, _ = await run(api, "todo", with_state(run_input(other, user("x")), [1, 2]))
    assert bad.status_code == 400 and bad.json()["details"][0]["field"] == "state"
    big = {"blob": "x" * 300_000}
    large, _ = await run(api, "todo", with_state(run_input(other, user("x")), big))
    assert (large.status_code, large.json()["code"]) == (413, "payload_too_large")
    assert await api.runtime.store.get_thread(other) is None


async def test_c13_073_context_reaches_the_model_request_and_is_not_stored(
    make_api: Any,
) -> None:
    """C13-073: the request's context entries are one part of the system text of each of
    the run's model requests, after the prompt's own; no message holds them; a later
    request with no context clears it."""
    api: Api = await make_api(extra=agents())
    thread = str(uuid.uuid4())
    context = [
        {"description": "The user's name", "value": "Ada"},
        {"description": "Open page", "value": '{"path": "/todos"}'},
    ]
    body = with_state(run_input(thread, user("add milk")), None, context)
    response, _ = await run(api, "todo", body)
    assert response.status_code == 200
    requests = provider_of(api).requests
    assert len(requests) == 2
    for request in requests:
        system = [m for m in request.messages if isinstance(m, SystemMessage)]
        assert len(system) == 1
        assert system[0].text == (
            "You keep todos.\n\nContext from the client application:\n"
            "- The user's name: Ada\n"
            '- Open page: {"path": "/todos"}'
        )
    page = await (await api.runtime.thread(thread)).get_messages(include_silent=True)
    assert all("Ada" not in (m.content or "") for m in page.messages)
    provider_of(api).requests.clear()
    response, _ = await run(api, "todo", with_state(run_input(thread, user("more")), None))
    system = [m for m in provider_of(api).requests[0].messages if isinstance(m, SystemMessage)]
    assert system[0].text == "You keep todos."


async def test_c13_075_a_resume_snapshots_the_stored_state_and_stores_nothing(
    make_api: Any,
) -> None:
    """C13-075: a resume (the same runId, the cursor of the last event) starts with
    RUN_STARTED and STATE_SNAPSHOT of the stored state; the request's own state is not
    written."""
    api: Api = await make_api(extra=agents())
    thread, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    body = with_state(run_input(thread, user("add milk"), run=run_id), {"todos": []})
    _, events = await run(api, "todo", body)
    cursor = events[-1][0]
    assert cursor is not None
    before = await (await api.runtime.thread(thread)).read_shared_state()
    again = with_state(run_input(thread, user("add milk"), run=run_id), {"other": 1})
    response, resumed = await run(api, "todo", again, **{"Last-Event-ID": cursor})
    assert response.status_code == 200
    seen = types(resumed)
    assert seen[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and seen[-1] == "RUN_FINISHED"
    assert resumed[1][1]["snapshot"] == before.value
    assert "STATE_DELTA" not in seen
    assert await (await api.runtime.thread(thread)).read_shared_state() == before
