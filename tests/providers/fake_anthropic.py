"""A local fake of the Anthropic Messages HTTP API for adapter tests (spec 05 §5.10).

A plain ``asyncio`` HTTP/1.1 server on 127.0.0.1: every request's JSON body and headers
are recorded, and each request takes the next queued response — an SSE stream of
recorded-shape Messages API events (chunked transfer encoding), or an error status with a
JSON body. A stream may be held open after its events so a test can observe the client
closing the connection (cancellation). Nothing here touches the network beyond 127.0.0.1.

Before answering, the server checks the request's ``messages`` against the rules the
Messages API documents and answers 400 ``invalid_request_error`` (in the API's words) when
one is broken (https://docs.anthropic.com/en/docs/build-with-claude/tool-use,
.../extended-thinking):

- roles are ``user`` or ``assistant``; each content block is of a known type and has only
  that type's fields (``Extra inputs are not permitted``: e.g. a Gemini
  ``thoughtSignature`` or an OpenAI reasoning item in a block);
- every ``tool_use`` block is answered by a ``tool_result`` block in the next message, and
  every ``tool_result`` answers a ``tool_use`` of the previous message; in that message the
  ``tool_result`` blocks come first;
- tool use ids match ``^[a-zA-Z0-9_-]+$``;
- a ``thinking`` block carries a ``signature``; with ``verify_signatures`` the signature
  (and a ``redacted_thinking`` block's ``data``) must be one this server issued for that
  block — a signature from elsewhere is ``Invalid `signature` in `thinking` block``;
- with thinking enabled, the assistant message whose tool use the last user message
  answers starts with a ``thinking`` or ``redacted_thinking`` block.

``rejected`` lists the messages of the requests refused that way.

Compaction (the ``compact-2026-01-12`` beta, answered by the server itself, not from the
queue): ``POST /v1/messages/count_tokens`` answers ``input_tokens`` — ceil(characters of
the JSON of ``system`` and ``messages`` / 4) — and, with a ``context_management`` config,
``context_management.original_input_tokens`` (the same count). A non-streaming
``POST /v1/messages`` that declares the ``compact_20260112`` edit with
``pause_after_compaction`` and whose count reaches the edit's trigger answers, as the API
documents, one ``compaction`` block (``content`` the summary text, ``encrypted_content``
opaque), ``stop_reason`` ``compaction``, top-level usage 0 and the compaction's tokens in
``usage.iterations`` (the count in, 7 out); below the trigger it answers a plain text
message. An edit whose trigger is under 50,000 tokens, or a request using the edit or a
``compaction`` block without the beta in ``anthropic-beta``, is a 400; a ``compaction``
block is taken only in an assistant message, with its edit declared, and with
``encrypted_content`` this server issued (``compactions``: encrypted content → the
messages it folded).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
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


# -- the documented request rules ---------------------------------------------------------

#: The fields each content block type takes (the API refuses others).
BLOCK_FIELDS: dict[str, set[str]] = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "cache_control", "title", "context", "citations"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "compaction": {"type", "content", "encrypted_content", "cache_control"},
}
COMPACT_BETA = "compact-2026-01-12"
COMPACT_EDIT = "compact_20260112"
MIN_TRIGGER = 50_000
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


class Invalid(Exception):
    """A request that breaks a documented rule; its text is the 400 message."""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def check_messages(
    body: Any, issued: dict[str, str] | None = None, redacted: set[str] | None = None
) -> None:
    """Raise :class:`Invalid` when ``body`` breaks a rule of the module docstring;
    ``issued`` (signature → thinking text) and ``redacted`` are checked when given."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: Field required")
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        for j, block in enumerate(_blocks(message)):
            kind = block.get("type")
            where = f"messages.{i}.content.{j}"
            if kind not in BLOCK_FIELDS:
                raise Invalid(f"{where}.type: Input tag {kind!r} does not match any expected tag")
            extra = sorted(set(block) - BLOCK_FIELDS[kind])
            if extra:
                raise Invalid(f"{where}.{kind}.{extra[0]}: Extra inputs are not permitted")
            if kind == "tool_use" and not _TOOL_ID.match(str(block.get("id", ""))):
                raise Invalid(
                    f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                )
            if kind == "thinking":
                if not block.get("signature"):
                    raise Invalid(f"{where}.thinking.signature: Field required")
                if issued is not None and issued.get(block["signature"]) != block.get("thinking"):
                    raise Invalid(f"{where}: Invalid `signature` in `thinking` block")
            if (
                kind == "redacted_thinking"
                and redacted is not None
                and block.get("data") not in redacted
            ):
                raise Invalid(f"{where}: Invalid `data` in `redacted_thinking` block")
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        following = _blocks(messages[i + 1]) if i + 1 < len(messages) else None
        if uses and message["role"] == "assistant" and following is not None:
            answered = [b.get("tool_use_id") for b in following if b.get("type") == "tool_result"]
            missing = [u for u in uses if u not in answered]
            if messages[i + 1]["role"] != "user" or missing:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing or uses)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if not results:
            continue
        previous = messages[i - 1] if i else None
        asked = (
            {b["id"] for b in _blocks(previous) if b.get("type") == "tool_use"}
            if previous is not None and previous["role"] == "assistant"
            else set()
        )
        strays = [r for r in results if r not in asked]
        if message["role"] != "user" or strays:
            raise Invalid(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{', '.join(map(str, strays or results))}. Each `tool_result` block must have "
                "a corresponding `tool_use` block in the previous message."
            )
        kinds = [b.get("type") for b in blocks]
        if kinds[: len(results)] != ["tool_result"] * len(results):
            raise Invalid(
                f"messages.{i}.content: `tool_result` blocks must come first in the content, "
                "before any other block."
            )
    thinking = (body.get("thinking") or {}).get("type") == "enabled"
    last = messages[-1]
    if (
        thinking
        and len(messages) > 1
        and any(b.get("type") == "tool_result" for b in _blocks(last))
    ):
        first = (_blocks(messages[-2]) or [{}])[0].get("type")
        if first not in ("thinking", "redacted_thinking"):
            raise Invalid(
                f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block (preceeding the lastmost "
                "set of `tool_use` and `tool_result` blocks)."
            )


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
class JSONReply:
    """A whole JSON answer (not streamed)."""

    status: int
    body: Any


def count_tokens(body: dict[str, Any]) -> int:
    """The fake's token count of a request: ceil(characters of its system and messages'
    JSON / 4)."""
    text = json.dumps([body.get("system"), body.get("messages")])
    return -(-len(text) // 4)


def compact_edit(body: Any) -> dict[str, Any] | None:
    """The request's ``compact_20260112`` edit, if it declares one."""
    config = body.get("context_management") if isinstance(body, dict) else None
    edits = config.get("edits") if isinstance(config, dict) else None
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict) and edit.get("type") == COMPACT_EDIT:
            return edit
    return None


def check_compaction(body: Any, headers: dict[str, str], issued: dict[str, Any]) -> None:
    """Raise :class:`Invalid` when ``body`` uses compaction against the module docstring's
    rules."""
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    edit = compact_edit(body)
    messages = body.get("messages") if isinstance(body, dict) else None
    blocks = [
        (i, message.get("role"), block)
        for i, message in enumerate(messages if isinstance(messages, list) else [])
        for block in _blocks(message)
        if block.get("type") == "compaction"
    ]
    if (edit is not None or blocks) and COMPACT_BETA not in betas:
        raise Invalid(f"compaction requires the beta header `anthropic-beta: {COMPACT_BETA}`")
    if edit is not None:
        trigger = edit.get("trigger") or {}
        if trigger.get("type") != "input_tokens" or int(trigger.get("value", 0)) < MIN_TRIGGER:
            raise Invalid(
                "context_management.edits.0.trigger.value: Input should be greater than or "
                f"equal to {MIN_TRIGGER}"
            )
    for i, role, block in blocks:
        if role != "assistant":
            raise Invalid(f"messages.{i}: `compaction` blocks may only be in assistant messages")
        if edit is None:
            raise Invalid(f"messages.{i}: `compaction` blocks require the `{COMPACT_EDIT}` edit")
        if block.get("encrypted_content") not in issued:
            raise Invalid(f"messages.{i}: Invalid `encrypted_content` in `compaction` block")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeAnthropic:
    """The fake server. ``async with FakeAnthropic() as fake`` starts it; ``base_url`` is
    what the SDK client points at; ``requests`` are the recorded requests in order."""

    def __init__(self, *, verify_signatures: bool = False) -> None:
        self.verify_signatures = verify_signatures
        self.issued: dict[str, str] = {}  # signature → the thinking text it was issued for
        self.redacted: set[str] = set()
        self.rejected: list[str] = []
        #: compaction blocks issued: encrypted content → the messages they folded
        self.compactions: dict[str, list[Any]] = {}
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

    def _invalid(self, body: Any, headers: dict[str, str] | None = None) -> ErrorReply | None:
        """The 400 of a request that breaks a documented rule, else None."""
        try:
            if self.verify_signatures:
                check_messages(body, self.issued, self.redacted)
            else:
                check_messages(body)
            check_compaction(body, headers or {}, self.compactions)
        except Invalid as exc:
            self.rejected.append(str(exc))
            error = {"type": "invalid_request_error", "message": str(exc)}
            return ErrorReply(400, {"type": "error", "error": error})
        return None

    def _answer(self, request: Recorded) -> JSONReply | None:
        """The server's own answer of a token count or an on-demand compaction (module
        docstring), None for a request the queue answers."""
        body = request.body if isinstance(request.body, dict) else {}
        path = request.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            tokens = count_tokens(body)
            answer: dict[str, Any] = {"input_tokens": tokens}
            if body.get("context_management") is not None:
                answer["context_management"] = {"original_input_tokens": tokens}
            return JSONReply(200, answer)
        edit = compact_edit(body)
        if body.get("stream") or edit is None or not edit.get("pause_after_compaction"):
            return None
        tokens = count_tokens(body)
        number = len(self.compactions) + 1
        message: dict[str, Any] = {
            "id": f"msg_compact_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "stop_sequence": None,
        }
        if tokens < int(edit["trigger"]["value"]):
            return JSONReply(
                200,
                {
                    **message,
                    "content": [{"type": "text", "text": "ok"}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": tokens, "output_tokens": 1},
                },
            )
        encrypted = f"fake-compaction-{number}"
        self.compactions[encrypted] = list(body.get("messages") or [])
        block = {
            "type": "compaction",
            "content": f"Summary {number} of {len(self.compactions[encrypted])} messages",
            "encrypted_content": encrypted,
        }
        iteration = {
            "type": "compaction",
            "input_tokens": tokens,
            "output_tokens": 7,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        usage = {"input_tokens": 0, "output_tokens": 0, "iterations": [iteration]}
        return JSONReply(
            200, {**message, "content": [block], "stop_reason": "compaction", "usage": usage}
        )

    def _issue(self, events: list[SSEEvent]) -> None:
        """Remember the signatures (and redacted data) a streamed answer hands out."""
        texts: dict[int, str] = {}
        for _, data in events:
            index = data.get("index", -1)
            block = data.get("content_block") or {}
            delta = data.get("delta") or {}
            if block.get("type") == "redacted_thinking":
                self.redacted.add(block.get("data", ""))
            if delta.get("type") == "thinking_delta":
                texts[index] = texts.get(index, "") + delta.get("thinking", "")
            if delta.get("type") == "signature_delta":
                self.issued[delta.get("signature", "")] = texts.get(index, "")

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
        request = self.requests[-1]
        refused = self.refuse(request, raw) or self._invalid(request.body, headers)
        reply: Stream | ErrorReply | JSONReply | None = refused or self._answer(request)
        if reply is None:
            reply = self.queue.popleft() if self.queue else Stream(simple_text_stream())
            if isinstance(reply, Stream):
                self._issue(reply.events)
        if isinstance(reply, ErrorReply | JSONReply):
            payload = json.dumps(reply.body).encode()
            extra = "".join(f"{k}: {v}\r\n" for k, v in getattr(reply, "headers", {}).items())
            writer.write(
                f"HTTP/1.1 {reply.status} {'OK' if reply.status == 200 else 'Error'}\r\n"
                "content-type: application/json\r\n"
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
