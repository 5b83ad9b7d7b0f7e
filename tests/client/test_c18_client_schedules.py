"""The client's calls for the schedule routes (spec 18 §18.7) against the real server, async
and sync (``api``: the ``echo`` agent, admin root, user alice)."""

from __future__ import annotations

import asyncio

import pytest

from server.conftest import Api
from threadloom.client import (
    AsyncClient,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)


async def test_c18_090_the_async_client_manages_and_fires_schedules(api: Api) -> None:
    """C18-090: ``client.schedules`` creates, lists, reads, changes, fires and deletes a
    schedule as an admin; its errors are the client's typed errors (400, 403, 404, 409)."""
    async with AsyncClient(api.base, token=api.keys["root"]) as root:
        created = await root.schedules.create(
            "nightly",
            "summarise",
            cron="30 2 * * *",
            timezone="Europe/Berlin",
            agent="echo",
            arguments={"k": "v"},
            overlap="queue",
        )
        assert (created.id, created.cron, created.overlap, created.arguments) == (
            "nightly",
            "30 2 * * *",
            "queue",
            {"k": "v"},
        )
        assert created.next_fire_at is not None and created.source == "api"
        with pytest.raises(ConflictError):
            await root.schedules.create("nightly", "x", interval_s=60, agent="echo")
        with pytest.raises(BadRequestError) as bad:
            await root.schedules.create("other", "x", cron="0 9 * * *", interval_s=60, agent="echo")
        assert bad.value.message.startswith("cron")
        assert [s.id for s in await root.schedules.list()] == ["nightly"]
        changed = await root.schedules.update("nightly", enabled=False, message="later")
        assert changed.next_fire_at is None and changed.message == "later"
        fire = await root.schedules.fire("nightly")
        assert fire.status == "fired" and fire.thread_id is not None
        await api.settle(fire.thread_id)
        got = await root.schedules.get("nightly")
        assert (got.fire_count, got.last_thread_id) == (1, fire.thread_id)
        await root.schedules.delete("nightly")
        with pytest.raises(NotFoundError):
            await root.schedules.get("nightly")
    async with AsyncClient(api.base, token=api.keys["alice"]) as alice:
        with pytest.raises(PermissionDeniedError):
            await alice.schedules.list()


async def test_c18_091_the_sync_client_has_the_same_calls(api: Api) -> None:
    """C18-091: ``Client.schedules`` (blocking) does the same."""

    def run() -> tuple[str, int, list[str]]:
        with Client(api.base, token=api.keys["root"]) as root:
            root.schedules.create("sync", "hi", interval_s=86400, agent="echo")
            fire = root.schedules.fire("sync")
            listed = [s.id for s in root.schedules.list()]
            root.schedules.delete("sync")
            return fire.status, root.schedules.list().__len__(), listed

    status, left, listed = await asyncio.to_thread(run)
    assert (status, left, listed) == ("fired", 0, ["sync"])
