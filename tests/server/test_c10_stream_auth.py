"""Spec 10 §10.9: how stream, log and event sockets authenticate and stay authenticated,
against the real routes of spec 09 on the uvicorn harness: tickets from the real ticket
route, keys and sessions from the real auth routes, revocations through the real key and
user routes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from test_c09_stream import open_ws, recv, refused, ws_url
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from conftest import USERS, Api
from threadloom.server.settings import ServerSettings

PASSWORD = "correct horse battery"


async def mint(api: Api, path: str, user: str = "alice", **headers: str) -> str:
    """A ticket from ``POST /api/auth/websocket-ticket`` (spec 10 §10.5.6)."""
    client = api.client(user, **headers)
    response = await client.post("/api/auth/websocket-ticket", json={"pathname": path})
    assert response.status_code == 200, response.text
    ticket: str = response.json()["ticket"]
    return ticket


async def new_key(api: Api, user: str = "alice") -> dict[str, Any]:
    """A fresh API key of ``user`` from ``POST /api/api-keys`` (``key`` and ``id``)."""
    response = await api.client(user).post("/api/api-keys", json={"name": "socket"})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def closed(ws: ClientConnection, within: float) -> list[dict[str, Any]]:
    """The frames received until the server closes ``ws``, which must happen ``within``
    seconds."""
    frames: list[dict[str, Any]] = []
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(within):
            while True:
                frames.append(await recv(ws, within))
    return frames


# -- tickets (rule 2) ---------------------------------------------------------------------


async def test_c10_017_ticket_is_bound_to_its_path_and_consumed_by_a_wrong_one(api: Api) -> None:
    thread = await api.thread()
    other = await api.thread()
    ticket = await mint(api, f"/api/threads/{thread}/stream")
    elsewhere = await refused(api, other, None, ticket=ticket)
    assert elsewhere.status_code == 401
    consumed = await refused(api, thread, None, ticket=ticket)
    assert consumed.status_code == 401
    fresh = await mint(api, f"/api/threads/{thread}/stream")
    async with await open_ws(api, thread, None, ticket=fresh) as ws:
        assert (await recv(ws))["type"] == "thread_status"


async def test_c10_018_ticket_is_refused_after_30_seconds(api: Api) -> None:
    thread = await api.thread()
    path = f"/api/threads/{thread}/stream"
    stale = await mint(api, path)
    ctx = api.app.context
    real = ctx.clock
    ctx.clock = lambda: real() + 31_000_000  # 31 s later
    try:
        response = await refused(api, thread, None, ticket=stale)
    finally:
        ctx.clock = real
    assert response.status_code == 401
    in_time = await mint(api, path)
    ctx.clock = lambda: real() + 29_000_000
    try:
        async with await open_ws(api, thread, None, ticket=in_time) as ws:
            assert (await recv(ws))["type"] == "thread_status"
    finally:
        ctx.clock = real


async def test_ticket_socket_is_rechecked_against_its_minting_key(api: Api) -> None:
    """Rule 2 and 5: deleting the key a ticket was minted with closes the socket it opened."""
    thread = await api.thread()
    key = await new_key(api)
    ticket = await mint(
        api, f"/api/threads/{thread}/stream", None, Authorization=f"Bearer {key['key']}"
    )
    async with await open_ws(api, thread, None, ticket=ticket) as ws:
        await recv(ws)
        deleted = await api.client("alice").delete(f"/api/api-keys/{key['id']}")
        assert deleted.status_code == 200
        await closed(ws, within=5)
        assert (ws.close_code, ws.close_reason) == (4001, "Credentials expired")


# -- ?token= (rule 3) ---------------------------------------------------------------------


async def test_c10_019_query_token_is_not_written_to_the_server_log(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    thread = await api.thread()
    key = api.keys["alice"]
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn.access")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(caplog.handler)
        logger.setLevel(logging.INFO)
    try:
        with caplog.at_level(logging.INFO):
            async with await open_ws(api, thread, None, token=key) as ws:
                assert (await recv(ws))["type"] == "thread_status"
            await refused(api, thread, None, token=key + "x")
            async with api.client(None).stream(
                "GET",
                f"/api/threads/{thread}/stream?token={key}",
                headers={"Accept": "text/event-stream"},
            ) as response:
                assert response.status_code == 200
            await asyncio.sleep(0.1)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(caplog.handler)
            logger.setLevel(level)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("uvicorn")]
    assert sum("token=***" in line for line in lines) >= 3, lines
    assert not [line for line in lines if key in line]


async def test_c10_020_query_tokens_can_be_switched_off(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(ServerSettings(auth="required", allow_query_token=False))
    thread = await api.thread()
    response = await refused(api, thread, None, token=api.keys["alice"])
    assert response.status_code == 401
    async with await open_ws(api, thread) as ws:  # the header still works
        assert (await recv(ws))["type"] == "thread_status"


async def test_failed_socket_authentications_count_toward_the_bearer_limit(api: Api) -> None:
    """Spec 10 §10.11: a wrong ``?token=`` or bearer header on a socket is a failed bearer
    authentication like one on an HTTP route; past 100 a minute the answer is 429."""
    thread = await api.thread()
    client = api.client(None, Authorization="Bearer tlk_" + "0" * 64)
    for _ in range(99):
        assert (await client.get("/api/auth/me")).status_code == 401
    assert (await refused(api, thread, None, token="tlk_" + "1" * 64)).status_code == 401
    limited = await refused(api, thread, None, token="tlk_" + "1" * 64)
    assert limited.status_code == 429
    assert limited.headers["retry-after"]
    async with await open_ws(api, thread) as ws:  # a valid key is never limited
        assert (await recv(ws))["type"] == "thread_status"


# -- cookies (rule 4) ---------------------------------------------------------------------


async def test_c10_021_cookie_upgrade_needs_an_allowed_origin(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    login = await api.client(None).post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    thread = await api.thread()
    url = ws_url(api, thread)
    cookie = {"Cookie": f"threadloom_session={login.json()['token']}"}
    with pytest.raises(InvalidStatus) as caught:
        await connect(url, additional_headers={**cookie, "Origin": "https://evil.example"})
    assert caught.value.response.status_code == 403
    with pytest.raises(InvalidStatus) as caught:
        await connect(url, additional_headers=cookie)  # no Origin at all
    assert caught.value.response.status_code == 403
    async with await connect(url, additional_headers={**cookie, "Origin": api.base}) as ws:
        assert (await recv(ws))["type"] == "thread_status"


# -- re-validation (rule 5) ---------------------------------------------------------------


async def test_c10_022_deleting_the_key_closes_its_socket_4001(api: Api) -> None:
    """Default settings (a 60 s re-check): the route that deletes the key makes this node
    re-check its sockets at once."""
    thread = await api.thread()
    key = await new_key(api)
    url = ws_url(api, thread)
    headers = {"Authorization": f"Bearer {key['key']}"}
    async with await connect(url, additional_headers=headers) as ws:
        assert (await recv(ws))["type"] == "thread_status"
        deleted = await api.client("alice").delete(f"/api/api-keys/{key['id']}")
        assert deleted.status_code == 200
        frames = await closed(ws, within=5)
        assert (ws.close_code, ws.close_reason) == (4001, "Credentials expired")
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "unauthorized"


async def test_logout_closes_the_sessions_sockets(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    login = await api.client(None).post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    bearer = {"Authorization": f"Bearer {login.json()['token']}"}
    events = api.base.replace("http://", "ws://") + "/api/events"
    async with await connect(events, additional_headers=bearer) as ws:
        out = await api.client(None, **bearer).post("/api/auth/logout")
        assert out.status_code == 200
        await closed(ws, within=5)
        assert (ws.close_code, ws.close_reason) == (4001, "Credentials expired")


async def test_demoted_admin_loses_a_foreign_thread_at_once(api: Api) -> None:
    """A role change through ``PATCH /api/users`` is re-checked at once: close 4003."""
    thread = await api.thread(user="alice")
    async with await open_ws(api, thread, "root") as ws:
        await recv(ws)
        root = api.client("root")
        promoted = await root.patch(f"/api/users/{USERS['bob'].id}", json={"role": "admin"})
        assert promoted.status_code == 200
        demoted = await root.patch(f"/api/users/{USERS['root'].id}", json={"role": "user"})
        assert demoted.status_code == 200
        await closed(ws, within=5)
        assert (ws.close_code, ws.close_reason) == (4003, "Access revoked")


async def test_demoted_admin_loses_the_all_scope_of_events(api: Api) -> None:
    """``/api/events?scope=all`` is for admins (spec 09 §9.14): a subscriber demoted while
    connected is closed 4003 instead of seeing every user's threads."""
    events = api.base.replace("http://", "ws://") + "/api/events?scope=all"
    bearer = {"Authorization": f"Bearer {api.keys['root']}"}
    async with await connect(events, additional_headers=bearer) as ws:
        root = api.client("root")
        assert (
            await root.patch(f"/api/users/{USERS['bob'].id}", json={"role": "admin"})
        ).status_code == 200
        thread = await api.thread(user="alice")
        created = await recv(ws)
        assert created["type"] == "thread_created" and created["thread"]["id"] == thread
        assert (
            await root.patch(f"/api/users/{USERS['root'].id}", json={"role": "user"})
        ).status_code == 200
        frames = await closed(ws, within=5)
        assert (ws.close_code, ws.close_reason) == (4003, "Access revoked")
    assert frames[-1] == {"type": "error", "code": "forbidden", "error": "Access revoked"}


async def test_log_socket_closes_when_the_logs_permission_is_withdrawn(api: Api) -> None:
    thread = await api.thread(user="alice")
    async with (
        await open_ws(api, thread, "alice", path="logs") as logs,
        await open_ws(api, thread, "alice") as plain,
    ):
        await recv(logs)
        await recv(plain)
        withdrawn = await api.client("root").patch(
            f"/api/users/{USERS['alice'].id}", json={"permissions": []}
        )
        assert withdrawn.status_code == 200
        await closed(logs, within=5)
        assert (logs.close_code, logs.close_reason) == (4003, "Access revoked")
        await plain.send("ping")  # the stream without log frames stays open
        assert await asyncio.wait_for(plain.recv(), 5) == "pong"
