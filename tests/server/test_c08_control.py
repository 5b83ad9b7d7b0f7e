"""Spec 08 §8.1.6, §8.5–§8.11: termination, execution control, logs, cost, the registry,
the catalog and the service routes."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from conftest import USERS, Api, last_user_text
from threadloom.records import LOG_LIST_KEYS, LogRow, SubagentRegistryEntry, new_id


async def messages(api: Api, thread: str, query: str = "?order=asc") -> list[dict[str, Any]]:
    response = await api.client().get(f"/api/threads/{thread}/messages{query}")
    assert response.status_code == 200
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def held(api: Api) -> str:
    """A ``gate`` thread whose run is held inside its first model request."""
    thread = await api.thread("gate")
    await api.client().post(f"/api/threads/{thread}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    return thread


async def test_c08_076_c02_079_send_to_a_terminated_thread_is_423(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    at = (await client.post(f"/api/threads/{thread}/terminate")).json()["terminated"]
    before = await messages(api, thread)
    response = await client.post(f"/api/threads/{thread}/messages", json={"content": "x"})
    assert response.status_code == 423
    assert response.json() == {
        "error": f"Thread is terminated (terminated_at={at})",
        "code": "thread_terminated",
        "terminated": at,
    }
    assert await messages(api, thread) == before
    state = await api.runtime.thread(thread)
    assert (await state.get_file_stats()).file_count == 0
    assert (await state.get_messages()).total == 0  # C02-079: get_messages() unchanged


async def test_c08_077_continue_on_a_terminated_thread_is_423(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/terminate")
    response = await client.post(f"/api/threads/{thread}/continue", json={})
    assert response.status_code == 423 and response.json()["code"] == "thread_terminated"


async def test_c08_078_other_routes_work_on_terminated_threads(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    first = await state.inject_message(role="user", content="a")
    second = await state.inject_message(role="user", content="b")
    await client.post(f"/api/threads/{thread}/terminate")
    base = f"/api/threads/{thread}"
    answers = [
        await client.get(f"{base}/messages"),
        await client.patch(f"{base}/messages/{first.id}", json={"content": "a2"}),
        await client.delete(f"{base}/messages/{second.id}"),
        await client.post(f"{base}/stop"),
        await client.get(f"{base}/cost"),
        await client.post(f"{base}/terminate"),
        await client.delete(base),
    ]
    assert [r.status_code for r in answers] == [200] * len(answers)


async def test_c08_089_continue_runs_a_turn_without_a_message(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    response = await client.post(f"/api/threads/{thread}/continue", json={})
    assert response.status_code == 202 and response.json()["status"] == "queued"
    await api.settle(thread)
    assert [m["role"] for m in await messages(api, thread)] == ["user", "assistant", "assistant"]


async def test_c08_090_side_is_checked(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(f"/api/threads/{thread}/continue", json={"side": "c"})
    assert response.status_code == 400
    assert response.json()["error"] == "Side must be 'a' or 'b'"


async def test_c08_091_continue_while_running_is_409(api: Api) -> None:
    thread = await held(api)
    response = await api.client().post(f"/api/threads/{thread}/continue")
    assert response.status_code == 409 and response.json()["code"] == "thread_running"


async def test_c08_092_stop_settles_the_run(api: Api) -> None:
    client = api.client()
    thread = await held(api)
    response = await client.post(f"/api/threads/{thread}/stop")
    assert response.json() == {
        "status": "stopped",
        "message": "Thread execution stopped",
        "wasRunning": True,
        "settled": True,
    }
    status = (await client.get(f"/api/threads/{thread}")).json()["status"]
    assert (status["state"], status["reason"]) == ("idle", "aborted_by_user")
    stored = await messages(api, thread, "?order=asc&includeSilent=true")
    assert any(m["role"] == "assistant" and m["status"] == "failed" for m in stored)
    last = stored[-1]
    assert (last["role"], last["content"]) == ("system", "Execution stopped by user")
    assert last["metadata"]["status_kind"] == "stopped_by_user"


async def test_c08_094_stop_on_an_idle_thread_stores_nothing(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    response = await client.post(f"/api/threads/{thread}/stop")
    assert response.status_code == 200 and response.json()["wasRunning"] is False
    assert await messages(api, thread) == []


async def test_stop_cascade_must_be_boolean(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(f"/api/threads/{thread}/stop", json={"cascade": "yes"})
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"


async def test_c08_097_terminate_is_idempotent(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    first = (await client.post(f"/api/threads/{thread}/terminate")).json()
    assert first["success"] is True and first["alreadyTerminated"] is False
    detail = (await client.get(f"/api/threads/{thread}")).json()
    assert detail["thread"]["terminated"] == first["terminated"]
    assert detail["status"]["state"] == "idle" and detail["status"]["reason"] is None
    again = (await client.post(f"/api/threads/{thread}/terminate")).json()
    assert again["terminated"] == first["terminated"] and again["alreadyTerminated"] is True


async def test_c08_099_terminate_a_running_thread(api: Api) -> None:
    client = api.client()
    thread = await held(api)
    queued = (
        await client.post(f"/api/threads/{thread}/messages", json={"content": "later"})
    ).json()["messageId"]
    assert (await client.post(f"/api/threads/{thread}/terminate")).status_code == 200
    await api.settle(thread)
    status = (await client.get(f"/api/threads/{thread}")).json()["status"]
    assert (status["state"], status["reason"]) == ("idle", "terminated")
    stored = await messages(api, thread, "?order=asc&includeSilent=true")
    note = [m for m in stored if m["role"] == "system"][-1]
    assert note["content"] == "Thread terminated"
    assert note["metadata"]["status_kind"] == "terminated"
    entry = next(m for m in stored if m["id"] == queued)
    assert entry["status"] == "pending" and entry["metadata"]["queue_status"] == "cancelled"
    api.gate.open()
    await asyncio.sleep(0.1)
    assert all(last_user_text(r) != "later" for r in api.gate.requests)
    late = await client.post(f"/api/threads/{thread}/messages", json={"content": "x"})
    assert late.status_code == 423


async def test_c08_098_terminating_a_child_updates_the_parents_registry(api: Api) -> None:
    client = api.client()
    parent = await api.thread()
    child = await api.runtime.create_thread("echo", user_id=USERS["alice"].id, parent=parent)
    entry = SubagentRegistryEntry(
        reference=child.thread_id, relationship="helper", name="echo", status="running"
    )
    await api.runtime.store.upsert_registry_entry(parent, entry)
    response = await client.post(f"/api/threads/{child.thread_id}/terminate")
    assert response.status_code == 200
    (listed,) = (await client.get(f"/api/threads/{parent}/subagents")).json()["subagents"]
    assert listed["id"] == child.thread_id and listed["status"] == "terminated"
    assert listed["relationship"] == "helper" and listed["agent_name"] == "echo"


async def test_c08_100_api_role_needs_the_logs_permission(api: Api) -> None:
    thread = await api.thread(user="apiu")
    response = await api.client("apiu").get(f"/api/threads/{thread}/logs")
    assert response.status_code == 403
    assert response.json() == {
        "error": "Forbidden: 'logs' access required",
        "code": "permission_required",
    }


async def test_c08_101_fresh_thread_has_no_logs(api: Api) -> None:
    thread = await api.thread()
    body = (await api.client().get(f"/api/threads/{thread}/logs")).json()
    assert body == {"logs": [], "total": 0, "hasMore": False}


async def test_c08_102_log_rows_after_an_exchange(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    for text in ("one", "two"):
        await client.post(f"/api/threads/{thread}/messages", json={"content": text})
        await api.settle(thread)
    rows = (await client.get(f"/api/threads/{thread}/logs")).json()["logs"]
    assert len(rows) == 2
    assert all(list(row) == list(LOG_LIST_KEYS) for row in rows)
    assert rows[0]["created_at"] <= rows[1]["created_at"]
    desc = (await client.get(f"/api/threads/{thread}/logs?order=desc")).json()["logs"]
    assert [r["id"] for r in desc] == [r["id"] for r in reversed(rows)]


async def test_c08_103_app_log_rows(api: Api) -> None:
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    await state.log({"name": "search.query", "cost": 0.0004, "request": {"q": "x"}})
    body = (await api.client().get(f"/api/threads/{thread}/logs?kind=app")).json()
    (row,) = body["logs"]
    assert row["kind"] == "app" and row["model"] == "search.query"
    assert row["app_cost"] == 0.0004 and row["app_request"] == '{"q":"x"}'
    assert row["cost_total"] is None


async def test_c08_104_too_many_log_ids(api: Api) -> None:
    thread = await api.thread()
    many = ",".join(str(uuid.uuid4()) for _ in range(201))
    response = await api.client().get(f"/api/threads/{thread}/logs?ids={many}")
    assert response.status_code == 400
    assert response.json()["error"] == "Too many log IDs requested"


async def test_c08_105_log_detail(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    unknown = str(uuid.uuid4())
    missing = await client.get(f"/api/threads/{thread}/logs/{unknown}")
    assert missing.status_code == 404
    assert missing.json() == {"error": f"Log not found: {unknown}", "code": "log_not_found"}
    (row,) = (await client.get(f"/api/threads/{thread}/logs")).json()["logs"]
    detail = (await client.get(f"/api/threads/{thread}/logs/{row['id']}")).json()
    assert detail["kind"] is None and detail["request_body"] and detail["response_body"]
    keys = list(detail)
    assert keys[-7:] == [
        "request_body",
        "response_body",
        "tools_schema",
        "system_prompt",
        "tool_results",
        "reasoning_content",
        "source_message_content",
    ]


def llm_row(model: str, cost: float, **fields: Any) -> LogRow:
    return LogRow(
        id=new_id(),
        provider="scripted",
        model=model,
        model_name=model,
        created_at=0,
        cost_total=cost,
        endpoint="chat.completions",
        **fields,
    )


async def test_c08_106_cost_of_a_fresh_thread(api: Api) -> None:
    thread = await api.thread()
    cost = (await api.client().get(f"/api/threads/{thread}/cost")).json()
    assert (cost["totalCost"], cost["appCost"], cost["requestCount"]) == (0, 0, 0)
    assert cost["modelBreakdown"] == [] and cost["avgCostPerMessageByModel"] == {}
    assert len(cost["threads"]) == 1 and cost["threads"][0]["isRoot"] is True
    assert cost["truncated"] is False


async def test_c08_107_c08_108_llm_and_app_costs(api: Api) -> None:
    thread = await api.thread()
    store = api.runtime.store
    await store.insert_log(thread, llm_row("a", 0.01))
    await store.insert_log(thread, llm_row("b", 0.02))
    client = api.client()
    cost = (await client.get(f"/api/threads/{thread}/cost")).json()
    assert abs(cost["totalCost"] - 0.03) < 1e-12 and cost["requestCount"] == 2
    assert cost["modelBreakdown"][0]["modelName"] == "b"
    state = await api.runtime.thread(thread)
    await state.log({"name": "tool.call", "cost": 0.005})
    cost = (await client.get(f"/api/threads/{thread}/cost")).json()
    assert abs(cost["appCost"] - 0.005) < 1e-12 and abs(cost["totalCost"] - 0.035) < 1e-12
    assert abs(cost["llmCost"] - 0.03) < 1e-12 and cost["requestCount"] == 2


async def test_c08_109_c08_110_descendant_costs(api: Api) -> None:
    root = await api.thread()
    alice = api.runtime
    child = await alice.create_thread("echo", parent=root)
    app_only = await alice.create_thread("echo", parent=root)
    await alice.store.insert_log(child.thread_id, llm_row("a", 0.004))
    await child.log({"name": "x", "cost": 0.001})
    await app_only.log({"name": "y", "cost": 0.002})
    cost = (await api.client().get(f"/api/threads/{root}/cost")).json()
    assert abs(cost["totalCost"] - 0.007) < 1e-12
    rows = {r["threadId"]: r for r in cost["threads"]}
    assert rows[child.thread_id]["parent"] == root and rows[child.thread_id]["isRoot"] is False
    assert abs(rows[child.thread_id]["totalCost"] - 0.005) < 1e-12
    assert abs(rows[child.thread_id]["appCost"] - 0.001) < 1e-12
    assert app_only.thread_id in rows


async def test_c08_116_empty_registry(api: Api) -> None:
    thread = await api.thread()
    assert (await api.client().get(f"/api/threads/{thread}/subagents")).json() == {"subagents": []}


async def test_c08_117_agents_catalog(api: Api) -> None:
    mine = (await api.client("alice").get("/api/agents")).json()["agents"]
    echo = next(a for a in mine if a["id"] == "echo")
    assert echo["title"] == "Echo" and echo["side_a_backing"] == "prompt"
    assert echo["side_b_backing"] == "human" and echo["primary"] is True
    assert echo["packed"] is False and "side_a_agent_prompt" not in echo
    admin = (await api.client("root").get("/api/agents")).json()["agents"]
    assert next(a for a in admin if a["id"] == "echo")["side_a_agent_prompt"] == "echo_prompt"
    assert [a["id"] for a in admin] == sorted(a["id"] for a in admin)


async def test_c08_118_definitions_are_admin_only(api: Api) -> None:
    client = api.client("alice")
    for path in ("/api/prompts", "/api/tools", "/api/models", "/api/hooks"):
        response = await client.get(path)
        assert response.status_code == 403
        assert response.json() == {
            "error": "Forbidden: Admin access required",
            "code": "admin_required",
        }


async def test_c08_119_prompt_defaults(api: Api) -> None:
    prompts = (await api.client("root").get("/api/prompts")).json()["prompts"]
    echo = next(p for p in prompts if p["id"] == "echo_prompt")
    assert echo["include_chat"] is True and echo["include_past_tools"] is True
    assert echo["parallel_tool_calls"] is True and echo["tools"] == []
    assert echo["prompt"] == "You echo." and echo["model_id"] == "echo_model"


async def test_c08_120_tools_catalog_is_keyed_by_name(api: Api) -> None:
    client = api.client("root")
    everything = (await client.get("/api/tools")).json()
    assert isinstance(everything, dict) and "echo_prompt" in everything
    assert all({"description", "type"} <= set(v) for v in everything.values())
    prompts = (await client.get("/api/tools?type=prompts")).json()
    assert prompts and all(v["type"] == "prompt" for v in prompts.values())
    assert (await client.get("/api/tools?type=widgets")).status_code == 400


async def test_c08_121_hooks_are_sorted(api: Api) -> None:
    hooks = (await api.client("root").get("/api/hooks")).json()["hooks"]
    assert {"id": "count_created", "hook": "after_create_message"} in hooks
    assert hooks == sorted(hooks, key=lambda h: (h["hook"], h["id"]))


async def test_c08_122_health(api: Api) -> None:
    client = api.client(None)
    body = (await client.get("/api/health")).json()
    assert body["status"] == "ok" and body["store"] in ("sqlite", "postgres")
    assert body["node"] == api.app.settings.node_id
    await api.runtime.store.close()
    down = await client.get("/api/health")
    assert down.status_code == 503 and down.json()["code"] == "unavailable"


async def test_c08_123_openapi_document(api: Api) -> None:
    document = (await api.client(None).get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    assert {"get", "post"} <= set(document["paths"]["/api/threads/{id}/messages"])


async def test_c08_127_interrupt_policy(api: Api) -> None:
    client = api.client()
    thread = await api.thread("gate", overlap="interrupt")
    await client.post(f"/api/threads/{thread}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    response = await client.post(f"/api/threads/{thread}/messages", json={"content": "new"})
    assert response.status_code == 202
    api.gate.open()
    await api.settle(thread)
    stored = await messages(api, thread, "?order=asc&includeSilent=true")
    assert any(m["role"] == "assistant" and m["status"] == "failed" for m in stored)
    assert stored[-1]["content"] == "echo: new"


async def test_c06_036_terminate_cascade_over_http(api: Api) -> None:
    """C06-036: cascade terminates the child too; ``ThreadState.terminate()`` on the parent
    alone leaves the child live."""
    client = api.client()
    alice = USERS["alice"].id
    parent = await api.thread()
    child = await api.runtime.create_thread("echo", user_id=alice, parent=parent)
    response = await client.post(f"/api/threads/{parent}/terminate", json={"cascade": True})
    assert response.status_code == 200
    for thread in (parent, child.thread_id):
        assert (await client.get(f"/api/threads/{thread}")).json()["thread"]["terminated"]
    lone_parent = await api.thread()
    lone_child = await api.runtime.create_thread("echo", user_id=alice, parent=lone_parent)
    await (await api.runtime.thread(lone_parent)).terminate()
    detail = (await client.get(f"/api/threads/{lone_child.thread_id}")).json()
    assert detail["thread"]["terminated"] is None
