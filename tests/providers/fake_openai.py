"""A fake OpenAI-style HTTP server for the adapter tests (spec 05 §5.10).

A plain ``asyncio.start_server`` speaking HTTP/1.1 on 127.0.0.1: it records every request
(method, path, headers, parsed JSON body) and answers each with the next queued response —
a JSON body with any status and headers, or a server-sent-event stream written with
chunked transfer encoding, event by event, the way the real APIs stream. The real
``openai`` SDK client is pointed at :attr:`FakeOpenAIServer.base_url`, so the tests cover
the adapters' wire bodies, the SDK's parsing and its error classes.

The builders at the bottom produce chunk / event objects in the recorded shapes of Chat
Completions (incl. OpenRouter's extra fields) and of the Responses API.

Before answering, the server checks the request against the rules the APIs document and
answers 400 ``invalid_request_error`` (in the API's words) when one is broken; ``rejected``
lists those messages:

- Chat Completions (``/chat/completions``): an assistant message with ``tool_calls`` is
  followed by a ``tool`` message for each ``tool_call_id``, and a ``tool`` message answers
  a call of the assistant message before its run of tool messages. With ``openai_only``
  (api.openai.com, which takes no reasoning input) a message has only its role's fields
  (``Additional properties are not allowed``: ``reasoning_details``, ``thinking`` …).
- Responses (``/responses``): each ``function_call_output`` answers an earlier
  ``function_call`` (``No tool call found for function call output``) and each
  ``function_call`` is answered (``No tool output found``); input items have only their
  type's fields; a ``reasoning`` item is followed by an output item, not another reasoning
  item (after any further reasoning items), not an output, a user message or the end.
  With ``verify_issued`` (for tests that replay only what this server answered, not
  seeded records): a reasoning item this server did not issue is refused (another
  provider's reasoning, ``Item with id … not found``), one it issued must carry the
  ``encrypted_content`` it was issued with, and an issued ``function_call`` or ``message``
  item sent by ``id`` is preceded by the reasoning item it was produced after (``… was
  provided without its required 'reasoning' item``).
- Compaction (``/responses/compact``, answered by the server itself, not from the queue):
  the input is checked as a ``/responses`` input; the answer is a ``response.compaction``
  object whose ``output`` is every user message of the input followed by one
  ``compaction`` item of opaque ``encrypted_content``, and whose ``usage`` counts 10 input
  tokens an input item and 7 output tokens. A ``compaction`` item in any input must be one
  this server issued, sent back with only ``type``, ``id`` and ``encrypted_content``
  (``The encrypted content for item … could not be verified``); ``compactions`` maps each
  issued item's encrypted content to the input it folded.
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

    def __init__(self, *, openai_only: bool = False, verify_issued: bool = False) -> None:
        self.openai_only = openai_only
        self.verify_issued = verify_issued
        self.rejected: list[str] = []
        #: Responses reasoning items issued: id → encrypted content; item id → its reasoning
        self.reasoning_issued: dict[str, str | None] = {}
        self.produced_after: dict[str, str] = {}
        #: compaction items issued: encrypted content → the input items it folded
        self.compactions: dict[str, list[Any]] = {}
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
        refused = self.refuse(self.requests[-1]) or self._invalid(path, body)
        if refused is None and path.split("?")[0].endswith("/responses/compact"):
            await self._send_json(writer, self._compact(body))
            return True
        response = refused or (
            self.responses.popleft()
            if self.responses
            else JSONResponse(500, {"error": {"message": "fake server: nothing queued"}})
        )
        if refused is None and isinstance(response, SSEResponse):
            self._issue(response.events)
        if isinstance(response, JSONResponse):
            await self._send_json(writer, response)
            return True
        return await self._send_sse(reader, writer, response)

    def _invalid(self, path: str, body: Any) -> JSONResponse | None:
        """The 400 of a request that breaks a documented rule (module docstring)."""
        try:
            if path.split("?")[0].endswith("/chat/completions") and isinstance(body, dict):
                check_chat(body, openai_only=self.openai_only)
            elif path.split("?")[0].endswith(("/responses", "/responses/compact")) and (
                isinstance(body, dict)
            ):
                check_responses(
                    body, self.reasoning_issued, self.produced_after, verify=self.verify_issued
                )
                check_compactions(body, self.compactions)
        except Invalid as exc:
            self.rejected.append(str(exc))
            return JSONResponse(400, error_body(str(exc)))
        return None

    def _compact(self, body: dict[str, Any]) -> JSONResponse:
        """The answer of ``/responses/compact`` (module docstring)."""
        items = list(body.get("input") or [])
        number = len(self.compactions) + 1
        encrypted = f"gAAAA-fake-compaction-{number}"
        self.compactions[encrypted] = items
        kept = [
            {
                "id": f"msg_kept_{number}_{n}",
                "type": "message",
                "status": "completed",
                "role": "user",
                "content": item.get("content"),
            }
            for n, item in enumerate(items)
            if item.get("type", "message") == "message" and item.get("role") == "user"
        ]
        compaction = {
            "id": f"cmp_{number}",
            "type": "compaction",
            "encrypted_content": encrypted,
            "created_by": "fake",
        }
        usage = {
            "input_tokens": 10 * len(items),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 10 * len(items) + 7,
        }
        answer = {
            "id": f"resp_cmp_{number}",
            "object": "response.compaction",
            "created_at": 1_700_000_000 + number,
            "output": [*kept, compaction],
            "usage": usage,
        }
        return JSONResponse(200, answer)

    def _issue(self, events: list[SSEEvent]) -> None:
        """Remember the reasoning items a Responses stream hands out, and which item
        followed each (the one it was produced for)."""
        last_reasoning: str | None = None
        for event in events:
            data = event[1] if isinstance(event, tuple) else event
            if not isinstance(data, dict) or data.get("type") != "response.output_item.done":
                continue
            item = data.get("item") or {}
            if item.get("type") == "reasoning":
                last_reasoning = item.get("id")
                self.reasoning_issued[str(last_reasoning)] = item.get("encrypted_content")
            elif last_reasoning is not None and item.get("id"):
                self.produced_after[item["id"]] = last_reasoning

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


# --------------------------------------------------------------------------------------
# The documented request rules


class Invalid(Exception):
    """A request that breaks a documented rule; its text is the 400 message."""


#: Chat Completions message fields by role (api.openai.com refuses others).
CHAT_FIELDS: dict[str, set[str]] = {
    "system": {"role", "content", "name"},
    "developer": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"},
    "tool": {"role", "content", "tool_call_id"},
}


def check_chat(body: dict[str, Any], *, openai_only: bool = False) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Invalid("[] is too short - 'messages'")
    open_calls: list[str] = []  # the ids of the last assistant message still unanswered
    answerable: set[str] = set()  # the ids the current run of tool messages may answer
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in CHAT_FIELDS:
            raise Invalid(f"Invalid value: '{role}'. Supported values are: {sorted(CHAT_FIELDS)}")
        extra = sorted(set(message) - CHAT_FIELDS[role])
        if openai_only and extra:
            raise Invalid(
                f"Additional properties are not allowed ('{extra[0]}' was unexpected) - "
                f"'messages.{i}'"
            )
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                raise Invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            if call_id in open_calls:
                open_calls.remove(call_id)
            continue
        if open_calls:
            raise Invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
        calls = message.get("tool_calls") or [] if role == "assistant" else []
        for call in calls:
            if call.get("type") != "function" or not isinstance(
                (call.get("function") or {}).get("arguments"), str
            ):
                raise Invalid(f"Invalid 'messages[{i}].tool_calls': not a function call")
        open_calls = [c.get("id") for c in calls]
        answerable = set(open_calls)
    if open_calls:
        raise Invalid(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(open_calls)}"
        )


#: Responses input item fields by type.
RESPONSES_FIELDS: dict[str, set[str]] = {
    "message": {"type", "role", "content", "id", "status"},
    "function_call": {"type", "id", "call_id", "name", "arguments", "status"},
    "function_call_output": {"type", "id", "call_id", "output", "status"},
    "reasoning": {"type", "id", "summary", "encrypted_content", "content", "status"},
    "compaction": {"type", "id", "encrypted_content"},
}


def check_compactions(body: dict[str, Any], issued: dict[str, list[Any]]) -> None:
    """Each ``compaction`` input item is one this server issued (module docstring)."""
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if item.get("type") == "compaction" and item.get("encrypted_content") not in issued:
            raise Invalid(f"The encrypted content for item {item.get('id')} could not be verified.")


def check_responses(
    body: dict[str, Any],
    issued: dict[str, str | None],
    produced_after: dict[str, str],
    *,
    verify: bool = True,
) -> None:
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list):
        raise Invalid("Invalid type for 'input'")
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind not in RESPONSES_FIELDS:
            raise Invalid(f"Invalid value: '{kind}'. (input[{i}].type)")
        extra = sorted(set(item) - RESPONSES_FIELDS[kind])
        if extra:
            raise Invalid(f"Unknown parameter: 'input[{i}].{extra[0]}'.")
        if kind == "function_call":
            calls.add(item.get("call_id"))
        if kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise Invalid(
                    f"No tool call found for function call output with call_id "
                    f"{item.get('call_id')}."
                )
            answered.add(item.get("call_id"))
        if kind == "reasoning" and verify:
            rid = item.get("id")
            if rid not in issued:
                raise Invalid(f"Item with id '{rid}' not found.")
            if issued[rid] is not None and item.get("encrypted_content") != issued[rid]:
                raise Invalid(f"The encrypted content for item {rid} could not be verified.")
            # the next item that is not reasoning (one output may hold several in a row)
            following = next((n for n in items[i + 1 :] if n.get("type") != "reasoning"), {})
            if following.get("type", "message") not in ("message", "function_call") or (
                following.get("type", "message") == "message"
                and following.get("role") != "assistant"
            ):
                raise Invalid(
                    f"Item '{rid}' of type 'reasoning' was provided without its required "
                    "following item."
                )
        item_id = item.get("id")
        if verify and kind in ("function_call", "message") and item_id in produced_after:
            wanted = produced_after[item_id]
            before = [p.get("id") for p in items[:i] if p.get("type") == "reasoning"]
            if wanted not in before:
                raise Invalid(
                    f"Item '{item_id}' of type '{kind}' was provided without its required "
                    f"'reasoning' item: '{wanted}'."
                )
    missing = sorted(calls - answered)
    if missing:
        raise Invalid(f"No tool output found for function call {missing[0]}.")


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
