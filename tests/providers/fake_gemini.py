"""A local fake of the Gemini ``streamGenerateContent`` HTTP API for adapter tests (§5.11).

A plain ``asyncio`` HTTP/1.1 server on 127.0.0.1 that answers the Gemini API path
(``/v1beta/models/{model}:streamGenerateContent?alt=sse``) and the Vertex AI one
(``/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:...``). Each request's
JSON body, path and headers are recorded; each takes the next queued reply: an SSE stream
of ``GenerateContentResponse`` chunks (``data: {...}`` events) or an error status with a
Google error body (``{"error": {"code", "message", "status"}}``).

Before answering, the server validates the request against the rules the Gemini API
documents, and answers 400 ``INVALID_ARGUMENT`` (with the API's wording) when one is
broken:

- ``contents`` roles are ``user`` or ``model``; every content has at least one part;
- a function call turn comes immediately after a user turn or a function response turn;
- the content after a model turn with N ``functionCall`` parts is a ``user`` turn with N
  ``functionResponse`` parts, whose names (and ids, when the call has one) match the calls;
  a ``functionResponse.response`` is an object;
- thought signatures (https://ai.google.dev/gemini-api/docs/thought-signatures): a
  signature the server issued is returned on the same part it was issued on (the same kind
  of part; for a function call the same name and id); an unknown signature is "corrupted";
  in strict mode (Gemini 3) the first ``functionCall`` part of every step of the current
  turn carries a signature, where the current turn starts at the newest ``user`` content
  that holds a part other than a ``functionResponse``; the documented dummy signatures
  for history from other models are accepted;
- ``thinkingConfig`` does not set both ``thinkingBudget`` and ``thinkingLevel``.

Signatures are protobuf ``bytes``: JSON carries them as base64, and the proto3 JSON mapping
accepts the standard and the URL-safe alphabets, so they are compared as bytes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: The dummy signatures the Gemini docs give for history that came from other models.
DUMMY_SIGNATURES = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")

Chunk = dict[str, Any]

_GEMINI_PATH = re.compile(
    r"^/(?P<version>v1|v1beta)/models/(?P<model>[^/:]+):streamGenerateContent\?alt=sse$"
)
_VERTEX_PATH = re.compile(
    r"^/(?P<version>v1|v1beta1)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/publishers/google/models/(?P<model>[^/:]+):streamGenerateContent\?alt=sse$"
)


def sig_bytes(value: str) -> bytes:
    """The bytes of a base64 signature in either alphabet, with or without padding."""
    text = value.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


# -- recorded-shape chunks (GenerateContentResponse) -------------------------------------


def text_part(text: str, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def thought_part(text: str, signature: str | None = None) -> dict[str, Any]:
    return {**text_part(text, signature), "thought": True}


def call_part(
    name: str, args: dict[str, Any], *, id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        call["id"] = id
    part: dict[str, Any] = {"functionCall": call}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def usage(
    prompt: int = 10,
    candidates: int = 5,
    thoughts: int | None = None,
    cached: int | None = None,
    tool_prompt: int | None = None,
) -> dict[str, Any]:
    """``usageMetadata`` as the API reports it (``totalTokenCount`` counts thoughts too)."""
    out: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    if thoughts is not None:
        out["thoughtsTokenCount"] = thoughts
    if cached is not None:
        out["cachedContentTokenCount"] = cached
    if tool_prompt is not None:
        out["toolUsePromptTokenCount"] = tool_prompt
    out["totalTokenCount"] = prompt + candidates + (thoughts or 0) + (tool_prompt or 0)
    return out


def chunk(
    *parts: dict[str, Any],
    finish: str | None = None,
    usage_metadata: dict[str, Any] | None = None,
    response_id: str = "resp-fake-1",
    model_version: str = "gemini-3-flash-preview",
) -> Chunk:
    """One streamed ``GenerateContentResponse``: a candidate with ``parts`` (role model)."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    out: Chunk = {"candidates": [candidate]}
    if usage_metadata is not None:
        out["usageMetadata"] = usage_metadata
    out["modelVersion"] = model_version
    out["responseId"] = response_id
    return out


def text_stream(text: str = "ok", **kw: Any) -> list[Chunk]:
    """A whole successful response: the text, then a final chunk with STOP and usage."""
    return [chunk(text_part(text)), chunk(text_part(""), finish="STOP", usage_metadata=usage())]


