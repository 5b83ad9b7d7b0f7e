"""Tool approvals over HTTP (spec 14 §14.3): a real server, a real store, httpx.

The ``payer`` agent's model calls ``pay`` (needs approval) on its first request and
answers text after; ``pay`` appends to ``PAID`` when it really runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_c09_stream import open_ws, quiet, until

from conftest import USERS
from payer import PAID, payer


@pytest.fixture
async def pay_api(make_api: Any) -> Any:
    PAID.clear()
    return await make_api(extra=payer())


async def _parked(api: Any, user: str = "alice") -> tuple[str, dict[str, Any]]:
    tid = await api.thread("payer", user)
    client = api.client(user)
    sent = await client.post(f"/api/threads/{tid}/messages", json={"content": "pay bo"})
    assert sent.status_code in (200, 201, 202), sent.text
    await api.settle(tid)
    detail = (await client.get(f"/api/threads/{tid}")).json()
    assert detail["status"]["reason"] == "awaiting_approval"
    [pending] = detail["approvals"]
    return tid, pending


async def test_c14_010_approve_over_http_runs_the_tool_once(pay_api: Any) -> None:
    """C14-010: GET the thread → its pending approval (tool, arguments, hash); POST approve
    with that hash → 200 with the decided approval; the tool ran once and the run ended."""
    tid, pending = await _parked(pay_api)
    assert (pending["tool"], pending["arguments"], pending["state"]) == (
        "pay",
        {"amount": 5, "to": "bo"},
        "pending",
    )
    client = pay_api.client("alice")
    url = f"/api/threads/{tid}/approvals/{pending['tool_call_id']}"
    decided = await client.post(
        url, json={"approve": True, "arguments_hash": pending["arguments_hash"]}
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["approval"]["state"] == "approved"
    await pay_api.settle(tid)
    assert PAID == [(5, "bo")]
    listed = (await client.get(f"/api/threads/{tid}/approvals")).json()
    assert listed["pending"] == 0
    assert listed["approvals"][0]["decided_by"] == USERS["alice"].id
    detail = (await client.get(f"/api/threads/{tid}")).json()
    assert detail["status"]["reason"] == "stop_on_response" and detail["approvals"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "approve"),
        ({"approve": None}, "approve"),
        ({"approve": "yes"}, "approve"),
        ({"approve": 1}, "approve"),
    ],
)
async def test_c14_011_a_missing_or_malformed_decision_is_refused(
    pay_api: Any, body: dict[str, Any], field: str
) -> None:
    """C14-011: ``approve`` absent, null, a string or a number → 400 naming ``approve``;
    nothing ran, the approval stays pending."""
    tid, pending = await _parked(pay_api)
    client = pay_api.client("alice")
    answer = await client.post(f"/api/threads/{tid}/approvals/{pending['tool_call_id']}", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["details"][0]["field"] == field
    listed = (await client.get(f"/api/threads/{tid}/approvals")).json()
    assert [a["state"] for a in listed["approvals"]] == ["pending"]
    assert PAID == []


async def test_c14_012_unknown_call_twice_and_stale_hash(pay_api: Any) -> None:
    """C14-012: an unknown tool call id → 404; approve without the hash → 400; a hash that
    is not the one shown → 409; a second decision after the first → 409 with the state;
    the tool ran exactly once (for the one valid approve)."""
    tid, pending = await _parked(pay_api)
    client = pay_api.client("alice")
    base = f"/api/threads/{tid}/approvals"
    unknown = await client.post(f"{base}/call_nope", json={"approve": False})
    assert unknown.status_code == 404 and unknown.json()["code"] == "approval_not_found"
    url = f"{base}/{pending['tool_call_id']}"
    no_hash = await client.post(url, json={"approve": True})
    assert no_hash.status_code == 400, no_hash.text
    assert no_hash.json()["details"][0]["field"] == "arguments_hash"
    stale = await client.post(url, json={"approve": True, "arguments_hash": "sha256:" + "0" * 64})
    assert stale.status_code == 409 and stale.json()["code"] == "approval_conflict"
    ok = await client.post(url, json={"approve": True, "arguments_hash": pending["arguments_hash"]})
    assert ok.status_code == 200
    again = await client.post(url, json={"approve": False, "reason": "changed my mind"})
    assert again.status_code == 409 and again.json()["state"] == "approved"
    await pay_api.settle(tid)
    assert PAID == [(5, "bo")]


async def test_c14_013_another_user_cannot_decide(pay_api: Any) -> None:
    """C14-013: bob decides on alice's thread → 404 (as any thread route), nothing
    changes; an admin may decide."""
    tid, pending = await _parked(pay_api)
    url = f"/api/threads/{tid}/approvals/{pending['tool_call_id']}"
    body = {"approve": True, "arguments_hash": pending["arguments_hash"]}
    bob = await pay_api.client("bob").post(url, json=body)
    assert bob.status_code in (403, 404), bob.text
    assert PAID == []
    root = await pay_api.client("root").post(url, json=body)
    assert root.status_code == 200, root.text
    assert root.json()["approval"]["decided_by"] == USERS["root"].id
    await pay_api.settle(tid)
    assert PAID == [(5, "bo")]


async def test_c14_014_edited_arguments_must_fit_the_schema(pay_api: Any) -> None:
    """C14-014: approve with arguments that fail the tool's schema → 400, nothing stored;
    with valid edited arguments → the tool runs with them and the stored call shows them."""
    tid, pending = await _parked(pay_api)
    client = pay_api.client("alice")
    url = f"/api/threads/{tid}/approvals/{pending['tool_call_id']}"
    shown = pending["arguments_hash"]
    bad = await client.post(
        url, json={"approve": True, "arguments_hash": shown, "arguments": {"amount": "lots"}}
    )
    assert bad.status_code == 400, bad.text
    assert [
        a["state"] for a in (await client.get(f"/api/threads/{tid}/approvals")).json()["approvals"]
    ] == ["pending"]
    good = await client.post(
        url, json={"approve": True, "arguments_hash": shown, "arguments": {"amount": 3, "to": "al"}}
    )
    assert good.status_code == 200, good.text
    await pay_api.settle(tid)
    assert PAID == [(3, "al")]
    page = (await client.get(f"/api/threads/{tid}/messages?order=asc")).json()
    [issued] = [m for m in page["messages"] if m.get("tool_calls")]
    calls = issued["tool_calls"]
    calls = json.loads(calls) if isinstance(calls, str) else calls
    assert json.loads(calls[0]["function"]["arguments"]) == {"amount": 3, "to": "al"}


async def test_c14_015_reject_stores_an_error_result_with_the_reason(pay_api: Any) -> None:
    """C14-015: reject with a reason → nothing ran; the call's result is an error that
    says it was rejected and why; the model was asked again and answered."""
    tid, pending = await _parked(pay_api)
    client = pay_api.client("alice")
    url = f"/api/threads/{tid}/approvals/{pending['tool_call_id']}"
    answer = await client.post(url, json={"approve": False, "reason": "too much"})
    assert answer.status_code == 200 and answer.json()["approval"]["state"] == "rejected"
    await pay_api.settle(tid)
    assert PAID == []
    page = (await client.get(f"/api/threads/{tid}/messages?order=asc")).json()
    [result] = [m for m in page["messages"] if m["role"] == "tool"]
    assert result["tool_status"] == "error" and "too much" in result["content"]
    assert page["messages"][-1]["content"] == "done"


async def test_c14_019_stream_frames_requested_then_decided(pay_api: Any) -> None:
    """C14-019: on the thread's stream, parking sends ``approval_requested`` (the pending
    approval as data) before the ``awaiting_approval`` status; the decision sends
    ``approval_decided`` (approved, who); a replay from ``since=0`` after the decision sends
    the approval once, decided."""
    tid = await pay_api.thread("payer", "alice")
    ws = await open_ws(pay_api, tid)
    try:
        await quiet(ws, 0.2)
        client = pay_api.client("alice")
        await client.post(f"/api/threads/{tid}/messages", json={"content": "pay bo"})
        frames = await until(
            ws,
            lambda f: f["type"] == "thread_status" and f["status"]["reason"] == "awaiting_approval",
        )
        [requested] = [f for f in frames if f["type"] == "approval_requested"]
        assert requested["data"]["state"] == "pending" and requested["data"]["tool"] == "pay"
        hash_ = requested["data"]["arguments_hash"]
        url = f"/api/threads/{tid}/approvals/{requested['tool_call_id']}"
        await client.post(url, json={"approve": True, "arguments_hash": hash_})
        decided = await until(ws, lambda f: f["type"] == "approval_decided")
        assert decided[-1]["data"]["state"] == "approved"
        assert decided[-1]["data"]["decided_by"] == USERS["alice"].id
    finally:
        await ws.close()
    await pay_api.settle(tid)
    replay = await open_ws(pay_api, tid, since=0)
    try:
        frames = await quiet(replay, 0.5)
    finally:
        await replay.close()
    approvals = [f for f in frames if f["type"].startswith("approval_")]
    assert [(f["type"], f["data"]["state"]) for f in approvals] == [
        ("approval_decided", "approved")
    ]
