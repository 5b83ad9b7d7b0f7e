"""Spec 10 §10.10: ``ThreadState.user()`` reads the owner's row of the users table."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from conftest import USERS, Api


async def who_api(make_api: Callable[..., Any]) -> Api:
    api: Api = await make_api(with_who=True)
    return api


async def run_whoami(api: Api, thread: str) -> None:
    response = await api.client("root").post(
        f"/api/threads/{thread}/messages", json={"content": "who am I?"}
    )
    assert response.status_code in (200, 202), response.text


async def test_c10_031_tool_sees_owner_and_application_roles(
    make_api: Callable[..., Any],
) -> None:
    api = await who_api(make_api)
    patched = await api.client("root").patch(
        f"/api/users/{USERS['alice'].id}", json={"roles": ["billing:refund"]}
    )
    assert patched.status_code == 200
    thread = await api.thread("who", user="alice")
    await run_whoami(api, thread)
    await api.settle(thread)
    user = api.probe.seen[0]
    assert user is not None
    assert user.id == USERS["alice"].id
    assert user.username == "alice"
    assert user.roles == ("billing:refund",)
    assert user.role == "user"
    assert user.permissions is None


async def test_c10_032_role_change_is_seen_within_the_same_execution(
    make_api: Callable[..., Any],
) -> None:
    api = await who_api(make_api)
    admin = api.client("root")
    await admin.patch(f"/api/users/{USERS['alice'].id}", json={"roles": ["billing:refund"]})
    thread = await api.thread("who", user="alice")
    api.probe.hold.clear()
    await run_whoami(api, thread)
    await asyncio.wait_for(api.probe.paused.wait(), 10)
    await admin.patch(f"/api/users/{USERS['alice'].id}", json={"roles": []})
    api.probe.hold.set()
    await api.settle(thread)
    before, after = api.probe.seen
    assert before is not None and before.roles == ("billing:refund",)
    assert after is not None and after.roles == ()


async def test_c10_033_ownerless_and_deleted_owner_give_none(
    make_api: Callable[..., Any],
) -> None:
    api = await who_api(make_api)
    ownerless = await api.thread("who", user="root", user_id=None)
    await run_whoami(api, ownerless)
    await api.settle(ownerless)
    bobs = await api.thread("who", user="bob")
    assert (await api.client("root").delete(f"/api/users/{USERS['bob'].id}")).status_code == 200
    await run_whoami(api, bobs)
    await api.settle(bobs)
    assert api.probe.seen == [None, None, None, None]
