"""Spec 10 §10.4, §10.6: roles, permissions and thread ownership over real HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import USERS, Api, spawning
from threadloom.server.settings import ServerSettings

ADMIN_TOKEN = "a" * 16 + "-static-admin-token-" + "b" * 16


async def test_c10_010_foreign_thread_is_403_and_admin_sees_it(api: Api) -> None:
    thread = await api.thread(user="alice")
    bob = await api.client("bob").get(f"/api/threads/{thread}")
    assert bob.status_code == 403
    assert bob.json() == {
        "error": "Forbidden: You don't have access to this thread",
        "code": "forbidden",
    }
    root = await api.client("root").get(f"/api/threads/{thread}")
    assert root.status_code == 200
    assert root.json()["thread"]["user_id"] == USERS["alice"].id


async def test_c10_011_listing_shows_only_own_threads(api: Api) -> None:
    alice_threads = {await api.thread(user="alice") for _ in range(2)}
    bob_thread = await api.thread(user="bob")
    bob = api.client("bob")
    for path in ("/api/threads", f"/api/threads?user_id={USERS['alice'].id}"):
        listed = (await bob.get(path)).json()
        assert [t["id"] for t in listed["threads"]] == [bob_thread], path
        assert listed["total"] == 1
    everything = (await api.client("root").get("/api/threads")).json()
    assert {t["id"] for t in everything["threads"]} == alice_threads | {bob_thread}


async def test_c10_013_static_admin_token_creates_ownerless_threads(
    make_api: Callable[..., Any],
) -> None:
    api = await make_api(ServerSettings(auth="required", admin_token=ADMIN_TOKEN))
    admin = api.client(None, Authorization=f"Bearer {ADMIN_TOKEN}")
    created = await admin.post("/api/threads", json={"agent_id": "echo"})
    assert created.status_code == 200, created.text
    thread = created.json()["threadId"]
    assert (await admin.get(f"/api/threads/{thread}")).json()["thread"]["user_id"] is None
    assert (await api.client("alice").get(f"/api/threads/{thread}")).status_code == 403
    assert (await api.client("root").get(f"/api/threads/{thread}")).status_code == 200


async def test_c10_014_catalog_definitions_are_admin_only(api: Api) -> None:
    denied = await api.client("alice").get("/api/prompts")
    assert denied.status_code == 403
    assert denied.json() == {"error": "Forbidden: Admin access required", "code": "admin_required"}
    assert (await api.client("root").get("/api/prompts")).status_code == 200
    assert (await api.client("alice").get("/api/agents")).status_code == 200


async def test_c10_015_api_role_needs_the_logs_permission(api: Api) -> None:
    thread = await api.thread(user="apiu")
    client = api.client("apiu")
    denied = await client.get(f"/api/threads/{thread}/logs")
    assert denied.status_code == 403
    assert denied.json() == {
        "error": "Forbidden: 'logs' access required",
        "code": "permission_required",
    }
    granted = await api.client("root").patch(
        f"/api/users/{USERS['apiu'].id}", json={"permissions": ["logs"]}
    )
    assert granted.status_code == 200
    assert granted.json()["user"]["permissions"] == ["logs"]
    assert (await client.get(f"/api/threads/{thread}/logs")).status_code == 200


async def test_user_role_loses_logs_with_an_explicit_list(api: Api) -> None:
    thread = await api.thread(user="alice")
    client = api.client("alice")
    assert (await client.get(f"/api/threads/{thread}/logs")).status_code == 200
    await api.client("root").patch(f"/api/users/{USERS['alice'].id}", json={"permissions": []})
    assert (await client.get(f"/api/threads/{thread}/logs")).status_code == 403


async def test_deleted_owner_leaves_thread_to_admins(api: Api) -> None:
    thread = await api.thread(user="bob")
    await api.client("root").delete(f"/api/users/{USERS['bob'].id}")
    row = (await api.client("root").get(f"/api/threads/{thread}")).json()["thread"]
    assert row["user_id"] == USERS["bob"].id
    assert (await api.client("alice").get(f"/api/threads/{thread}")).status_code == 403


async def test_c10_012_child_created_by_a_run_inherits_the_owner(
    make_api: Callable[..., Any],
) -> None:
    """Spec 10 §10.6 rule 2: the child a run of alice's thread creates is alice's."""
    api: Api = await make_api(extra=spawning())
    parent = await api.thread("spawner", user="alice")
    alice = api.client("alice")
    sent = await alice.post(f"/api/threads/{parent}/messages", json={"content": "go"})
    assert sent.status_code == 202, sent.text
    await api.settle(parent)
    registry = (await alice.get(f"/api/threads/{parent}/subagents")).json()["subagents"]
    assert [e["relationship"] for e in registry] == ["helper"]
    child = registry[0]["id"]
    await api.settle(child)
    await api.settle(parent)  # woken by the child's result
    seen = await alice.get(f"/api/threads/{child}")
    assert seen.status_code == 200, seen.text
    assert seen.json()["thread"]["user_id"] == USERS["alice"].id
    assert seen.json()["thread"]["parent"] == parent
    bob = await api.client("bob").get(f"/api/threads/{child}")
    assert bob.status_code == 403
    assert bob.json()["error"] == "Forbidden: You don't have access to this thread"
    listed = (await api.client("bob").get("/api/threads")).json()["threads"]
    assert child not in [t["id"] for t in listed]
