"""First reads of ``GET …/messages`` (issue 40): a page the server keeps no copy of is read
with the thread's row, the access check's, in one store read. The answers are those of
spec 08 §8.1.4 and §8.4.1 as before — 404 then 403 before a 400, the page and its ``seq``
— with pages kept and without, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from server.conftest import Api
from threadloom.server.page_cache import PageCache
from threadloom.server.settings import ServerSettings

BAD = (
    "?order=down",
    "?limit=-1",
    "?depth=x",
    "?includeSilent=maybe",
    "?ids=" + ",".join(str(i) for i in range(201)),
)


@pytest.mark.parametrize("budget", [0, 1 << 20], ids=["nothing-kept", "pages-kept"])
async def test_c08_193_a_first_read_answers_404_then_403_then_400(
    make_api: Callable[..., Any], budget: int
) -> None:
    api: Api = await make_api(ServerSettings(auth="required", page_cache_bytes=budget))
    alice, bob = api.client("alice"), api.client("bob")
    thread = await api.thread()
    await alice.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    unknown = str(uuid.uuid4())
    for _ in range(2):  # the second time, a page of the thread is kept (when any is)
        for query in ("", *BAD):
            missing = await alice.get(f"/api/threads/{unknown}/messages{query}")
            assert missing.status_code == 404, (query, missing.text)
            assert missing.json() == {
                "error": f"Thread not found: {unknown}",
                "code": "thread_not_found",
            }
            malformed = await alice.get(f"/api/threads/not%20an%20id/messages{query}")
            assert malformed.status_code == 404, query
            denied = await bob.get(f"/api/threads/{thread}/messages{query}")
            assert denied.status_code == 403, (query, denied.text)
            assert denied.json()["code"] == "forbidden"
        for query in BAD:
            refused = await alice.get(f"/api/threads/{thread}/messages{query}")
            assert refused.status_code == 400, (query, refused.text)
        page = await alice.get(f"/api/threads/{thread}/messages")
        assert page.status_code == 200, page.text
        body = page.json()
        assert [m["content"] for m in body["messages"]] == ["hi", "echo: hi"]
        assert body["total"] == 2 and body["hasMore"] is False
        row = await api.runtime.store.get_thread(thread)
        assert row is not None and body["seq"] == row.event_seq
    pages = api.app.context.pages
    assert pages.holds_thread(thread) is bool(budget)


async def test_c08_193_a_first_read_equals_a_kept_one_and_the_records(
    make_api: Callable[..., Any],
) -> None:
    """The same bytes whether the page was kept or read with the row, and the same page as
    the records' (ids mode reads records)."""
    api: Api = await make_api(ServerSettings(auth="required", page_cache_bytes=1 << 20))
    client = api.client()
    thread = await api.thread()
    for text in ("one", "two"):
        await client.post(f"/api/threads/{thread}/messages", json={"content": text})
        await api.settle(thread)
    pages = api.app.context.pages
    first = await client.get(f"/api/threads/{thread}/messages?limit=3")
    assert pages.holds_thread(thread)
    kept = await client.get(f"/api/threads/{thread}/messages?limit=3")
    assert kept.content == first.content
    pages.clear()
    assert not pages.holds_thread(thread)
    again = await client.get(f"/api/threads/{thread}/messages?limit=3")
    assert again.content == first.content
    listed = ",".join(m["id"] for m in first.json()["messages"])
    by_ids = (await client.get(f"/api/threads/{thread}/messages?ids={listed}")).json()
    assert by_ids["messages"] == first.json()["messages"]


def test_c08_194_the_kept_pages_know_their_threads() -> None:
    cache = PageCache(budget=8_000)
    key = ("t1", 1, 100, 0, "desc", 0, False, False)
    other = ("t1", 1, 1, 0, "asc", 0, False, False)
    assert not cache.holds_thread("t1")
    cache.put(key, 5, b"x" * 1_000)
    cache.put(other, 5, b"y" * 1_000)
    assert cache.holds_thread("t1") and not cache.holds_thread("t2")
    cache.put(key, 6, b"z" * 2_000, keep=False)  # not kept: the entry goes
    assert cache.holds_thread("t1") and cache.used == 1_000
    cache.put(other, 6, b"w" * 1_001)  # over an eighth of the budget: not kept
    assert not cache.holds_thread("t1") and cache.used == 0 and len(cache) == 0
    for i in range(9):  # the least recently used goes: t0's page
        cache.put((f"t{i}", 1, 100, 0, "desc", 0, False, False), 1, b"p" * 1_000)
    assert not cache.holds_thread("t0") and cache.holds_thread("t8") and len(cache) == 8
    cache.clear()
    assert not any(cache.holds_thread(f"t{i}") for i in range(9))
