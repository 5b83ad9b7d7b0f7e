"""The client's calls for the memory routes (spec 20 §20.7) against the real server, async
and sync (``api``: the ``echo`` agent, admin root, users alice and bob)."""

from __future__ import annotations

import asyncio

import pytest

from server.conftest import USERS, Api
from threadloom.client import (
    AsyncClient,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)


async def test_c20_015_the_async_client_puts_reads_searches_and_deletes(api: Api) -> None:
    """C20-015: ``client.memory`` puts, reads, searches, lists namespaces and deletes items
    of the caller's memory; a stale version is ConflictError, a missing item NotFoundError,
    another user's memory PermissionDeniedError, bad input BadRequestError; an admin names
    a user's or an agent's memory."""
    async with AsyncClient(api.base, token=api.keys["alice"]) as alice:
        item = await alice.memory.put(["notes", "a"], "n1", {"text": "hi", "n": 2}, ttl_s=60)
        assert (item.namespace, item.key, item.version) == (["notes", "a"], "n1", 1)
        assert item.expires_at is not None
        again = await alice.memory.put(["notes", "a"], "n1", {"text": "ho", "n": 3}, if_version=1)
        assert again.version == 2
        with pytest.raises(ConflictError):
            await alice.memory.put(["notes", "a"], "n1", {}, if_version=1)
        assert (await alice.memory.get(["notes", "a"], "n1")).value == {"text": "ho", "n": 3}
        found = await alice.memory.search(["notes"], filter={"n": {"$gt": 2}})
        assert [i.key for i in found] == ["n1"]
        assert await alice.memory.search(["notes"], filter={"n": 9}) == []
        assert await alice.memory.list_namespaces() == [("notes", "a")]
        with pytest.raises(BadRequestError):
            await alice.memory.put(["a.b"], "k", {})
        with pytest.raises(PermissionDeniedError):
            await alice.memory.get(["notes", "a"], "n1", user_id=USERS["bob"].id)
        await alice.memory.delete(["notes", "a"], "n1")
        with pytest.raises(NotFoundError):
            await alice.memory.get(["notes", "a"], "n1")
    async with AsyncClient(api.base, token=api.keys["root"]) as root:
        await root.memory.put(["p"], "k", {"v": 1}, agent_id="echo")
        assert (await root.memory.get(["p"], "k", agent_id="echo")).value == {"v": 1}
        assert await root.memory.list_namespaces(user_id=USERS["alice"].id) == []


async def test_c20_016_the_sync_client_has_the_same_calls(api: Api) -> None:
    """C20-016: the blocking client's ``memory`` calls do the same (here from a worker
    thread, as a blocking caller runs)."""

    def work() -> None:
        with Client(api.base, token=api.keys["bob"]) as bob:
            bob.memory.put(["s"], "k", {"x": 1})
            assert bob.memory.get(["s"], "k").value == {"x": 1}
            assert [i.key for i in bob.memory.search()] == ["k"]
            assert bob.memory.list_namespaces(prefix=["s"]) == [("s",)]
            bob.memory.delete(["s"], "k", if_version=1)
            with pytest.raises(NotFoundError):
                bob.memory.delete(["s"], "k")

    await asyncio.to_thread(work)
