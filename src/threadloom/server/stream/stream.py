"""The live channel of a thread (spec 09): the WebSocket at ``/api/threads/{id}/stream``, the
log socket at ``/api/threads/{id}/logs`` and the Server-Sent Events twin of the stream.

This module is the HTTP side: the handshake checks (credentials, thread access, the
``logs`` permission, parameters, the per-principal limit), the WebSocket and SSE transports
and their close codes. What a subscriber is sent, and in which order, is
``server/stream/session.py`` (its frames: ``server/stream/frames.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any, cast

from fastapi import Request, WebSocket
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.requests import HTTPConnection
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect, WebSocketState

from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query, ServerContext
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.server.settings import StreamSettings
from threadloom.server.stream.auth import authenticate_stream
from threadloom.server.stream.frames import Close, Filters
from threadloom.server.stream.session import Grant, Session

log = logging.getLogger("threadloom.server.stream")

router = Router(tags=["stream"])


def stream_settings(app: Any) -> StreamSettings:
    """The stream part of the app's ``ServerSettings`` (``THREADLOOM_STREAM_*``)."""
    ctx: ServerContext = app.state.ctx
    return ctx.settings.stream


def open_counts(app: Any) -> dict[str, int]:
    counts = getattr(app.state, "stream_counts", None)
    if not isinstance(counts, dict):
        counts = {}
        app.state.stream_counts = counts
    return counts


def check_open_limit(app: Any, who: Principal) -> None:
    """429 when ``who`` already holds the most sockets a principal may (§9.2.4)."""
    if open_counts(app).get(who.id, 0) >= stream_settings(app).max_per_principal:
        raise ApiError(429, "rate_limited", "Too many open streams", headers={"Retry-After": "1"})


def hold_slot(app: Any, who: Principal) -> Callable[[], None]:
    """Count one open socket (or SSE response) of ``who`` now; the returned function
    uncounts it (once, however often it is called). Call it in the same step as the
    ``check_open_limit`` that allowed it, with no ``await`` in between, or concurrent
    handshakes can all pass the check before any of them is counted."""
    counts = open_counts(app)
    counts[who.id] = counts.get(who.id, 0) + 1
    held = True

    def release() -> None:
        nonlocal held
        if not held:
            return
        held = False
        counts[who.id] -= 1
        if counts[who.id] <= 0:
            counts.pop(who.id, None)

    return release


@contextlib.contextmanager
def counted(app: Any, who: Principal) -> Iterator[None]:
    """Count one open socket of ``who`` while the block runs."""
    release = hold_slot(app, who)
    try:
        yield
    finally:
        release()


