"""A local fake of the Anthropic Messages HTTP API for adapter tests (spec 05 §5.10).

A plain ``asyncio`` HTTP/1.1 server on 127.0.0.1: every request's JSON body and headers
are recorded, and each request takes the next queued response — an SSE stream of
recorded-shape Messages API events (chunked transfer encoding), or an error status with a
JSON body. A stream may be held open after its events so a test can observe the client
closing the connection (cancellation). Nothing here touches the network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

SSEEvent = tuple[str, dict[str, Any]]


# -- recorded-shape events ------------------------------------------------------------


def message_start(
    msg_id: str = "msg_01FAKE",
    *,
    input_tokens: int = 10,
    cache_creation: int = 0,
    cache_read: int = 0,
    model: str = "claude-test",
) -> SSEEvent:
    """``message_start`` as the API sends it (usage carries the prompt counts)."""
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
    }
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return "message_start", {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> SSEEvent:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def block_delta(index: int, delta: dict[str, Any]) -> SSEEvent:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> SSEEvent:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str = "end_turn", output_tokens: int = 5) -> SSEEvent:
    return "message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def message_stop() -> SSEEvent:
    return "message_stop", {"type": "message_stop"}


def ping() -> SSEEvent:
    return "ping", {"type": "ping"}


def error_event(kind: str, message: str) -> SSEEvent:
    return "error", {"type": "error", "error": {"type": kind, "message": message}}


def text_block(index: int, *pieces: str) -> list[SSEEvent]:
    """A text block streamed as one ``text_delta`` per piece."""
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(block_delta(index, {"type": "text_delta", "text": p}) for p in pieces),
        block_stop(index),
    ]


def thinking_block(index: int, text: str, signature: str | None) -> list[SSEEvent]:
    """A thinking block: its text, then (when given) the ``signature_delta``."""
    events = [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(index, {"type": "thinking_delta", "thinking": text}),
    ]
    if signature is not None:
        events.append(block_delta(index, {"type": "signature_delta", "signature": signature}))
    return [*events, block_stop(index)]


def redacted_block(index: int, data: str) -> list[SSEEvent]:
    return [block_start(index, {"type": "redacted_thinking", "data": data}), block_stop(index)]


def tool_use_block(index: int, call_id: str, name: str, *json_pieces: str) -> list[SSEEvent]:
    """A tool_use block whose input arrives as ``input_json_delta`` fragments."""
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        *(block_delta(index, {"type": "input_json_delta", "partial_json": p}) for p in json_pieces),
        block_stop(index),
    ]


def simple_text_stream(text: str = "ok", **start: Any) -> list[SSEEvent]:
    """A whole successful response with one text block."""
    return [message_start(**start), *text_block(0, text), message_delta(), message_stop()]


# -- the server ------------------------------------------------------------------------


@dataclass
class Stream:
    events: list[SSEEvent]
    hold_open: bool = False
    truncate: bool = False


@dataclass
class ErrorReply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeAnthropic:
    """The fake server. ``async with FakeAnthropic() as fake`` starts it; ``base_url`` is
    what the SDK client points at; ``requests`` are the recorded requests in order."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.raw_bodies: list[bytes] = []
        self.queue: deque[Stream | ErrorReply] = deque()
        self.client_closed = asyncio.Event()
        self.held = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FakeAnthropic:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def last_body(self) -> dict[str, Any]:
        body = self.requests[-1].body
        assert isinstance(body, dict)
        return body

    #: The streamed answer's content type and how one event is framed (server-sent events
    #: here; the Bedrock fake replaces both with AWS event-stream messages).
    stream_content_type = "text/event-stream; charset=utf-8"

    def frame(self, name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    def refuse(self, request: Recorded, raw: bytes) -> ErrorReply | None:
        """An error answer for a request the fake rejects (its checks of the cloud
        fakes' authentication); None accepts it."""
        return None

    def stream(
        self, events: list[SSEEvent], *, hold_open: bool = False, truncate: bool = False
    ) -> None:
        """Queue an SSE response. ``hold_open``: keep the connection open after the events
        until the client closes it; ``truncate``: drop the connection mid-body (no final
        chunk)."""
        self.queue.append(Stream(events, hold_open, truncate))

    def error(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.queue.append(ErrorReply(status, body, headers or {}))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.client_closed.set()
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Recorded(method, path, headers, json.loads(raw) if raw else None))
        self.raw_bodies.append(raw)
        refused = self.refuse(self.requests[-1], raw)
        reply: Stream | ErrorReply
        if refused is not None:
            reply = refused
        else:
            reply = self.queue.popleft() if self.queue else Stream(simple_text_stream())
        if isinstance(reply, ErrorReply):
            payload = json.dumps(reply.body).encode()
            extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
            writer.write(
                f"HTTP/1.1 {reply.status} Error\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\n{extra}connection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            return
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-type: {self.stream_content_type}\r\n".encode()
            + b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n"
            b"request-id: req_fake\r\nconnection: close\r\n\r\n"
        )
        for name, data in reply.events:
            chunk = self.frame(name, data)
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        if reply.hold_open:
            self.held.set()
            # Wait for the client to go away: EOF (or a reset) means the stream was closed.
            while await reader.read(1024):
                pass
            self.client_closed.set()
            return
        if reply.truncate:
            writer.write(b"5\r\nevent")  # half a chunk, then the connection drops
            await writer.drain()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()
