"""Spec 10 §10.9 at ``threadloom.server.stream_auth``: how a socket upgrade authenticates.

The stream routes (spec 09) are not served yet, so these tests mount a probe socket that
does what a stream route does before accepting: ``authenticate_stream``, then ``refuse``
with the error's status, or accept and report the principal.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from conftest import USERS, Api
from threadloom.server.errors import ApiError
from threadloom.server.principal import digest
from threadloom.server.settings import ServerSettings
from threadloom.server.stream_auth import StreamAuth, authenticate_stream, recheck, refuse
from threadloom.server.tickets import take_ticket

PATH = "/api/probe/socket"
PASSWORD = "correct horse battery"


async def probe_socket(websocket: WebSocket) -> None:
    try:
        auth = await authenticate_stream(websocket)
    except ApiError as exc:
        await refuse(websocket, exc)
        return
    await websocket.accept()
    await websocket.send_text(json.dumps({"id": auth.principal.id, "via": auth.via}))
    await websocket.close()


async def probe_api(make_api: Callable[..., Any], **settings: Any) -> Api:
    api: Api = await make_api(ServerSettings(auth="required", **settings))
    api.app.app.add_api_websocket_route(PATH, probe_socket)
    return api


async def open_socket(api: Api, query: str = "", **headers: str) -> dict[str, Any] | int:
    """The probe's report, or the HTTP status the upgrade was refused with."""
    url = api.base.replace("http://", "ws://") + PATH + query
    try:
        async with connect(url, additional_headers=headers) as ws:
            report: dict[str, Any] = json.loads(await ws.recv())
            return report
    except InvalidStatus as exc:
        return int(exc.response.status_code)


async def ticket_for(api: Api, path: str, user: str = "alice") -> str:
    response = await api.client(user).post("/api/auth/websocket-ticket", json={"pathname": path})
    ticket: str = response.json()["ticket"]
    return ticket


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def server_log() -> Iterator[Callable[[], list[str]]]:
    """Call it after the server started (uvicorn configures its loggers at start-up): the
    lines ``uvicorn.error`` logs from then on, at INFO."""
    logger = logging.getLogger("uvicorn.error")
    level = logger.level
    handler = Keep()

    def attach() -> list[str]:
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        return handler.lines

    yield attach
    logger.removeHandler(handler)
    logger.setLevel(level)


async def test_ticket_opens_its_path_once(make_api: Callable[..., Any]) -> None:
    api = await probe_api(make_api)
    ticket = await ticket_for(api, PATH)
    assert await open_socket(api, f"?ticket={ticket}") == {
        "id": USERS["alice"].id,
        "via": "ticket",
    }
    assert await open_socket(api, f"?ticket={ticket}") == 401
    other = await ticket_for(api, "/api/threads/T2/stream")
    assert await open_socket(api, f"?ticket={other}") == 401


async def test_query_token_is_accepted_and_redacted_from_the_log(
    make_api: Callable[..., Any], server_log: Callable[[], list[str]]
) -> None:
    api = await probe_api(make_api)
    access_log = server_log()
    key = api.keys["alice"]
    assert await open_socket(api, f"?token={key}") == {"id": USERS["alice"].id, "via": "token"}
    lines = [line for line in access_log if "WebSocket" in line]
    assert lines and all("token=***" in line for line in lines)
    assert not any(key in line or key[4:] in line for line in access_log)


async def test_query_token_can_be_disabled(make_api: Callable[..., Any]) -> None:
    api = await probe_api(make_api, allow_query_token=False)
    assert await open_socket(api, f"?token={api.keys['alice']}") == 401
    header = await open_socket(api, Authorization=f"Bearer {api.keys['alice']}")
    assert header == {"id": USERS["alice"].id, "via": "header"}


async def test_cookie_upgrade_needs_a_same_origin(make_api: Callable[..., Any]) -> None:
    api = await probe_api(make_api)
    await api.set_password("alice", PASSWORD)
    login = await api.client(None).post(
        "/api/auth/login", json={"username": "alice", "password": PASSWORD}
    )
    cookie = f"threadloom_session={login.json()['token']}"
    evil = await open_socket(api, Cookie=cookie, Origin="https://evil.example")
    assert evil == 403
    assert await open_socket(api, Cookie=cookie) == 403  # no Origin at all
    same = await open_socket(api, Cookie=cookie, Origin=api.base)
    assert same == {"id": USERS["alice"].id, "via": "cookie"}


async def test_bad_credentials_are_401(make_api: Callable[..., Any]) -> None:
    api = await probe_api(make_api)
    assert await open_socket(api) == 401
    assert await open_socket(api, "?token=tlk_" + "0" * 64) == 401
    assert await open_socket(api, "?ticket=" + "0" * 64) == 401


async def test_recheck_sees_a_deleted_key(make_api: Callable[..., Any]) -> None:
    api = await probe_api(make_api)
    key = (await api.client("alice").post("/api/api-keys", json={"name": "ws"})).json()
    ticket = await ticket_for(api, PATH, "alice")
    ctx = api.app.context
    taken = await take_ticket(ctx, ticket, PATH)
    assert taken is not None
    by_ticket = StreamAuth(taken[0], taken[1].auth_type, taken[1].credential_digest, "ticket")
    by_key = StreamAuth(taken[0], "api_key", digest(key["key"]), "header")
    assert (await recheck(ctx, by_key)) is not None
    await api.client("alice").delete(f"/api/api-keys/{key['id']}")
    assert await recheck(ctx, by_key) is None
    assert await recheck(ctx, by_ticket) is not None  # minted with alice's fixture key
