"""Thread-list events (spec 09 §9.14): the WebSocket at ``/api/events`` that keeps a list of
threads live — created, updated, deleted, and their run activity.

Frames carry no ``seq`` and there is no resume: a reconnecting client lists again with
``GET /api/threads``. Credentials, limits, buffering and close codes are the stream's
(``server/stream/stream.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Any

from fastapi import Request, WebSocket
from starlette.requests import HTTPConnection

from threadloom.errors import EventOverflow
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import ServerContext
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.pipeline import own_origin
from threadloom.server.routing import Router
from threadloom.server.settings import StreamSettings
from threadloom.server.stream.auth import StreamAuth, authenticate_stream, recheck
from threadloom.server.stream.frames import SHUTTING_DOWN, Close, Frame, Out, Outbox, now_ms
from threadloom.server.stream.stream import (
    check_open_limit,
    close_socket,
    counted,
    deny,
    read_client,
    redact_query,
    serve_until_done,
    stop_tasks,
    stream_settings,
)
from threadloom.server.thread_answers import thread_item
from threadloom.thread.events import Subscription, ThreadEvent

router = Router(tags=["stream"])

KINDS = ("thread_created", "thread_updated", "thread_deleted", "status")
OWNERS_KEPT = 10_000


async def authorize(conn: HTTPConnection) -> tuple[Principal, StreamAuth, bool]:
    """401, then the scope (400), then admin for ``scope=all`` (403), then the limit (429);
    the principal, its credential and whether it sees every thread."""
    auth = await authenticate_stream(conn)
    who = auth.principal
    values = conn.query_params.getlist("scope")
    scope = (values[-1] if values else "").lower() or "user"
    if scope not in ("user", "all"):
        raise bad_field(
            "scope", "must be 'user' or 'all'", "Invalid event scope; expected 'user' or 'all'"
        )
    if scope == "all" and not who.is_admin:
        raise ApiError(403, "admin_required", "Forbidden: only admins may subscribe to all events")
    check_open_limit(conn.app, who)
    return who, auth, scope == "all"


def _dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


class ListSession:
    """One ``/api/events`` subscriber: bus → frames for the threads it may see → outbox."""

    def __init__(
        self,
        ctx: ServerContext,
        who: Principal,
        see_all: bool,
        origin: str,
        settings: StreamSettings,
    ) -> None:
        self.ctx = ctx
        self.who = who
        self.see_all = see_all
        self.origin = origin
        self.settings = settings
        self.outbox = Outbox(settings.buffer_frames, settings.buffer_bytes)
        self.subscription: Subscription = ctx.runtime.events.subscribe(
            None, kinds=KINDS, max_queue=settings.buffer_frames, max_bytes=settings.buffer_bytes
        )
        self.subscription.on_overflow = self.slow_consumer
        self.dropped = False
        self._owners: OrderedDict[str, str | None] = OrderedDict()
        self._terminated: set[str] = set()
        self._unregister = ctx.on_shutdown(lambda: self.outbox.put(SHUTTING_DOWN))

    def close(self) -> None:
        self._unregister()
        self.subscription.close()

    def _visible(self, owner: str | None) -> bool:
        return self.see_all or (owner is not None and owner == self.who.id)

    async def _owner(self, thread_id: str) -> tuple[bool, str | None]:
        """(known, user_id) of a thread; a thread's owner never changes, so it is kept."""
        if thread_id in self._owners:
            return True, self._owners[thread_id]
        row = await self.ctx.runtime.store.get_thread(thread_id)
        if row is None:
            return False, None
        self._remember(thread_id, row.user_id)
        return True, row.user_id

    def _remember(self, thread_id: str, owner: str | None) -> None:
        self._owners[thread_id] = owner
        if len(self._owners) > OWNERS_KEPT:
            self._owners.popitem(last=False)

    async def frame(self, event: ThreadEvent) -> Frame | None:
        """The frame for one bus event, ``None`` when this subscriber may not see it."""
        tid = event.thread_id
        if event.kind == "thread_deleted":
            owner = event.data.get("user_id")
            self._owners.pop(tid, None)
            if not self._visible(owner if isinstance(owner, str) else None):
                return None
            return Frame("thread_deleted", 0, _dumps({"type": "thread_deleted", "threadId": tid}))
        if event.kind in ("thread_created", "thread_updated"):
            row = await self.ctx.runtime.store.get_thread(tid)
            if row is None:
                return None
            self._remember(tid, row.user_id)
            if not self._visible(row.user_id):
                return None
            item = thread_item(row, self.ctx.runtime.definitions, self.origin)
            item["agent_name"] = item.pop("agent_id")
            item["origin_agent_name"] = item.pop("origin_agent_id")
            return Frame(event.kind, 0, _dumps({"type": event.kind, "thread": item}))
        status = event.data.get("status")
        if event.kind == "status" and isinstance(status, dict):
            known, owner = await self._owner(tid)
            if not known or not self._visible(owner):
                return None
            body = {
                "type": "thread_activity",
                "threadId": tid,
                "executing": status.get("state") == "running",
                "status": status,
                "last_activity_at": int(status.get("since") or 0) // 1_000_000,
            }
            return Frame("thread_activity", 0, _dumps(body))
        return None

    async def frames(self, event: ThreadEvent) -> list[Frame]:
        """The frames for one bus event; a ``status`` event that carries a new termination
        is also a ``thread_updated`` (§9.14)."""
        out: list[Frame | None] = []
        terminated = event.kind == "status" and event.data.get("terminated") is not None
        if terminated and event.thread_id not in self._terminated:
            self._terminated.add(event.thread_id)
            update = ThreadEvent(event.thread_id, "thread_updated", None, {}, event.at)
            out.append(await self.frame(update))
        out.append(await self.frame(event))
        return [f for f in out if f is not None]

    async def forward(self) -> None:
        try:
            async for event in self.subscription:
                for item in await self.frames(event):
                    if not self.outbox.put(item):
                        self.slow_consumer()
                        return
        except EventOverflow:
            self.slow_consumer()

    def slow_consumer(self) -> None:
        """Cut the subscriber off (§9.10.2): its subscription ends and its queue is
        discarded now, not once a write stuck on its socket times out."""
        if self.dropped:
            return
        self.dropped = True
        self._fail(
            "slow_consumer",
            "Send buffer overflow; list the threads again",
            Close(4008, "Slow consumer"),
        )

    async def revalidate(self, auth: StreamAuth) -> None:
        """The stream's re-checks (spec 10 §10.9 rule 5): a revoked credential closes 4001;
        a ``scope=all`` subscriber that is no longer an admin closes 4003."""
        seen = self.ctx.revocations.generation
        while True:
            seen = await self.ctx.revocations.wait(self.settings.revalidate_s, seen)
            who = await recheck(self.ctx, auth)
            if who is None:
                self._fail(
                    "unauthorized", "Credentials expired", Close(4001, "Credentials expired")
                )
                return
            if self.see_all and not who.is_admin:
                self._fail("forbidden", "Access revoked", Close(4003, "Access revoked"))
                return

    def _fail(self, code: str, message: str, close: Close) -> None:
        self.subscription.close()
        error = {"type": "error", "code": code, "error": message}
        self.outbox.fail(Frame("error", 0, _dumps(error)), close)

    async def next(self) -> Out:
        item = await self.outbox.get(self.settings.heartbeat_s)
        if item is None:
            return Frame("heartbeat", 0, _dumps({"type": "heartbeat", "ts": now_ms()}))
        return item


