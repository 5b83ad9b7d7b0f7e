"""Spec 09: the thread stream over a real WebSocket against the uvicorn harness."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from conftest import USERS, Api, stream_settings
from threadloom.providers.scripted import Reply
from threadloom.server.auth.principal import digest
from threadloom.server.settings import ServerSettings
from threadloom.store.base import UserPatch

MESSAGE_KEYS = {
    "id",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "tool_status",
    "status",
    "attachments",
    "reasoning_content",
    "reasoning_details",
    "prompt",
    "log_id",
    "created_at",
    "parent_id",
    "depth",
    "silent",
    "subagent_id",
}


def ws_url(api: Api, thread: str, path: str = "stream", **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    base = api.base.replace("http://", "ws://")
    return f"{base}/api/threads/{thread}/{path}" + (f"?{query}" if query else "")


async def open_ws(
    api: Api,
    thread: str,
    user: str | None = "alice",
    path: str = "stream",
    *,
    max_queue: int = 16,
    compression: str | None = "deflate",
    **params: Any,
) -> ClientConnection:
    """A stream socket; ``max_queue`` is how many frames the client buffers before it stops
    reading from the network."""
    headers = {"Authorization": f"Bearer {api.keys[user]}"} if user else {}
    return await connect(
        ws_url(api, thread, path, **params),
        additional_headers=headers,
        max_queue=max_queue,
        compression=compression,
    )


async def refused(api: Api, thread: str, user: str | None = "alice", **params: Any) -> Any:
    """The HTTP response that refused the upgrade."""
    with pytest.raises(InvalidStatus) as caught:
        await open_ws(api, thread, user, **params)
    return caught.value.response


async def recv(ws: ClientConnection, timeout: float = 5.0) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), timeout))
    return frame


async def until(
    ws: ClientConnection, done: Callable[[dict[str, Any]], bool], timeout: float = 10.0
) -> list[dict[str, Any]]:
    """Frames received up to and including the first one ``done`` accepts."""
    frames: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while True:
            frames.append(await recv(ws, timeout))
            if done(frames[-1]):
                return frames


async def quiet(ws: ClientConnection, seconds: float = 0.3) -> list[dict[str, Any]]:
    """Every frame that arrives within ``seconds``."""
    frames: list[dict[str, Any]] = []
    try:
        while True:
            frames.append(await recv(ws, seconds))
    except TimeoutError:
        return frames


def settled_idle(frame: dict[str, Any]) -> bool:
    return frame["type"] == "thread_status" and frame["status"]["state"] != "running"


async def exchange(api: Api, thread: str, text: str) -> str:
    response = await api.client().post(f"/api/threads/{thread}/messages", json={"content": text})
    assert response.status_code == 202, response.text
    await api.settle(thread)
    message_id: str = response.json()["messageId"]
    return message_id


async def run_frames(
    api: Api, thread: str, text: str = "hi", **params: Any
) -> tuple[str, list[dict[str, Any]]]:
    """Open WS(T, params), send ``text``, collect frames until the run settles."""
    async with await open_ws(api, thread, **params) as ws:
        snapshot = await recv(ws)
        assert snapshot["type"] == "thread_status"
        response = await api.client().post(
            f"/api/threads/{thread}/messages", json={"content": text}
        )
        frames = await until(ws, settled_idle)
    return response.json()["messageId"], frames


async def head_of(api: Api, thread: str) -> int:
    seq: int = (await api.client().get(f"/api/threads/{thread}")).json()["seq"]
    return seq


# -- connecting and the opening sequence ---------------------------------------------------


async def test_c09_001_first_frame_is_thread_status(api: Api) -> None:
    thread = await api.thread()
    await exchange(api, thread, "before")
    seq = await head_of(api, thread)
    async with await open_ws(api, thread) as ws:
        first = await recv(ws)
    assert first["type"] == "thread_status"
    assert first["snapshot"] is True
    assert first["seq"] == seq == first["head"]
    assert first["thread_id"] == thread
    assert first["status"]["state"] in ("idle", "running", "failed")
    assert first["terminated"] is None


async def test_c09_002_frames_of_a_send_arrive_in_commit_order(api: Api) -> None:
    thread = await api.thread()
    message_id, frames = await run_frames(api, thread, "hi")
    kinds = [
        (f["type"], f.get("data", {}).get("role"), f.get("data", {}).get("status")) for f in frames
    ]
    queued = frames[0]
    assert queued["type"] == "message_data" and queued["message_id"] == message_id
    assert queued["data"]["status"] == "pending"
    assert queued["data"]["metadata"]["queued"] is True
    running = next(i for i, f in enumerate(frames) if f["type"] == "thread_status")
    assert frames[running]["status"]["state"] == "running"
    stored = next(
        i
        for i, f in enumerate(frames)
        if f["type"] == "message_data" and f["message_id"] == message_id and i > 0
    )
    assert stored > running
    assert frames[stored]["data"]["status"] == "completed"
    assert "queued" not in (frames[stored]["data"].get("metadata") or {})
    assistant = [
        i
        for i, f in enumerate(frames)
        if f["type"] == "message_data" and f["data"]["role"] == "assistant"
    ]
    pending, completed = assistant[0], assistant[-1]
    assert pending > stored
    assert frames[pending]["data"]["status"] == "pending"
    assert frames[completed]["data"]["status"] == "completed"
    assert frames[completed]["data"]["content"] == "echo: hi"
    chunks = [i for i, f in enumerate(frames) if f["type"] == "message_chunk"]
    assert chunks, kinds
    assert all(pending < i < completed for i in chunks)
    last = frames[-1]
    assert last["status"] == {
        "state": "idle",
        "since": last["status"]["since"],
        "reason": "stop_on_response",
        "error": None,
    }
    assert completed < len(frames) - 1


async def test_c09_003_durable_seq_increases_and_chunks_carry_the_head(api: Api) -> None:
    thread = await api.thread()
    # an unfiltered socket: a filtered one skips durable frames (log rows) whose seq the
    # chunks after them carry as the head (§9.6 rule 3)
    _, frames = await run_frames(api, thread, logs="true", includeSilent="true", depth=99)
    last_durable: int | None = None
    for frame in frames:
        if frame["type"] in ("message_chunk", "reasoning_chunk", "event", "heartbeat"):
            assert frame["seq"] == last_durable
        elif frame["type"] in ("message_data", "thread_status", "log_data"):
            assert last_durable is None or frame["seq"] > last_durable
            last_durable = frame["seq"]


async def test_c09_004_chunks_at_their_offsets_give_the_completed_content(api: Api) -> None:
    api.echo.reset(lambda request: Reply(content="echo: a longer answer in pieces", chunk_size=4))
    thread = await api.thread()
    _, frames = await run_frames(api, thread)
    text = ""
    chunks = [f for f in frames if f["type"] == "message_chunk"]
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk["offset"] <= len(text)
        text = text[: chunk["offset"]] + chunk["chunk"]
    completed = [
        f for f in frames if f["type"] == "message_data" and f["data"]["role"] == "assistant"
    ][-1]
    assert text == completed["data"]["content"] == "echo: a longer answer in pieces"


async def test_c09_005_message_data_carries_the_complete_record(api: Api) -> None:
    thread = await api.thread()
    _, frames = await run_frames(api, thread)
    records = [f["data"] for f in frames if f["type"] == "message_data"]
    assert records
    for record in records:
        assert set(record) >= MESSAGE_KEYS
        assert record["attachments"] is None or isinstance(record["attachments"], list)


# -- handshake checks ------------------------------------------------------------------------


async def test_c09_006_no_credentials_is_401(api: Api) -> None:
    thread = await api.thread()
    response = await refused(api, thread, None)
    assert response.status_code == 401
    assert json.loads(response.body)["code"] == "unauthorized"


async def test_c09_007_other_users_thread_is_403_and_unknown_is_404(api: Api) -> None:
    thread = await api.thread()
    forbidden = await refused(api, thread, "bob")
    assert forbidden.status_code == 403
    assert json.loads(forbidden.body)["code"] == "forbidden"
    missing = await refused(api, str(uuid.uuid4()))
    assert missing.status_code == 404
    assert json.loads(missing.body)["code"] == "thread_not_found"


async def test_c09_008_logs_needs_the_logs_permission(api: Api) -> None:
    thread = await api.thread(user="apiu")
    response = await refused(api, thread, "apiu", logs="true")
    assert response.status_code == 403
    assert json.loads(response.body)["code"] == "permission_required"
    async with await open_ws(api, thread, "apiu") as ws:
        assert (await recv(ws))["type"] == "thread_status"


async def test_c09_009_bad_parameter_is_400(api: Api) -> None:
    thread = await api.thread()
    for params in ({"depth": "x"}, {"since": "-1"}, {"includeSilent": "maybe"}):
        response = await refused(api, thread, **params)
        assert response.status_code == 400, params
        assert json.loads(response.body)["code"] == "invalid_request"


async def test_c09_010_plain_get_is_400(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().get(f"/api/threads/{thread}/stream")
    assert response.status_code == 400
    assert response.json()["error"] == "This endpoint only supports WebSocket connections"


async def test_c09_stream_accepts_token_in_the_query(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread, None, token=api.keys["alice"]) as ws:
        assert (await recv(ws))["type"] == "thread_status"
    response = await refused(api, thread, None, token="tlk_nope")
    assert response.status_code == 401


async def test_c09_stream_ticket_without_a_ticket_book_is_401(api: Api) -> None:
    thread = await api.thread()
    response = await refused(api, thread, None, ticket="ab" * 32)
    assert response.status_code == 401


async def test_c09_043_too_many_sockets_is_429(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(stream_settings(max_per_principal=2))
    thread = await api.thread()
    first = await open_ws(api, thread)
    second = await open_ws(api, thread)
    response = await refused(api, thread)
    assert response.status_code == 429
    assert json.loads(response.body) == {"error": "Too many open streams", "code": "rate_limited"}
    async with await open_ws(api, thread, "root") as other:
        assert (await recv(other))["type"] == "thread_status"
    await first.close()
    await second.close()
    await asyncio.sleep(0.1)
    async with await open_ws(api, thread) as again:
        assert (await recv(again))["type"] == "thread_status"


async def mint(api: Api, user: str, path: str) -> str:
    """A ticket from the real route (spec 10 §10.5.6)."""
    response = await api.client(user).post("/api/auth/websocket-ticket", json={"pathname": path})
    assert response.status_code == 200, response.text
    ticket: str = response.json()["ticket"]
    return ticket


async def test_c09_011_a_ticket_opens_one_socket(api: Api) -> None:
    thread = await api.thread()
    ticket = await mint(api, "alice", f"/api/threads/{thread}/stream")
    async with await open_ws(api, thread, None, ticket=ticket) as ws:
        assert (await recv(ws))["type"] == "thread_status"
    again = await refused(api, thread, None, ticket=ticket)
    assert again.status_code == 401
    elsewhere = await mint(api, "alice", f"/api/threads/{thread}/logs")
    assert (await refused(api, thread, None, ticket=elsewhere)).status_code == 401


async def test_c09_036_revoked_credential_closes_4001(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(stream_settings(revalidate_s=0.2))
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        assert await api.runtime.store.delete_api_key_by_digest(digest(api.keys["alice"]))
        frames: list[dict[str, Any]] = []
        with pytest.raises(ConnectionClosed):
            while True:
                frames.append(await recv(ws, 5))
        assert ws.close_code == 4001
        assert ws.close_reason == "Credentials expired"
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "unauthorized"


async def test_c09_lost_access_closes_4003(make_api: Callable[..., Any]) -> None:
    """An admin watching alice's thread is demoted: the next re-check closes with 4003."""
    api: Api = await make_api(stream_settings(revalidate_s=0.2))
    thread = await api.thread(user="alice")
    async with await open_ws(api, thread, "root") as ws:
        await recv(ws)
        store = api.runtime.store
        await store.update_user(USERS["bob"].id, UserPatch(role="admin"))  # not the last admin
        await store.update_user(USERS["root"].id, UserPatch(role="user"))
        with pytest.raises(ConnectionClosed):
            while True:
                await recv(ws, 5)
        assert (ws.close_code, ws.close_reason) == (4003, "Access revoked")


async def test_local_principal_opens_sockets_and_the_origin_guard_applies(
    make_api: Callable[..., Any],
) -> None:
    """Spec 10 §10.9 rule 6: without configured credentials on a loopback server, a local
    upgrade is the local principal; a cross-origin one is refused (§10.8.2)."""
    api: Api = await make_api(ServerSettings(auth="auto"), with_keys=False)
    created = await api.client(None).post("/api/threads", json={"agent_id": "echo"})
    thread = created.json()["threadId"]
    async with await open_ws(api, thread, None) as ws:
        assert (await recv(ws))["type"] == "thread_status"
    with pytest.raises(InvalidStatus) as caught:
        await connect(ws_url(api, thread), additional_headers={"Origin": "https://evil.example"})
    assert caught.value.response.status_code == 403
    assert json.loads(caught.value.response.body)["code"] == "cross_origin_forbidden"
