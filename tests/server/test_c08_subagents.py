"""Spec 08 §8.9 and §8.2.7 with children the engine created: the parent's model calls
``subagent_create`` (non-blocking), each child runs its session and delivers its result;
then the registry route and the parent's message records are read over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

from family import DELIVERED, add_family

from conftest import Api

ENTRY_KEYS = {
    "id",
    "relationship",
    "agent_name",
    "title",
    "threadName",
    "status",
    "blocking",
    "resumable",
    "owner",
    "description",
    "createdAt",
    "spawnGroupId",
}
PROJECTED = {
    "subagent_name",
    "subagent_title",
    "subagent_description",
    "subagent_status",
    "subagent_relationship",
    "subagent_thread_name",
    "subagent_spawn_group_id",
    "subagent_blocking",
}


async def parent_messages(api: Api, thread: str) -> list[dict[str, Any]]:
    response = await api.client().get(
        f"/api/threads/{thread}/messages?order=asc&includeSilent=true&limit=1000"
    )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def ask(api: Api, thread: str, text: str) -> None:
    """Send ``text`` and wait until the child it spawns has delivered its result and the
    parent has answered that delivery."""
    response = await api.client().post(f"/api/threads/{thread}/messages", json={"content": text})
    assert response.status_code == 202, response.text
    async with asyncio.timeout(10):
        while True:
            await api.settle(thread)
            answers = [m["content"] or "" for m in await parent_messages(api, thread)]
            if any(a.startswith("noted: ") and a.endswith(f"scouted {text}") for a in answers):
                return
            await asyncio.sleep(0.02)


async def test_registry_route_lists_engine_created_children_in_creation_order(api: Api) -> None:
    add_family(api)
    client = api.client()
    parent = await api.thread("lead")
    await ask(api, parent, "north")
    await ask(api, parent, "south")

    response = await client.get(f"/api/threads/{parent}/subagents")
    assert response.status_code == 200
    entries = response.json()["subagents"]
    assert len(entries) == 2
    assert all(set(entry) == ENTRY_KEYS for entry in entries)
    assert entries[0]["createdAt"] < entries[1]["createdAt"]
    assert [e["threadName"] for e in entries] == ["north", "south"]

    records = await parent_messages(api, parent)
    creates = [m for m in records if m["role"] == "tool" and m["name"] == "subagent_create"]
    assert [m["subagent_id"] for m in creates] == [e["id"] for e in entries]
    callers = [m for m in records if m["role"] == "assistant" and m["tool_calls"]]
    for entry, caller in zip(entries, callers, strict=True):
        assert isinstance(entry["createdAt"], int)
        assert {k: v for k, v in entry.items() if k not in ("id", "createdAt")} == {
            "relationship": "scouting",
            "agent_name": "scout",
            "title": "Scout",
            "threadName": entry["threadName"],
            "status": "idle",
            "blocking": False,
            "resumable": True,
            "owner": "a",
            "description": "Scouts one topic",
            "spawnGroupId": caller["id"],  # the parent message whose tool call created it
        }
        child = (await client.get(f"/api/threads/{entry['id']}")).json()
        assert child["thread"]["parent"] == parent
        assert (child["status"]["state"], child["status"]["reason"]) == ("idle", "session_stop")
        assert (await client.get(f"/api/threads/{entry['id']}/subagents")).json() == {
            "subagents": []
        }

    # §8.2.3: the create results and the delivered results carry the child's id and the
    # eight fields projected from its entry; every other record carries none of them.
    delivered = [m for m in records if (m["content"] or "").startswith(DELIVERED)]
    assert [m["subagent_id"] for m in delivered] == [e["id"] for e in entries]
    assert all(m["silent"] and m["role"] == "user" for m in delivered)
    by_id = {e["id"]: e for e in entries}
    for record in creates + delivered:
        entry = by_id[record["subagent_id"]]
        assert {k: record[k] for k in PROJECTED} == {
            "subagent_name": "scout",
            "subagent_title": "Scout",
            "subagent_description": "Scouts one topic",
            "subagent_status": "idle",
            "subagent_relationship": "scouting",
            "subagent_thread_name": entry["threadName"],
            "subagent_spawn_group_id": entry["spawnGroupId"],
            "subagent_blocking": False,
        }
    others = [m for m in records if m["subagent_id"] is None]
    assert others and all(not PROJECTED & set(m) for m in others)
    assert len(others) + len(creates) + len(delivered) == len(records)


async def test_registry_route_refuses_other_users_and_unknown_threads(api: Api) -> None:
    add_family(api)
    parent = await api.thread("lead")
    await ask(api, parent, "east")
    assert (await api.client("root").get(f"/api/threads/{parent}/subagents")).status_code == 200
    assert (await api.client("bob").get(f"/api/threads/{parent}/subagents")).status_code == 403
    assert (await api.client(None).get(f"/api/threads/{parent}/subagents")).status_code == 401
    missing = "00000000-0000-4000-8000-000000000000"
    assert (await api.client().get(f"/api/threads/{missing}/subagents")).status_code == 404
