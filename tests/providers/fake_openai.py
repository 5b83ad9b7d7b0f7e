"""A fake OpenAI-style HTTP server for the adapter tests (spec 05 §5.10).

A plain ``asyncio.start_server`` speaking HTTP/1.1 on 127.0.0.1: it records every request
(method, path, headers, parsed JSON body) and answers each with the next queued response —
a JSON body with any status and headers, or a server-sent-event stream written with
chunked transfer encoding, event by event, the way the real APIs stream. The real
``openai`` SDK client is pointed at :attr:`FakeOpenAIServer.base_url`, so the tests cover
the adapters' wire bodies, the SDK's parsing and its error classes.

The builders at the bottom produce chunk / event objects in the recorded shapes of Chat
Completions (incl. OpenRouter's extra fields) and of the Responses API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

SSEEvent = dict[str, Any] | str | tuple[str, dict[str, Any]]
"""A JSON object (``data:`` line), a raw ``data:`` string (one starting with ``:`` is an SSE
comment line, as OpenRouter sends while it waits), or ``(event name, object)``."""


@dataclass
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class JSONResponse:
    """A non-streaming answer, e.g. an API error."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class SSEResponse:
    """A streamed answer. ``done`` appends ``data: [DONE]``; ``hang`` keeps the response
    open after the events until the client goes away (for cancellation tests); ``drop``
    closes the connection after the events without ending the chunked body."""

    events: list[SSEEvent]
    done: bool = True
    hang: bool = False
    drop: bool = False
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


Response = JSONResponse | SSEResponse
_Closable = TypeVar("_Closable", bound="SupportsAclose")


