"""``threadloom serve``: settings from options and ``THREADLOOM_*``, the start-up refusals of
spec 10 §10.1, then uvicorn with a graceful shutdown (SIGTERM: stop accepting, let running
steps settle, close the store)."""

from __future__ import annotations

import os
from pathlib import Path

import uvicorn

from threadloom.server.app import serve_app
from threadloom.server.principal import Credentials, StaticCredentials
from threadloom.server.settings import ServerSettings, SettingsError, is_loopback_host


class ServeError(Exception):
    """The server refuses to start; the message says why and what to do (exit code 2)."""


def check_startup(settings: ServerSettings, credentials: Credentials) -> None:
    """Spec 10 §10.1 rule 2: no credential at all on a non-loopback address → refuse."""
    if not is_loopback_host(settings.host) and not credentials.configured():
        raise ServeError(
            f"Refusing to listen on {settings.host} without any credential: anyone who can "
            "reach this address could use the API. Set THREADLOOM_ADMIN_TOKEN (32+ "
            "characters) or create a user and an API key first, or listen on 127.0.0.1."
        )


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
    except SettingsError as exc:
        raise ServeError(str(exc)) from None
    credentials = StaticCredentials(admin_token=settings.admin_token)
    check_startup(settings, credentials)
    app = serve_app(project, settings, credentials)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
        ws="websockets-sansio",
    )
