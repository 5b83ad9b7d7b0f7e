"""The approvals inbox over HTTP (spec 14 §14.9): ``GET /api/approvals`` across the
threads a caller may act on — a real server, a real store (both), httpx.

The ``payer`` agent's model calls ``pay`` (needs approval): once, or twice for ``pay two``."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import USERS
from payer import PAID, payer


@pytest.fixture
async def pay_api(make_api: Any) -> Any:
    PAID.clear()
    return await make_api(extra=payer())


async def _park(api: Any, user: str, text: str = "pay bo") -> str:
    tid: str = await api.thread("payer", user)
    sent = await api.client(user).post(f"/api/threads/{tid}/messages", json={"content": text})
    assert sent.status_code in (200, 201, 202), sent.text
    await api.settle(tid)
    return tid


async def _inbox(api: Any, user: str, **params: Any) -> dict[str, Any]:
    answer = await api.client(user).get("/api/approvals", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_c14_052_the_inbox_lists_pending_calls_across_the_callers_threads(
    pay_api: Any,
) -> None:
    """C14-052: alice parks two threads (one on two calls), bob one → alice's inbox holds
    her three pending calls, newest request first, each with its thread, tool, arguments,
    hash, time, agent and owner, as the thread's own list shows them; bob sees his one; an
    admin sees all four, or bob's with ``user_id``."""
    first = await _park(pay_api, "alice")
    second = await _park(pay_api, "alice", "pay two")
    bobs = await _park(pay_api, "bob")
    mine = await _inbox(pay_api, "alice")
    assert (mine["total"], mine["hasMore"], len(mine["approvals"])) == (3, False, 3)
    times = [a["requested_at"] for a in mine["approvals"]]
    assert times == sorted(times, reverse=True)
    assert {a["thread_id"] for a in mine["approvals"]} == {first, second}
    own = (await pay_api.client("alice").get(f"/api/threads/{second}/approvals")).json()
    shown = {a["tool_call_id"]: a for a in mine["approvals"] if a["thread_id"] == second}
    for approval in own["approvals"]:
        item = shown[approval["tool_call_id"]]
        assert {k: item[k] for k in approval} == approval
        assert (item["agent_id"], item["user_id"], item["state"]) == (
            "payer",
            USERS["alice"].id,
            "pending",
        )
    assert sorted(a["arguments"]["amount"] for a in shown.values()) == [5, 700]
    theirs = await _inbox(pay_api, "bob")
    assert [a["thread_id"] for a in theirs["approvals"]] == [bobs] and theirs["total"] == 1
    everyone = await _inbox(pay_api, "root")
    assert everyone["total"] == 4
    assert {a["thread_id"] for a in everyone["approvals"]} == {first, second, bobs}
    only_bob = await _inbox(pay_api, "root", user_id=USERS["bob"].id)
    assert [a["thread_id"] for a in only_bob["approvals"]] == [bobs]
    ignored = await _inbox(pay_api, "alice", user_id=USERS["bob"].id)
    assert ignored["total"] == 3  # user_id is an admin's filter
    assert PAID == []


async def test_c14_053_pages_and_filters(pay_api: Any) -> None:
    """C14-053: ``limit``/``offset`` page the inbox (``hasMore``, ``total``); deciding
    one through the thread's route with the hash the inbox showed takes it out of the
    default (pending) inbox and runs the tool once; ``status=approved`` lists it,
    ``status=all`` every state, ``status=pending,rejected`` both; ``agent_id`` filters."""
    await _park(pay_api, "alice", "pay two")
    await _park(pay_api, "alice")
    page1 = await _inbox(pay_api, "alice", limit=2)
    page2 = await _inbox(pay_api, "alice", limit=2, offset=2)
    assert (page1["total"], page1["hasMore"], len(page1["approvals"])) == (3, True, 2)
    assert (page2["hasMore"], len(page2["approvals"])) == (False, 1)
    ids = [a["tool_call_id"] for a in page1["approvals"] + page2["approvals"]]
    assert len(set(ids)) == 3
    item = page1["approvals"][0]
    url = f"/api/threads/{item['thread_id']}/approvals/{item['tool_call_id']}"
    decided = await pay_api.client("alice").post(
        url, json={"approve": True, "arguments_hash": item["arguments_hash"]}
    )
    assert decided.status_code == 200, decided.text
    await pay_api.settle(item["thread_id"])
    assert [(item["arguments"]["amount"], item["arguments"]["to"])] == PAID
    pending = await _inbox(pay_api, "alice")
    assert pending["total"] == 2
    assert item["tool_call_id"] not in {a["tool_call_id"] for a in pending["approvals"]}
    approved = await _inbox(pay_api, "alice", status="approved")
    assert [a["tool_call_id"] for a in approved["approvals"]] == [item["tool_call_id"]]
    assert approved["approvals"][0]["decided_by"] == USERS["alice"].id
    assert (await _inbox(pay_api, "alice", status="all"))["total"] == 3
    assert (await _inbox(pay_api, "alice", status="pending,rejected"))["total"] == 2
    assert (await _inbox(pay_api, "alice", agent_id="payer"))["total"] == 2
    assert (await _inbox(pay_api, "alice", agent_id="echo"))["total"] == 0


async def test_c14_054_refusals(pay_api: Any) -> None:
    """C14-054: an unknown ``status``, a negative ``limit`` → 400 naming the parameter; no
    credential → 401; a user with no threads parked → an empty inbox."""
    await _park(pay_api, "alice")
    client = pay_api.client("alice")
    for params, name in (({"status": "nope"}, "status"), ({"limit": "-1"}, "limit")):
        bad = await client.get("/api/approvals", params=params)
        assert bad.status_code == 400, bad.text
        assert bad.json()["details"][0]["field"] == name
    anonymous = await pay_api.client(None).get("/api/approvals")
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized"
    assert (await _inbox(pay_api, "apiu")) == {"approvals": [], "total": 0, "hasMore": False}
