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
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from threadloom.client.calls import Upload
from threadloom.client.chat import AttachmentUrl, Message, fs_url
from threadloom.client.errors import APIError, StreamClosed, ThreadloomError, TransportError
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
    Snapshot,
    StatusChecked,
    ThreadView,
    empty_view,
    reduce,
)
from threadloom.client.session import all_found, in_doubt, retry_event, send_failed
from threadloom.client.stream import SyncThreadStream
from threadloom.records import Message as Record

if TYPE_CHECKING:
    from threadloom.client.http import Client


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class SyncThreadSession:
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
        self.client = client
        self.thread_id = thread_id
        self.depth = depth
        self.page_size = page_size
        self.reasoning = reasoning
        self.logs = logs
        self.attachment_url = attachment_url or fs_url(client.base_url)
        """Builds the URL of each stored attachment's block (as ``ThreadSession``)."""
        self._clock = clock
        self._new_id = new_id
        self.view: ThreadView = empty_view(thread_id)
        self._stream: SyncThreadStream | None = None
        self._pump_thread: threading.Thread | None = None
        self._subscribers: list[Callable[[ThreadView], None]] = []
        self._changed = threading.Condition(threading.RLock())
        self._events: queue.Queue[Frame] = queue.Queue()
        self._sends: dict[str, LocalSend] = {}
        self._checking = False
        self.closed: BaseException | None = None
        """Why the stream ended for good, once it has."""
        self._ended = False
        """``close()`` was called or the stream ended: ``views()`` and ``wait_for`` stop."""

    # -- loading -------------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        page = self.client.messages.list(
            self.thread_id,
            order="desc",
            limit=self.page_size,
            include_silent=True,
            depth=self.depth,
        )
        detail = self.client.threads.get(self.thread_id)
        subagents = self.client.threads.subagents(self.thread_id)
        return Snapshot(page.messages, detail.status, detail.terminated, page.seq, subagents)

    def __enter__(self) -> Self:
        snapshot = self._snapshot()
        self._apply(snapshot)
        self._stream = self.client.stream(
            self.thread_id,
            include_silent=True,
            depth=self.depth,
            reasoning=self.reasoning,
            logs=self.logs,
            since=snapshot.seq,
        )
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
                if isinstance(
                    frame, EventFrame | TelemetryFrame | UnknownFrame | MalformedFrame
                ) or frame.type in ("heartbeat", "error"):
                    self._events.put_nowait(frame)
                self._apply(FrameEvent(frame, self._clock()))
        except ThreadloomError as exc:
            with self._changed:
                self.closed = exc
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def _apply(self, event: ReducerEvent) -> None:
        with self._changed:
            new = reduce(self.view, event, attachment_url=self.attachment_url)
            if new is self.view:
                return
            self.view = new
            for callback in list(self._subscribers):
                callback(new)
            self._changed.notify_all()

    # -- observing -----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[ThreadView], None]) -> Callable[[], None]:
        """``callback(view)`` on every change, called on the thread that made it."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

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
        self._apply(event)
        self._post(event)
        found = self.view.by_key("local:" + local_id)
        assert found is not None
        return found

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
        found = self.view.by_key(key)
        assert found is not None
        return found

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        self.client.threads.stop(self.thread_id)

    def continue_(self, side: Literal["a", "b"] = "a") -> None:
        self.client.threads.continue_(self.thread_id, side)

    def terminate(self) -> None:
        self.client.threads.terminate(self.thread_id)

    def load_older(self, n: int) -> None:
        """Prepend up to ``n`` older messages."""
        loaded = sum(1 for m in self.view.messages if not m.id.startswith("local:"))
        page = self.client.messages.list(
            self.thread_id,
            order="desc",
            limit=n,
            offset=loaded,
            include_silent=True,
            depth=self.depth,
        )
        self._apply(StatusChecked(page.messages))

    def check_status(self) -> ThreadView:
        """Read-only: look up the messages in doubt and merge what the server has (never POSTs)."""
        if self._checking:
            raise RuntimeError("check_status() is already running")
        self._checking = True
        try:
            doubt = in_doubt(self.view)
            server_ids = [m.id for m in doubt if not m.id.startswith("local:")]
            records: list[Record] = []
            if server_ids:
                records.extend(self.client.messages.get(self.thread_id, server_ids).messages)
            local = {m.key.removeprefix("local:") for m in doubt if m.id.startswith("local:")}
            if local:
                newest = self.client.messages.list(
                    self.thread_id, include_silent=True, depth=self.depth
                )
                records.extend(
                    r
                    for r in newest.messages
                    if (r.metadata or {}).get("client_message_id") in local
                )
            self._apply(StatusChecked(records))
            with self._changed:
                if all_found(doubt, records) and self.view.error is not None:
                    self.view = replace(self.view, error=None)
                return self.view
        finally:
            self._checking = False
