"""``threadloom serve``: settings from options and ``THREADLOOM_*``, the project's
definitions (a project that does not load is refused with its findings, before anything
listens), the start-up refusals of spec 10 §10.1, a banner, then uvicorn with a graceful
shutdown (SIGTERM: stop accepting, let running steps settle, close the store)."""

from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import uvicorn

import threadloom
from threadloom.define.registry import Definitions
from threadloom.errors import DefinitionError, StoreError, ThreadloomError
from threadloom.gc_tuning import tune_gc
from threadloom.providers.base import ProviderRegistry
from threadloom.server.app import ThreadloomApp, serve_app
from threadloom.server.settings import ServerSettings, SettingsError, is_loopback_host
from threadloom.server.startup import open_checked_store
from threadloom.store.base import Store


class ServeError(ThreadloomError):
    """The server refuses to start; the message says why and what to do (exit code 2)."""


@dataclass(frozen=True)
class ServeInfo:
    """What a starting server tells its operator (``threadloom serve``'s banner)."""

    version: str
    project: str
    agents: tuple[str, ...]
    store: str
    auth: str
    ui_url: str
    docs_url: str | None


_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")


def shown_url(url: str) -> str:
    """A store URL as it may be shown: without its password."""
    url = _PASSWORD.sub(r"\1***@", url)
    return re.sub(r"(password=)[^&]*", r"\1***", url)


def _auth_text(settings: ServerSettings, has_credentials: bool) -> str:
    """The server's authentication mode in words (spec 10 §10.1 rule 3)."""
    if settings.auth == "local":
        return "off: local development mode (THREADLOOM_AUTH=local)"
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    required = "required: users and API keys (threadloom users / threadloom keys)"
    if settings.admin_token is not None:  # the credential a container starts with
        return "required: the admin token (THREADLOOM_ADMIN_TOKEN), users and API keys"
    if settings.auth == "required" or has_credentials:
        return required
    if is_loopback_host(host):
        return "off: local development mode on this machine until a user or an API key exists"
    return required


def _base_url(settings: ServerSettings) -> str:
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


def load_definitions(project: str | Path | None) -> Definitions:
    """The project's definitions, checked as ``Runtime.open`` checks them: a project that
    does not load raises ``DefinitionError`` with every finding, before the server starts."""
    definitions = Definitions()
    if project is not None:
        definitions.load_project(project)
    definitions.validate(providers=ProviderRegistry().names())
    return definitions


_BIND_HINTS = {
    errno.EADDRINUSE: "address already in use (is another server running there?); stop it or"
    " choose another port with --port",
    errno.EACCES: "permission denied (a port below 1024 needs privileges); choose another port"
    " with --port",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's; choose another with --host",
}


def check_port(host: str, port: int) -> None:
    """Raise ``ServeError`` when ``host:port`` cannot be listened on — another program holds
    it, a privileged port, an address not of this machine: a bind test of each address
    uvicorn will bind (as asyncio's ``create_server`` binds them), before the banner."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        found = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, OverflowError) as exc:
        raise ServeError(f"cannot listen on {where}: {exc}") from None
    for family, kind, proto, _, address in dict.fromkeys(found):
        try:
            probe = socket.socket(family, kind, proto)
        except OSError:  # an address family this machine lacks: asyncio skips it too
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                why = _BIND_HINTS.get(exc.errno or 0, exc.strerror or str(exc))
                raise ServeError(f"cannot listen on {where}: {why}") from None


async def _open(settings: ServerSettings) -> tuple[Store, bool]:
    store = await open_checked_store(settings)
    return store, await store.has_credentials()


def run_server(
    project: str | Path | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    store: str | None = None,
    log_level: str = "info",
    on_ready: Callable[[ServeInfo], None] | None = None,
) -> None:
    """Serve ``project``; ``on_ready`` is told what is served just before it listens."""
    if project is not None and not Path(project).is_dir():
        raise ServeError(f"Project folder not found: {project}")
    definitions = load_definitions(project)  # DefinitionError: the caller prints it
    try:
        settings = ServerSettings.from_env(os.environ, host=host, port=port, store=store)
        check_port(settings.host, settings.port)
        opened, has_credentials = asyncio.run(_open(settings))
    except (SettingsError, StoreError) as exc:
        raise ServeError(str(exc)) from None
    app = serve_app(None, settings, store=opened, definitions=definitions)
    base = _base_url(settings)
    info = ServeInfo(
        version=threadloom.__version__,
        project=str(project) if project is not None else "(none)",
        agents=tuple(sorted(agent.name for agent in definitions.agents())),
        store=shown_url(settings.store),
        auth=_auth_text(settings, has_credentials),
        ui_url=f"{base}/",
        docs_url=f"{base}/docs" if settings.public_docs else None,
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=30,
        http="httptools",  # a dependency: the C parser, ~0.1-0.2 ms less CPU a request
        ws="websockets-sansio",
        **settings.uvicorn_proxy_options(),  # type: ignore[arg-type]
    )
    server = ThreadloomServer(config, app, (lambda: on_ready(info)) if on_ready else None)
    server.run()
    refusal = server.refusal
    if isinstance(refusal, DefinitionError):
        raise refusal  # the caller prints its findings, as for any definition error
    if refusal is not None:
        raise ServeError(str(refusal))


class ThreadloomServer(uvicorn.Server):
    """uvicorn's server with Threadloom's start and end: once started it tunes the garbage
    collector (``tune_gc``); at a shutdown, where uvicorn would end every open WebSocket
    with 1012 (which clients of spec 11 do not resume on), the app first ends its streams
    with 1001 ``Server shutting down`` (spec 09 §9.10.1) and waits for them to close, then
    uvicorn shuts down as usual (the lifespan lets running steps settle)."""

    STREAMS_CLOSE_S = 2.0

    def __init__(
        self,
        config: uvicorn.Config,
        app: ThreadloomApp,
        on_open: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.threadloom = app
        self._on_open = on_open
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Task[None] | None = None
        self.refusal: ThreadloomError | None = None
        """Why the app's runtime did not open (then the server never listened)."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Open the runtime first, in the loop it serves from: a refusal (an MCP server
        that cannot start, a store that refuses) ends the start here, for the caller to
        say in one line, instead of as a failed ASGI lifespan with a traceback."""
        try:
            await self.threadloom.prepare()
        except ThreadloomError as exc:
            self.refusal = exc
            return
        if self._on_open is not None:  # the banner: what is served, just before it listens
            self._on_open()
        await super().serve(sockets)

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
