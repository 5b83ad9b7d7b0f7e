"""Spec 10 §10.5.6, §10.9 rule 2: minting WebSocket tickets over HTTP and redeeming them on
the real stream and event sockets (the path binding, single use and expiry are C10-017 and
C10-018 in ``test_c10_stream_auth.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from test_c09_stream import open_ws, recv, refused
from websockets.asyncio.client import connect

from conftest import Api
from threadloom.server.settings import ServerSettings
from threadloom.wire.patterns import normalized_api_path


async def mint(api: Api, path: str, user: str = "alice") -> str:
    response = await api.client(user).post("/api/auth/websocket-ticket", json={"pathname": path})
    assert response.status_code == 200, response.text
    ticket: str = response.json()["ticket"]
    return ticket


async def test_c10_016_ticket_minting(api: Api) -> None:
    client = api.client("alice")
    thread = await api.thread()
    bad = await client.post("/api/auth/websocket-ticket", json={"pathname": "threads/x"})
    assert bad.status_code == 400
    assert bad.json()["error"] == "pathname must be a normalized /api/* path."
    empty = await client.post("/api/auth/websocket-ticket")
    assert empty.status_code == 400
    assert empty.json()["error"] == "A JSON body is required."
    good = await client.post(
        "/api/auth/websocket-ticket", json={"pathname": f"/api/threads/{thread}/stream"}
    )
    assert good.status_code == 200
    body = good.json()
    assert re.fullmatch(r"[0-9a-f]{64}", body["ticket"])
    assert body["expires_in"] == 30
    assert good.headers["cache-control"] == "no-store"
    anonymous = await api.client(None).post(
        "/api/auth/websocket-ticket", json={"pathname": "/api/threads/x/stream"}
    )
    assert anonymous.status_code == 401


def test_pathname_must_be_normalized() -> None:
    assert normalized_api_path("/api/threads/t/stream")
    assert normalized_api_path("/api/events")
    for bad in (
        "threads/x",
        "/api/",
        "/api/threads/",
        "/api//x",
        "/api/./x",
        "/api/threads/../users",
        "/api/x?ticket=1",
        "/api/x#y",
        "/other/x",
        None,
        5,
    ):
        assert not normalized_api_path(bad), bad


async def test_ticket_rechecks_its_minting_credential(api: Api) -> None:
    thread = await api.thread()
    key = (await api.client("alice").post("/api/api-keys", json={"name": "ws"})).json()
    client = api.client(None, Authorization=f"Bearer {key['key']}")
    response = await client.post(
        "/api/auth/websocket-ticket", json={"pathname": f"/api/threads/{thread}/stream"}
    )
    ticket = response.json()["ticket"]
    assert (await api.client("alice").delete(f"/api/api-keys/{key['id']}")).status_code == 200
    assert (await refused(api, thread, None, ticket=ticket)).status_code == 401


async def test_ticket_minting_is_rate_limited(api: Api) -> None:
    client = api.client("bob")
    for _ in range(60):
        ok = await client.post("/api/auth/websocket-ticket", json={"pathname": "/api/events"})
        assert ok.status_code == 200
    limited = await client.post("/api/auth/websocket-ticket", json={"pathname": "/api/events"})
    assert limited.status_code == 429
    assert "retry-after" in limited.headers


async def test_tickets_are_not_credentials_for_ordinary_routes(api: Api) -> None:
    ticket = await mint(api, "/api/threads")
    response = await api.client(None).get(f"/api/threads?ticket={ticket}")
    assert response.status_code == 401


async def test_local_principal_ticket(make_api: Callable[..., Any]) -> None:
    api = await make_api(ServerSettings(auth="auto"), with_keys=False)
    client = api.client(None, Host="localhost")
    thread = (await client.post("/api/threads", json={"agent_id": "echo"})).json()["threadId"]
    response = await client.post("/api/auth/websocket-ticket", json={"pathname": "/api/events"})
    assert response.status_code == 200
    url = api.base.replace("http://", "ws://") + "/api/events?ticket=" + response.json()["ticket"]
    async with await connect(url) as ws:
        await ws.send("ping")
        assert await ws.recv() == "pong"
    stream = await client.post(
        "/api/auth/websocket-ticket", json={"pathname": f"/api/threads/{thread}/stream"}
    )
    async with await open_ws(api, thread, None, ticket=stream.json()["ticket"]) as ws:
        assert (await recv(ws))["type"] == "thread_status"
