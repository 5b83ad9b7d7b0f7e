"""The client's calls for the spec 10 routes (auth, API keys, users; spec 11 §11.2.2) against the
real server, async and sync."""

from __future__ import annotations

import asyncio
import re

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
from threadloom.client.errors import AuthenticationError
from threadloom.client.frames import ThreadStatusFrame

PASSWORD = "correct horse battery"


def as_user(api: Api, user: str | None) -> AsyncClient:
    return AsyncClient(api.base, token=api.keys[user] if user else "")


async def test_client_auth_config_me_and_tickets(api: Api, client: AsyncClient) -> None:
    async with as_user(api, None) as anonymous:
        config = await anonymous.auth.config()  # public
        assert (config.auth_required, config.local_mode, config.hosted) == (True, False, False)
        with pytest.raises(AuthenticationError):
            await anonymous.auth.me()
    me = await client.auth.me()
    assert (me.auth_type, me.user.id, me.user.username, me.user.role) == (
        "api_key",
        USERS["alice"].id,
        "alice",
        "user",
    )
    ticket = await client.auth.websocket_ticket("/api/threads/x/stream")
    assert re.fullmatch("[0-9a-f]{64}", ticket.ticket) and ticket.expires_in == 30
    with pytest.raises(BadRequestError) as bad:
        await client.auth.websocket_ticket("threads/x")
    assert bad.value.message == "pathname must be a normalized /api/* path."


async def test_client_login_uses_the_session_until_logout(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    async with as_user(api, None) as client:
        with pytest.raises(AuthenticationError) as wrong:
            await client.auth.login("alice", "not the password")
        assert wrong.value.message == "Invalid username or password"
        result = await client.auth.login("alice", PASSWORD)
        assert result.token.startswith("tls_") and result.token not in repr(result)
        assert (result.user.id, result.user.username) == (USERS["alice"].id, "alice")
        me = await client.auth.me()
        assert (me.auth_type, me.user.username) == ("session", "alice")
        created = await client.threads.create("echo")  # the session acts as alice
        async with client.stream(created.thread_id) as stream:  # and opens streams
            first = await anext(aiter(stream))
        assert isinstance(first, ThreadStatusFrame) and first.snapshot
        await client.auth.logout()
        with pytest.raises(AuthenticationError):
            await client.auth.me()
    async with AsyncClient(api.base, token=result.token) as stale:
        with pytest.raises(AuthenticationError):  # the session is gone on the server too
            await stale.auth.me()


async def test_client_api_keys_create_list_delete_and_revoke(api: Api, client: AsyncClient) -> None:
    created = await client.api_keys.create("ci", expires_in_days=30)
    assert created.key.startswith("tlk_") and created.key not in repr(created)
    assert created.user_id == USERS["alice"].id and created.last_five == created.key[-5:]
    assert created.expires_at is not None and created.created_at is not None
    listed = {k.id: k for k in await client.api_keys.list()}
    assert listed[created.id].name == "ci" and "key" not in listed[created.id].model_dump()
    async with AsyncClient(api.base, token=created.key) as ci:
        assert (await ci.auth.me()).user.username == "alice"
        await ci.api_keys.revoke_current()
        with pytest.raises(AuthenticationError):
            await ci.auth.me()
    assert created.id not in {k.id for k in await client.api_keys.list()}
    spare = await client.api_keys.create("spare")
    await client.api_keys.delete(spare.id)
    with pytest.raises(NotFoundError) as gone:
        await client.api_keys.delete(spare.id)
    assert gone.value.message == "API key not found"
    with pytest.raises(PermissionDeniedError):
        await client.api_keys.create("for root", user_id=USERS["root"].id)
    with pytest.raises(PermissionDeniedError):
        await _session_revoke(api)
    async with as_user(api, "root") as root:
        owners = {k.user_id for k in await root.api_keys.list(all=True)}
        assert {USERS["alice"].id, USERS["bob"].id} <= owners
        made = await root.api_keys.create("for alice", user_id=USERS["alice"].id)
        assert made.user_id == USERS["alice"].id


async def _session_revoke(api: Api) -> None:
    """Only an API key may revoke itself: a session is refused with 403."""
    await api.set_password("bob", PASSWORD)
    async with as_user(api, None) as bob:
        await bob.auth.login("bob", PASSWORD)
        await bob.api_keys.revoke_current()


async def test_client_users_administration(api: Api, client: AsyncClient) -> None:
    async with as_user(api, "root") as root:
        with pytest.raises(BadRequestError) as short:
            await root.users.create("ana", password="short")
        assert short.value.details and short.value.details[0]["field"] == "password"
        ana = await root.users.create(
            "ana", password=PASSWORD, roles=["billing:read"], email="ana@example.org"
        )
        assert (ana.username, ana.role, ana.roles, ana.email) == (
            "ana",
            "user",
            ["billing:read"],
            "ana@example.org",
        )
        with pytest.raises(ConflictError) as taken:
            await root.users.create("ana")
        assert taken.value.message == "Username already exists"
        changed = await root.users.update(ana.id, role="api", display_name="Ana", email=None)
        assert (changed.role, changed.display_name, changed.email) == ("api", "Ana", None)
        names = [u.username for u in await root.users.list()]
        assert names == sorted(names) and "ana" in names
        async with as_user(api, None) as fresh:
            assert (await fresh.auth.login("ana", PASSWORD)).user.role == "api"
        await root.users.delete(ana.id)
        with pytest.raises(NotFoundError) as missing:
            await root.users.update(ana.id, display_name="x")
        assert missing.value.message == "User not found"
        with pytest.raises(NotFoundError):
            await root.users.delete(ana.id)
        with pytest.raises(ConflictError) as last:
            await root.users.delete(USERS["root"].id)
        assert last.value.message == "Cannot delete the last admin"
    with pytest.raises(PermissionDeniedError):
        await client.users.list()


async def test_sync_client_accounts_match_the_async_client(api: Api) -> None:
    await api.set_password("alice", PASSWORD)

    def work() -> tuple[list[str], str, str, list[str]]:
        with Client(api.base, token=api.keys["root"]) as root:
            names = [u.username for u in root.users.list()]
            made = root.users.create("sam")
            root.users.delete(made.id)
        with Client(api.base, token="") as alice:
            alice.auth.login("alice", PASSWORD)
            who = alice.auth.me().auth_type
            key = alice.api_keys.create("sync")
            keys = [k.name for k in alice.api_keys.list()]
            alice.api_keys.delete(key.id)
            alice.auth.logout()
            return names, who, key.name, keys

    names, who, key_name, keys = await asyncio.to_thread(work)
    async with as_user(api, "root") as root:
        assert names == [u.username for u in await root.users.list()]
    assert (who, key_name) == ("session", "sync") and "sync" in keys
