"""``ThreadSession``: REST load + stream + reducer + optimistic send (spec 11 §11.6)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from threadloom.client.calls import Upload
from threadloom.client.chat import AttachmentUrl, Message
from threadloom.client.errors import APIError, StreamClosed, TransportError
from threadloom.client.frames import Frame, ResyncFrame
from threadloom.client.models import Approval, ApprovalList
from threadloom.client.reduce import (
    FrameEvent,
    LocalSend,
    ReducerEvent,
    SendAccepted,
    Snapshot,
    StatusChecked,
    ThreadView,
)
from threadloom.client.session_core import (
    SessionCore,
    _now_ms,
    retry_event,
    send_failed,
    snapshot_of,
    with_client_ids,
)
from threadloom.client.stream import ThreadStream
from threadloom.records import Message as Record

if TYPE_CHECKING:
    from threadloom.client.http import AsyncClient


class ThreadSession(SessionCore):
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
        super().__init__(
            client,
            thread_id,
            depth=depth,
            page_size=page_size,
            reasoning=reasoning,
            logs=logs,
            attachment_url=attachment_url,
            clock=clock,
            new_id=new_id,
        )
        self.client = client
        self._stream: ThreadStream | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._events: asyncio.Queue[Frame] = asyncio.Queue()

    # -- loading -------------------------------------------------------------------------------

    async def _snapshot(self) -> Snapshot:
        page = await self.client.messages.list(self.thread_id, **self._page_query(self.page_size))
        detail = await self.client.threads.get(self.thread_id)
        subagents = await self.client.threads.subagents(self.thread_id)
        return snapshot_of(page, detail, subagents)

    async def __aenter__(self) -> Self:
        snapshot = await self._snapshot()
        await self._apply(snapshot)
        self._stream = self.client.stream(self.thread_id, **self._stream_query(snapshot.seq))
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
                if self._ignored(frame):
                    self._events.put_nowait(frame)
                await self._apply(FrameEvent(frame, self._clock()))
        except StreamClosed as exc:
            self.closed = exc
        except APIError as exc:
            self.closed = exc
        async with self._changed:
            self._changed.notify_all()

    async def _apply(self, event: ReducerEvent) -> None:
        if self._reduced(event):
            async with self._changed:
                self._changed.notify_all()

    # -- observing -----------------------------------------------------------------------------

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
        event = self._local_send(content, role, attachments, silent, metadata)
        await self._apply(event)
        await self._post(event)
        return self._shown("local:" + event.local_id)

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
        return self._shown(key)

    # -- control -------------------------------------------------------------------------------

    async def stop(self) -> None:
        await self.client.threads.stop(self.thread_id)

    async def continue_(self, side: Literal["a", "b"] = "a") -> None:
        await self.client.threads.continue_(self.thread_id, side)

    async def terminate(self) -> None:
        await self.client.threads.terminate(self.thread_id)

    # -- tool-call approvals (spec 14) ---------------------------------------------------------

    async def approvals(self) -> ApprovalList:
        """Every approval of the thread, read from the server (``view.approvals`` holds
        those the session saw)."""
        return await self.client.threads.approvals(self.thread_id)

    async def approve(
        self,
        tool_call_id: str,
        arguments_hash: str | None = None,
        *,
        arguments: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> Approval:
        """Approve a pending call; the hash defaults to that of the approval the view shows
        (so what is approved is what was shown)."""
        shown = self._shown_hash(tool_call_id, arguments_hash)
        return await self.client.threads.approve(
            self.thread_id, tool_call_id, shown, arguments=arguments, reason=reason
        )

    async def reject(self, tool_call_id: str, reason: str | None = None) -> Approval:
        """Reject a pending call: it does not run."""
        return await self.client.threads.reject(self.thread_id, tool_call_id, reason=reason)

    async def load_older(self, n: int) -> None:
        """Prepend up to ``n`` older messages."""
        query = self._page_query(n, self._older_offset())
        page = await self.client.messages.list(self.thread_id, **query)
        await self._apply(StatusChecked(page.messages))

    async def check_status(self) -> ThreadView:
        """Read-only: look up the messages in doubt and merge what the server has (never POSTs)."""
        doubt, server_ids, local = self._doubt()
        self._checking = True
        try:
            records: list[Record] = []
            if server_ids:
                records += (await self.client.messages.get(self.thread_id, server_ids)).messages
            if local:
                newest = await self.client.messages.list(
                    self.thread_id, include_silent=True, depth=self.depth
                )
                records += with_client_ids(newest.messages, local)
            await self._apply(StatusChecked(records))
            return self._checked(doubt, records)
        finally:
            self._checking = False