@router.websocket("/api/events")
async def events_socket(websocket: WebSocket) -> None:
    """Live thread-list events (spec 09 §9.14)."""
    try:
        who, auth, see_all = await authorize(websocket)
    except ApiError as error:
        redact_query(websocket)
        await deny(websocket, error)
        return
    redact_query(websocket)
    app = websocket.app
    settings = stream_settings(app)
    with counted(app, who):
        session = ListSession(app.state.ctx, who, see_all, own_origin(websocket.scope), settings)
        tasks: list[asyncio.Task[Any]] = []
        try:
            await websocket.accept()
            writer = asyncio.create_task(_write(websocket, session))
            reader = asyncio.create_task(read_client(websocket, settings))
            tasks = [
                asyncio.create_task(session.forward()),
                asyncio.create_task(session.revalidate(auth)),
                writer,
                reader,
            ]
            await serve_until_done(websocket, writer, reader)
        finally:
            session.close()
            await stop_tasks(tasks)


async def _write(websocket: WebSocket, session: ListSession) -> None:
    while True:
        item = await session.next()
        if isinstance(item, Close):
            await close_socket(websocket, item)
            return
        try:
            async with asyncio.timeout(session.settings.write_timeout_s):
                await websocket.send_text(item.text)
        except TimeoutError:
            session.slow_consumer()
            await close_socket(websocket, Close(4008, "Slow consumer"))
            return
        except Exception:
            return  # the peer went away


@router.get("/api/events", summary="Thread-list events (WebSocket only)")
async def events_get(request: Request) -> None:
    await deps.principal(request)
    raise ApiError(400, "invalid_request", "This endpoint requires a WebSocket connection")
