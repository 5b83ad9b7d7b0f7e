"""``SyncThreadSession``: the blocking twin of ``ThreadSession`` (spec 11 §11.6.5), returned by
``Client.session``. The same pure reducer; the stream is read by a background thread, and every
view change happens under one lock, so views, callbacks and ``send()`` see one order."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from threadloom.client.calls import Upload
from threadloom.client.chat import AttachmentUrl, Message
from threadloom.client.errors import APIError, StreamClosed, ThreadloomError, TransportError
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
from threadloom.client.stream import SyncThreadStream
from threadloom.records import Message as Record

if TYPE_CHECKING:
    from threadloom.client.http import Client


class SyncThreadSession(SessionCore):
    """Keeps a ``ThreadView`` of one thread up to date; use with ``with``."""

    def __init__(
        self,
        client: Client,
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
        self._stream: SyncThreadStream | None = None
        self._pump_thread: threading.Thread | None = None
        self._changed = threading.Condition(threading.RLock())
        self._events: queue.Queue[Frame] = queue.Queue()

    # -- loading -------------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        page = self.client.messages.list(self.thread_id, **self._page_query(self.page_size))
        detail = self.client.threads.get(self.thread_id)
        subagents = self.client.threads.subagents(self.thread_id)
        return snapshot_of(page, detail, subagents)

    def __enter__(self) -> Self:
        snapshot = self._snapshot()
        self._apply(snapshot)
        self._stream = self.client.stream(self.thread_id, **self._stream_query(snapshot.seq))
        self._stream.__enter__()
        self._pump_thread = threading.Thread(
            target=self._pump, name=f"threadloom-session-{self.thread_id}", daemon=True
        )
        self._pump_thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        if self._pump_thread is not None and self._pump_thread is not threading.current_thread():
            self._pump_thread.join(timeout=10)
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _pump(self) -> None:
        assert self._stream is not None
        try:
            for frame in self._stream:
                if isinstance(frame, ResyncFrame):
                    self._apply(self._snapshot())
                    continue
                if self._ignored(frame):
                    self._events.put_nowait(frame)
                self._apply(FrameEvent(frame, self._clock()))
        except ThreadloomError as exc:
            with self._changed:
                self.closed = exc
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _apply(self, event: ReducerEvent) -> None:
        with self._changed:  # subscribers are called on the thread that made the change
            if self._reduced(event):
                self._changed.notify_all()

    # -- observing -----------------------------------------------------------------------------

    def views(self) -> Iterator[ThreadView]:
        """The current view, then each new one (views that changed in between are skipped);
        ends when the session closes."""
        last = self.view
        yield last
        while True:
            with self._changed:
                while self.view is last and not self._ended:
                    self._changed.wait()
                if self.view is last:
                    return
                last = self.view
            yield last

    def events(self) -> Iterator[Frame]:
        """Frames the reducer ignores: file events, heartbeats, errors, telemetry, unknown."""
        while True:
            yield self._events.get()

    def wait_for(self, done: Callable[[ThreadView], bool], timeout: float = 10.0) -> ThreadView:
        """The first view (the current one included) for which ``done`` holds; ``TimeoutError``
        after ``timeout`` seconds, ``StreamClosed`` when the session ends first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                view = self.view
                if done(view):
                    return view
                if self._ended:
                    raise StreamClosed(0, "session ended")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._changed.wait(left)

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        content: str,
        *,
        role: Literal["user", "assistant", "system"] = "user",
        attachments: Sequence[Upload] = (),
        silent: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """Show the message at once (``SENDING``), then POST it (spec 11 §11.6.2); returns the
        message as it stands after the POST."""
        event = self._local_send(content, role, attachments, silent, metadata)
        self._apply(event)
        self._post(event)
        return self._shown("local:" + event.local_id)

    def _post(self, event: LocalSend) -> None:
        try:
            result = self.client.messages.send(
                self.thread_id,
                event.content,
                role=event.role,
                attachments=event.attachments,
                silent=event.silent,
                metadata=event.metadata,
                client_message_id=event.local_id,
            )
        except (APIError, TransportError) as exc:
            self._apply(send_failed(event.local_id, exc))
            return
        self._apply(SendAccepted(event.local_id, result.message_id, result.duplicate))
        if result.duplicate:
            with contextlib.suppress(APIError, TransportError):
                page = self.client.messages.get(
                    self.thread_id, [result.message_id], include_silent=True
                )
                self._apply(StatusChecked(page.messages))

    def retry(self, key: str) -> Message:
        """Re-send a REJECTED/ERROR local message with the same ``client_message_id``."""
        event = retry_event(self.view, self._sends, key)
        self._apply(event)
        self._post(event)
        return self._shown(key)

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        self.client.threads.stop(self.thread_id)

    def continue_(self, side: Literal["a", "b"] = "a") -> None:
        self.client.threads.continue_(self.thread_id, side)

    def terminate(self) -> None:
        self.client.threads.terminate(self.thread_id)

    # -- tool-call approvals (spec 14) ---------------------------------------------------------

    def approvals(self) -> ApprovalList:
        """Every approval of the thread, read from the server (``view.approvals`` holds
        those the session saw)."""
        return self.client.threads.approvals(self.thread_id)

    def approve(
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
        return self.client.threads.approve(
            self.thread_id, tool_call_id, shown, arguments=arguments, reason=reason
        )

    def reject(self, tool_call_id: str, reason: str | None = None) -> Approval:
        """Reject a pending call: it does not run."""
        return self.client.threads.reject(self.thread_id, tool_call_id, reason=reason)

    def load_older(self, n: int) -> None:
        """Prepend up to ``n`` older messages."""
        query = self._page_query(n, self._older_offset())
        page = self.client.messages.list(self.thread_id, **query)
        self._apply(StatusChecked(page.messages))

    def check_status(self) -> ThreadView:
        """Read-only: look up the messages in doubt and merge what the server has (never POSTs)."""
        doubt, server_ids, local = self._doubt()
        self._checking = True
        try:
            records: list[Record] = []
            if server_ids:
                records += self.client.messages.get(self.thread_id, server_ids).messages
            if local:
                newest = self.client.messages.list(
                    self.thread_id, include_silent=True, depth=self.depth
                )
                records += with_client_ids(newest.messages, local)
            self._apply(StatusChecked(records))
            with self._changed:
                return self._checked(doubt, records)
        finally:
            self._checking = False
