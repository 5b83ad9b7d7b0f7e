"""``threadloom serve``: settings from options and ``THREADLOOM_*``, the start-up refusals of
spec 10 §10.1, then uvicorn with a graceful shutdown (SIGTERM: stop accepting, let running
steps settle, close the store)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import uvicorn

from threadloom.errors import StoreError
from threadloom.server.app import serve_app
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.server.startup import check_startup


class ServeError(Exception):
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
        asyncio.run(check_startup(settings))
    except (SettingsError, StoreError) as exc:
        raise ServeError(str(exc)) from None
    app = serve_app(project, settings)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
        ws="websockets-sansio",
        **settings.uvicorn_proxy_options(),  # type: ignore[arg-type]
    )
