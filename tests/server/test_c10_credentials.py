"""Spec 10 §10.3, §10.5: credentials, login, sessions, API keys and users over real HTTP."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import httpx

from conftest import USERS, Api
from store_probe import probe
from threadloom.server.settings import ServerSettings

PASSWORD = "correct horse battery"


async def login(api: Api, username: str = "alice", password: str = PASSWORD) -> httpx.Response:
    return await api.client(None).post(
        "/api/auth/login", json={"username": username, "password": password}
    )


def cookie_client(api: Api, token: str, **headers: str) -> httpx.AsyncClient:
    client = api.client(None, **headers)
    client.cookies.set("threadloom_session", token)
    return client


async def test_c10_001_no_credentials_is_401(api: Api) -> None:
    response = await api.client(None).get("/api/threads")
    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized", "code": "unauthorized"}


async def test_c10_002_unknown_api_key_is_401(api: Api) -> None:
    response = await api.client(None).get(
        "/api/threads", headers={"Authorization": f"Bearer tlk_{secrets.token_hex(32)}"}
    )
    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


async def test_c10_003_api_key_acts_as_its_user(api: Api) -> None:
    response = await api.client("alice").get("/api/auth/me")
    assert response.status_code == 200
    body = response.json()
    assert body["authType"] == "api_key"
    assert body["user"]["id"] == USERS["alice"].id
    assert body["user"]["username"] == "alice"
    assert body["user"]["role"] == "user"
    assert body["user"]["roles"] == []


async def test_c10_004_login_returns_session_token_and_cookie(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    response = await login(api)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token"].startswith("tls_") and len(body["token"]) == 68
    assert body["user"] == {"id": USERS["alice"].id, "username": "alice", "role": "user"}
    cookie = response.headers["set-cookie"]
    assert f"threadloom_session={body['token']}" in cookie
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Max-Age=2592000" in cookie
    assert "Secure" not in cookie  # plain HTTP, no trusted proxy
    assert response.headers["cache-control"] == "no-store"
    me = await api.client(None, Authorization=f"Bearer {body['token']}").get("/api/auth/me")
    assert me.json()["authType"] == "session"


async def test_c10_005_wrong_password_and_unknown_user_answer_the_same(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    wrong = await login(api, "alice", "not the password at all")
    unknown = await login(api, "nobody", PASSWORD)
    no_password = await login(api, "bob", PASSWORD)  # bob has no password
    for response in (wrong, unknown, no_password):
        assert response.status_code == 401
        assert response.json() == {"error": "Invalid username or password", "code": "unauthorized"}
        assert "set-cookie" not in response.headers


async def test_c10_006_login_without_password_is_400(api: Api) -> None:
    client = api.client(None)
    empty = await client.post("/api/auth/login", json={})
    assert empty.status_code == 400
    assert empty.json()["error"] == "Password is required"
    no_user = await client.post("/api/auth/login", json={"password": "x"})
    assert no_user.status_code == 400
    assert no_user.json()["error"] == "Username is required"


async def test_c10_007_eleventh_failed_login_is_429(api: Api) -> None:
    client = api.client(None)
    for n in range(10):
        response = await client.post(
            "/api/auth/login", json={"username": f"u{n}", "password": "wrong password"}
        )
        assert response.status_code == 401
    response = await client.post(
        "/api/auth/login", json={"username": "u10", "password": "wrong password"}
    )
    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited"
    assert response.json()["error"] == "Too many authentication attempts. Try again later."
    assert int(response.headers["retry-after"]) > 0


async def test_c10_008_cookie_session_and_logout(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    token = (await login(api)).json()["token"]
    client = cookie_client(api, token)
    assert (await client.get("/api/threads")).status_code == 200
    out = await client.post("/api/auth/logout")
    assert out.status_code == 200 and out.json() == {"success": True}
    assert "Max-Age=0" in out.headers["set-cookie"]
    again = cookie_client(api, token)
    assert (await again.get("/api/threads")).status_code == 401


async def test_c10_009_cookie_request_from_another_origin_is_refused(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    token = (await login(api)).json()["token"]
    evil = {"Origin": "https://evil.example"}
    # On a loopback Host the origin guard answers first; on a public Host the cookie rule.
    local = await cookie_client(api, token).post(
        "/api/threads", json={"agent_id": "echo"}, headers=evil
    )
    assert local.status_code == 403
    public = await cookie_client(api, token, Host="api.example.com").post(
        "/api/threads", json={"agent_id": "echo"}, headers=evil
    )
    assert public.status_code == 403
    assert public.json() == {"error": "Cross-origin request refused", "code": "forbidden"}
    same = await cookie_client(api, token, Host="api.example.com").post(
        "/api/threads",
        json={"agent_id": "echo"},
        headers={"Origin": "http://api.example.com"},
    )
    assert same.status_code == 200
    listed = (await api.client("root").get("/api/threads")).json()
    assert listed["total"] == 1  # only the same-origin request created a thread


async def test_bearer_credentials_need_no_origin_check(api: Api) -> None:
    response = await api.client("alice", Host="api.example.com").post(
        "/api/threads", json={"agent_id": "echo"}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 200


async def test_c10_034_api_key_shown_once_and_stored_as_digest(api: Api) -> None:
    client = api.client("alice")
    created = await client.post("/api/api-keys", json={"name": "ci"})
    assert created.status_code == 201, created.text
    body = created.json()
    key = body["key"]
    assert key.startswith("tlk_") and len(key) == 68
    assert body["last_five"] == key[-5:] and body["key_prefix"] == "tlk_"
    assert body["user_id"] == USERS["alice"].id and body["expires_at"] is None
    listed = (await client.get("/api/api-keys")).json()["keys"]
    entry = next(k for k in listed if k["id"] == body["id"])
    assert entry["last_five"] == key[-5:] and "key" not in entry
    assert {k["user_id"] for k in listed} == {USERS["alice"].id}
    used = await api.client(None, Authorization=f"Bearer {key}").get("/api/auth/me")
    assert used.json()["user"]["username"] == "alice"
    store = probe(api.runtime)
    for table in store.tables():
        for row in store.rows(f"SELECT * FROM {table}"):
            assert not any(isinstance(v, str) and key in v for v in row), table
            assert not any(isinstance(v, str) and key[4:] in v for v in row), table


async def test_api_key_last_used_and_expiry(api: Api) -> None:
    client = api.client("alice")
    key = (await client.post("/api/api-keys", json={"name": "t", "expires_in_days": 1})).json()
    assert key["expires_at"] > key["created_at"]
    await api.client(None, Authorization=f"Bearer {key['key']}").get("/api/auth/me")
    listed = (await client.get("/api/api-keys")).json()["keys"]
    assert next(k for k in listed if k["id"] == key["id"])["last_used_at"] is not None
    bad = await client.post("/api/api-keys", json={"name": "", "expires_in_days": 0})
    assert bad.status_code == 400
    assert {d["field"] for d in bad.json()["details"]} == {"name", "expires_in_days"}


async def test_api_key_delete_and_ownership(api: Api) -> None:
    key = (await api.client("alice").post("/api/api-keys", json={"name": "x"})).json()
    foreign = await api.client("bob").delete(f"/api/api-keys/{key['id']}")
    assert foreign.status_code == 404
    assert foreign.json()["error"] == "API key not found"
    mine = await api.client("alice").delete(f"/api/api-keys/{key['id']}")
    assert mine.json() == {"success": True}
    gone = await api.client(None, Authorization=f"Bearer {key['key']}").get("/api/auth/me")
    assert gone.status_code == 401
    for_bob = await api.client("alice").post(
        "/api/api-keys", json={"name": "x", "user_id": USERS["bob"].id}
    )
    assert for_bob.status_code == 403
    by_root = await api.client("root").post(
        "/api/api-keys", json={"name": "x", "user_id": USERS["bob"].id}
    )
    assert by_root.status_code == 201 and by_root.json()["user_id"] == USERS["bob"].id
    every = (await api.client("root").get("/api/api-keys?all=true")).json()["keys"]
    assert len({k["user_id"] for k in every}) == len(USERS)


async def test_current_key_revokes_itself(api: Api) -> None:
    key = (await api.client("alice").post("/api/api-keys", json={"name": "x"})).json()["key"]
    client = api.client(None, Authorization=f"Bearer {key}")
    response = await client.delete("/api/auth/current-key")
    assert response.status_code == 200 and response.json() == {"revoked": True}
    assert (await client.get("/api/auth/me")).status_code == 401
    await api.set_password("alice", PASSWORD)
    token = (await login(api)).json()["token"]
    session = api.client(None, Authorization=f"Bearer {token}")
    assert (await session.delete("/api/auth/current-key")).status_code == 403


async def test_system_principal_must_name_the_key_owner(make_api: Callable[..., Any]) -> None:
    token = "t" * 40
    api = await make_api(ServerSettings(auth="required", admin_token=token))
    client = api.client(None, Authorization=f"Bearer {token}")
    missing = await client.post("/api/api-keys", json={"name": "ci"})
    assert missing.status_code == 400
    assert missing.json()["error"] == "user_id is required for this credential"
    made = await client.post("/api/api-keys", json={"name": "ci", "user_id": USERS["bob"].id})
    assert made.status_code == 201
    me = await client.get("/api/auth/me")
    assert me.json()["authType"] == "admin_token" and me.json()["user"]["id"] == "admin"


async def test_c10_035_user_creation_validates_and_refuses_duplicates(api: Api) -> None:
    client = api.client("root")
    short = await client.post("/api/users", json={"username": "ana", "password": "short"})
    assert short.status_code == 400
    assert short.json()["code"] == "invalid_request"
    made = await client.post("/api/users", json={"username": "ana", "password": "x" * 12})
    assert made.status_code == 201, made.text
    user = made.json()["user"]
    assert user["username"] == "ana" and user["role"] == "user"
    assert user["permissions"] is None and user["roles"] == []
    assert "password" not in user and "password_hash" not in user
    again = await client.post("/api/users", json={"username": "ana", "password": "y" * 12})
    assert again.status_code == 409
    assert again.json() == {"error": "Username already exists", "code": "conflict"}
    names = [u["username"] for u in (await client.get("/api/users")).json()["users"]]
    assert names == sorted(names) and "ana" in names
    login_ok = await login(api, "ana", "x" * 12)
    assert login_ok.status_code == 200


async def test_users_routes_are_admin_only(api: Api) -> None:
    response = await api.client("alice").get("/api/users")
    assert response.status_code == 403
    assert response.json()["code"] == "admin_required"


async def test_c10_036_last_admin_cannot_be_deleted(api: Api) -> None:
    client = api.client("root")
    response = await client.delete(f"/api/users/{USERS['root'].id}")
    assert response.status_code == 409
    assert response.json() == {"error": "Cannot delete the last admin", "code": "conflict"}
    demote = await client.patch(f"/api/users/{USERS['root'].id}", json={"role": "user"})
    assert demote.status_code == 409
    assert (await client.get("/api/auth/me")).json()["user"]["role"] == "admin"


async def test_user_deletion_revokes_credentials(api: Api) -> None:
    response = await api.client("root").delete(f"/api/users/{USERS['bob'].id}")
    assert response.json() == {"success": True}
    assert (await api.client("bob").get("/api/auth/me")).status_code == 401
    unknown = await api.client("root").delete(f"/api/users/{USERS['bob'].id}")
    assert unknown.status_code == 404 and unknown.json()["error"] == "User not found"


async def test_c10_037_password_change_revokes_sessions(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    token = (await login(api)).json()["token"]
    session = api.client(None, Authorization=f"Bearer {token}")
    assert (await session.get("/api/auth/me")).status_code == 200
    changed = await api.client("root").patch(
        f"/api/users/{USERS['alice'].id}", json={"password": "a new password!"}
    )
    assert changed.status_code == 200
    assert (await session.get("/api/auth/me")).status_code == 401
    assert (await cookie_client(api, token).get("/api/threads")).status_code == 401
    assert (await login(api, "alice", "a new password!")).status_code == 200


async def test_password_login_can_be_disabled(make_api: Callable[..., Any]) -> None:
    api = await make_api(ServerSettings(auth="required", password_login=False))
    response = await login(api)
    assert response.status_code == 404


async def test_auth_config_is_public(api: Api) -> None:
    response = await api.client(None).get("/api/auth/config")
    assert response.status_code == 200
    assert response.json() == {
        "localPassword": True,
        "authRequired": True,
        "localMode": False,
        "hosted": False,
        "github": False,
        "google": False,
        "platformConnected": False,
    }


async def test_secure_cookie_behind_a_trusted_proxy(make_api: Callable[..., Any]) -> None:
    api = await make_api(ServerSettings(auth="required", trusted_proxies=("127.0.0.0/8",)))
    await api.set_password("alice", PASSWORD)
    response = await api.client(None, **{"X-Forwarded-Proto": "https"}).post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    assert "; Secure" in response.headers["set-cookie"]


async def test_forwarded_proto_from_an_untrusted_peer_is_ignored(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    plain = await api.client(None, **{"X-Forwarded-Proto": "https"}).post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    assert "Secure" not in plain.headers["set-cookie"]


async def test_failed_bearer_authentications_are_rate_limited(api: Api) -> None:
    client = api.client(None, Authorization="Bearer tlk_" + "0" * 64)
    for _ in range(100):
        assert (await client.get("/api/auth/me")).status_code == 401
    limited = await client.get("/api/auth/me")
    assert limited.status_code == 429
    assert limited.headers["retry-after"]
    assert (await api.client("alice").get("/api/auth/me")).status_code == 200  # valid: never


async def test_expired_session_is_401(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    token = (await login(api)).json()["token"]
    creds = api.app.context.credentials
    real = creds.clock  # type: ignore[attr-defined]
    creds.clock = lambda: real() + 30 * 86_400_000_000  # type: ignore[attr-defined]
    try:
        me = await api.client(None, Authorization=f"Bearer {token}").get("/api/auth/me")
        assert me.status_code == 401
    finally:
        creds.clock = real  # type: ignore[attr-defined]
