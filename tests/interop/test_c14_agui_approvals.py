"""Tool-call approvals over AG-UI (spec 14, "Surfaces": C14-040 to C14-044), against a real
server on SQLite and PostgreSQL, read as raw Server-Sent Events checked against the
``ag-ui-protocol`` models: a run that parks ends with the interrupt outcome, a run whose
``resume`` entries answer the interrupts decides them and follows the run that goes on.

The ``payer`` agent's model calls ``pay`` (needs approval) once for "pay", twice (in one
step) for "pay two", and answers "done" after the results; ``pay`` appends to ``PAID`` when
it really runs."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from ag_ui.core import RunFinishedEvent
from agui_events import check_events, parse_sse

from payer import PAID, payer
from server.conftest import USERS, Api, make_api
from threadloom.client import AsyncClient
from threadloom.client.convert.agui import AguiExporter
from threadloom.client.frames import ThreadStatusFrame

__all__ = ["make_api"]

HELD: dict[str, set[str]] = {}
"""Per thread, the tool calls earlier responses announced (a client holds them)."""


@pytest.fixture
async def pay_api(make_api: Any) -> Api:
    PAID.clear()
    made: Api = await make_api(extra=payer())
    return made


def run_input(thread: str, *messages: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": str(uuid.uuid4()),
        "messages": list(messages),
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
        **more,
    }


def user(text: str) -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "role": "user", "content": text}


async def run(api: Api, body: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    """POST an AG-UI run of ``payer`` as alice and read its events to the end (each checked
    against the protocol's models)."""
    client = api.client("alice", Accept="text/event-stream")
    response = await client.post("/api/agui/payer", json=body, timeout=30)
    if response.status_code != 200:
        return response, []
    had = HELD.setdefault(body["threadId"], set())  # what a client of the thread holds
    events = check_events(parse_sse(response.text), known_calls=had)
    had.update(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    return response, events


def finished(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", [
        e["type"] for e in events
    ]
    return events[-1]


async def parked_two(api: Api) -> tuple[str, list[dict[str, Any]]]:
    """A thread parked on two pay calls through AG-UI: its id and the run's events."""
    thread = str(uuid.uuid4())
    response, events = await run(api, run_input(thread, user("pay two")))
    assert response.status_code == 200, response.text
    return thread, events


def resolved(interrupt: dict[str, Any], **payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


async def test_c14_040_a_run_that_parks_ends_with_the_interrupt_outcome(pay_api: Api) -> None:
    """C14-040: a run whose model calls ``pay`` twice ends with ``RUN_FINISHED`` whose
    outcome is ``interrupt``: one interrupt per pending call (``id`` and ``toolCallId`` the
    call's id, ``reason`` ``tool_call``, ``metadata`` the tool, arguments and
    argumentsHash of the approval, a ``responseSchema``), after the tool calls' events and
    the messages snapshot; no tool result, nothing ran."""
    thread, events = await parked_two(pay_api)
    end = finished(events)
    assert end["outcome"]["type"] == "interrupt"
    interrupts = end["outcome"]["interrupts"]
    listed = (await pay_api.client().get(f"/api/threads/{thread}/approvals")).json()
    by_call = {a["tool_call_id"]: a for a in listed["approvals"]}
    assert {i["id"] for i in interrupts} == set(by_call) and len(interrupts) == 2
    for interrupt in interrupts:
        approval = by_call[interrupt["id"]]
        assert interrupt["toolCallId"] == interrupt["id"]
        assert interrupt["reason"] == "tool_call" and "pay" in interrupt["message"]
        assert interrupt["metadata"]["tool"] == "pay"
        assert interrupt["metadata"]["arguments"] == approval["arguments"]
        assert interrupt["metadata"]["argumentsHash"] == approval["arguments_hash"]
        assert interrupt["responseSchema"]["required"] == ["approved"]
    seen = [e["type"] for e in events]
    assert seen.count("TOOL_CALL_START") == 2 and "TOOL_CALL_RESULT" not in seen
    assert seen[-3:] == ["MESSAGES_SNAPSHOT", "CUSTOM", "RUN_FINISHED"]
    approvals = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "threadloom.approval"]
    assert sorted(e["value"]["state"] for e in approvals) == ["pending", "pending"]
    assert PAID == []


async def test_c14_041_resume_entries_decide_and_the_run_goes_on(pay_api: Api) -> None:
    """C14-041: the next run's ``resume`` approves one interrupt (with its argumentsHash)
    and cancels the other → both decided by the caller, the run goes on in this request:
    a tool result for each call (``paid 5 to bo``; the cancelled one an error), the
    model's answer, ``RUN_FINISHED`` success. Replaying the same resume is safe: nothing is
    decided or run again."""
    thread, events = await parked_two(pay_api)
    interrupts = finished(events)["outcome"]["interrupts"]
    bo, eve = sorted(interrupts, key=lambda i: i["metadata"]["arguments"]["to"])
    resume = [
        resolved(bo, approved=True, argumentsHash=bo["metadata"]["argumentsHash"]),
        {"interruptId": eve["id"], "status": "cancelled"},
    ]
    response, events = await run(pay_api, run_input(thread, resume=resume))
    assert response.status_code == 200, response.text
    assert finished(events)["outcome"] == {"type": "success"}
    results = {e["toolCallId"]: e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert results[bo["id"]] == "paid 5 to bo" and eve["id"] in results
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "done"
    assert PAID == [(5, "bo")]
    listed = (await pay_api.client().get(f"/api/threads/{thread}/approvals")).json()
    states = {a["tool_call_id"]: (a["state"], a["decided_by"]) for a in listed["approvals"]}
    alice = USERS["alice"].id
    assert states == {bo["id"]: ("approved", alice), eve["id"]: ("rejected", alice)}
    again, events = await run(pay_api, run_input(thread, resume=resume))
    assert again.status_code == 200, again.text
    assert finished(events)["outcome"] == {"type": "success"}
    await pay_api.settle(thread)
    assert PAID == [(5, "bo")]


async def test_c14_042_a_resume_that_says_no_decision_is_refused(pay_api: Api) -> None:
    """C14-042: approving without the argumentsHash, ``approved`` not a boolean, a payload
    that is not an object → 400 naming ``resume[0].payload…``; a hash that is not the one
    shown → 409 ``approval_conflict``; an answer contradicting a decision already made →
    409 with its ``state``. Nothing was decided or ran by the refused requests."""
    thread, events = await parked_two(pay_api)
    bo, eve = sorted(
        finished(events)["outcome"]["interrupts"], key=lambda i: i["metadata"]["arguments"]["to"]
    )
    client = pay_api.client("alice", Accept="text/event-stream")
    cases = [
        (resolved(bo, approved=True), "resume[0].payload.argumentsHash"),
        (resolved(bo, approved="yes"), "resume[0].payload.approved"),
        ({"interruptId": bo["id"], "status": "resolved", "payload": [1]}, "resume[0].payload"),
    ]
    for entry, field in cases:
        answer = await client.post("/api/agui/payer", json=run_input(thread, resume=[entry]))
        assert answer.status_code == 400, answer.text
        assert answer.json()["details"][0]["field"] == field
    stale = resolved(bo, approved=True, argumentsHash="sha256:" + "0" * 64)
    answer = await client.post("/api/agui/payer", json=run_input(thread, resume=[stale]))
    assert answer.status_code == 409 and answer.json()["code"] == "approval_conflict"
    listed = (await pay_api.client().get(f"/api/threads/{thread}/approvals")).json()
    assert listed["pending"] == 2
    rejected = resolved(eve, approved=False, reason="too much")
    both = [resolved(bo, approved=True, argumentsHash=bo["metadata"]["argumentsHash"]), rejected]
    response, _ = await run(pay_api, run_input(thread, resume=both))
    assert response.status_code == 200
    flipped = resolved(eve, approved=True, argumentsHash=eve["metadata"]["argumentsHash"])
    answer = await client.post("/api/agui/payer", json=run_input(thread, resume=[flipped]))
    assert answer.status_code == 409 and answer.json()["state"] == "rejected"
    await pay_api.settle(thread)
    assert PAID == [(5, "bo")]


async def test_c14_043_a_partial_resume_ends_with_the_interrupt_still_open(
    pay_api: Api,
) -> None:
    """C14-043: a resume answering one of two interrupts decides that one and ends at once
    with the interrupt outcome carrying the other (the run does not go on); a request with a
    new message and no resume ends the same way (the message waits, queued); an entry that
    answers nothing of the thread is left out with a ``threadloom.warning`` event; the
    final resume lets the run go on."""
    thread, events = await parked_two(pay_api)
    bo, eve = sorted(
        finished(events)["outcome"]["interrupts"], key=lambda i: i["metadata"]["arguments"]["to"]
    )
    first = [resolved(bo, approved=True, argumentsHash=bo["metadata"]["argumentsHash"])]
    response, events = await run(pay_api, run_input(thread, resume=first))
    assert response.status_code == 200, response.text
    assert [i["id"] for i in finished(events)["outcome"]["interrupts"]] == [eve["id"]]
    response, events = await run(pay_api, run_input(thread, user("hurry")))
    assert [i["id"] for i in finished(events)["outcome"]["interrupts"]] == [eve["id"]]
    assert PAID == []
    last = [resolved(eve, approved=False), {"interruptId": "nope", "status": "cancelled"}]
    response, events = await run(pay_api, run_input(thread, resume=last))
    assert finished(events)["outcome"] == {"type": "success"}
    [warning] = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "threadloom.warning"]
    assert "nope" in warning["value"]["message"]
    assert PAID == [(5, "bo")]


async def test_c14_044_the_clients_exporter_ends_a_parked_run_with_the_interrupts(
    pay_api: Api,
) -> None:
    """C14-044: ``AguiExporter`` fed the thread's stream (spec 09 frames, read with the
    client) emits ``threadloom.approval`` events and ends the parked run with
    ``RUN_FINISHED`` whose interrupt outcome carries each pending call."""
    async with AsyncClient(pay_api.base, token=pay_api.keys["alice"]) as client:
        thread = (await client.threads.create("payer")).thread_id
        exporter = AguiExporter(thread)
        out: list[Any] = []
        async with client.stream(thread) as stream:
            await client.messages.send(thread, "pay two")
            async for frame in stream:
                out += exporter.feed(frame)
                if isinstance(frame, ThreadStatusFrame) and frame.status.reason == (
                    "awaiting_approval"
                ):
                    break
    [end] = [e for e in out if isinstance(e, RunFinishedEvent)]
    assert end.outcome is not None and end.outcome.type == "interrupt"
    calls = {i.tool_call_id: i for i in end.outcome.interrupts}
    listed = (await pay_api.client().get(f"/api/threads/{thread}/approvals")).json()
    assert set(calls) == {a["tool_call_id"] for a in listed["approvals"]}
    for approval in listed["approvals"]:
        metadata = calls[approval["tool_call_id"]].metadata or {}
        assert metadata["argumentsHash"] == approval["arguments_hash"]
    names = [getattr(e, "name", None) for e in out]
    assert names.count("threadloom.approval") == 2
