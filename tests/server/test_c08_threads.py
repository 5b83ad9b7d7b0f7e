"""Spec 08 §8.3: thread routes."""

from __future__ import annotations

import asyncio
import uuid

from conftest import USERS, Api


async def test_c08_008_create_thread(api: Api) -> None:
    response = await api.client().post("/api/threads", json={"agent_id": "echo"})
    assert response.status_code == 200
    body = response.json()
    assert uuid.UUID(body["threadId"]).version == 4
    assert body["agent_id"] == "echo"
    assert body["message"] == "Thread created successfully"
    assert body["initialMessageIds"] == []
    assert body["thread"]["status"]["state"] == "idle"
    assert body["thread"]["user_id"] == USERS["alice"].id


async def test_c08_009_agent_id_is_required(api: Api) -> None:
    response = await api.client().post("/api/threads", json={})
    assert response.status_code == 400
    assert response.json()["error"] == "Missing required field: agent_id"


async def test_c08_010_unknown_agent_is_404(api: Api) -> None:
    response = await api.client().post("/api/threads", json={"agent_id": "nope"})
    assert response.status_code == 404
    assert response.json() == {"error": "Agent not found: nope", "code": "agent_not_found"}


async def test_c08_011_tags_must_be_an_array(api: Api) -> None:
    response = await api.client().post("/api/threads", json={"agent_id": "echo", "tags": "x"})
    assert response.status_code == 400
    assert response.json()["error"] == "tags must be an array of strings"


async def test_c08_012_tags_must_be_strings(api: Api) -> None:
    response = await api.client().post("/api/threads", json={"agent_id": "echo", "tags": [1]})
    assert response.status_code == 400
    assert response.json()["error"] == "All tags must be strings"


async def test_c08_013_every_problem_is_reported(api: Api) -> None:
    response = await api.client().post(
        "/api/threads",
        json={"agent_id": "echo", "tags": "x", "initial_messages": [{"role": "bogus"}]},
    )
    assert response.status_code == 400
    fields = [d["field"] for d in response.json()["details"]]
    assert "tags" in fields and "initial_messages[0].role" in fields


async def test_c08_014_initial_messages_are_stored_in_order(api: Api) -> None:
    client = api.client()
    created = await client.post(
        "/api/threads",
        json={
            "agent_id": "echo",
            "initial_messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
            ],
        },
    )
    assert created.status_code == 200, created.text
    body = created.json()
    page = (await client.get(f"/api/threads/{body['threadId']}/messages?order=asc")).json()
    messages = page["messages"]
    assert [(m["role"], m["content"], m["status"]) for m in messages] == [
        ("user", "a", "completed"),
        ("assistant", "b", "completed"),
    ]
    assert messages[0]["created_at"] < messages[1]["created_at"]
    assert [m["id"] for m in messages] == body["initialMessageIds"]


async def test_c08_015_initial_messages_start_no_execution(api: Api) -> None:
    client = api.client()
    created = await client.post(
        "/api/threads",
        json={"agent_id": "echo", "initial_messages": [{"role": "user", "content": "hi"}]},
    )
    thread = created.json()["threadId"]
    await asyncio.sleep(1)
    detail = (await client.get(f"/api/threads/{thread}")).json()
    assert detail["status"]["state"] == "idle" and detail["status"]["reason"] is None
    page = (await client.get(f"/api/threads/{thread}/messages")).json()
    assert [m["role"] for m in page["messages"]] == ["user"]
    assert api.echo.requests == []


async def test_c08_016_create_hooks_run_for_each_initial_message(api: Api) -> None:
    items = [{"role": "user", "content": c} for c in ("one", "two", "three")]
    created = await api.client().post(
        "/api/threads", json={"agent_id": "hooked", "initial_messages": items}
    )
    assert created.status_code == 200, created.text
    assert api.created == ["one", "two", "three"]


async def test_c08_017_tool_result_without_a_call_creates_nothing(api: Api) -> None:
    client = api.client()
    response = await client.post(
        "/api/threads",
        json={
            "agent_id": "echo",
            "initial_messages": [{"role": "tool", "content": "x", "tool_call_id": "c1"}],
        },
    )
    assert response.status_code == 400
    assert [d["field"] for d in response.json()["details"]] == ["initial_messages[0].tool_call_id"]
    assert (await client.get("/api/threads")).json()["total"] == 0


