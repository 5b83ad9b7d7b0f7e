"""Spec 09 §9.14: thread-list events on ``/api/events``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from test_c09_stream import quiet, recv, until
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from conftest import USERS, Api, stream_settings


async def events_ws(api: Api, user: str = "alice", **params: str) -> ClientConnection:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    url = api.base.replace("http://", "ws://") + "/api/events" + (f"?{query}" if query else "")
    return await connect(url, additional_headers={"Authorization": f"Bearer {api.keys[user]}"})


async def test_c09_041_thread_created_reaches_its_owner_only(api: Api) -> None:
    async with await events_ws(api) as alice, await events_ws(api, "bob") as bob:
        thread = await api.thread()
        frames = await until(alice, lambda f: f["type"] == "thread_created")
        assert await quiet(bob) == []
    item = frames[-1]["thread"]
    assert item["id"] == thread
    assert item["agent_name"] == "echo" and item["origin_agent_name"] == "echo"
    assert "agent_id" not in item
    assert item["user_id"] == USERS["alice"].id
    assert item["status"]["state"] == "idle"


async def test_c09_042_scope_all_is_for_admins_and_scope_is_checked(api: Api) -> None:
    with pytest.raises(InvalidStatus) as caught:
        await events_ws(api, "bob", scope="all")
    assert caught.value.response.status_code == 403
    body = json.loads(caught.value.response.body)
    assert body["error"] == "Forbidden: only admins may subscribe to all events"
    with pytest.raises(InvalidStatus) as caught:
        await events_ws(api, "bob", scope="x")
    assert caught.value.response.status_code == 400
    assert json.loads(caught.value.response.body)["error"] == (
        "Invalid event scope; expected 'user' or 'all'"
    )
    async with await events_ws(api, "root", scope="all") as root:
        thread = await api.thread(user="bob")
        frames = await until(root, lambda f: f["type"] == "thread_created")
    assert frames[-1]["thread"]["id"] == thread


async def test_events_activity_termination_and_delete(api: Api) -> None:
    thread = await api.thread()
    async with await events_ws(api) as ws:
        response = await api.client().post(
            f"/api/threads/{thread}/messages", json={"content": "hi"}
        )
        assert response.status_code == 202
        frames: list[dict[str, Any]] = await until(
            ws, lambda f: f["type"] == "thread_activity" and not f["executing"]
        )
        running = [f for f in frames if f["type"] == "thread_activity" and f["executing"]]
        assert running and running[0]["threadId"] == thread
        assert running[0]["status"]["state"] == "running"
        await api.client().post(f"/api/threads/{thread}/terminate", json={})
        frames = await until(ws, lambda f: f["type"] == "thread_updated")
        assert frames[-1]["thread"]["id"] == thread
        assert isinstance(frames[-1]["thread"]["terminated"], int)
        await api.client().delete(f"/api/threads/{thread}")
        frames = await until(ws, lambda f: f["type"] == "thread_deleted")
    assert frames[-1] == {"type": "thread_deleted", "threadId": thread}


async def test_events_patch_announces_thread_updated(api: Api) -> None:
    """Spec 08 §8.3.5: a PATCH sends ``thread_updated`` to ``/api/events`` subscribers."""
    thread = await api.thread()
    async with await events_ws(api) as ws:
        patched = await api.client().patch(f"/api/threads/{thread}", json={"tags": ["x"]})
        assert patched.status_code == 200
        frames = await until(ws, lambda f: f["type"] == "thread_updated")
    assert frames[-1]["thread"]["id"] == thread and frames[-1]["thread"]["tags"] == ["x"]


async def test_events_plain_get_is_400(api: Api) -> None:
    response = await api.client().get("/api/events")
    assert response.status_code == 400
    assert response.json()["error"] == "This endpoint requires a WebSocket connection"


async def test_events_ping_and_heartbeat_shape(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(stream_settings(heartbeat_s=0.2))
    async with await events_ws(api) as ws:
        beat = await recv(ws, 2)
        await ws.send("ping")
        answers = [await ws.recv() for _ in range(3)]  # heartbeats may come in between
        assert "pong" in answers
    assert beat["type"] == "heartbeat" and "seq" not in beat and isinstance(beat["ts"], int)
