"""``threadloom serve``: settings from options and ``THREADLOOM_*``, the start-up refusals of
spec 10 §10.1, then uvicorn with a graceful shutdown (SIGTERM: stop accepting, let running
steps settle, close the store)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from types import FrameType

import uvicorn

from threadloom.errors import StoreError, ThreadloomError
from threadloom.gc_tuning import tune_gc
from threadloom.server.app import ThreadloomApp, serve_app
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.server.startup import open_checked_store


class ServeError(ThreadloomError):
    """The server refuses to start; the message says why and what to do (exit code 2)."""


def run_server(
    project: str | Path | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    store: str | None = None,
    log_level: str = "info",
) -> None:
    if project is not None and not Path(project).is_dir():
        raise ServeError(f"Project folder not found: {project}")
    try:
        settings = ServerSettings.from_env(os.environ, host=host, port=port, store=store)
        opened = asyncio.run(open_checked_store(settings))
    except (SettingsError, StoreError) as exc:
        raise ServeError(str(exc)) from None
    app = serve_app(project, settings, store=opened)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
        ws="websockets-sansio",
        **settings.uvicorn_proxy_options(),  # type: ignore[arg-type]
    )
    ThreadloomServer(config, app).run()


class ThreadloomServer(uvicorn.Server):
    """uvicorn's server with Threadloom's start and end: once started it tunes the garbage
    collector (``tune_gc``); at a shutdown, where uvicorn would end every open WebSocket
    with 1012 (which clients of spec 11 do not resume on), the app first ends its streams
    with 1001 ``Server shutting down`` (spec 09 §9.10.1) and waits for them to close, then
    uvicorn shuts down as usual (the lifespan lets running steps settle)."""

    STREAMS_CLOSE_S = 2.0

    def __init__(self, config: uvicorn.Config, app: ThreadloomApp) -> None:
        super().__init__(config)
        self.threadloom = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:  # the app, its definitions and its runtime are up
            self._loop = asyncio.get_running_loop()
            tune_gc()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The first SIGTERM or SIGINT drains (spec 12 §12.6.4): health answers 503 and no
        run starts while the node still serves what arrives and its runs get their grace
        period; then uvicorn shuts down. A second signal shuts down at once."""
        loop = self._loop
        if self._drain is None and loop is not None and not self.should_exit:
            self._captured_signals.append(sig)  # re-raised at the end, as uvicorn does
            loop.call_soon_threadsafe(self._start_drain)
            return
        super().handle_exit(sig, frame)

    def _start_drain(self) -> None:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            await self.threadloom.drain()
        finally:
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.threadloom.begin_shutdown()
        await self.threadloom.streams_closed(self.STREAMS_CLOSE_S)
        await super().shutdown(sockets)
