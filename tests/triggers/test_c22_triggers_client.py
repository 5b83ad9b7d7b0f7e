"""The client's calls for the trigger routes (spec 22 §22.5) against the real server, async
and sync (``api``: the ``echo`` agent, admin root, user alice), both stores."""

from __future__ import annotations

import asyncio

import httpx
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


async def test_c22_030_the_async_client_manages_triggers(api: Api) -> None:
    """C22-030: ``client.triggers`` creates (the secret answered), lists, reads (no
    secret), changes and deletes a trigger as an admin; the secret it answered calls the
    trigger; its errors are the client's typed errors (400, 403, 404, 409)."""
    async with AsyncClient(api.base, token=api.keys["root"]) as root:
        created = await root.triggers.create(
            "hook", agent="echo", arguments={"k": "v"}, message="Got: {body}"
        )
        assert (created.id, created.agent, created.arguments) == ("hook", "echo", {"k": "v"})
        assert created.secret is not None and created.url == "/api/triggers/hook/fire"
        with pytest.raises(ConflictError):
            await root.triggers.create("hook", agent="echo")
        with pytest.raises(BadRequestError) as bad:
            await root.triggers.create("other")
        assert bad.value.message.startswith("agent")
        assert [t.id for t in await root.triggers.list()] == ["hook"]
        async with httpx.AsyncClient(base_url=api.base) as caller:
            called = await caller.post(
                created.url, content=b"ping", headers={"Authorization": f"Bearer {created.secret}"}
            )
        assert called.status_code == 202, called.text
        await api.settle(called.json()["thread_id"])
        got = await root.triggers.get("hook")
        assert got.secret is None and got.fire_count == 1
        assert got.last_thread_id == called.json()["thread_id"]
        changed = await root.triggers.update("hook", enabled=False, message=None)
        assert changed.enabled is False and changed.message is None and changed.secret is None
        await root.triggers.delete("hook")
        with pytest.raises(NotFoundError):
            await root.triggers.get("hook")
    async with AsyncClient(api.base, token=api.keys["alice"]) as alice:
        with pytest.raises(PermissionDeniedError):
            await alice.triggers.list()


async def test_c22_031_the_sync_client_has_the_same_calls(api: Api) -> None:
    """C22-031: ``Client.triggers`` (blocking) does the same."""

    def run() -> tuple[bool, list[str], int]:
        with Client(api.base, token=api.keys["root"]) as root:
            made = root.triggers.create("sync", agent="echo")
            listed = [t.id for t in root.triggers.list()]
            root.triggers.update("sync", message="fixed")
            root.triggers.delete("sync")
            return made.secret is not None, listed, len(root.triggers.list())

    has_secret, listed, left = await asyncio.to_thread(run)
    assert (has_secret, listed, left) == (True, ["sync"], 0)