async def test_initial_tool_calls_and_results_are_accepted(api: Api) -> None:
    """A tool result naming a call of an earlier assistant item of the same request."""
    call = {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": {"v": 1}}}
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "done", "tool_call_id": "c1", "tool_status": "success"},
    ]
    client = api.client()
    created = await client.post(
        "/api/threads", json={"agent_id": "echo", "initial_messages": items}
    )
    assert created.status_code == 200, created.text
    page = (await client.get(f"/api/threads/{created.json()['threadId']}/messages")).json()
    assert page["messages"][2]["tool_call_id"] == "c1"
    assert page["messages"][2]["tool_status"] == "success"


async def test_c08_018_data_is_an_alias_of_arguments(api: Api) -> None:
    client = api.client()
    created = await client.post("/api/threads", json={"agent_id": "echo", "data": {"x": 1}})
    detail = (await client.get(f"/api/threads/{created.json()['threadId']}")).json()
    assert detail["thread"]["arguments"] == {"x": 1}


async def test_c08_019_arguments_and_data_together_are_refused(api: Api) -> None:
    response = await api.client().post(
        "/api/threads", json={"agent_id": "echo", "arguments": {}, "data": {}}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "Use either arguments or data, not both"


async def test_c08_020_only_admins_create_threads_for_others(api: Api) -> None:
    body = {"agent_id": "echo", "user_id": USERS["bob"].id}
    refused = await api.client("alice").post("/api/threads", json=body)
    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    allowed = await api.client("root").post("/api/threads", json=body)
    assert allowed.status_code == 200
    assert allowed.json()["thread"]["user_id"] == USERS["bob"].id


async def test_c08_021_listed_thread_item(api: Api) -> None:
    thread = await api.thread()
    listing = (await api.client().get("/api/threads")).json()
    item = next(t for t in listing["threads"] if t["id"] == thread)
    assert item["executing"] is False and item["terminated"] is None
    assert item["origin_agent_id"] == "echo" and item["tags"] == []
    assert item["status"]["state"] == "idle"
    assert item["agent"]["name"] == "echo" and item["agent"]["side_b_backing"] == "human"


async def test_c08_022_list_pagination(api: Api) -> None:
    await api.thread()
    await api.thread()
    listing = (await api.client().get("/api/threads?limit=1")).json()
    assert len(listing["threads"]) == 1
    assert listing["total"] == 2 and listing["hasMore"] is True


async def test_c08_023_integer_parameters_are_checked(api: Api) -> None:
    response = await api.client().get("/api/threads?limit=abc")
    assert response.status_code == 400
    assert response.json()["error"] == "limit must be a non-negative integer"
    assert (await api.client().get("/api/threads?offset=-1")).status_code == 400


async def test_c08_024_enumerations_name_the_allowed_values(api: Api) -> None:
    response = await api.client().get("/api/threads?sort=newest")
    assert response.status_code == 400
    error = response.json()["error"]
    assert all(word in error for word in ("activity", "created", "oldest"))
    assert (await api.client().get("/api/threads?sort=OLDEST")).status_code == 200


async def test_c08_025_limit_is_capped_at_1000(api: Api) -> None:
    state = await api.runtime.create_thread("echo", user_id=USERS["alice"].id)
    # 1,200 threads through the store directly keeps the test fast; the route reads them.
    for _ in range(1199):
        await api.runtime.create_thread("echo", user_id=USERS["alice"].id)
    listing = (await api.client().get("/api/threads?limit=5000")).json()
    assert len(listing["threads"]) == 1000 and listing["total"] == 1200
    assert listing["hasMore"] is True
    assert state.thread_id in {t["id"] for t in listing["threads"]} or listing["total"] == 1200


async def test_c08_026_user_filter_is_ignored_for_non_admins(api: Api) -> None:
    await api.thread(user="alice")
    await api.thread(user="bob")
    listing = (await api.client("bob").get(f"/api/threads?user_id={USERS['alice'].id}")).json()
    assert listing["threads"] and all(t["user_id"] == USERS["bob"].id for t in listing["threads"])


async def test_c08_027_admin_filters_by_user(api: Api) -> None:
    mine = await api.thread(user="alice")
    await api.thread(user="bob")
    listing = (await api.client("root").get(f"/api/threads?user_id={USERS['alice'].id}")).json()
    assert [t["id"] for t in listing["threads"]] == [mine]


async def test_c08_028_terminated_filter(api: Api) -> None:
    client = api.client()
    ended = await api.thread()
    live = await api.thread()
    assert (await client.post(f"/api/threads/{ended}/terminate")).status_code == 200
    hidden = (await client.get("/api/threads?terminated=0")).json()["threads"]
    assert [t["id"] for t in hidden] == [live]
    only = (await client.get("/api/threads?terminated=1")).json()["threads"]
    assert [t["id"] for t in only] == [ended] and only[0]["terminated"] is not None


async def test_c08_029_parent_filter(api: Api) -> None:
    parent = await api.thread()
    child = await api.runtime.create_thread("echo", user_id=USERS["alice"].id, parent=parent)
    client = api.client()
    children = (await client.get(f"/api/threads?parent={parent}")).json()["threads"]
    assert [t["id"] for t in children] == [child.thread_id]
    roots = (await client.get("/api/threads?parent=none")).json()["threads"]
    assert roots and all(t["parent"] is None for t in roots)


async def test_c08_030_status_filter_shows_running_threads(api: Api) -> None:
    client = api.client()
    gated = await api.thread("gate")
    await client.post(f"/api/threads/{gated}/messages", json={"content": "hold"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    running = (await client.get("/api/threads?status=running")).json()["threads"]
    assert [t["id"] for t in running] == [gated]
    assert running[0]["executing"] is True
    api.gate.open()
    await api.settle(gated)
    assert (await client.get("/api/threads?status=running")).json()["threads"] == []


async def test_c08_031_search_matches_id_prefix_and_tags(api: Api) -> None:
    thread = await api.thread(tags=["name:Refund"])
    await api.thread()
    client = api.client()
    by_id = (await client.get(f"/api/threads?search={thread[:8]}")).json()["threads"]
    assert thread in [t["id"] for t in by_id]
    by_tag = (await client.get("/api/threads?search=refund")).json()["threads"]
    assert [t["id"] for t in by_tag] == [thread]


async def test_c08_032_owner_facet(api: Api) -> None:
    await api.thread(user="bob")
    await api.thread(user="alice")
    owners = (await api.client("bob").get("/api/threads/owners")).json()["owners"]
    assert len(owners) == 1
    assert owners[0]["user_id"] == USERS["bob"].id and owners[0]["thread_count"] == 1


async def test_c08_033_get_thread(api: Api) -> None:
    thread = await api.thread()
    detail = (await api.client().get(f"/api/threads/{thread}")).json()
    assert detail["thread"]["id"] == thread
    assert detail["agent"]["id"] == "echo"
    assert detail["stats"] == {"message_count": 0, "log_count": 0, "queued_count": 0}
    status = detail["status"]
    assert status["state"] == "idle" and status["reason"] is None
    assert isinstance(status["since"], int) and status["since"] > 10**15
    assert isinstance(detail["seq"], int)


async def test_c08_039_patch_tags(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().patch(f"/api/threads/{thread}", json={"tags": ["a", "b"]})
    assert response.status_code == 200
    body = response.json()
    assert body["tags"] == ["a", "b"]
    assert {"agent_id", "env_types", "created_at"} <= set(body) and "env" not in body


async def test_c08_040_patch_needs_a_field(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().patch(f"/api/threads/{thread}", json={})
    assert response.status_code == 400
    assert response.json()["error"] == "No valid fields to update"


async def test_c08_041_agent_without_a_human_side_cannot_be_assigned(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().patch(f"/api/threads/{thread}", json={"agent_id": "bot_only"})
    assert response.status_code == 400
    assert (
        response.json()["error"]
        == "Only agents with a human-backed side can be assigned to threads"
    )


async def test_c08_042_variables_are_write_only(api: Api) -> None:
    thread = await api.thread()
    client = api.client()
    secret = "v-very-secret-value"
    response = await client.patch(
        f"/api/threads/{thread}",
        json={"env_patch": {"K": secret}, "env_type_patch": {"K": "text"}},
    )
    assert response.status_code == 200, response.text
    assert response.json()["env_types"] == {"K": "text"}
    reads = [
        response,
        await client.get(f"/api/threads/{thread}"),
        await client.get("/api/threads"),
        await client.get(f"/api/threads/{thread}/messages"),
    ]
    assert all(secret not in r.text for r in reads)


async def test_c08_043_type_patch_needs_a_variable(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().patch(
        f"/api/threads/{thread}", json={"env_type_patch": {"MISSING": "text"}}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "env_type_patch.MISSING has no matching env value"


async def test_patch_writes_the_agent_and_the_fields_in_one_transaction(api: Api) -> None:
    """A refused variable type leaves the new agent unwritten too; an accepted patch
    writes both (one store transaction, ``Runtime.update_thread``)."""
    thread = await api.thread()
    client = api.client()
    refused = await client.patch(
        f"/api/threads/{thread}",
        json={"agent_id": "gate", "env_type_patch": {"MISSING": "text"}},
    )
    assert refused.status_code == 400
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.agent_id == "echo"
    response = await client.patch(
        f"/api/threads/{thread}", json={"agent_id": "gate", "tags": ["x"]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["agent_id"] == "gate" and response.json()["tags"] == ["x"]
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and (row.agent_id, row.tags) == ("gate", ("x",))


async def test_c08_044_delete_removes_descendants_deepest_first(api: Api) -> None:
    root = await api.thread()
    alice = USERS["alice"].id
    child = await api.runtime.create_thread("echo", user_id=alice, parent=root)
    grandchild = await api.runtime.create_thread("echo", user_id=alice, parent=child.thread_id)
    client = api.client()
    response = await client.delete(f"/api/threads/{root}")
    assert response.status_code == 200
    body = response.json()
    assert body["deletedThreadIds"] == [grandchild.thread_id, child.thread_id, root]
    assert body["deletedCount"] == 3 and body["success"] is True
    assert (await client.get(f"/api/threads/{child.thread_id}")).status_code == 404
    assert (await client.delete(f"/api/threads/{root}")).status_code == 404


async def test_delete_of_a_running_thread_aborts_its_run(api: Api) -> None:
    """Spec 08 §8.3.6 step 1: the execution is aborted, the thread vanishes."""
    client = api.client()
    gated = await api.thread("gate")
    await client.post(f"/api/threads/{gated}/messages", json={"content": "hold"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    assert api.runtime.running(gated)
    assert (await client.delete(f"/api/threads/{gated}")).status_code == 200
    assert not api.runtime.running(gated)
    assert (await client.get(f"/api/threads/{gated}")).status_code == 404


async def test_c08_126_overlap_reject(api: Api) -> None:
    client = api.client()
    gated = await api.thread("gate")
    patched = await client.patch(f"/api/threads/{gated}", json={"overlap": "reject"})
    assert patched.status_code == 200 and patched.json()["overlap"] == "reject"
    await client.post(f"/api/threads/{gated}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    refused = await client.post(f"/api/threads/{gated}/messages", json={"content": "second"})
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "Thread is running (overlap policy: reject)",
        "code": "thread_running",
    }
    api.gate.open()
    await api.settle(gated)
    page = (await client.get(f"/api/threads/{gated}/messages")).json()
    assert "second" not in [m["content"] for m in page["messages"]]
    assert (
        await client.post(f"/api/threads/{gated}/messages", json={"content": "third"})
    ).status_code == 202


async def test_c08_128_unknown_overlap_is_400(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().patch(f"/api/threads/{thread}", json={"overlap": "drop"})
    assert response.status_code == 400
    assert response.json()["error"] == "overlap must be one of enqueue, reject, interrupt, or null"


async def test_last_activity_and_preview_follow_sends_and_runs(api: Api) -> None:
    """Spec 08 §8.2.2: the preview is the newest visible user text, collapsed and cut to
    140 characters; a child's activity bumps its parent."""
    client = api.client()
    thread = await api.thread()
    long_text = "word   " * 60
    await client.post(f"/api/threads/{thread}/messages", json={"content": long_text})
    await api.settle(thread)
    item = (await client.get("/api/threads")).json()["threads"][0]
    preview = item["last_message_preview"]
    assert len(preview) == 140 and preview.endswith("…") and "  " not in preview
    assert item["last_message_at"] >= item["created_at"]
    assert item["last_activity_at"] >= item["created_at"]


async def test_c08_134_tag_filter_is_exact_and_paged(api: Api) -> None:
    exact = await api.thread(tags=["a"])
    longer = await api.thread(tags=["a-b"])
    await api.thread(tags=["A"])
    client = api.client()
    page = (await client.get("/api/threads?tag=a")).json()
    assert [t["id"] for t in page["threads"]] == [exact] and page["total"] == 1
    page = (await client.get("/api/threads?tag=a-b")).json()
    assert [t["id"] for t in page["threads"]] == [longer]
    await api.thread(tags=["x"])
    await api.thread(tags=["x", "y"])
    page = (await client.get("/api/threads?tag=x&limit=1")).json()
    assert len(page["threads"]) == 1 and page["total"] == 2 and page["hasMore"] is True
