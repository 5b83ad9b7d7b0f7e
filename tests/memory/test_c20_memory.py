"""The memory store across threads on every store (spec 20): put / get / delete, search by
namespace prefix with filters, namespaces, versions and two writers, TTL expiry and its
sweep, and the scopes a tool sees. The clock the store stamps rows with is the test's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from threadloom import RetentionPolicy, Runtime
from threadloom.errors import InvalidField, MemoryConflict

SECOND = 1_000_000


class Clock:
    """A clock the test moves: microseconds since the epoch."""

    def __init__(self, now: int = 1_800_000_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1
        return self.now

    def seconds(self, n: float) -> None:
        self.now += round(n * SECOND)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def rt(db_url: str, clock: Clock) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(db_url, clock=clock, retention=RetentionPolicy(interval_s=None))
    yield runtime
    await runtime.close()


async def test_c20_001_put_get_delete_round_trip_an_item(rt: Runtime) -> None:
    """C20-001: an item put is read back with its namespace, key, value, times and
    version 1; deleting it leaves nothing, and a second delete says so."""
    mem = rt.memory(user_id="u1")
    item = await mem.put(("prefs", "ui"), "theme", {"dark": True, "size": 12, "tags": ["a"]})
    assert item.namespace == ("prefs", "ui") and item.key == "theme"
    assert item.value == {"dark": True, "size": 12, "tags": ["a"]}
    assert item.version == 1 and item.created_at == item.updated_at and item.expires_at is None
    assert await mem.get(["prefs", "ui"], "theme") == item
    assert await mem.get(("prefs",), "theme") is None
    assert await mem.get(("prefs", "ui"), "other") is None
    assert await mem.delete(("prefs", "ui"), "theme") is True
    assert await mem.get(("prefs", "ui"), "theme") is None
    assert await mem.delete(("prefs", "ui"), "theme") is False


async def test_c20_002_a_put_over_an_item_is_its_next_version(rt: Runtime) -> None:
    """C20-002: a second put replaces the value whole, keeps created_at, moves updated_at
    on and increments the version (last write wins)."""
    mem = rt.memory(user_id="u1")
    first = await mem.put(("n",), "k", {"a": 1, "b": 2})
    second = await mem.put(("n",), "k", {"a": 3})
    assert second.value == {"a": 3} and second.version == 2
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert (await mem.get(("n",), "k")) == second


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.put((), "k", {}), "namespace"),
        (lambda m: m.put(("a.b",), "k", {}), "namespace"),
        (lambda m: m.put(("",), "k", {}), "namespace"),
        (lambda m: m.put(("a",) * 11, "k", {}), "namespace"),
        (lambda m: m.put(("a",), "", {}), "key"),
        (lambda m: m.put(("a",), "k" * 257, {}), "key"),
        (lambda m: m.put(("a",), "k", [1]), "value"),
        (lambda m: m.put(("a",), "k", {"x": float("nan")}), "value"),
        (lambda m: m.put(("a",), "k", {"x": "y" * (256 * 1024)}), "value"),
        (lambda m: m.put(("a",), "k", {}, ttl_s=0), "ttl_s"),
        (lambda m: m.put(("a",), "k", {}, if_version=-1), "if_version"),
        (lambda m: m.search(("a",), filter={"x": {"$like": 1}}), "filter"),
        (lambda m: m.search(("a",), limit=0), "limit"),
        (lambda m: m.search(("a",), query="cats"), "query"),
    ],
)
async def test_c20_003_bad_input_is_refused_naming_its_field(
    rt: Runtime, call: Any, field: str
) -> None:
    """C20-003: a namespace, key, value, TTL, version, filter or limit that breaks its
    rule is refused with InvalidField naming it, and nothing is stored."""
    mem = rt.memory(user_id="u1")
    with pytest.raises(InvalidField) as refused:
        await call(mem)
    assert refused.value.field == field
    assert await mem.list_namespaces() == []


async def test_c20_004_search_by_namespace_prefix(rt: Runtime, clock: Clock) -> None:
    """C20-004: a search returns the items whose namespace is the prefix or starts with it
    (whole labels only), most recently updated first, paged by limit and offset; the
    empty prefix is the whole scope."""
    mem = rt.memory(user_id="u1")
    await mem.put(("docs",), "root", {"i": 0})
    await mem.put(("docs", "a"), "k1", {"i": 1})
    await mem.put(("docs", "a", "deep"), "k2", {"i": 2})
    await mem.put(("docs", "b"), "k3", {"i": 3})
    await mem.put(("docsx",), "k4", {"i": 4})
    await mem.put(("docs-",), "k5", {"i": 5})
    found = await mem.search(("docs",), limit=10)
    assert [i.key for i in found] == ["k3", "k2", "k1", "root"]
    assert [i.key for i in await mem.search(("docs", "a"))] == ["k2", "k1"]
    assert [i.key for i in await mem.search(("docs",), limit=2, offset=1)] == ["k2", "k1"]
    assert len(await mem.search((), limit=100)) == 6
    await mem.put(("docs", "a"), "k1", {"i": 10})  # updated: first now
    assert [i.key for i in await mem.search(("docs",), limit=1)] == ["k1"]


async def test_c20_005_search_filters_on_document_fields(rt: Runtime) -> None:
    """C20-005: a filter keeps the items whose fields (nested by '.') equal the values it
    names, or meet its operators ($eq $ne $gt $gte $lt $lte); a comparison across JSON
    types never matches, and true is not 1; limit and offset count matching items."""
    mem = rt.memory(user_id="u1")
    docs = {
        "a": {"kind": "note", "score": 5, "meta": {"lang": "en"}, "ok": True},
        "b": {"kind": "note", "score": 9, "meta": {"lang": "fr"}, "ok": 1},
        "c": {"kind": "task", "score": "9", "meta": {"lang": "en"}},
        "d": {"kind": "note", "score": 7.5},
    }
    for key, value in docs.items():
        await mem.put(("m",), key, value)

    async def keys(**filter: Any) -> list[str]:
        return sorted(i.key for i in await mem.search(("m",), filter=filter, limit=100))

    assert await keys(kind="note") == ["a", "b", "d"]
    assert await keys(**{"meta.lang": "en"}) == ["a", "c"]
    assert await keys(score={"$gt": 5}) == ["b", "d"]
    assert await keys(score={"$gte": 5, "$lt": 9}) == ["a", "d"]
    assert await keys(score={"$lte": "9"}) == ["c"]
    assert await keys(kind={"$ne": "note"}) == ["c"]
    assert await keys(ok=True) == ["a"]
    assert await keys(ok={"$eq": 1}) == ["b"]
    assert await keys(missing={"$ne": 1}) == ["a", "b", "c", "d"]
    assert await keys(kind="note", **{"meta.lang": "fr"}) == ["b"]
    paged = await mem.search(("m",), filter={"kind": "note"}, limit=1, offset=1)
    assert len(paged) == 1 and paged[0].value["kind"] == "note"


async def test_c20_006_list_namespaces(rt: Runtime) -> None:
    """C20-006: the namespaces holding items, in order, once each; under a prefix, ending
    with a suffix, cut to max_depth labels; paged."""
    mem = rt.memory(user_id="u1")
    for ns in [("a", "x"), ("a", "y", "z"), ("a", "y"), ("b",), ("c", "x")]:
        await mem.put(ns, "k", {})
    await mem.put(("a", "x"), "k2", {})
    assert await mem.list_namespaces() == [
        ("a", "x"),
        ("a", "y"),
        ("a", "y", "z"),
        ("b",),
        ("c", "x"),
    ]
    assert await mem.list_namespaces(prefix=("a",)) == [("a", "x"), ("a", "y"), ("a", "y", "z")]
    assert await mem.list_namespaces(suffix=("x",)) == [("a", "x"), ("c", "x")]
    assert await mem.list_namespaces(max_depth=1) == [("a",), ("b",), ("c",)]
    assert await mem.list_namespaces(limit=2, offset=1) == [("a", "y"), ("a", "y", "z")]


async def test_c20_007_a_version_check_lets_one_of_two_writers_win(rt: Runtime) -> None:
    """C20-007: two writers that read version n and put with if_version=n: one wins
    (version n+1), the other gets MemoryConflict naming the stored version and changes
    nothing; if_version=0 creates only where no item is; a delete with a stale version is
    refused too."""
    mem = rt.memory(user_id="u1")
    created = await mem.put(("c",), "k", {"n": 0}, if_version=0)
    with pytest.raises(MemoryConflict) as exists:
        await mem.put(("c",), "k", {"n": -1}, if_version=0)
    assert exists.value.version == 1
    results = await asyncio.gather(
        mem.put(("c",), "k", {"n": 1}, if_version=created.version),
        mem.put(("c",), "k", {"n": 2}, if_version=created.version),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, MemoryConflict)]
    assert len(won) == 1 and len(lost) == 1 and lost[0].version == 2
    stored = await mem.get(("c",), "k")
    assert stored is not None and stored.version == 2 and stored.value == won[0].value
    with pytest.raises(MemoryConflict):
        await mem.delete(("c",), "k", if_version=1)
    assert await mem.delete(("c",), "k", if_version=2) is True
    with pytest.raises(MemoryConflict) as gone:
        await mem.put(("c",), "k", {}, if_version=2)
    assert gone.value.version is None


async def test_c20_008_two_writers_without_a_version_last_write_wins(rt: Runtime) -> None:
    """C20-008: many concurrent puts of one key without a version all succeed; the stored
    item is one of the values written whole, at the version that counts every write."""
    mem = rt.memory(user_id="u1")
    values = [{"writer": i, "payload": [i] * 5} for i in range(8)]
    written = await asyncio.gather(*(mem.put(("w",), "k", v) for v in values))
    assert sorted(i.version for i in written) == list(range(1, 9))
    stored = await mem.get(("w",), "k")
    assert stored is not None and stored.version == 8 and stored.value in values
    assert stored.value == max(written, key=lambda i: i.version).value


async def test_c20_009_an_expired_item_is_not_returned_and_the_sweep_removes_it(
    rt: Runtime, clock: Clock
) -> None:
    """C20-009: an item with ttl_s is read until it expires, then no read returns it
    (get, search, namespaces, a delete finds nothing); a put over it starts anew at
    version 1; each put sets the TTL anew; a retention pass removes expired rows."""
    mem = rt.memory(user_id="u1")
    item = await mem.put(("t",), "short", {"v": 1}, ttl_s=10)
    assert item.expires_at == item.updated_at + 10 * SECOND
    await mem.put(("t",), "long", {"v": 2}, ttl_s=100)
    await mem.put(("keep",), "forever", {"v": 3})
    clock.seconds(5)
    assert (await mem.get(("t",), "short")) is not None
    clock.seconds(6)
    assert await mem.get(("t",), "short") is None
    assert [i.key for i in await mem.search(("t",))] == ["long"]
    assert await mem.delete(("t",), "short") is False
    renewed = await mem.put(("t",), "long", {"v": 4}, ttl_s=100)
    clock.seconds(95)
    assert (await mem.get(("t",), "long")) == renewed
    clock.seconds(10)
    assert await mem.list_namespaces() == [("keep",)]
    again = await mem.put(("t",), "long", {"v": 5})
    assert again.version == 1 and again.expires_at is None
    await mem.put(("t",), "gone", {}, ttl_s=1)
    await mem.put(("t",), "gone2", {}, ttl_s=1)
    clock.seconds(2)
    report = await rt.apply_retention()
    assert report.memory_items >= 2  # "short" and the two just expired
    assert await rt.store.delete_expired_memory() == 0
    assert [i.key for i in await mem.search((), limit=10)] == ["long", "forever"]


async def test_c20_010_scopes_are_isolated(rt: Runtime) -> None:
    """C20-010: one namespace and key in two users' memories, in two agents' memories, and
    in the memory of threads without a user are six items; no scope's search, get,
    delete or namespaces sees another's."""
    scopes = [
        rt.memory(user_id="alice"),
        rt.memory(user_id="bob"),
        rt.memory(),
        rt.memory(agent_id="alice"),
        rt.memory(agent_id="support"),
        rt.memory(agent_id="sales"),
    ]
    for i, mem in enumerate(scopes):
        await mem.put(("profile",), "name", {"scope": i})
    for i, mem in enumerate(scopes):
        got = await mem.get(("profile",), "name")
        assert got is not None and got.value == {"scope": i}
        assert [x.value for x in await mem.search(())] == [{"scope": i}]
    assert await scopes[1].delete(("profile",), "name") is True
    assert (await scopes[0].get(("profile",), "name")) is not None
    assert await scopes[1].list_namespaces() == []
    assert await scopes[3].list_namespaces() == [("profile",)]