class SupportsAclose(Protocol):
    async def aclose(self) -> None: ...


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class FakeOpenAIServer:
    """The server; use as ``async with FakeOpenAIServer() as server``."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.responses: deque[Response] = deque()
        self.client_disconnected = asyncio.Event()
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._clients: list[Any] = []
        self.port = 0

    async def __aenter__(self) -> FakeOpenAIServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self._clients:
            await client.aclose()
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def adopt(self, client: _Closable) -> _Closable:
        """Close ``client`` (a provider) when the server stops, so no socket leaks."""
        self._clients.append(client)
        return client

    def refuse(self, request: Recorded) -> JSONResponse | None:
        """An error answer for a request the fake rejects (the Azure fake's URL and
        authentication checks); None accepts it and answers the next queued response."""
        return None

    def enqueue(self, *responses: Response) -> None:
        self.responses.extend(responses)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    @property
    def last_body(self) -> Any:
        return self.requests[-1].body

    # -- HTTP ----------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        line = await reader.readline()
        if not line:
            return False
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            header = await reader.readline()
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        body = json.loads(raw) if raw else None
        self.requests.append(Recorded(method, path, headers, body))
        refused = self.refuse(self.requests[-1])
        response = refused or (
            self.responses.popleft()
            if self.responses
            else JSONResponse(500, {"error": {"message": "fake server: nothing queued"}})
        )
        if isinstance(response, JSONResponse):
            await self._send_json(writer, response)
            return True
        return await self._send_sse(reader, writer, response)

    @staticmethod
    def _head(status: int, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send_json(self, writer: asyncio.StreamWriter, response: JSONResponse) -> None:
        payload = json.dumps(response.body).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(payload)),
            **response.headers,
        }
        writer.write(self._head(response.status, headers) + payload)
        await writer.drain()

    async def _send_sse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, response: SSEResponse
    ) -> bool:
        headers = {
            "content-type": "text/event-stream",
            "transfer-encoding": "chunked",
            "cache-control": "no-cache",
            **response.headers,
        }
        writer.write(self._head(200, headers))
        frames = [_frame(event) for event in response.events]
        if response.done:
            frames.append(b"data: [DONE]\n\n")
        for frame in frames:
            writer.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            await writer.drain()
            await asyncio.sleep(response.delay)
        if response.hang:
            # Wait for the client to close the connection (EOF) — the cancellation check.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.read(), 10)
            self.client_disconnected.set()
            return False
        if response.drop:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _frame(event: SSEEvent) -> bytes:
    if isinstance(event, tuple):
        name, data = event
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    if isinstance(event, str) and event.startswith(":"):
        return f"{event}\n\n".encode()
    text = event if isinstance(event, str) else json.dumps(event)
    return f"data: {text}\n\n".encode()


# --------------------------------------------------------------------------------------
# Chat Completions chunks


def chat_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    id: str = "chatcmpl-fake1",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` object (a usage-only chunk has ``choices: []``)."""
    chunk: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-fake",
        "system_fingerprint": "fp_fake",
        "choices": [],
    }
    if choices:
        chunk["choices"] = [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def chat_text_stream(text: str = "ok", usage: dict[str, Any] | None = None) -> SSEResponse:
    """role chunk, one content chunk, a stop chunk and a usage chunk."""
    return SSEResponse(
        [
            chat_chunk({"role": "assistant", "content": ""}),
            chat_chunk({"content": text}),
            chat_chunk({}, finish_reason="stop"),
            chat_chunk(
                choices=False,
                usage=usage or {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            ),
        ]
    )


def error_body(message: str, code: str | None = None, type: str = "invalid_request_error") -> Any:
    """The OpenAI error envelope."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


# --------------------------------------------------------------------------------------
# Responses API events


class ResponsesEvents:
    """Builds a Responses stream event by event, numbering ``sequence_number``."""

    def __init__(self, response_id: str = "resp_fake1", model: str = "gpt-fake") -> None:
        self.response_id = response_id
        self.model = model
        self.events: list[SSEEvent] = []
        self.output: list[dict[str, Any]] = []

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": self.model,
            "output": list(self.output) if status != "in_progress" else [],
            **extra,
        }

    def add(self, type: str, **fields: Any) -> ResponsesEvents:
        event = {"type": type, "sequence_number": len(self.events), **fields}
        self.events.append((type, event))
        return self

    def created(self) -> ResponsesEvents:
        self.add("response.created", response=self._response("in_progress"))
        return self.add("response.in_progress", response=self._response("in_progress"))

    def reasoning(
        self, item_id: str, summaries: list[str], encrypted: str | None = None
    ) -> ResponsesEvents:
        index = len(self.output)
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        self.add("response.output_item.added", output_index=index, item=item)
        for number, text in enumerate(summaries):
            part = {"type": "summary_text", "text": ""}
            common = {"item_id": item_id, "output_index": index, "summary_index": number}
            self.add("response.reasoning_summary_part.added", part=part, **common)
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                if piece:
                    self.add("response.reasoning_summary_text.delta", delta=piece, **common)
            self.add("response.reasoning_summary_text.done", text=text, **common)
            self.add("response.reasoning_summary_part.done", part={**part, "text": text}, **common)
        done = {**item, "summary": [{"type": "summary_text", "text": s} for s in summaries]}
        if encrypted is not None:
            done["encrypted_content"] = encrypted
        self.output.append(done)
        return self.add("response.output_item.done", output_index=index, item=done)

    def message(self, text: str, item_id: str = "msg_1") -> ResponsesEvents:
        index = len(self.output)
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
        self.add("response.output_item.added", output_index=index, item={**item, "content": []})
        common = {"item_id": item_id, "output_index": index, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        self.add("response.content_part.added", part=part, **common)
        for piece in text:
            self.add("response.output_text.delta", delta=piece, logprobs=[], **common)
        self.add("response.output_text.done", text=text, logprobs=[], **common)
        self.add("response.content_part.done", part={**part, "text": text}, **common)
        done = {**item, "status": "completed", "content": [{**part, "text": text}]}
        self.output.append(done)
        return self.add("response.output_item.done", output_index=index, item=done)

    def function_call(
        self, item_id: str, call_id: str, name: str, pieces: list[str]
    ) -> ResponsesEvents:
        index = len(self.output)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": name,
            "arguments": "",
        }
        self.add("response.output_item.added", output_index=index, item=item)
        for piece in pieces:
            self.add(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
            )
        arguments = "".join(pieces)
        self.add(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        done = {**item, "status": "completed", "arguments": arguments}
        self.output.append(done)
        return self.add("response.output_item.done", output_index=index, item=done)

    def completed(self, usage: dict[str, Any] | None = None) -> ResponsesEvents:
        usage = usage or {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        return self.add("response.completed", response=self._response("completed", usage=usage))

    def incomplete(self, reason: str) -> ResponsesEvents:
        response = self._response("incomplete", incomplete_details={"reason": reason})
        return self.add("response.incomplete", response=response)

    def stream(self, **kwargs: Any) -> SSEResponse:
        """The events as a streamed response (the Responses API sends no ``[DONE]``)."""
        return SSEResponse(list(self.events), done=False, **kwargs)
