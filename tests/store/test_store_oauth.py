"""The OAuth clients, codes and tokens of the Store protocol (spec 10 §10.15), on every store:
a code and a refresh token are taken once even when presented at the same moment, a reused
code revokes its grant, and a user's deletion or password change ends their grants."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from threadloom.records import OAuthClient, OAuthCode, OAuthToken
from threadloom.store import open_store
from threadloom.store.base import Store, UserPatch, UserRow


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


def code(digest: str, user_id: str = "id-ana") -> OAuthCode:
    return OAuthCode(
        code_digest=digest,
        client_id="tlc_a",
        user_id=user_id,
        redirect_uri="http://localhost:1/cb",
        scope="threadloom",
        resource="http://127.0.0.1:8000/mcp",
        code_challenge="challenge",
        code_challenge_method="S256",
        expires_at_us=2**62,
    )


def token(n: int, grant: str = "g1", user_id: str = "id-ana") -> OAuthToken:
    return OAuthToken(
        access_digest=f"access-{n}",
        refresh_digest=f"refresh-{n}",
        grant_id=grant,
        client_id="tlc_a",
        user_id=user_id,
        scope="threadloom",
        resource="http://127.0.0.1:8000/mcp",
        issued_at_us=1,
        expires_at_us=2**62,
        refresh_expires_at_us=2**62,
    )


async def users(store: Store) -> None:
    for name in ("ana", "ben"):
        await store.create_user(
            UserRow(id=f"id-{name}", username=name, role="user", created_at_us=1)
        )


async def test_c10_054_a_code_is_taken_once_and_its_reuse_revokes_the_grant(
    store: Store,
) -> None:
    await users(store)
    client = OAuthClient(client_id="tlc_a", metadata='{"redirect_uris": []}', created_at_us=1)
    await store.create_oauth_client(client)
    assert await store.get_oauth_client("tlc_a") == client
    await store.create_oauth_code(code("c1"))
    taken = await asyncio.gather(*(store.take_oauth_code("c1") for _ in range(8)))
    fresh = [t for t in taken if t is not None and not t.used]
    assert fresh == [code("c1")]  # exactly one presentation gets the code
    assert await store.create_oauth_token(token(1, grant="c1"))
    assert await store.oauth_token_by_digest("access-1") is not None
    again = await store.take_oauth_code("c1")
    assert again is not None and again.used
    assert await store.oauth_token_by_digest("access-1") is None  # the grant's token revoked
    assert await store.take_oauth_code("unknown") is None


async def test_c10_055_a_refresh_token_is_taken_once(store: Store) -> None:
    await users(store)
    assert await store.create_oauth_token(token(1))
    taken = await asyncio.gather(*(store.take_oauth_refresh("refresh-1") for _ in range(8)))
    assert [t for t in taken if t is not None] == [token(1)]
    assert await store.oauth_token_by_digest("access-1") is None
    assert await store.create_oauth_token(token(5))  # the rotated pair, same grant
    assert await store.take_oauth_refresh("refresh-1") is None  # spent, presented again
    assert await store.oauth_token_by_digest("access-5") is None  # the grant ended
    assert await store.create_oauth_token(token(2))
    assert await store.get_oauth_refresh("refresh-2") == token(2)
    assert await store.revoke_oauth_token("refresh-2") == token(2)
    assert await store.revoke_oauth_token("access-2") is None


async def test_c10_058_a_users_deletion_or_new_password_ends_their_grants(store: Store) -> None:
    await users(store)
    await store.create_oauth_code(code("c1"))
    assert await store.create_oauth_token(token(1))
    assert await store.create_oauth_token(token(2, user_id="id-ben"))
    await store.update_user("id-ana", UserPatch(set_password=True, password_hash=None))
    assert await store.oauth_token_by_digest("access-1") is None
    assert await store.take_oauth_code("c1") is None
    found = await store.oauth_token_by_digest("access-2")
    assert found is not None and found[1].username == "ben"
    assert await store.delete_user("id-ben")
    assert await store.oauth_token_by_digest("access-2") is None
    assert not await store.create_oauth_token(token(3, user_id="id-ben"))  # no such user