def google_error(code: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    """A Google API error body (https://cloud.google.com/apis/design/errors)."""
    return {"error": {"code": code, "message": message, "status": status, **extra}}


#: Fields whose values are free-form JSON (``Struct`` / schemas), whose keys are data.
_FREE_FORM = frozenset(
    {"args", "response", "parameters", "parametersJsonSchema", "responseJsonSchema"}
)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def normalise(value: Any) -> Any:
    """``value`` with every field name in lowerCamelCase. The proto3 JSON mapping has
    parsers accept the proto field name (``thinking_budget``) as well as the JSON name
    (``thinkingBudget``); the keys inside free-form values are left alone."""
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key)
        out[name] = item if name in _FREE_FORM else normalise(item)
    return out


class Invalid(Exception):
    """A request that breaks a documented rule; its text is the 400 message."""


# -- the server ------------------------------------------------------------------------


@dataclass
class Stream:
    chunks: list[Chunk]
    hold_open: bool = False
    error_after: dict[str, Any] | None = None


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
    route: dict[str, str]

    @property
    def wire(self) -> Any:
        """The body with lowerCamelCase field names (what the API reads, :func:`normalise`)."""
        return normalise(self.body)


@dataclass(frozen=True)
class _Issued:
    """Where a signature was issued: the kind of part and, for calls, name and id."""

    kind: str  # "call", "text" or "thought"
    name: str | None = None
    id: str | None = None


def _part_kind(part: dict[str, Any]) -> str:
    if "functionCall" in part:
        return "call"
    if "functionResponse" in part:
        return "response"
    if "text" in part:
        return "thought" if part.get("thought") else "text"
    return "other"


