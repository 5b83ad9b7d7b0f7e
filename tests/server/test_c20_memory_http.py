"""The memory store over HTTP and from tools (spec 20 §20.7, §20.8) on a real server and
Runtime (users alice and bob, admin root), both stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import USERS, last_user_text
from threadloom import Agent, Side, ThreadState
from threadloom.define import Model, Prompt, hook, tool
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

ITEMS = "/api/memory/items"


async def test_c20_011_put_get_search_delete_over_http(make_api: Callable[..., Any]) -> None:
    """C20-011: PUT /api/memory/items stores an item in the caller's memory and answers it;
    GET reads it by namespace (labels joined by '.') and key; POST /api/memory/search and
    /api/memory/namespaces find it; DELETE removes it (then 404
    ``memory_item_not_found``); a stale ``if_version`` → 409 ``memory_conflict`` with the
    stored version."""
    api = await make_api()
    alice = api.client("alice")
    put = await alice.put(
        ITEMS,
        json={"namespace": ["prefs", "ui"], "key": "theme", "value": {"dark": True}, "ttl_s": 60},
    )
    assert put.status_code == 200, put.text
    item = put.json()["item"]
    assert item["namespace"] == ["prefs", "ui"] and item["value"] == {"dark": True}
    assert item["version"] == 1 and item["expires_at"] == item["updated_at"] + 60_000_000
    got = await alice.get(ITEMS, params={"namespace": "prefs.ui", "key": "theme"})
    assert got.status_code == 200 and got.json()["item"] == item
    found = await alice.post("/api/memory/search", json={"namespace_prefix": ["prefs"]})
    assert found.status_code == 200 and found.json()["items"] == [item]
    filtered = await alice.post("/api/memory/search", json={"filter": {"dark": False}})
    assert filtered.json()["items"] == []
    spaces = await alice.post("/api/memory/namespaces", json={})
    assert spaces.json()["namespaces"] == [["prefs", "ui"]]
    stale = await alice.put(
        ITEMS,
        json={"namespace": ["prefs", "ui"], "key": "theme", "value": {}, "if_version": 5},
    )
    assert stale.status_code == 409 and stale.json()["code"] == "memory_conflict"
    assert stale.json()["version"] == 1
    conflict = await alice.delete(
        ITEMS, params={"namespace": "prefs.ui", "key": "theme", "if_version": "4"}
    )
    assert conflict.status_code == 409
    deleted = await alice.delete(ITEMS, params={"namespace": "prefs.ui", "key": "theme"})
    assert deleted.status_code == 200 and deleted.json() == {"success": True}
    for method in ("GET", "DELETE"):
        missing = await alice.request(
            method, ITEMS, params={"namespace": "prefs.ui", "key": "theme"}
        )
        assert (missing.status_code, missing.json()["code"]) == (404, "memory_item_not_found")


async def test_c20_012_a_users_memory_is_invisible_to_other_users(
    make_api: Callable[..., Any],
) -> None:
    """C20-012: alice and bob put the same namespace and key; each reads, searches and
    lists only their own; bob naming alice's ``user_id`` → 403 on every route, and
    deleting his own leaves hers; an admin reads alice's with ``user_id`` and an agent's
    with ``agent_id`` (``user_id`` beside it is not read), which a user may not (403)."""
    api = await make_api()
    alice, bob, root = api.client("alice"), api.client("bob"), api.client("root")
    for who, client in (("alice", alice), ("bob", bob)):
        put = await client.put(ITEMS, json={"namespace": ["p"], "key": "k", "value": {"who": who}})
        assert put.status_code == 200, put.text
    for who, client in (("alice", alice), ("bob", bob)):
        got = await client.get(ITEMS, params={"namespace": "p", "key": "k"})
        assert got.json()["item"]["value"] == {"who": who}
        items = (await client.post("/api/memory/search", json={})).json()["items"]
        assert [i["value"] for i in items] == [{"who": who}]
    theirs = {"user_id": USERS["alice"].id}
    refused = [
        await bob.get(ITEMS, params={"namespace": "p", "key": "k", **theirs}),
        await bob.delete(ITEMS, params={"namespace": "p", "key": "k", **theirs}),
        await bob.put(ITEMS, json={"namespace": ["p"], "key": "k", "value": {}, **theirs}),
        await bob.post("/api/memory/search", json=theirs),
        await bob.post("/api/memory/namespaces", json=theirs),
        await bob.post("/api/memory/search", json={"agent_id": "echo"}),
    ]
    assert [r.status_code for r in refused] == [403] * 6
    assert all(r.json()["code"] == "forbidden" for r in refused)
    own = await alice.get(ITEMS, params={"namespace": "p", "key": "k", **theirs})
    assert own.status_code == 200
    assert (await bob.delete(ITEMS, params={"namespace": "p", "key": "k"})).status_code == 200
    kept = await root.get(ITEMS, params={"namespace": "p", "key": "k", **theirs})
    assert kept.status_code == 200 and kept.json()["item"]["value"] == {"who": "alice"}
    assert (await root.get(ITEMS, params={"namespace": "p", "key": "k"})).status_code == 404
    agent = await root.put(
        ITEMS, json={"namespace": ["p"], "key": "k", "value": {"who": "agent"}, "agent_id": "echo"}
    )
    assert agent.status_code == 200
    both = await root.post("/api/memory/search", json={"agent_id": "echo", "user_id": "x"})
    assert [i["value"] for i in both.json()["items"]] == [{"who": "agent"}]


async def test_c20_013_bad_memory_requests_are_a_400_naming_the_field(
    make_api: Callable[..., Any],
) -> None:
    """C20-013: a namespace with a '.' in a label or none, an empty key, a value that is
    not an object, a TTL of 0, an unknown filter operator, a ``query`` (no embedding
    function), a missing ``namespace`` or ``key`` in the query → 400 naming the field."""
    api = await make_api()
    alice = api.client("alice")
    base = {"namespace": ["p"], "key": "k", "value": {}}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("PUT", ITEMS, {**base, "namespace": ["a.b"]}, "namespace"),
        ("PUT", ITEMS, {**base, "namespace": []}, "namespace"),
        ("PUT", ITEMS, {**base, "key": ""}, "key"),
        ("PUT", ITEMS, {**base, "value": [1]}, "value"),
        ("PUT", ITEMS, {**base, "ttl_s": 0}, "ttl_s"),
        ("PUT", ITEMS, {**base, "if_version": None}, "if_version"),
        ("POST", "/api/memory/search", {"filter": {"x": {"$in": [1]}}}, "filter"),
        ("POST", "/api/memory/search", {"query": "cats"}, "query"),
        ("POST", "/api/memory/search", {"limit": 0}, "limit"),
        ("POST", "/api/memory/namespaces", {"max_depth": 0}, "max_depth"),
    ]
    for method, path, body, field in cases:
        answer = await alice.request(method, path, json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["details"][0]["field"] == field, (body, answer.text)
    for params, field in (
        ({"key": "k"}, "namespace"),
        ({"namespace": "p"}, "key"),
        ({"namespace": "a..b", "key": "k"}, "namespace"),
    ):
        answer = await alice.get(ITEMS, params=params)
        assert answer.status_code == 400, answer.text
        assert answer.json()["details"][0]["field"] == field
    assert (await alice.post("/api/memory/namespaces", json={})).json()["namespaces"] == []


def _remember(request: ProviderRequest) -> Reply:
    """Call ``remember`` with the user's text once, then answer."""
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return Reply.text("noted")
    return Reply.tool_calls(Call("remember", {"fact": last_user_text(request)}))


