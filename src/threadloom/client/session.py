"""``ThreadSession``: REST load + stream + reducer + optimistic send (spec 11 §11.6)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from threadloom.client.calls import Upload
from threadloom.client.chat import AgentError, AttachmentUrl, Message, Outcome, Phase, fs_url
from threadloom.client.errors import (
    APIError,
    ConflictError,
    StreamClosed,
    ThreadTerminatedError,
    TransportError,
)
from threadloom.client.frames import (
    EventFrame,
    Frame,
    MalformedFrame,
    ResyncFrame,
    TelemetryFrame,
    UnknownFrame,
)
from threadloom.client.reduce import (
    FrameEvent,
    LocalSend,
    ReducerEvent,
    SendAccepted,
    SendFailed,
    Snapshot,
    StatusChecked,
    ThreadView,
    empty_view,
    reduce,
)
from threadloom.client.stream import ThreadStream
from threadloom.records import Message as Record

if TYPE_CHECKING:
    from threadloom.client.http import AsyncClient


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ThreadSession:
    """Keeps a ``ThreadView`` of one thread up to date; use with ``async with``."""

    def __init__(
        self,
        client: AsyncClient,
        thread_id: str,
        *,
        depth: int = 0,
        page_size: int = 100,
        reasoning: bool = True,
        logs: bool = False,
        attachment_url: AttachmentUrl | None = None,
        clock: Callable[[], int] = _now_ms,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.client = client
        self.thread_id = thread_id
        self.depth = depth
        self.page_size = page_size
        self.reasoning = reasoning
        self.logs = logs
        self.attachment_url = attachment_url or fs_url(client.base_url)
        """Builds the URL of each stored attachment's block (default: the file route of
        ``client.base_url``, which needs the client's credential to read)."""
        self._clock = clock
        self._new_id = new_id
        self.view: ThreadView = empty_view(thread_id)
        self._stream: ThreadStream | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._subscribers: list[Callable[[ThreadView], None]] = []
        self._changed = asyncio.Condition()
        self._events: asyncio.Queue[Frame] = asyncio.Queue()
        self._sends: dict[str, LocalSend] = {}
        self._checking = False
        self.closed: BaseException | None = None
        """Why the stream ended for good, once it has."""
        self._ended = False

    # -- loading -------------------------------------------------------------------------------

    async def _snapshot(self) -> Snapshot:
        page = await self.client.messages.list(
            self.thread_id,
            order="desc",
            limit=self.page_size,
            include_silent=True,
            depth=self.depth,
        )
        detail = await self.client.threads.get(self.thread_id)
        subagents = await self.client.threads.subagents(self.thread_id)
        return Snapshot(page.messages, detail.status, detail.terminated, page.seq, subagents)

    async def __aenter__(self) -> Self:
        snapshot = await self._snapshot()
        await self._apply(snapshot)
        self._stream = self.client.stream(
            self.thread_id,
            include_silent=True,
            depth=self.depth,
            reasoning=self.reasoning,
            logs=self.logs,
            since=snapshot.seq,
        )
        await self._stream.__aenter__()
        self._pump_task = asyncio.create_task(self._pump())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._ended = True  # views() and wait_for() end once the reader is gone
        if self._pump_task is not None:
            self._pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._pump_task
        if self._stream is not None:
            await self._stream.aclose()
        async with self._changed:
            self._changed.notify_all()

    async def _pump(self) -> None:
        assert self._stream is not None
        try:
            async for frame in self._stream:
                if isinstance(frame, ResyncFrame):
                    await self._apply(await self._snapshot())
                    continue
                if isinstance(
                    frame, EventFrame | TelemetryFrame | UnknownFrame | MalformedFrame
                ) or frame.type in ("heartbeat", "error"):
                    self._events.put_nowait(frame)
                await self._apply(FrameEvent(frame, self._clock()))
        except StreamClosed as exc:
            self.closed = exc
        except APIError as exc:
            self.closed = exc
        async with self._changed:
            self._changed.notify_all()

    async def _apply(self, event: ReducerEvent) -> None:
        new = reduce(self.view, event, attachment_url=self.attachment_url)
        if new is self.view:
            return
        self.view = new
        for callback in list(self._subscribers):
            callback(new)
        async with self._changed:
            self._changed.notify_all()

    # -- observing -----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[ThreadView], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    async def views(self) -> AsyncIterator[ThreadView]:
        """The current view, then each new one (views that changed in between are skipped)."""
        last = self.view
        yield last
        while True:
            seen = last
            async with self._changed:
                await self._changed.wait_for(
                    lambda seen=seen: (
                        self.view is not seen  # type: ignore[misc]
                        or self.closed is not None
                        or self._ended
                    )
                )
            if self.view is last:
                return
            last = self.view
            yield last

    async def events(self) -> AsyncIterator[Frame]:
        """Frames the reducer ignores: file events, heartbeats, errors, telemetry, unknown."""
        while True:
            yield await self._events.get()

    async def wait_for(
        self, done: Callable[[ThreadView], bool], timeout: float = 10.0
    ) -> ThreadView:
        async with asyncio.timeout(timeout):
            async for view in self.views():
                if done(view):
                    return view
        raise StreamClosed(0, "session ended")

    # -- sending -------------------------------------------------------------------------------

    async def send(
        self,
        content: str,
        *,
        role: Literal["user", "assistant", "system"] = "user",
        attachments: Sequence[Upload] = (),
        silent: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """Show the message at once (``SENDING``, attachments included), then POST it
        (spec 11 §11.6.2); returns the message as it stands after the POST."""
        local_id = self._new_id()
        event = LocalSend(
            local_id,
            content,
            role,
            attachments=tuple(attachments),
            silent=silent,
            metadata=metadata,
            at_ms=self._clock(),
        )
        self._sends[local_id] = event
        await self._apply(event)
        await self._post(event)
        found = self.view.by_key("local:" + local_id)
        assert found is not None
        return found

    async def _post(self, event: LocalSend) -> None:
        try:
            result = await self.client.messages.send(
                self.thread_id,
                event.content,
                role=event.role,
                attachments=event.attachments,
                silent=event.silent,
                metadata=event.metadata,
                client_message_id=event.local_id,
            )
        except (APIError, TransportError) as exc:
            await self._apply(send_failed(event.local_id, exc))
        else:
            await self._apply(SendAccepted(event.local_id, result.message_id, result.duplicate))
            if result.duplicate:
                # an earlier attempt was stored: its frames may be long gone, so read it
                with contextlib.suppress(APIError, TransportError):
                    page = await self.client.messages.get(
                        self.thread_id, [result.message_id], include_silent=True
                    )
                    await self._apply(StatusChecked(page.messages))

    async def retry(self, key: str) -> Message:
        """Re-send a REJECTED/ERROR local message with the same ``client_message_id``."""
        event = retry_event(self.view, self._sends, key)
        await self._apply(event)
        await self._post(event)
        found = self.view.by_key(key)
        assert found is not None
        return found

    # -- control -------------------------------------------------------------------------------

    async def stop(self) -> None:
        await self.client.threads.stop(self.thread_id)

    async def continue_(self, side: Literal["a", "b"] = "a") -> None:
        await self.client.threads.continue_(self.thread_id, side)

    async def terminate(self) -> None:
        await self.client.threads.terminate(self.thread_id)

    async def load_older(self, n: int) -> None:
        """Prepend up to ``n`` older messages."""
        loaded = sum(1 for m in self.view.messages if not m.id.startswith("local:"))
        page = await self.client.messages.list(
            self.thread_id,
            order="desc",
            limit=n,
            offset=loaded,
            include_silent=True,
            depth=self.depth,
        )
        await self._apply(StatusChecked(page.messages))

    async def check_status(self) -> ThreadView:
        """Read-only: look up the messages in doubt and merge what the server has (never POSTs)."""
        if self._checking:
            raise RuntimeError("check_status() is already running")
        self._checking = True
        try:
            doubt = in_doubt(self.view)
            server_ids = [m.id for m in doubt if not m.id.startswith("local:")]
            records: list[Record] = []
            if server_ids:
                records.extend(
                    (await self.client.messages.get(self.thread_id, server_ids)).messages
                )
            local = {m.key.removeprefix("local:") for m in doubt if m.id.startswith("local:")}
            if local:
                newest = await self.client.messages.list(
                    self.thread_id, include_silent=True, depth=self.depth
                )
                records.extend(
                    r
                    for r in newest.messages
                    if (r.metadata or {}).get("client_message_id") in local
                )
            await self._apply(StatusChecked(records))
            if all_found(doubt, records) and self.view.error is not None:
                self.view = replace(self.view, error=None)
            return self.view
        finally:
            self._checking = False


def send_failed(local_id: str, exc: APIError | TransportError) -> SendFailed:
    """What a failed POST of a send means for the view (spec 11 §11.6.2 step 4)."""
    if isinstance(exc, TransportError):
        error = AgentError(kind="connection", message=exc.message, retryable=True, recovery="retry")
        return SendFailed(local_id, error)
    retryable = isinstance(exc, ConflictError)
    error = AgentError(
        kind="rejected",
        message=exc.message,
        retryable=retryable,
        status=exc.status,
        recovery="retry" if retryable else "none",
        detail=exc.details,
    )
    terminated = exc.terminated if isinstance(exc, ThreadTerminatedError) else None
    return SendFailed(local_id, error, terminated)


def retry_event(view: ThreadView, sends: Mapping[str, LocalSend], key: str) -> LocalSend:
    """The send to repeat for ``retry(key)``; raises when that message cannot be retried."""
    message = view.by_key(key)
    event = sends.get(key.removeprefix("local:"))
    if message is None or event is None:
        raise KeyError(key)
    if message.delivery.phase is Phase.SENDING:
        raise ValueError("the message is still being sent")
    if message.delivery.outcome not in (Outcome.REJECTED, Outcome.ERROR):
        raise ValueError("only a rejected or failed send can be retried")
    return event


def in_doubt(view: ThreadView) -> list[Message]:
    """The messages ``check_status()`` looks up (spec 11 §11.6.4)."""
    return [
        m
        for m in view.messages
        if m.delivery.phase is Phase.SENDING
        # a send that failed in transport: it may have been stored all the same
        or (m.delivery.outcome is Outcome.ERROR and m.delivery.generation.startswith("send:"))
    ]


def all_found(doubt: Sequence[Message], records: Sequence[Record]) -> bool:
    found = {r.id for r in records} | {(r.metadata or {}).get("client_message_id") for r in records}
    return all(m.id in found or m.key.removeprefix("local:") in found for m in doubt)


def records_of(view: ThreadView) -> Sequence[str]:
    """The ids of a view's messages (for comparisons in tests and tools)."""
    return [m.id for m in view.messages]
