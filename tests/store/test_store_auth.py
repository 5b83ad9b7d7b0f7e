"""The users, API keys, sessions and tickets of the Store protocol (spec 10), on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from threadloom.errors import LastAdmin, UsernameTaken
from threadloom.store import open_store
from threadloom.store.base import ApiKeyRow, SessionRow, Store, TicketRow, UserPatch, UserRow


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


def user(name: str, role: str = "user", **fields: object) -> UserRow:
    return UserRow(id=f"id-{name}", username=name, role=role, created_at_us=1, **fields)  # type: ignore[arg-type]


def key(key_id: str, user_id: str, used: int | None = None) -> ApiKeyRow:
    return ApiKeyRow(
        id=key_id,
        user_id=user_id,
        name=key_id,
        key_prefix="tlk_",
        last_five="abcde",
        created_at_us=1,
        last_used_at_us=used,
    )


async def test_users_round_trip_in_username_order(store: Store) -> None:
    assert not await store.has_credentials()
    await store.create_user(user("zed", roles=("a:b",), permissions=("logs",), email="z@x"))
    await store.create_user(user("ann", "admin"))
    assert await store.has_credentials()
    assert [u.username for u in await store.list_users()] == ["ann", "zed"]
    zed = await store.get_user_by_name("zed")
    assert zed == user("zed", roles=("a:b",), permissions=("logs",), email="z@x")
    assert await store.get_user("id-ann") == user("ann", "admin")
    with pytest.raises(UsernameTaken):
        await store.create_user(UserRow(id="other", username="zed", role="user", created_at_us=1))


async def test_password_change_revokes_sessions_only_of_that_user(store: Store) -> None:
    await store.create_user(user("a"))
    await store.create_user(user("b"))
    await store.create_session("sa", SessionRow("id-a", 1, 2**60))
    await store.create_session("sb", SessionRow("id-b", 1, 2**60))
    updated = await store.update_user("id-a", UserPatch(set_password=True, password_hash="h"))
    assert updated is not None and updated.password_hash == "h"
    assert await store.session_by_digest("sa") is None
    assert await store.session_by_digest("sb") is not None
    roles = await store.update_user("id-b", UserPatch(roles=("x",), profile={"email": "b@x"}))
    assert roles is not None and roles.roles == ("x",) and roles.email == "b@x"
    assert await store.session_by_digest("sb") is not None
    assert await store.update_user("missing", UserPatch(roles=())) is None


async def test_last_admin_is_kept(store: Store) -> None:
    await store.create_user(user("root", "admin"))
    with pytest.raises(LastAdmin):
        await store.update_user("id-root", UserPatch(role="user"))
    with pytest.raises(LastAdmin):
        await store.delete_user("id-root")
    await store.create_user(user("second", "admin"))
    assert await store.delete_user("id-root")
    assert not await store.delete_user("id-root")


async def test_deleting_a_user_deletes_keys_and_sessions(store: Store) -> None:
    await store.create_user(user("a"))
    await store.create_api_key(key("k1", "id-a"), "digest-1")
    await store.create_session("s1", SessionRow("id-a", 1, 2**60))
    found = await store.api_key_by_digest("digest-1")
    assert found is not None and found[0].id == "k1" and found[1].username == "a"
    assert await store.delete_user("id-a")
    assert await store.api_key_by_digest("digest-1") is None
    assert await store.session_by_digest("s1") is None
    assert await store.list_api_keys(None) == []


async def test_key_use_is_recorded_at_most_once_a_minute(store: Store) -> None:
    await store.create_user(user("a"))
    await store.create_api_key(key("k1", "id-a"), "d1")
    await store.touch_api_key("k1", 100_000_000)
    await store.touch_api_key("k1", 130_000_000)  # 30 s later: not written
    assert (await store.get_api_key("k1")).last_used_at_us == 100_000_000  # type: ignore[union-attr]
    await store.touch_api_key("k1", 160_000_000)
    assert (await store.get_api_key("k1")).last_used_at_us == 160_000_000  # type: ignore[union-attr]


async def test_keys_listed_per_user_and_deleted_by_digest(store: Store) -> None:
    await store.create_user(user("a"))
    await store.create_user(user("b"))
    await store.create_api_key(key("k1", "id-a"), "d1")
    await store.create_api_key(key("k2", "id-b"), "d2")
    assert [k.id for k in await store.list_api_keys("id-a")] == ["k1"]
    assert {k.id for k in await store.list_api_keys(None)} == {"k1", "k2"}
    assert await store.delete_api_key_by_digest("d2")
    assert not await store.delete_api_key_by_digest("d2")
    assert await store.delete_api_key("k1")
    assert await store.get_api_key("k1") is None


async def test_a_ticket_is_taken_once(store: Store) -> None:
    ticket = TicketRow("/api/events", "api_key", "id-a", "d1", 2**60)
    await store.create_ticket("t1", ticket)
    assert await store.take_ticket("t1") == ticket
    assert await store.take_ticket("t1") is None
