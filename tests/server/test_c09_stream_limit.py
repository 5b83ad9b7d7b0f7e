"""Spec 09 §9.2.4: the per-principal limit of open streams holds for concurrent handshakes,
Server-Sent Events included (issue 23 item 7).

An SSE response is counted when the request is accepted, in the same step as the check —
not when its body starts — and uncounted when the response ends, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from test_c09_stream import open_ws
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import InvalidStatus

from conftest import USERS, Api, stream_settings
from threadloom.server.stream.stream import open_counts

LIMIT = 5
SSE = {"Accept": "text/event-stream"}


async def open_sse(
    stack: contextlib.AsyncExitStack, client: httpx.AsyncClient, thread: str
) -> httpx.Response:
    """An SSE request whose response (status and headers) has arrived; it stays open until
    ``stack`` closes."""
    return await stack.enter_async_context(
        client.stream("GET", f"/api/threads/{thread}/stream", headers=SSE)
    )


async def open_counted(api: Api, user: str = "alice") -> int:
    """How many streams the server counts for ``user`` (after letting it run)."""
    await asyncio.sleep(0)
    return open_counts(api.app.app).get(USERS[user].id, 0)


async def until_counted(api: Api, expected: int, user: str = "alice") -> None:
    """Wait (bounded) until the server's count for ``user`` is ``expected``."""
    async with asyncio.timeout(10):
        while await open_counted(api, user) != expected:
            await asyncio.sleep(0.01)


async def test_c09_043_concurrent_sse_requests_get_exactly_the_limit(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(max_per_principal=LIMIT, heartbeat_s=0.05))
    thread = await api.thread()
    client = api.client()
    async with contextlib.AsyncExitStack() as stack:
        answers = await asyncio.gather(*(open_sse(stack, client, thread) for _ in range(4 * LIMIT)))
        counts = Counter(response.status_code for response in answers)
        assert counts == {200: LIMIT, 429: 3 * LIMIT}
        for response in answers:
            if response.status_code == 429:
                await response.aread()
                assert response.json() == {"error": "Too many open streams", "code": "rate_limited"}
                assert response.headers["retry-after"] == "1"
        assert await open_counted(api) == LIMIT
        # Another principal has its own count.
        other = await open_sse(stack, api.client("root"), thread)
        assert other.status_code == 200
    # Every accepted response gave its slot back when its client left.
    await until_counted(api, 0)
    async with contextlib.AsyncExitStack() as stack:
        again = [await open_sse(stack, client, thread) for _ in range(LIMIT)]
        assert [response.status_code for response in again] == [200] * LIMIT


async def test_sse_and_sockets_share_the_limit_under_concurrency(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(max_per_principal=LIMIT, heartbeat_s=0.05))
    thread = await api.thread()
    client = api.client()
    sockets: list[ClientConnection] = []

    async def socket() -> int:
        try:
            sockets.append(await open_ws(api, thread))
        except InvalidStatus as refused:
            return int(refused.response.status_code)
        return 200

    async with contextlib.AsyncExitStack() as stack:

        async def sse() -> int:
            return (await open_sse(stack, client, thread)).status_code

        answers = await asyncio.gather(
            *(socket() for _ in range(LIMIT)), *(sse() for _ in range(LIMIT))
        )
        assert Counter(answers) == {200: LIMIT, 429: LIMIT}
        assert await open_counted(api) == LIMIT
        for ws in sockets:
            await ws.close()
    await until_counted(api, 0)


async def test_an_sse_refused_for_another_reason_takes_no_slot(
    make_api: Callable[..., Any],
) -> None:
    """404 and 403 handshakes are answered before the limit and hold nothing."""
    api: Api = await make_api(stream_settings(max_per_principal=LIMIT, heartbeat_s=0.05))
    bobs = await api.thread(user="bob")
    client = api.client()
    for path in ("/api/threads/nope/stream", f"/api/threads/{bobs}/stream"):
        for _ in range(LIMIT + 1):
            response = await client.get(path, headers=SSE)
            assert response.status_code in (403, 404)
    assert await open_counted(api) == 0
