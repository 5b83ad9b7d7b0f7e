"""Pages of ``GET …/messages`` kept while their thread is unchanged (spec 08 §8.4.1,
``server/page_cache.py``), on SQLite and PostgreSQL: a page read again is the same bytes
from memory, and after every kind of change the page served is the page a fresh read
builds — never an older one."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from server.conftest import USERS, Api
from threadloom.server.page_cache import PageCache
from threadloom.server.settings import ServerSettings, SettingsError

PAGES = ("", "?order=asc", "?limit=2", "?limit=2&offset=1&order=asc", "?includeSilent=true")


async def served(api: Api, client: httpx.AsyncClient, thread: str, query: str = "") -> bytes:
    response = await client.get(f"/api/threads/{thread}/messages{query}")
    assert response.status_code == 200, response.text
    return response.content


async def fresh(api: Api, client: httpx.AsyncClient, thread: str, query: str = "") -> bytes:
    """The page as a read that keeps nothing builds it."""
    pages = api.app.context.pages
    budget, pages.budget = pages.budget, 0
    try:
        return await served(api, client, thread, query)
    finally:
        pages.budget = budget


async def same_as_fresh(api: Api, client: httpx.AsyncClient, thread: str) -> list[Any]:
    """Every page of ``PAGES``, served (from memory when kept) and built fresh: equal."""
    bodies = []
    for query in PAGES:
        kept = await served(api, client, thread, query)
        assert kept == await fresh(api, client, thread, query), query
        bodies.append(httpx.Response(200, content=kept).json())
    return bodies


async def test_c08_140_a_page_read_again_is_the_same_bytes_from_memory(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    pages = api.app.context.pages
    first = await served(api, client, thread)
    hits = pages.hits
    again = await served(api, client, thread)
    assert again == first and pages.hits == hits + 1
    assert [m["content"] for m in httpx.Response(200, content=again).json()["messages"]] == [
        "hi",
        "echo: hi",
    ]
    # another page of the same thread is another entry
    asc = await served(api, client, thread, "?order=asc&limit=1")
    assert [m["content"] for m in httpx.Response(200, content=asc).json()["messages"]] == ["hi"]
    # bob may not read it, kept or not
    denied = await api.client("bob").get(f"/api/threads/{thread}/messages")
    assert denied.status_code == 403


async def test_c08_141_every_change_is_seen_at_once(api: Api) -> None:
    """A run, a send joining it (a pending view), the run's end, an edit, a deletion, a
    stop and a terminate: after each, every page served equals a fresh read."""
    client = api.client()
    thread = await api.thread("gate")
    await same_as_fresh(api, client, thread)  # the empty pages, kept
    await client.post(f"/api/threads/{thread}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    await same_as_fresh(api, client, thread)
    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "second"})
    queued = sent.json()["messageId"]
    newest = (await same_as_fresh(api, client, thread))[0]["messages"]
    assert any(m["id"] == queued and m["status"] == "pending" for m in newest), newest
    api.gate.open()
    await api.settle(thread)
    newest = (await same_as_fresh(api, client, thread))[0]["messages"]
    assert [m["content"] for m in newest] == ["first", "echo: first", "second", "echo: second"]
    edited = await client.patch(
        f"/api/threads/{thread}/messages/{newest[1]['id']}", json={"content": "changed"}
    )
    assert edited.status_code == 200, edited.text
    newest = (await same_as_fresh(api, client, thread))[0]["messages"]
    assert newest[1]["content"] == "changed"
    deleted = await client.delete(f"/api/threads/{thread}/messages/{newest[0]['id']}")
    assert deleted.status_code == 200, deleted.text
    newest = (await same_as_fresh(api, client, thread))[0]["messages"]
    assert "first" not in [m["content"] for m in newest]
    assert (await client.post(f"/api/threads/{thread}/stop")).status_code == 200
    await same_as_fresh(api, client, thread)
    assert (await client.post(f"/api/threads/{thread}/terminate")).status_code == 200
    await same_as_fresh(api, client, thread)


async def test_c08_141_a_thread_made_again_under_its_id_has_its_own_pages(api: Api) -> None:
    client = api.client()
    made = await api.runtime.create_thread("echo", user_id=USERS["alice"].id)
    thread = made.thread_id
    await client.post(f"/api/threads/{thread}/messages", json={"content": "old"})
    await api.settle(thread)
    assert b"old" in await served(api, client, thread)
    assert (await client.delete(f"/api/threads/{thread}")).status_code == 200
    again = await api.runtime.create_thread("echo", user_id=USERS["alice"].id, thread_id=thread)
    assert again.thread_id == thread
    body = httpx.Response(200, content=await served(api, client, thread)).json()
    assert body["messages"] == [] and body["total"] == 0


def test_c08_142_kept_pages_are_bounded_in_bytes_least_recently_used_first() -> None:
    cache = PageCache(budget=8_000)
    keys = [(f"t{i}", 1, 100, 0, "desc", 0, False, False) for i in range(12)]
    for key in keys[:8]:
        cache.put(key, 5, b"x" * 1_000)
    assert cache.used == 8_000 and len(cache) == 8
    assert cache.get(keys[0], 5) is not None  # now the most recently used
    cache.put(keys[8], 5, b"y" * 1_000)
    assert cache.used == 8_000
    assert cache.get(keys[1], 5) is None  # the least recently used went
    assert cache.get(keys[0], 5) == b"x" * 1_000
    assert cache.get(keys[0], 6) is None  # another event_seq: not this page
    cache.put(keys[9], 5, b"z" * 1_001)  # over an eighth of the budget
    assert cache.get(keys[9], 5) is None
    cache.put(keys[10], 5, b"s", keep=False)  # a page with a subagent's projected fields
    assert cache.get(keys[10], 5) is None
    cache.put(keys[0], 7, b"new")  # a newer read replaces the older one
    assert cache.get(keys[0], 7) == b"new" and cache.get(keys[0], 5) is None
    assert cache.used == 7 * 1_000 + 3 and len(cache) == 8


def test_c08_142_the_budget_is_a_setting() -> None:
    assert ServerSettings().page_cache_bytes == 16 * 1024 * 1024
    assert ServerSettings.from_env({"THREADLOOM_PAGE_CACHE_BYTES": "0"}).page_cache_bytes == 0
    with pytest.raises(SettingsError, match="THREADLOOM_PAGE_CACHE_BYTES"):
        ServerSettings.from_env({"THREADLOOM_PAGE_CACHE_BYTES": "lots"})
