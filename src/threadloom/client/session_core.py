"""What ``ThreadSession`` and its blocking twin ``SyncThreadSession`` share (spec 11 §11.6):
their state, the reducer step, the local send, the queries they make and what they do with
the answers. The two sessions only add their own I/O (await or block) and their own lock."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from threadloom.client.calls import Upload
from threadloom.client.chat import AgentError, AttachmentUrl, Message, Outcome, Phase, fs_url
from threadloom.client.errors import APIError, ConflictError, ThreadTerminatedError, TransportError
from threadloom.client.frames import (
    EventFrame,
    Frame,
    MalformedFrame,
    TelemetryFrame,
    UnknownFrame,
)
from threadloom.client.reduce import (
    LocalSend,
    ReducerEvent,
    SendFailed,
    Snapshot,
    ThreadView,
    empty_view,
    reduce,
)
from threadloom.records import Message as Record


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class SessionCore:
    """The state of a session and every step of it that does no I/O."""

    def __init__(
        self,
        client: Any,
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
        self._subscribers: list[Callable[[ThreadView], None]] = []
        self._sends: dict[str, LocalSend] = {}
        self._checking = False
        self.closed: BaseException | None = None
        """Why the stream ended for good, once it has."""
        self._ended = False
        """The session was closed or its stream ended: ``views()`` and ``wait_for`` stop."""

    def subscribe(self, callback: Callable[[ThreadView], None]) -> Callable[[], None]:
        """``callback(view)`` on every change."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(callback)

        return unsubscribe

    def _reduced(self, event: ReducerEvent) -> bool:
        """Apply ``event`` to the view and tell the subscribers; False when nothing changed."""
        new = reduce(self.view, event, attachment_url=self.attachment_url)
        if new is self.view:
            return False
        self.view = new
        for callback in list(self._subscribers):
            callback(new)
        return True

    # -- queries and their answers ---------------------------------------------------------------

    def _page_query(self, limit: int, offset: int = 0) -> dict[str, Any]:
        """The ``messages.list`` arguments of a load (newest first)."""
        return {
            "order": "desc",
            "limit": limit,
            "offset": offset,
            "include_silent": True,
            "depth": self.depth,
        }

    def _older_offset(self) -> int:
        """How many stored messages are loaded (where ``load_older`` continues)."""
        return sum(1 for m in self.view.messages if not m.id.startswith("local:"))

    def _stream_query(self, since: int | None) -> dict[str, Any]:
        return {
            "include_silent": True,
            "depth": self.depth,
            "reasoning": self.reasoning,
            "logs": self.logs,
            "since": since,
        }

    @staticmethod
    def _ignored(frame: Frame) -> bool:
        """A frame the reducer ignores, offered on ``events()`` instead."""
        return isinstance(
            frame, EventFrame | TelemetryFrame | UnknownFrame | MalformedFrame
        ) or frame.type in ("heartbeat", "error")

    def _local_send(
        self,
        content: str,
        role: Literal["user", "assistant", "system"],
        attachments: Sequence[Upload],
        silent: bool,
        metadata: Mapping[str, Any] | None,
    ) -> LocalSend:
        """A new optimistic send, remembered for ``retry``."""
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
        return event

    def _shown_hash(self, tool_call_id: str, arguments_hash: str | None) -> str:
        """The hash a decision names: the one given, else that of the approval the view
        shows (``KeyError`` when it shows none for that call)."""
        if arguments_hash is not None:
            return arguments_hash
        shown = self.view.approvals.get(tool_call_id)
        if shown is None:
            raise KeyError(f"no approval of tool call {tool_call_id} is shown")
        return shown.arguments_hash

    def _shown(self, key: str) -> Message:
        found = self.view.by_key(key)
        assert found is not None
        return found

    def _doubt(self) -> tuple[list[Message], list[str], set[str]]:
        """What ``check_status`` looks up: the messages in doubt, the server ids among them
        and the client message ids of the local ones."""
        if self._checking:
            raise RuntimeError("check_status() is already running")
        doubt = in_doubt(self.view)
        server_ids = [m.id for m in doubt if not m.id.startswith("local:")]
        local = {m.key.removeprefix("local:") for m in doubt if m.id.startswith("local:")}
        return doubt, server_ids, local

    def _checked(self, doubt: Sequence[Message], records: Sequence[Record]) -> ThreadView:
        """After the check's records were applied: the view, its error cleared when every
        message in doubt was found."""
        if all_found(doubt, records) and self.view.error is not None:
            self.view = replace(self.view, error=None)
        return self.view


def snapshot_of(page: Any, detail: Any, subagents: Any) -> Snapshot:
    return Snapshot(
        page.messages, detail.status, detail.terminated, page.seq, subagents, detail.approvals
    )


def with_client_ids(records: Sequence[Record], local: set[str]) -> list[Record]:
    """The records that answer the local sends ``local`` (by ``client_message_id``)."""
    return [r for r in records if (r.metadata or {}).get("client_message_id") in local]


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
