"""A WebSocket relay in front of the real test server: it forwards every frame both ways and can
close its client side with a chosen code, as the server does on a slow consumer (4008). It
injects network faults only; every frame comes from the real server."""

from __future__ import annotations

import asyncio
import contextlib

from websockets.asyncio.client import connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed


class Relay:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.replace("http://", "ws://")
        self.server: Server | None = None
        self.downstream: list[ServerConnection] = []
        self.paths: list[str] = []
        self.forwarded = asyncio.Event()
        self.gate = asyncio.Event()
        """New client connections wait here before the relay connects upstream."""
        self.gate.set()

    @property
    def base(self) -> str:
        assert self.server is not None
        port = next(iter(self.server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aenter__(self) -> Relay:
        self.server = await serve(self.handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def handle(self, down: ServerConnection) -> None:
        assert down.request is not None
        self.paths.append(down.request.path)
        self.downstream.append(down)
        await self.gate.wait()
        auth = down.request.headers.get("Authorization")
        headers = {"Authorization": auth} if auth else {}
        async with connect(self.upstream + down.request.path, additional_headers=headers) as up:

            async def pump_up() -> None:
                with contextlib.suppress(ConnectionClosed):
                    async for message in down:
                        await up.send(message)
                await up.close()  # the client side is gone: end the upstream socket too

            task = asyncio.create_task(pump_up())
            try:
                async for message in up:
                    await down.send(message)
                    self.forwarded.set()
                rcvd = up.close_code or 1000
                await down.close(rcvd, up.close_reason or "")
            except ConnectionClosed:
                pass
            finally:
                task.cancel()

    async def close_clients(self, code: int, reason: str) -> None:
        for down in self.downstream:
            asyncio.create_task(down.close(code, reason))  # noqa: RUF006 - the relay's own task
        self.downstream.clear()
