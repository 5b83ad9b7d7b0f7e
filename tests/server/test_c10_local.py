"""Spec 10 §10.7, §10.8: CORS, the local development principal and the origin guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import Api
from threadloom.server.settings import ServerSettings

LOCAL = {"Host": "localhost:8000"}


async def local_api(make_api: Callable[..., Any], **settings: Any) -> Api:
    """A loopback server in ``auth=auto`` with no credential configured."""
    api: Api = await make_api(ServerSettings(auth="auto", **settings), with_keys=False)
    return api


async def test_c10_023_local_principal_without_credentials(
    make_api: Callable[..., Any],
) -> None:
    api = await local_api(make_api)
    client = api.client(None, **LOCAL)
    assert (await client.get("/api/threads")).status_code == 200
    me = (await client.get("/api/auth/me")).json()
    assert me["authType"] == "local"
    assert me["user"]["role"] == "admin" and me["user"]["id"] == "local"
    config = (await client.get("/api/auth/config")).json()
    assert config["localMode"] is True and config["authRequired"] is False
    created = await client.post("/api/threads", json={"agent_id": "echo"})
    thread = created.json()["threadId"]
    assert (await client.get(f"/api/threads/{thread}")).json()["thread"]["user_id"] is None


async def test_c10_024_non_loopback_host_needs_credentials(
    make_api: Callable[..., Any],
) -> None:
    api = await local_api(make_api)
    response = await api.client(None, Host="evil.example").get("/api/threads")
    assert response.status_code == 401
    config = (await api.client(None, Host="evil.example").get("/api/auth/config")).json()
    assert config["localMode"] is False


async def test_c10_025_proxy_headers_need_credentials(make_api: Callable[..., Any]) -> None:
    api = await local_api(make_api)
    for name, value in (
        ("X-Forwarded-For", "203.0.113.9"),
        ("X-Real-IP", "203.0.113.9"),
        ("Forwarded", "for=203.0.113.9"),
    ):
        response = await api.client(None, **LOCAL).get("/api/threads", headers={name: value})
        assert response.status_code == 401, name


async def test_invalid_credential_never_falls_back_to_local(
    make_api: Callable[..., Any],
) -> None:
    api = await local_api(make_api)
    client = api.client(None, **LOCAL)
    bad = await client.get("/api/threads", headers={"Authorization": "Bearer tlk_nope"})
    assert bad.status_code == 401
    malformed = await client.get("/api/threads", headers={"Authorization": "Basic abc"})
    assert malformed.status_code == 401
    client.cookies.set("threadloom_session", "tls_" + "0" * 64)
    assert (await client.get("/api/threads")).status_code == 401


async def test_c10_026_origin_guard_blocks_cross_origin_pages(
    make_api: Callable[..., Any],
) -> None:
    api = await local_api(make_api)
    client = api.client(None, **LOCAL)
    for headers in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
    ):
        response = await client.get("/api/threads", headers=headers)
        assert response.status_code == 403, headers
        assert response.json() == {
            "error": "Cross-origin access is disabled for local development",
            "code": "cross_origin_forbidden",
        }
        assert response.headers["cache-control"] == "no-store"
        assert "access-control-allow-origin" not in response.headers
    same = await client.get(
        "/api/threads",
        headers={"Origin": "http://localhost:8000", "Sec-Fetch-Site": "same-origin"},
    )
    assert same.status_code == 200


async def test_c10_027_listed_origin_passes_the_guard_with_cors(
    make_api: Callable[..., Any],
) -> None:
    api = await local_api(make_api, cors_origins=("http://localhost:5173",))
    response = await api.client(None, **LOCAL).get(
        "/api/threads", headers={"Origin": "http://localhost:5173"}
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert "Origin" in response.headers["vary"]
    assert "access-control-allow-credentials" not in response.headers


async def test_credentials_turn_local_mode_off(make_api: Callable[..., Any]) -> None:
    api = await make_api(ServerSettings(auth="auto"))  # fixture users exist
    response = await api.client(None, **LOCAL).get("/api/threads")
    assert response.status_code == 401


async def test_first_user_created_turns_local_mode_off(make_api: Callable[..., Any]) -> None:
    api = await local_api(make_api)
    client = api.client(None, **LOCAL)
    made = await client.post("/api/users", json={"username": "first", "role": "admin"})
    assert made.status_code == 201
    assert (await client.get("/api/threads")).status_code == 401


async def test_c10_029_cors_closed_by_default(api: Api) -> None:
    public = {"Host": "api.example.com", "Origin": "https://app.example"}
    preflight = await api.client(None, **public).options(
        "/api/threads", headers={"Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 403
    assert preflight.json()["code"] == "cross_origin_forbidden"
    assert preflight.json()["error"] == "Origin not allowed"
    for response in (
        preflight,
        await api.client("alice", **public).get("/api/threads"),
        await api.client(None, **public).get("/api/threads"),
        await api.client(None, **public).get("/api/health"),
    ):
        assert "access-control-allow-origin" not in response.headers


async def test_c10_030_preflight_of_an_allowed_origin(make_api: Callable[..., Any]) -> None:
    api = await make_api(ServerSettings(auth="required", cors_origins=("https://app.example",)))
    response = await api.client(None, Host="api.example.com").options(
        "/api/threads",
        headers={"Origin": "https://app.example", "Access-Control-Request-Method": "PATCH"},
    )
    assert response.status_code == 204
    assert "PATCH" in response.headers["access-control-allow-methods"]
    assert response.headers["access-control-max-age"] == "86400"
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    assert "Authorization" in response.headers["access-control-allow-headers"]