def _memory_agents(seen: list[Any]) -> tuple[Any, ...]:
    @tool
    async def remember(state: ThreadState, fact: str) -> str:
        """Remember a fact about the user and about the agent's work."""
        await state.memory.put(("facts",), "latest", {"fact": fact})
        count = await state.agent_memory.get(("stats",), "calls")
        calls = count.value["n"] + 1 if count is not None else 1
        await state.agent_memory.put(("stats",), "calls", {"n": calls})
        return "ok"

    @hook("before_create_message", id="recall")
    async def recall(state: ThreadState, message: Any) -> None:
        """What the user's memory holds when a user message arrives."""
        if message.role == "user":
            item = await state.memory.get(("facts",), "latest")
            seen.append(item.value if item is not None else None)

    model = Model(name="mem_model", provider=ScriptedProvider(_remember), model="scripted-mem")
    return (
        remember,
        recall,
        model,
        Prompt(name="mem_prompt", model="mem_model", system="You remember.", tools=["remember"]),
        Agent(name="mem", side_a=Side(prompt="mem_prompt"), hooks=("recall",)),
        Agent(name="mem2", side_a=Side(prompt="mem_prompt"), hooks=("recall",)),
    )


async def test_c20_014_tools_and_hooks_use_the_users_and_the_agents_memory(
    make_api: Callable[..., Any],
) -> None:
    """C20-014: a tool's ``state.memory`` is the thread owner's memory (what the user reads
    over HTTP, and what a hook of another thread of that user reads); its
    ``state.agent_memory`` is the agent's, shared by its threads whoever's, and unseen by
    another agent."""
    seen: list[Any] = []
    api = await make_api(extra=_memory_agents(seen))
    alice, bob, root = api.client("alice"), api.client("bob"), api.client("root")
    first = await api.thread("mem", "alice")
    sent = await alice.post(f"/api/threads/{first}/messages", json={"content": "likes tea"})
    assert sent.status_code == 202, sent.text
    await api.settle(first)
    got = await alice.get(ITEMS, params={"namespace": "facts", "key": "latest"})
    assert got.status_code == 200 and got.json()["item"]["value"] == {"fact": "likes tea"}
    assert (await bob.get(ITEMS, params={"namespace": "facts", "key": "latest"})).status_code == 404
    second = await api.thread("mem2", "alice")
    await alice.post(f"/api/threads/{second}/messages", json={"content": "likes jazz"})
    await api.settle(second)
    theirs = await api.thread("mem", "bob")
    await bob.post(f"/api/threads/{theirs}/messages", json={"content": "likes coffee"})
    await api.settle(theirs)
    assert seen[:2] == [None, {"fact": "likes tea"}] and seen[2] is None
    bobs = await bob.get(ITEMS, params={"namespace": "facts", "key": "latest"})
    assert bobs.json()["item"]["value"] == {"fact": "likes coffee"}
    calls = {
        agent: await root.get(
            ITEMS, params={"namespace": "stats", "key": "calls", "agent_id": agent}
        )
        for agent in ("mem", "mem2", "echo")
    }
    assert calls["mem"].json()["item"]["value"] == {"n": 2}
    assert calls["mem2"].json()["item"]["value"] == {"n": 1}
    assert calls["echo"].status_code == 404


async def test_c20_017_a_deleted_users_memory_goes_with_the_user(
    make_api: Callable[..., Any],
) -> None:
    """C20-017: deleting a user deletes their memory; another user's and the agents'
    memories stay."""
    api = await make_api()
    alice, bob, root = api.client("alice"), api.client("bob"), api.client("root")
    body = {"namespace": ["p"], "key": "k", "value": {"v": 1}}
    for client in (alice, bob):
        assert (await client.put(ITEMS, json=body)).status_code == 200
    assert (await root.put(ITEMS, json={**body, "agent_id": "echo"})).status_code == 200
    assert (await root.delete(f"/api/users/{USERS['alice'].id}")).status_code == 200
    where = {"namespace": "p", "key": "k"}
    gone = await root.get(ITEMS, params={**where, "user_id": USERS["alice"].id})
    assert gone.status_code == 404
    assert (await bob.get(ITEMS, params=where)).status_code == 200
    assert (await root.get(ITEMS, params={**where, "agent_id": "echo"})).status_code == 200
