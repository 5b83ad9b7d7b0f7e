"""The tool playground over HTTP (spec 08 §8.10.7): ``POST /api/tools/{name}/call`` —
a real server, a real store (both), httpx, the real tool pipeline."""

from __future__ import annotations

import json
from typing import Any

import pytest

from payer import PAID, payer
from threadloom import ThreadState
from threadloom.define import tool

CALLS: list[tuple[int, int, str]] = []


@tool
async def add_numbers(state: ThreadState, a: int, b: int = 1) -> str:
    """Add two whole numbers (the playground's test tool)."""
    CALLS.append((a, b, state.thread_id))
    return f"{a} + {b} = {a + b}"


@tool
def explode(reason: str) -> str:
    """Fail on purpose."""
    raise RuntimeError(f"boom: {reason}")


@pytest.fixture
async def play_api(make_api: Any) -> Any:
    CALLS.clear()
    PAID.clear()
    return await make_api(extra=(*payer(), add_numbers, explode))


async def _threads(api: Any) -> list[dict[str, Any]]:
    listed = await api.client("root").get("/api/threads", params={"tag": "playground"})
    threads: list[dict[str, Any]] = listed.json()["threads"]
    return threads


async def test_c08_230_a_call_runs_in_a_scratch_thread_with_its_log_row(play_api: Any) -> None:
    """C08-230: an admin calls ``add_numbers`` {a: 2, b: 3} → 200: a new thread (tagged
    ``playground`` and ``tool:add_numbers``, owned by the admin, of the first primary
    agent), status success, the tool's result; the tool ran once in that thread; the log
    row ``log_id`` is an ``app`` row naming the tool with the arguments, the result and
    the status; the thread has no message."""
    root = play_api.client("root")
    answer = await root.post("/api/tools/add_numbers/call", json={"arguments": {"a": 2, "b": 3}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    tid = body["thread_id"]
    assert (body["created"], body["tool"], body["status"], body["result"], body["error"]) == (
        True,
        "add_numbers",
        "success",
        "2 + 3 = 5",
        None,
    )
    assert body["duration_ms"] >= 0
    assert [(2, 3, tid)] == CALLS
    thread = (await root.get(f"/api/threads/{tid}")).json()["thread"]
    primary = [a["name"] for a in (await root.get("/api/agents")).json()["agents"] if a["primary"]]
    assert thread["agent_id"] == primary[0]
    assert set(thread["tags"]) == {"playground", "tool:add_numbers"}
    assert [t["id"] for t in await _threads(play_api)] == [tid]
    row = (await root.get(f"/api/threads/{tid}/logs/{body['log_id']}")).json()
    assert (row["kind"], row["model"], row["app_status"]) == (
        "app",
        "playground:add_numbers",
        "success",
    )
    assert json.loads(row["app_request"]) == {"a": 2, "b": 3}
    assert json.loads(row["app_response"]) == "2 + 3 = 5"
    assert json.loads(row["app_trigger"])["kind"] == "playground"
    messages = (await root.get(f"/api/threads/{tid}/messages")).json()["messages"]
    assert messages == []


async def test_c08_231_errors_and_a_given_thread(play_api: Any) -> None:
    """C08-231: arguments the schema refuses (``a`` a string, ``a`` missing) → 200 status
    ``error`` naming the argument, the tool did not run, the log row says ``error``; a
    tool that raises → ``error`` with its message; ``thread_id`` of an existing thread →
    the call runs there (``created`` false, no new thread); an unknown thread → 404."""
    root = play_api.client("root")
    wrong = await root.post("/api/tools/add_numbers/call", json={"arguments": {"a": "two"}})
    assert wrong.status_code == 200, wrong.text
    assert wrong.json()["status"] == "error" and "a" in wrong.json()["error"]
    missing = (await root.post("/api/tools/add_numbers/call", json={})).json()
    assert missing["status"] == "error" and "a" in missing["error"]
    assert CALLS == []
    row = (await root.get(f"/api/threads/{missing['thread_id']}/logs/{missing['log_id']}")).json()
    assert (row["app_status"], row["app_error"]) == ("error", missing["error"])
    boom = (await root.post("/api/tools/explode/call", json={"arguments": {"reason": "x"}})).json()
    assert (boom["status"], boom["error"]) == ("error", "boom: x")
    tid = await play_api.thread("echo", "root")
    before = len(await _threads(play_api))
    there = await root.post(
        "/api/tools/add_numbers/call", json={"arguments": {"a": 1}, "thread_id": tid}
    )
    assert there.status_code == 200, there.text
    assert (there.json()["thread_id"], there.json()["created"]) == (tid, False)
    assert [(1, 1, tid)] == CALLS
    assert len(await _threads(play_api)) == before
    unknown = await root.post(
        "/api/tools/add_numbers/call",
        json={"arguments": {"a": 1}, "thread_id": "00000000-0000-4000-8000-000000000000"},
    )
    assert unknown.status_code == 404, unknown.text


async def test_c08_232_approval_unknown_tool_and_non_admins_run_nothing(play_api: Any) -> None:
    """C08-232: ``pay`` (requires approval) → 409 ``approval_required``, it did not run and
    no scratch thread is left; an unknown tool → 404 ``tool_not_found``; an agent (not a
    tool) → 400; a user → 403 ``admin_required``; none of them ran anything."""
    root = play_api.client("root")
    pay = await root.post("/api/tools/pay/call", json={"arguments": {"amount": 5, "to": "bo"}})
    assert pay.status_code == 409 and pay.json()["code"] == "approval_required", pay.text
    assert "approval" in pay.json()["error"]
    assert PAID == [] and await _threads(play_api) == []
    nope = await root.post("/api/tools/nope/call", json={"arguments": {}})
    assert nope.status_code == 404 and nope.json()["code"] == "tool_not_found"
    agent = await root.post("/api/tools/payer/call", json={"arguments": {}})
    assert agent.status_code == 404 and agent.json()["code"] == "tool_not_found"
    user = await play_api.client("alice").post(
        "/api/tools/add_numbers/call", json={"arguments": {"a": 1}}
    )
    assert user.status_code == 403 and user.json()["code"] == "admin_required"
    assert CALLS == [] and PAID == []
