"""The answer to a WebSocket upgrade — its 101 and its refusals — carries the headers of
every HTTP answer (spec 09 §9.2.3, spec 08 §8.1.1 rule 7, spec 12 §12.2 rule 5), seen on
the wire: a raw HTTP/1.1 upgrade request to a real server, its status line and headers read
as sent."""

from __future__ import annotations

import asyncio
import base64
import os

import httpx

from conftest import Api

UNKNOWN = "0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11"


async def upgrade(api: Api, target: str, user: str | None = "alice") -> tuple[int, dict[str, str]]:
    """``GET target`` as a WebSocket upgrade: the answer's status and headers (lower case)."""
    base = httpx.URL(api.base)
    assert base.port is not None
    reader, writer = await asyncio.open_connection(base.host, base.port)
    try:
        lines = [
            f"GET {target} HTTP/1.1",
            f"Host: {base.host}:{base.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}",
            "Sec-WebSocket-Version: 13",
            "X-Request-Id: ws-1",
        ]
        if user is not None:
            lines.append(f"Authorization: Bearer {api.keys[user]}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    finally:
        writer.close()
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


async def test_c09_046_upgrades_and_their_refusals_carry_the_node_header(api: Api) -> None:
    """C09-046: the 101 of a thread stream, a log socket and ``/api/events``, and the
    refusals 401, 404, 403 and 403 (``scope=all`` for a user), each carry
    ``X-Threadloom-Node`` (the node of ``/api/health``), the client's ``X-Request-Id`` and
    ``nosniff``."""
    node = (await api.client(None).get("/api/health")).headers["x-threadloom-node"]
    assert node
    alice = await api.thread(user="alice")
    answers = {
        "stream": await upgrade(api, f"/api/threads/{alice}/stream"),
        "logs": await upgrade(api, f"/api/threads/{alice}/logs"),
        "events": await upgrade(api, "/api/events"),
        "no credentials": await upgrade(api, f"/api/threads/{alice}/stream", None),
        "unknown thread": await upgrade(api, f"/api/threads/{UNKNOWN}/stream"),
        "not bob's": await upgrade(api, f"/api/threads/{alice}/stream", "bob"),
        "scope all": await upgrade(api, "/api/events?scope=all", "bob"),
    }
    assert {name: status for name, (status, _) in answers.items()} == {
        "stream": 101,
        "logs": 101,
        "events": 101,
        "no credentials": 401,
        "unknown thread": 404,
        "not bob's": 403,
        "scope all": 403,
    }
    for name, (_, headers) in answers.items():
        assert headers.get("x-threadloom-node") == node, (name, headers)
        assert headers.get("x-request-id") == "ws-1", (name, headers)
        assert headers.get("x-content-type-options") == "nosniff", (name, headers)
