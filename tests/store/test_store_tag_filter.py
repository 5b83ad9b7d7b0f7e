"""The exact tag filter of a thread listing (``ThreadQuery.tags``, the ``tag`` parameter of
GET /api/threads, spec 08 §8.3.1) on every store: a whole tag, case and all, paged."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.shapes import NewThread, ThreadQuery


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


async def make(store: Store, name: str, *tags: str) -> str:
    await store.create_thread(NewThread(id=name, agent_id="chat", tags=tags))
    return name


async def listed(store: Store, **filters: object) -> tuple[list[str], int]:
    rows, total = await store.query_threads(ThreadQuery(sort="oldest", **filters))  # type: ignore[arg-type]
    return [r.id for r in rows], total


async def test_a_tag_filter_matches_whole_tags_only(store: Store) -> None:
    exact = await make(store, "t-exact", "a", "other")
    await make(store, "t-longer", "a-b")
    await make(store, "t-prefix", "xa")
    await make(store, "t-case", "A")
    await make(store, "t-none")
    percent = await make(store, "t-percent", "50%_off")
    await make(store, "t-percent-like", "50xyoff")
    assert await listed(store, tags=("a",)) == ([exact], 1)
    assert await listed(store, tags=("a-b",)) == (["t-longer"], 1)
    assert await listed(store, tags=("A",)) == (["t-case"], 1)
    # LIKE's wildcards are plain characters here
    assert await listed(store, tags=("50%_off",)) == ([percent], 1)
    assert await listed(store, tags=("nope",)) == ([], 0)
    # several tags: a thread must have each; the substring search still finds all of `a`
    assert await listed(store, tags=("a", "other")) == ([exact], 1)
    assert await listed(store, tags=("a", "a-b")) == ([], 0)
    found, _ = await listed(store, search="a")
    assert {exact, "t-longer", "t-prefix", "t-case"} <= set(found)


async def test_a_tag_filter_is_paged_with_the_total(store: Store) -> None:
    tagged = [await make(store, f"t-{i:02}", "team:blue") for i in range(7)]
    for i in range(5):
        await make(store, f"u-{i:02}", "team:blue-green")
    pages = [await listed(store, tags=("team:blue",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [total for _, total in pages] == [7, 7, 7]
    assert [t for ids, _ in pages for t in ids] == tagged