async def stop_tasks(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task


# -- handshake (spec 09 §9.2, spec 10 §10.9) --------------------------------------------------


async def authorize(conn: HTTPConnection, thread_id: str, *, log_socket: bool) -> Grant:
    """The handshake checks of §9.2.3 in the order of spec 08 §8.1.4 (429 last); the
    credentials are spec 10 §10.9's (``stream.auth.authenticate_stream``)."""
    auth = await authenticate_stream(conn)
    who = auth.principal
    await deps.accessible_thread(conn, thread_id, who)
    q = Query(cast(Request, conn))
    logs = log_socket or bool(q.bool("logs", False))
    if logs and not who.has_permission("logs"):
        raise ApiError(403, "permission_required", "Forbidden: 'logs' access required")
    since = q.int("since")
    if since is None and conn.scope["type"] == "http":
        since = resume_point(conn.headers.get("last-event-id", ""))
    filters = Filters(
        include_silent=False if log_socket else bool(q.bool("includeSilent", False)),
        depth=0 if log_socket else (q.int("depth", 0) or 0),
        reasoning=False if log_socket else bool(q.bool("reasoning", False)),
        logs=logs,
        log_socket=log_socket,
    )
    check_open_limit(conn.app, who)
    return Grant(who, auth, thread_id, filters, since)


SECRET_PARAMS = (b"token", b"ticket")


def redact_query(conn: HTTPConnection) -> None:
    """Replace the values of ``token`` and ``ticket`` in the request's query string with
    ``***`` once they have been read (spec 10 §10.9 rule 3): the server's access log lines
    are written from the same scope."""
    _ = conn.query_params  # parsed and kept by the connection before the scope changes
    raw: bytes = conn.scope.get("query_string", b"")
    if not any(name in raw for name in SECRET_PARAMS):
        return
    parts = []
    for part in raw.split(b"&"):
        name, sep, _value = part.partition(b"=")
        parts.append(name + sep + b"***" if name in SECRET_PARAMS and sep else part)
    conn.scope["query_string"] = b"&".join(parts)


# -- WebSocket transport --------------------------------------------------------------------


async def deny(websocket: WebSocket, error: ApiError) -> None:
    """Refuse an upgrade with the HTTP error (denial-response extension), else 4000+status."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        headers = {
            **error.headers,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        }
        response = JSONResponse(error.body(), status_code=error.status, headers=headers)
        await websocket.send_denial_response(response)
        return
    await websocket.accept()
    await websocket.close(4000 + error.status, error.error[:120])


async def _serve_socket(websocket: WebSocket, thread_id: str, *, log_socket: bool) -> None:
    app = websocket.app
    try:
        grant = await authorize(websocket, thread_id, log_socket=log_socket)
    except ApiError as error:
        redact_query(websocket)
        await deny(websocket, error)
        return
    redact_query(websocket)
    ctx: ServerContext = app.state.ctx
    settings = stream_settings(app)
    with counted(app, grant.principal):
        session = Session(ctx, grant, settings)
        tasks: list[asyncio.Task[Any]] = []
        try:
            await websocket.accept()
            driver = asyncio.create_task(_drive(websocket, session))
            reader = asyncio.create_task(read_client(websocket, settings))
            tasks = [driver, reader, asyncio.create_task(session.revalidate())]
            await serve_until_done(websocket, driver, reader)
        finally:
            session.close()
            await stop_tasks(tasks)


async def serve_until_done(
    websocket: WebSocket, writer: asyncio.Task[None], reader: asyncio.Task[Close | None]
) -> None:
    """Wait until the writer ends or the client is gone; a client message that breaks the
    rules (§9.11) closes the socket."""
    await asyncio.wait([writer, reader], return_when=asyncio.FIRST_COMPLETED)
    if reader.done() and not reader.cancelled() and reader.exception() is None:
        close = reader.result()
        if close is not None:
            await close_socket(websocket, close)


async def close_socket(websocket: WebSocket, close: Close) -> None:
    if websocket.application_state != WebSocketState.CONNECTED:
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5):
            await websocket.close(close.code, close.reason)


async def _drive(websocket: WebSocket, session: Session) -> None:
    """Write the session's frames; a write stuck for ``write_timeout_s`` is a slow consumer.
    A subscriber cut off while a write is in flight holds only that frame meanwhile: the
    session ended its subscription and discarded its queue at once."""
    timeout = session.settings.write_timeout_s
    try:
        async for item in session.frames():
            if isinstance(item, Close):
                await close_socket(websocket, item)
                return
            try:
                async with asyncio.timeout(timeout):
                    await websocket.send_text(item.text)
            except TimeoutError:
                session.slow_consumer()
                error = session.framer.error("slow_consumer", "Send buffer overflow")
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1):
                        await websocket.send_text(error.text)
                await close_socket(websocket, Close(4008, "Slow consumer"))
                return
    except (WebSocketDisconnect, RuntimeError, OSError):
        return  # the peer went away
    except Exception:
        log.exception("stream of thread %s failed", session.thread_id)
        with contextlib.suppress(Exception):
            await websocket.send_text(session.framer.error("internal_error", "Internal error").text)
        await close_socket(websocket, Close(1011, "Internal error"))


async def read_client(websocket: WebSocket, settings: StreamSettings) -> Close | None:
    """Client messages (§9.11): ``ping``/``stream_ping`` answered, others ignored."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        text = message.get("text")
        size = len(text.encode("utf-8")) if text is not None else len(message.get("bytes") or b"")
        if size > settings.max_client_message:
            return Close(1009, "Message too big")
        if text == "ping":
            await websocket.send_text("pong")
        elif text == "stream_ping":
            await websocket.send_text("stream_pong")


@router.websocket("/api/threads/{id}/stream")
async def stream_socket(websocket: WebSocket, id: str) -> None:
    """The thread's live stream (spec 09)."""
    await _serve_socket(websocket, id, log_socket=False)


@router.websocket("/api/threads/{id}/logs")
async def log_socket(websocket: WebSocket, id: str) -> None:
    """Live log frames of the thread (spec 09 §9.12)."""
    await _serve_socket(websocket, id, log_socket=True)


# -- Server-Sent Events ---------------------------------------------------------------------


def _wants_sse(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/event-stream" for part in accept.split(","))


@router.get(
    "/api/threads/{id}/stream",
    summary="Live stream as Server-Sent Events (WebSocket upgrades are served on this path too)",
)
async def stream_sse(id: str, request: Request) -> Any:
    if not _wants_sse(request):
        await deps.thread_row(id, request, await deps.principal(request))
        raise ApiError(400, "invalid_request", "This endpoint only supports WebSocket connections")
    try:
        grant = await authorize(request, id, log_socket=False)
    finally:
        redact_query(request)
    app = request.app
    # authorize() checked the limit last; counting now, before any await, makes the check
    # and the count one step, as for sockets (§9.2.4). The response gives the slot back.
    release = hold_slot(app, grant.principal)

    settings = stream_settings(app)

    async def body() -> AsyncGenerator[bytes, None]:
        session = Session(app.state.ctx, grant, settings)
        revalidate = asyncio.create_task(session.revalidate())
        ids = EventIds()
        try:
            yield b"retry: 1000\n\n"
            async for item in session.frames():
                if isinstance(item, Close):
                    if item.code == 1000:
                        data = {"type": "thread_deleted", "thread_id": id}
                        at = ids.next(session.framer.head)
                        yield _sse(at, "thread_deleted", json.dumps(data))
                    return
                yield _sse(ids.next(item.seq), item.type, item.text)
        finally:
            revalidate.cancel()
            session.close()

    return CountedStream(
        body(),
        release,
        settings.write_timeout_s,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class CountedStream(StreamingResponse):
    """A streaming response that holds a stream slot until it has been sent or abandoned
    (also when the body never started: the client left before the first byte). A write
    the peer has not taken within ``write_timeout_s`` ends the response (§9.10.2 rule 4),
    and the body's session with it."""

    def __init__(
        self,
        content: AsyncGenerator[bytes, None],
        release: Callable[[], None],
        write_timeout_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(content, **kwargs)
        self._content = content
        self._release = release
        self._write_timeout_s = write_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def timed_send(message: Message) -> None:
            async with asyncio.timeout(self._write_timeout_s):
                await send(message)

        try:
            await super().__call__(scope, receive, timed_send)
        except* TimeoutError:
            pass  # the peer stopped reading: the response ends unfinished
        finally:
            self._release()
            with contextlib.suppress(Exception):
                await self._content.aclose()


class EventIds:
    """The ``id:`` of each event of one SSE response (spec 09 §9.13): the frame's ``seq``
    when it is past the last id written, else ``<seq>.<n>`` for the n-th event since (the
    ephemeral frames of a run, heartbeats, a ``resync``). Unique and increasing on the
    response; the part before the dot is the resume point a ``Last-Event-ID`` gives."""

    __slots__ = ("n", "seq")

    def __init__(self) -> None:
        self.seq = -1
        self.n = 0

    def next(self, seq: int) -> str:
        if seq > self.seq:
            self.seq, self.n = seq, 0
            return str(seq)
        self.n += 1
        return f"{self.seq}.{self.n}"


def resume_point(last_event_id: str) -> int | None:
    """The ``since`` of a ``Last-Event-ID`` (``<seq>`` or ``<seq>.<n>``, as ``EventIds``
    writes them); ``None`` for anything else, as for no header."""
    whole, dot, part = last_event_id.strip().partition(".")
    if not (whole.isascii() and whole.isdigit()):
        return None
    if dot and not (part.isascii() and part.isdigit()):
        return None
    return int(whole)


def _sse(event_id: str, event: str, data: str) -> bytes:
    return f"id: {event_id}\nevent: {event}\ndata: {data}\n\n".encode()
