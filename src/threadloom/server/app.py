"""The ASGI application: routes, the error shape, the outer pipeline (spec 08, 10).

``create_app(runtime)`` serves a Runtime the caller opened (tests, embedding);
``serve_app(project, settings)`` opens the Runtime itself in the app's lifespan and closes
it on shutdown, letting running steps settle (``threadloom serve``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

import threadloom
from threadloom.engine.run.runtime import Runtime
from threadloom.server import agui, errors, mcp, metrics, openapi, redact, ui
from threadloom.server.auth.accounts import StoreCredentials
from threadloom.server.auth.principal import Credentials
from threadloom.server.deps import ServerContext
from threadloom.server.metrics import HttpMetrics
from threadloom.server.pipeline import Pipeline
from threadloom.server.routes import (
    approvals,
    auth,
    catalog,
    compaction,
    control,
    files,
    forks,
    inbox,
    memory,
    messages,
    oauth,
    playground,
    portable,
    records,
    schedules,
    search,
    state,
    threads,
    triggers,
    users,
    webhooks,
)
from threadloom.server.settings import ServerSettings
from threadloom.server.stream import list_events, stream
from threadloom.thread.retention import EventRetention

DESCRIPTION = """Threadloom's REST API: threads, messages, execution control, logs, cost,
the subagent registry and the catalog of definitions. Errors always have the body
`{"error", "code"}` (plus `details` for validation failures).

The live stream of a thread is a WebSocket at `/api/threads/{id}/stream` (spec 09)."""


def _build(
    settings: ServerSettings,
    lifespan: Any = None,
) -> FastAPI:
    app = FastAPI(
        title="Threadloom",
        version=threadloom.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # /docs is the UI's, with its assets served locally
        openapi_url="/openapi.json",
        redoc_url=None,
        generate_unique_id_function=openapi.operation_id,
    )
    errors.install(app)
    redact.install()
    routers = (
        threads,
        portable,
        forks,
        messages,
        control,
        approvals,
        inbox,
        state,
        records,
        files,
        catalog,
        playground,
        schedules,
        triggers,
        memory,
        search,
        compaction,
    )
    for module in routers:
        app.include_router(module.router)
    app.include_router(catalog.service)
    for router in (auth.router, users.keys, users.users, webhooks.router, webhooks.deliveries):
        app.include_router(router)
    app.include_router(oauth.router)  # spec 10 §10.15: well-known documents and /oauth
    app.add_exception_handler(oauth.Insecure, oauth.insecure)
    app.include_router(oauth.grants)  # /api/oauth/grants: the hosts a user allowed
    app.include_router(stream.router)
    app.include_router(list_events.router)
    metrics.install(app)  # GET /metrics: Prometheus (spec 17 §17.1), not in the OpenAPI
    agui.install(app)  # POST /api/agui/{agent}
    mcp.install(app)  # the agents as MCP tools at /mcp
    ui.install(app, settings)
    openapi.install(app)  # query parameters, bodies and answers of every operation
    return app


def prepare_routes(app: FastAPI) -> None:
    """Have FastAPI prepare every route now. It prepares an included router's routes (their
    dependants and models) when a request first reaches them, and a request tries the
    routers in order, so the first request to a late one — a page of the web UI, its
    static files — paid for nearly all of them (0.1–0.2 s, more on a busy machine).
    ``threadloom serve`` calls it at start-up, before it listens; an app that a test
    builds for a few requests keeps preparing only what they reach."""
    scope = {"type": "http", "path": "/.prepare", "root_path": "", "method": "GET"}
    for route in app.router.routes:
        route.matches({**scope, "headers": [], "query_string": b""})


class ThreadloomApp:
    """The FastAPI app wrapped in the outer pipeline; ``.app`` is the FastAPI object."""

    def __init__(
        self,
        app: FastAPI,
        settings: ServerSettings,
        open_runtime: Callable[[], Awaitable[Runtime]] | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        http = HttpMetrics()
        app.state.http_metrics = http  # read by GET /metrics
        self._asgi = Pipeline(app, settings, http.observe)
        self._open_runtime = open_runtime

    async def prepare(self) -> None:
        """Open the runtime the app serves, if it opens its own (``serve_app``), before
        the ASGI lifespan starts: a host calls it to get the start-up's refusal (an MCP
        server that cannot start, a store that refuses) as the exception itself, not as
        a failed lifespan. The lifespan then uses the runtime opened here."""
        if self._open_runtime is not None:
            await self._open_runtime()

    @property
    def context(self) -> ServerContext:
        ctx: ServerContext = self.app.state.ctx
        return ctx

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._asgi(scope, receive, send)

    def begin_shutdown(self) -> None:
        """End every open stream with 1001 and answer health with 503 (``ServerContext
        .begin_shutdown``); a host calls it when it starts to shut down, before it closes
        connections its own way (``threadloom serve`` does)."""
        ctx: ServerContext | None = getattr(self.app.state, "ctx", None)
        if ctx is not None:
            ctx.begin_shutdown()

    async def drain(self) -> None:
        """Drain (spec 12 §12.6.4): health answers 503 ``draining`` from now on, the node
        takes no new lease, and its running executions get ``THREADLOOM_DRAIN_SECONDS``
        before those left are aborted; requests that arrive meanwhile are still served."""
        ctx: ServerContext | None = getattr(self.app.state, "ctx", None)
        if ctx is None:
            return
        ctx.draining = True
        await ctx.runtime.drain(self.settings.drain_seconds)

    async def streams_closed(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the streams ended by ``begin_shutdown`` to
        close; True when none is left."""
        ctx: ServerContext | None = getattr(self.app.state, "ctx", None)
        deadline = asyncio.get_running_loop().time() + timeout
        while ctx is not None and ctx.open_streams:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True


def create_app(
    runtime: Runtime,
    settings: ServerSettings | None = None,
    credentials: Credentials | None = None,
) -> ThreadloomApp:
    """An app serving ``runtime`` (which the caller opens and closes). Credentials default
    to the store's users, keys and sessions plus ``settings.admin_token``."""
    settings = settings or ServerSettings()
    app = _build(settings)
    app.state.ctx = ServerContext(
        runtime,
        settings,
        credentials or StoreCredentials(runtime.store, admin_token=settings.admin_token),
    )
    return ThreadloomApp(app, settings)


def serve_app(
    project: str | Path | None,
    settings: ServerSettings,
    credentials: Credentials | None = None,
    **runtime_options: Any,
) -> ThreadloomApp:
    """An app that opens the Runtime for ``project`` on start-up and closes it on shutdown."""

    opened: list[Runtime] = []

    async def open_runtime() -> Runtime:
        if not opened:
            options = dict(runtime_options)
            if settings.warm_messages is not None:
                options.setdefault("warm_messages", settings.warm_messages)
            options.setdefault(
                "event_retention", EventRetention(settings.replay_seconds, settings.replay_events)
            )
            options.setdefault("retention", settings.retention)
            options.setdefault("node_id", settings.node_id)
            options.setdefault("node_timings", settings.node_timings())
            opened.append(await Runtime.open(settings.store, project=project, **options))
        return opened[0]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await open_runtime()
        opened.clear()  # a later start (a test's second client) opens a runtime of its own
        prepare_routes(app)
        creds = credentials or StoreCredentials(runtime.store, admin_token=settings.admin_token)
        app.state.ctx = ServerContext(runtime, settings, creds)
        try:
            yield
        finally:
            app.state.ctx.draining = True
            await runtime.close(drain=settings.drain_seconds)

    return ThreadloomApp(_build(settings, lifespan), settings, open_runtime)
