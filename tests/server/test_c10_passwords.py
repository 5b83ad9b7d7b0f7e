"""Passwords hashed with argon2id; hashes of the earlier scrypt scheme still verify and are
rehashed at the next login, sessions kept (spec 10 §10.12 rule 1, C10-038, C10-039). A real
server and store (SQLite and PostgreSQL); the scrypt hash is made as the earlier code made
it, with hashlib."""

from __future__ import annotations

import base64
import hashlib
import secrets

from test_c10_credentials import PASSWORD, login

from conftest import USERS, Api
from threadloom.server.auth.passwords import hash_password, needs_rehash, verify_password
from threadloom.store.base import UserPatch


def scrypt_hash(password: str) -> str:
    """A hash in the earlier stored form, ``scrypt$16384$8$1$<salt>$<key>``."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(
        password.encode(), salt=salt, n=16384, r=8, p=1, dklen=64, maxmem=64 * 1024 * 1024
    )
    encode = base64.b64encode
    return f"scrypt$16384$8$1${encode(salt).decode()}${encode(key).decode()}"


def test_hashes_are_argon2id_and_old_ones_verify() -> None:
    new = hash_password(PASSWORD)
    assert new.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert verify_password(PASSWORD, new) and not verify_password("wrong password!", new)
    assert not needs_rehash(new)
    old = scrypt_hash(PASSWORD)
    assert verify_password(PASSWORD, old) and not verify_password("wrong password!", old)
    assert needs_rehash(old)
    weaker = "$argon2id$v=19$m=8,t=1,p=1$" + new.rsplit("$", 2)[1] + "$" + new.rsplit("$", 1)[1]
    assert needs_rehash(weaker)
    for unusable in (None, "", "plain", "scrypt$x", "$argon2id$broken"):
        assert not verify_password(PASSWORD, unusable)


async def test_c10_038_new_passwords_are_argon2id(api: Api) -> None:
    created = await api.client("root").post(
        "/api/users", json={"username": "ana", "password": PASSWORD}
    )
    assert created.status_code == 201, created.text
    row = await api.runtime.store.get_user_by_name("ana")
    assert row is not None and (row.password_hash or "").startswith(
        "$argon2id$v=19$m=65536,t=3,p=4$"
    )
    assert (await login(api, "ana")).status_code == 200
    assert (await login(api, "ana", "not the password")).status_code == 401


async def test_c10_039_an_scrypt_hash_is_upgraded_at_login(api: Api) -> None:
    store = api.runtime.store
    alice = USERS["alice"].id
    old = scrypt_hash(PASSWORD)
    await store.update_user(alice, UserPatch(set_password=True, password_hash=old))
    first = await login(api)
    assert first.status_code == 200, first.text
    session = first.json()["token"]
    row = await store.get_user(alice)
    assert row is not None and row.password_hash is not None
    assert row.password_hash.startswith("$argon2id$") and verify_password(
        PASSWORD, row.password_hash
    )
    me = await api.client(None, Authorization=f"Bearer {session}").get("/api/auth/me")
    assert me.status_code == 200, me.text  # the session of the upgrading login is kept
    assert (await login(api)).status_code == 200  # and the new hash logs in

    await store.update_user(alice, UserPatch(set_password=True, password_hash=old))
    assert (await login(api, password="not the password")).status_code == 401
    unchanged = await store.get_user(alice)
    assert unchanged is not None and unchanged.password_hash == old  # a failure upgrades nothing

    stale = await store.rehash_password(alice, "scrypt$stale", hash_password(PASSWORD))
    assert stale is False
    still = await store.get_user(alice)
    assert still is not None and still.password_hash == old