class FakeGemini:
    """The fake server. ``async with FakeGemini() as fake`` starts it; ``base_url`` is what
    the SDK points at (``http_options.base_url``); ``requests`` are recorded in order.

    ``strict_signatures`` is Gemini 3's validation of the current turn's function calls.
    """

    def __init__(self, *, strict_signatures: bool = True) -> None:
        self.strict_signatures = strict_signatures
        self.requests: list[Recorded] = []
        self.rejected: list[str] = []
        self.queue: deque[Stream | ErrorReply] = deque()
        self.issued: dict[bytes, _Issued] = {}
        self.client_closed = asyncio.Event()
        self.held = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> FakeGemini:
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
        """The last request's body, field names normalised to lowerCamelCase."""
        body = self.requests[-1].wire
        assert isinstance(body, dict)
        return body

    def stream(
        self,
        chunks: list[Chunk],
        *,
        hold_open: bool = False,
        error_after: dict[str, Any] | None = None,
    ) -> None:
        """Queue an SSE response; the signatures in it count as issued when it is sent.
        ``hold_open``: keep the connection open until the client closes it;
        ``error_after``: an error object sent as a last ``data:`` event."""
        self.queue.append(Stream(chunks, hold_open, error_after))

    def error(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.queue.append(ErrorReply(status, body, headers or {}))

    # -- validation ----------------------------------------------------------------

    def _issue(self, chunks: list[Chunk]) -> None:
        for data in chunks:
            for candidate in data.get("candidates") or []:
                for part in (candidate.get("content") or {}).get("parts") or []:
                    signature = part.get("thoughtSignature")
                    if not isinstance(signature, str):
                        continue
                    kind = _part_kind(part)
                    call = part.get("functionCall") or {}
                    self.issued[sig_bytes(signature)] = _Issued(
                        kind, call.get("name"), call.get("id")
                    )

    def _check_signature(self, index: int, part: dict[str, Any]) -> None:
        signature = part["thoughtSignature"]
        if not isinstance(signature, str):
            raise Invalid(f"Invalid value at 'contents[{index}].parts' (thought_signature)")
        if signature in DUMMY_SIGNATURES:
            return
        try:
            issued = self.issued.get(sig_bytes(signature))
        except (binascii.Error, ValueError):
            issued = None
        if issued is None:
            raise Invalid("Corrupted thought signature.")
        call = part.get("functionCall") or {}
        here = _Issued(_part_kind(part), call.get("name"), call.get("id"))
        if issued.kind == "call" and issued.id is None:
            here = _Issued(here.kind, here.name, None)  # the call had no id to compare
        if here != issued:
            raise Invalid(
                f"Thought signature in contents[{index}] is not on the part it was issued on."
            )

    def validate(self, body: Any) -> None:
        """Raise :class:`Invalid` when ``body`` breaks one of the documented rules."""
        if not isinstance(body, dict):
            raise Invalid("Invalid JSON payload received.")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise Invalid("* GenerateContentRequest.contents: contents is not specified")
        thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        if "thinkingBudget" in thinking and "thinkingLevel" in thinking:
            raise Invalid("You can only set only one of thinking budget and thinking level.")
        for i, content in enumerate(contents):
            if content.get("role") not in ("user", "model"):
                raise Invalid(f"Please use a valid role: user, model. (contents[{i}])")
            parts = content.get("parts")
            if not isinstance(parts, list) or not parts:
                raise Invalid(
                    f"* GenerateContentRequest.contents[{i}].parts: contents.parts "
                    "must not be empty."
                )
            for part in parts:
                if "thoughtSignature" in part:
                    self._check_signature(i, part)
                response = part.get("functionResponse")
                if response is not None and not isinstance(response.get("response"), dict):
                    raise Invalid(f"contents[{i}]: functionResponse.response must be an object")
        for i, content in enumerate(contents):
            calls = [p["functionCall"] for p in content["parts"] if "functionCall" in p]
            if not calls:
                continue
            if content["role"] != "model":
                raise Invalid(f"contents[{i}]: a functionCall part must be in a model turn")
            previous = contents[i - 1] if i else None
            if previous is None or previous["role"] != "user":
                raise Invalid(
                    "Please ensure that function call turn comes immediately after a user "
                    "turn or after a function response turn."
                )
            following = contents[i + 1] if i + 1 < len(contents) else None
            if following is None:
                continue  # the newest turn: a model turn may end the request (prefill)
            responses = [
                p["functionResponse"] for p in following["parts"] if "functionResponse" in p
            ]
            if following["role"] != "user" or len(responses) != len(calls):
                raise Invalid(
                    "Please ensure that the number of function response parts is equal to "
                    "the number of function call parts of the function call turn."
                )
            for call, response in zip(calls, responses, strict=True):
                if response.get("name") != call.get("name") or (
                    call.get("id") is not None and response.get("id") != call.get("id")
                ):
                    raise Invalid(
                        f"contents[{i + 1}]: function response {response.get('name')!r} does "
                        f"not match function call {call.get('name')!r}"
                    )
        if self.strict_signatures:
            self._check_current_turn(contents)

    def _check_current_turn(self, contents: list[dict[str, Any]]) -> None:
        start = 0
        for i in range(len(contents) - 1, -1, -1):
            content = contents[i]
            if content["role"] == "user" and any(
                "functionResponse" not in p for p in content["parts"]
            ):
                start = i
                break
        for i in range(start, len(contents)):
            calls = [p for p in contents[i]["parts"] if "functionCall" in p]
            if calls and "thoughtSignature" not in calls[0]:
                name = calls[0]["functionCall"].get("name")
                raise Invalid(
                    f"Function call `{name}` in the `{i + 1}.` content block is missing a "
                    "`thought_signature`."
                )

    # -- HTTP ----------------------------------------------------------------------

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

    async def _reply_json(
        self, writer: asyncio.StreamWriter, status: int, body: Any, headers: dict[str, str]
    ) -> None:
        payload = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(
            f"HTTP/1.1 {status} Error\r\ncontent-type: application/json; charset=UTF-8\r\n"
            f"content-length: {len(payload)}\r\n{extra}connection: close\r\n\r\n".encode()
            + payload
        )
        await writer.drain()

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
        body = json.loads(raw) if raw else None
        match = _GEMINI_PATH.match(path) or _VERTEX_PATH.match(path)
        route = match.groupdict() if match else {}
        self.requests.append(Recorded(method, path, headers, body, route))
        if method != "POST" or match is None:
            await self._reply_json(
                writer, 404, google_error(404, "NOT_FOUND", f"no route {path}"), {}
            )
            return
        try:
            self.validate(normalise(body))
        except Invalid as exc:
            self.rejected.append(str(exc))
            await self._reply_json(writer, 400, google_error(400, "INVALID_ARGUMENT", str(exc)), {})
            return
        reply = self.queue.popleft() if self.queue else Stream(text_stream())
        if isinstance(reply, ErrorReply):
            await self._reply_json(writer, reply.status, reply.body, reply.headers)
            return
        self._issue(reply.chunks)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        events = [*reply.chunks, *([reply.error_after] if reply.error_after else [])]
        for data in events:
            piece = f"data: {json.dumps(data)}\r\n\r\n".encode()
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        if reply.hold_open:
            self.held.set()
            while await reader.read(1024):
                pass
            self.client_closed.set()
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()
