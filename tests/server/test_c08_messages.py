"""Spec 08 §8.4: reading, sending, editing and deleting messages."""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import httpx

from conftest import Api, last_user_text
from threadloom.records import ToolCall, ToolCallFunction


async def seed(api: Api, thread: str, items: list[dict[str, Any]]) -> list[str]:
    """Store messages at rest through ThreadState (the API's own read side is under test)."""
    state = await api.runtime.thread(thread)
    return [(await state.inject_message(item)).id for item in items]


async def five(api: Api) -> tuple[str, list[str]]:
    thread = await api.thread()
    ids = await seed(api, thread, [{"role": "user", "content": f"m{i}"} for i in range(1, 6)])
    return thread, ids


async def page(client: httpx.AsyncClient, thread: str, query: str = "") -> dict[str, Any]:
    response = await client.get(f"/api/threads/{thread}/messages{query}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids_of(body: dict[str, Any]) -> list[str]:
    return [m["id"] for m in body["messages"]]


async def test_c08_046_fresh_thread_has_no_messages(api: Api) -> None:
    thread = await api.thread()
    body = await page(api.client(), thread)
    assert body["messages"] == [] and body["total"] == 0 and body["hasMore"] is False
    assert isinstance(body["seq"], int)


async def test_c08_047_desc_page_is_chronological(api: Api) -> None:
    thread, m = await five(api)
    body = await page(api.client(), thread, "?limit=2")
    assert ids_of(body) == [m[3], m[4]]
    assert body["total"] == 5 and body["hasMore"] is True


async def test_c08_048_desc_offset(api: Api) -> None:
    thread, m = await five(api)
    body = await page(api.client(), thread, "?limit=2&offset=4")
    assert ids_of(body) == [m[0]] and body["hasMore"] is False


async def test_c08_049_asc_page(api: Api) -> None:
    thread, m = await five(api)
    body = await page(api.client(), thread, "?order=asc&limit=2")
    assert ids_of(body) == [m[0], m[1]] and body["hasMore"] is True


async def test_c08_050_asc_offset(api: Api) -> None:
    thread, m = await five(api)
    body = await page(api.client(), thread, "?order=asc&limit=2&offset=4")
    assert ids_of(body) == [m[4]] and body["hasMore"] is False


async def test_c08_051_limit_zero(api: Api) -> None:
    thread, _ = await five(api)
    body = await page(api.client(), thread, "?limit=0")
    assert body["messages"] == [] and body["total"] == 5 and body["hasMore"] is True


async def test_c08_052_order_is_case_insensitive_and_checked(api: Api) -> None:
    thread, m = await five(api)
    client = api.client()
    assert ids_of(await page(client, thread, "?order=DESC&limit=1")) == [m[4]]
    bad = await client.get(f"/api/threads/{thread}/messages?order=down")
    assert bad.status_code == 400
    assert bad.json()["error"] == "order must be 'asc' or 'desc'"


async def test_c08_053_silent_messages(api: Api) -> None:
    thread = await api.thread()
    ids = await seed(
        api,
        thread,
        [
            {"role": "user", "content": "a"},
            {"role": "system", "content": "quiet", "silent": True},
            {"role": "user", "content": "b"},
        ],
    )
    client = api.client()
    visible = await page(client, thread)
    assert visible["total"] == 2 and ids[1] not in ids_of(visible)
    everything = await page(client, thread, "?includeSilent=true")
    assert everything["total"] == 3
    assert next(x for x in everything["messages"] if x["id"] == ids[1])["silent"] is True


async def test_c08_054_depth_filter(api: Api) -> None:
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    top = await state.inject_message(role="user", content="top")
    deep = await api.runtime.store.insert_message(
        thread,
        top.model_copy(update={"id": str(uuid.uuid4()), "depth": 1, "parent_id": top.id}),
    )
    deep_id = deep[0].id if isinstance(deep, tuple) else deep.id
    client = api.client()
    assert deep_id not in ids_of(await page(client, thread))
    found = await page(client, thread, "?depth=1")
    assert next(x for x in found["messages"] if x["id"] == deep_id)["depth"] == 1


async def test_c08_055_non_numeric_depth_is_400(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().get(f"/api/threads/{thread}/messages?depth=x")
    assert response.status_code == 400
    assert response.json()["error"] == "depth must be a non-negative integer"


async def gated_with_sends(api: Api, *texts: str) -> tuple[str, list[str]]:
    """A ``gate`` thread held in its first model request, then ``texts`` sent."""
    client = api.client()
    thread = await api.thread("gate")
    await client.post(f"/api/threads/{thread}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    sent = []
    for text in texts:
        response = await client.post(f"/api/threads/{thread}/messages", json={"content": text})
        assert response.status_code == 202
        sent.append(response.json()["messageId"])
    return thread, sent


async def test_c08_056_queue_entries_read_as_pending_last(api: Api) -> None:
    thread, (s1, s2) = await gated_with_sends(api, "s1", "s2")
    body = await page(api.client(), thread)
    assert ids_of(body)[-2:] == [s1, s2]
    for message in body["messages"][-2:]:
        assert message["status"] == "pending"
        meta = message["metadata"]
        assert (meta["queued"], meta["queue_status"], meta["queue_source"]) == (
            True,
            "queued",
            "api",
        )
    assert body["total"] == len(body["messages"])


async def test_c08_057_asc_starts_with_stored_messages(api: Api) -> None:
    thread, _ = await gated_with_sends(api, "s1", "s2")
    body = await page(api.client(), thread, "?limit=1&order=asc")
    first = body["messages"][0]
    assert first["content"] == "first" and first["status"] == "completed"


async def test_c08_058_ids_mode(api: Api) -> None:
    thread, m = await five(api)
    body = await page(api.client(), thread, f"?ids={m[2]},{m[0]},")
    assert ids_of(body) == [m[0], m[2]] and body["total"] == 2 and body["hasMore"] is False


async def test_c08_059_too_many_ids(api: Api) -> None:
    thread = await api.thread()
    many = ",".join(str(uuid.uuid4()) for _ in range(201))
    response = await api.client().get(f"/api/threads/{thread}/messages?ids={many}")
    assert response.status_code == 400
    assert response.json()["error"] == "Too many message IDs requested"


async def test_c08_060_blank_ids_mean_pagination(api: Api) -> None:
    thread, _ = await five(api)
    client = api.client()
    assert await page(client, thread, "?ids=,%20,") == await page(client, thread)


async def test_c08_061_ids_mode_finds_queue_entries(api: Api) -> None:
    thread, (queued,) = await gated_with_sends(api, "later")
    body = await page(api.client(), thread, f"?ids={queued}")
    assert ids_of(body) == [queued] and body["messages"][0]["metadata"]["queued"] is True


def call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, function=ToolCallFunction(name="lookup", arguments="{}"))


async def work_history(api: Api) -> tuple[str, list[str]]:
    thread = await api.thread()
    ids = await seed(
        api,
        thread,
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
            {"role": "tool", "content": "r1", "tool_call_id": "c1"},
            {"role": "tool", "content": "r2", "tool_call_id": "c2"},
            {"role": "assistant", "content": "done"},
        ],
    )
    return thread, ids


async def test_c08_062_workblock_expansion(api: Api) -> None:
    thread, ids = await work_history(api)
    body = await page(api.client(), thread, f"?ids={ids[3]}&includeWorkblocks=true")
    assert ids_of(body) == ids[1:4]


async def test_c08_063_non_work_message_comes_alone(api: Api) -> None:
    thread, ids = await work_history(api)
    body = await page(api.client(), thread, f"?ids={ids[0]}&includeWorkblocks=true")
    assert ids_of(body) == [ids[0]]


async def test_c08_064_absent_metadata_and_projections(api: Api) -> None:
    thread, _ = await five(api)
    record = (await page(api.client(), thread))["messages"][0]
    assert "metadata" not in record
    assert record["subagent_id"] is None and "subagent_name" not in record


async def test_c08_065_send_is_queued(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["messageId"] == body["queueId"]
    assert uuid.UUID(body["messageId"]).version == 4


async def test_c08_066_send_runs_a_turn(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    sent = (await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})).json()
    await api.settle(thread)
    messages = (await page(client, thread, "?order=asc"))["messages"]
    user, reply = messages
    assert user["id"] == sent["messageId"] and user["status"] == "completed"
    assert "queued" not in (user.get("metadata") or {})
    assert reply["role"] == "assistant" and reply["content"] == "echo: hi"
    assert reply["created_at"] > user["created_at"]
    status = (await client.get(f"/api/threads/{thread}")).json()["status"]
    assert (status["state"], status["reason"]) == ("idle", "stop_on_response")


async def test_c08_067_blank_content_is_refused(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(f"/api/threads/{thread}/messages", json={"content": "  "})
    assert response.status_code == 400
    assert response.json()["error"] == "Message content or attachments required"


async def test_c08_068_tool_role_is_refused(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(
        f"/api/threads/{thread}/messages", json={"content": "x", "role": "tool"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "role must be one of user, assistant, system"


async def test_c08_069_reserved_metadata_is_refused(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().post(
        f"/api/threads/{thread}/messages", json={"content": "x", "metadata": {"queued": False}}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "metadata.queued is reserved"


async def test_c08_070_send_joins_the_running_execution(api: Api) -> None:
    thread, _ = await gated_with_sends(api, "m2")
    assert api.runtime.running(thread)
    api.gate.open()
    await api.settle(thread)
    assert len(api.gate.requests) == 2
    assert last_user_text(api.gate.requests[1]) == "m2"
    contents = [m["content"] for m in (await page(api.client(), thread, "?order=asc"))["messages"]]
    assert contents == ["first", "echo: first", "m2", "echo: m2"]


async def test_c08_071_twenty_sends_keep_their_order(api: Api) -> None:
    texts = [f"x{i}" for i in range(1, 21)]
    thread, _ = await gated_with_sends(api, *texts)
    api.gate.open()
    await api.settle(thread)
    body = await page(api.client(), thread, "?order=asc&limit=1000")
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    assert users == ["first", *texts]


async def test_c08_072_client_message_id_deduplicates(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    body = {"content": "hi", "metadata": {"client_message_id": "c1"}}
    first = await client.post(f"/api/threads/{thread}/messages", json=body)
    second = await client.post(f"/api/threads/{thread}/messages", json=body)
    assert first.status_code == 202
    assert second.status_code == 200 and second.json()["status"] == "duplicate"
    assert second.json()["messageId"] == first.json()["messageId"]
    await api.settle(thread)
    third = await client.post(f"/api/threads/{thread}/messages", json=body)
    assert third.status_code == 200 and third.json()["queueId"] is None
    stored = (await page(client, thread))["messages"]
    assert [m["content"] for m in stored].count("hi") == 1


async def test_c08_073_silent_send(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "s", "silent": True})
    await api.settle(thread)
    assert "s" not in [m["content"] for m in (await page(client, thread))["messages"]]
    everything = (await page(client, thread, "?includeSilent=true"))["messages"]
    assert next(m for m in everything if m["content"] == "s")["silent"] is True


PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def test_c08_074_bad_attachment_stores_nothing(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    response = await client.post(
        f"/api/threads/{thread}/messages",
        json={
            "content": "x",
            "attachments": [{"name": "a.png", "mimeType": "image/png", "data": "%%%"}],
        },
    )
    assert response.status_code == 400
    assert "attachments[0].data" in [d["field"] for d in response.json()["details"]]
    state = await api.runtime.thread(thread)
    assert (await state.get_file_stats()).file_count == 0


async def test_c08_075_image_attachment_is_stored_as_a_file(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    data = base64.b64encode(PNG).decode()
    response = await client.post(
        f"/api/threads/{thread}/messages",
        json={
            "content": "look",
            "attachments": [{"name": "dot.png", "mimeType": "image/png", "data": data}],
        },
    )
    assert response.status_code == 202, response.text
    await api.settle(thread)
    user = (await page(client, thread, "?order=asc"))["messages"][0]
    ref = user["attachments"][0]
    assert ref["type"] == "file" and ref["mimeType"] == "image/png" and ref["size"] == len(PNG)
    assert (ref["width"], ref["height"]) == (1, 1)
    state = await api.runtime.thread(thread)
    assert await state.read_file(ref["path"]) == PNG


async def test_c08_079_patch_message_content(api: Api) -> None:
    thread, m = await five(api)
    response = await api.client().patch(
        f"/api/threads/{thread}/messages/{m[0]}", json={"content": "edited"}
    )
    assert response.status_code == 200
    assert response.json()["success"] is True
    assert response.json()["message"]["content"] == "edited"


async def test_c08_080_patch_content_must_be_a_string(api: Api) -> None:
    thread, m = await five(api)
    response = await api.client().patch(
        f"/api/threads/{thread}/messages/{m[0]}", json={"content": 5}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "content must be a string"


async def test_c08_081_unknown_message_is_404_after_validation(api: Api) -> None:
    thread = await api.thread()
    client = api.client()
    unknown = f"/api/threads/{thread}/messages/{uuid.uuid4()}"
    missing = await client.patch(unknown, json={"content": "x"})
    assert missing.status_code == 404
    assert missing.json() == {"error": "Message not found", "code": "message_not_found"}
    assert (await client.patch(unknown, json={"content": 5})).status_code == 400


async def test_c08_082_metadata_is_merged(api: Api) -> None:
    thread = await api.thread()
    (mid,) = await seed(
        api, thread, [{"role": "user", "content": "x", "metadata": {"a": 1, "b": 2}}]
    )
    response = await api.client().patch(
        f"/api/threads/{thread}/messages/{mid}", json={"metadata": {"b": None, "c": 3}}
    )
    assert response.status_code == 200, response.text
    assert response.json()["message"]["metadata"] == {"a": 1, "c": 3}


async def test_c08_083_patch_a_queue_entry_before_delivery(api: Api) -> None:
    thread, (queued,) = await gated_with_sends(api, "tpyo")
    response = await api.client().patch(
        f"/api/threads/{thread}/messages/{queued}", json={"content": "fixed"}
    )
    assert response.status_code == 200, response.text
    api.gate.open()
    await api.settle(thread)
    stored = next(m for m in (await page(api.client(), thread))["messages"] if m["id"] == queued)
    assert stored["content"] == "fixed" and stored["status"] == "completed"


async def test_c08_084_message_being_generated_is_409(api: Api) -> None:
    client = api.client()
    thread, _ = await gated_with_sends(api)
    pending = [
        m
        for m in (await page(client, thread))["messages"]
        if m["role"] == "assistant" and m["status"] == "pending"
    ]
    assert pending, "the gated run holds a pending assistant message"
    path = f"/api/threads/{thread}/messages/{pending[0]['id']}"
    patched = await client.patch(path, json={"content": "x"})
    deleted = await client.delete(path)
    assert patched.status_code == deleted.status_code == 409
    assert patched.json()["code"] == deleted.json()["code"] == "message_generating"


async def test_c08_085_delete_cascades_to_tool_results(api: Api) -> None:
    thread, ids = await work_history(api)
    client = api.client()
    response = await client.delete(f"/api/threads/{thread}/messages/{ids[1]}")
    assert response.status_code == 200
    assert response.json() == {"success": True, "deletedIds": ids[1:4]}
    assert ids_of(await page(client, thread)) == [ids[0], ids[4]]


async def test_c08_087_second_delete_is_404(api: Api) -> None:
    thread, m = await five(api)
    client = api.client()
    assert (await client.delete(f"/api/threads/{thread}/messages/{m[0]}")).status_code == 200
    again = await client.delete(f"/api/threads/{thread}/messages/{m[0]}")
    assert again.status_code == 404 and again.json()["error"] == "Message not found"


async def test_c08_088_deleted_queue_entry_is_never_delivered(api: Api) -> None:
    thread, (queued,) = await gated_with_sends(api, "never")
    response = await api.client().delete(f"/api/threads/{thread}/messages/{queued}")
    assert response.json() == {"success": True, "deletedIds": [queued]}
    api.gate.open()
    await api.settle(thread)
    assert all(last_user_text(r) != "never" for r in api.gate.requests)
    assert queued not in ids_of(await page(api.client(), thread, "?includeSilent=true"))
