"""The Google Gemini adapter (spec 05 §5.11), built on the official ``google-genai`` SDK.

One ``stream()`` call is one ``streamGenerateContent?alt=sse`` request through
``client.aio.models.generate_content_stream`` (SDK retries off — the engine owns retries,
fallbacks and stream timers; automatic function calling off — the engine runs tools). The
same adapter serves the Gemini API (API key) and Vertex AI (the SDK's ``vertexai=True``
client: project and location with Google Cloud credentials, or an express-mode key).

Thought summaries come back as ``reasoning.text`` details and thought signatures as
details of format ``google-gemini-v1`` that record the part that carried them (§5.11.3),
so a later request can put each signature back on that part, as the API requires
(https://ai.google.dev/gemini-api/docs/thought-signatures). The request builder is pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from google import genai
from google.auth import exceptions as auth_exceptions
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from threadloom.errors import ProviderError
from threadloom.providers.errormap import code_from_text, error_for_status
from threadloom.providers.reasoning import (
    FORMAT_GEMINI,
    encrypted_detail,
    supply_reasoning,
    text_detail,
)
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    FinishReason,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ReasoningDelta,
    ReasoningRequest,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallEnd,
    ToolCallStart,
    ToolMessage,
    Usage,
)
from threadloom.records import new_call_id

API_KEY_ENVS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
"""The SDK's key variables, in its order of precedence; ``GEMINI_API_KEY`` is reported."""
API_KEY_ENV = "GEMINI_API_KEY"
PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"
LOCATION_ENV = "GOOGLE_CLOUD_LOCATION"
VERTEX_ENV = "GOOGLE_GENAI_USE_VERTEXAI"
DEFAULT_LOCATION = "global"
#: The signature the Gemini docs give for function calls of history from other models.
DUMMY_SIGNATURE = "skip_thought_signature_validator"
#: Thinking budgets by effort for Gemini 2.x models, which take no thinking level (§5.11.2).
EFFORT_BUDGETS: dict[str, int] = {"low": 1024, "medium": 8192, "high": 24576}
#: ``GenerateContentConfig`` fields the adapter computes; ``provider_options`` cannot set them.
OWNED_KEYS = frozenset(
    {"system_instruction", "tools", "tool_config", "automatic_function_calling", "http_options"}
)
_LEGACY_MODEL = re.compile(r"(^|/)gemini-(1|2)[.-]")
_TOOL_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
}
_TIMEOUT_MS = None  # stream timers are the engine's (spec 04 §4.12.4)

Part = dict[str, Any]
Content = dict[str, Any]


# --------------------------------------------------------------------------------------
# Signatures: protobuf bytes, base64 in JSON


def signature_text(value: bytes) -> str:
    """The persisted form of a signature: standard base64 with padding (the JSON form)."""
    return base64.b64encode(value).decode("ascii")


def signature_bytes(text: str) -> bytes | None:
    """The bytes of a persisted signature (either base64 alphabet); None when unreadable."""
    clean = text.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(clean + "=" * (-len(clean) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def legacy_model(model: str) -> bool:
    """True for Gemini 1.x / 2.x model ids, which take a thinking budget, not a level, and
    do not validate thought signatures."""
    return bool(_LEGACY_MODEL.search(model))


# --------------------------------------------------------------------------------------
# Request mapping (§5.11.1, §5.11.2)


@dataclass(frozen=True, slots=True)
class GeminiRequest:
    """The SDK arguments for one neutral request: ``contents`` (``ContentDict`` values,
    snake_case as the SDK takes them) and ``config`` (``GenerateContentConfigDict``)."""

    model: str
    contents: list[Content]
    config: dict[str, Any] = field(default_factory=dict)


def _inline(image: ImagePart) -> Part:
    return {"inline_data": {"mime_type": image.media_type, "data": base64.b64decode(image.data)}}


def _user_parts(content: str | list[Any]) -> list[Part]:
    parts = [TextPart(text=content)] if isinstance(content, str) else content
    return [
        _inline(p) if isinstance(p, ImagePart) else {"text": p.text}
        for p in parts
        if isinstance(p, ImagePart) or p.text
    ]


def _args(arguments: str) -> dict[str, Any]:
    """The parsed arguments when they are a JSON object, else ``{}``."""
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _signed(part: Part, signature: str | None) -> Part:
    if signature:
        raw = signature_bytes(signature)
        if raw is not None:
            part["thought_signature"] = raw
    return part


def _model_parts(message: AssistantMessage) -> list[Part]:
    """Signed thought parts, the text part, then one ``function_call`` part per call, each
    with the signature that arrived on it (the §5.6.2 ``gemini`` row)."""
    supply = supply_reasoning("gemini", message.reasoning_content, message.reasoning_details)
    by_call: dict[str, str] = {}
    text_signature: str | None = None
    for d in supply.details or ():
        if isinstance(d.get("id"), str):
            by_call[d["id"]] = d["data"]
        else:
            text_signature = d["data"]
    parts = [
        _signed({"text": t["text"], "thought": True}, t["thoughtSignature"]) for t in supply.wire
    ]
    if message.content:
        parts.append(_signed({"text": message.content}, text_signature))
    for call in message.tool_calls:
        fc = {"id": call.id, "name": call.name, "args": _args(call.arguments)}
        parts.append(_signed({"function_call": fc}, by_call.get(call.id)))
    return parts if (message.content or message.tool_calls) else []


def _response_part(message: ToolMessage) -> Part:
    key = "error" if message.is_error else "output"
    response = {
        "id": message.tool_call_id,
        "name": message.name,
        "response": {key: message.content},
    }
    return {"function_response": response}


def _split_system(messages: list[ProviderMessage]) -> tuple[str | None, list[ProviderMessage]]:
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    texts = [m.content for m in messages[:start] if isinstance(m, SystemMessage) and m.content]
    return ("\n\n".join(texts) or None), messages[start:]


def wire_contents(messages: list[ProviderMessage], *, dummy_signatures: bool) -> list[Content]:
    """The ``contents`` for the non-leading-system part of a request (§5.11.1).

    Tool results become ``function_response`` parts of a user content (their images follow
    as inline parts); later system messages become ``<system>`` user text; consecutive
    contents of one role are merged; empty ones are dropped. With ``dummy_signatures``,
    the first function call of every model step of the current turn that has no signature
    gets :data:`DUMMY_SIGNATURE` (history from another provider, §5.11.3).
    """
    out: list[Content] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            role, parts = "user", [{"text": f"<system>\n{message.content}\n</system>"}]
        elif isinstance(message, AssistantMessage):
            role, parts = "model", _model_parts(message)
        elif isinstance(message, ToolMessage):
            role = "user"
            parts = [_response_part(message), *(_inline(i) for i in message.images)]
        else:
            role, parts = "user", _user_parts(message.content)
        if not parts:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    # A response's function_response parts come first in their content (images after).
    for content in out:
        if content["role"] == "user":
            content["parts"].sort(key=lambda p: "function_response" not in p)
    if dummy_signatures:
        _sign_current_turn(out)
    return out


def _sign_current_turn(contents: list[Content]) -> None:
    start = 0
    for i in range(len(contents) - 1, -1, -1):
        content = contents[i]
        if content["role"] == "user" and any(
            "function_response" not in p for p in content["parts"]
        ):
            start = i
            break
    for content in contents[start:]:
        calls = [p for p in content["parts"] if "function_call" in p]
        if calls and "thought_signature" not in calls[0]:
            calls[0]["thought_signature"] = base64.urlsafe_b64decode(DUMMY_SIGNATURE)


def thinking_config(model: str, reasoning: ReasoningRequest) -> dict[str, Any]:
    """``thinking_config`` for a reasoning request (§5.11.2): ``max_tokens`` → a budget;
    else the effort → ``thinking_level`` (Gemini 3 and later) or a budget (Gemini 1.x/2.x);
    ``include_thoughts`` unless ``exclude``."""
    config: dict[str, Any] = {"include_thoughts": not reasoning.exclude}
    if reasoning.max_tokens is not None:
        config["thinking_budget"] = reasoning.max_tokens
    elif legacy_model(model):
        config["thinking_budget"] = EFFORT_BUDGETS[reasoning.effort or "medium"]
    elif reasoning.effort is not None:
        config["thinking_level"] = reasoning.effort
    return config


def _tool_config(request: ProviderRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    if not request.tools or choice is None:
        return None
    if isinstance(choice, dict):
        calling = {"mode": "ANY", "allowed_function_names": [choice["name"]]}
    else:
        calling = {"mode": _TOOL_MODES[choice]}
    return {"function_calling_config": calling}


def build_request(request: ProviderRequest) -> GeminiRequest:
    """Convert a neutral request into the SDK's ``contents`` and ``config`` (§5.11.1).

    Pure: the request and its persisted reasoning are never modified.
    ``parallel_tool_calls`` has no Gemini parameter and is not sent.
    """
    system, rest = _split_system(list(request.messages))
    contents = wire_contents(rest, dummy_signatures=not legacy_model(request.model))
    config: dict[str, Any] = {
        k: v for k, v in request.provider_options.items() if k not in OWNED_KEYS
    }
    if system is not None:
        config["system_instruction"] = system
    if request.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters}
            for t in request.tools
        ]
        config["tools"] = [{"function_declarations": declarations}]
    tool_config = _tool_config(request)
    if tool_config is not None:
        config["tool_config"] = tool_config
    config["automatic_function_calling"] = {"disable": True}
    if request.max_output_tokens is not None:
        config["max_output_tokens"] = request.max_output_tokens
    if request.reasoning is not None and "thinking_config" not in config:
        config["thinking_config"] = thinking_config(request.model, request.reasoning)
    if request.output is not None:  # JSON mode with the schema (spec 24 §24.2)
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = request.output.json_schema
    return GeminiRequest(model=request.model, contents=contents, config=config)


# --------------------------------------------------------------------------------------
# Errors (§5.4, §5.11.4)


def _duration_seconds(value: object) -> float | None:
    """A protobuf ``Duration`` in JSON (``"37s"``, ``"1.5s"``) as seconds."""
    if isinstance(value, str) and value.endswith("s"):
        try:
            return float(value[:-1])
        except ValueError:
            return None
    return None


def retry_delay(body: object) -> float | None:
    """``retryDelay`` of a ``google.rpc.RetryInfo`` entry of ``error.details``, in seconds."""
    error = body.get("error") if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for item in details if isinstance(details, list) else ():
        if isinstance(item, Mapping) and str(item.get("@type", "")).endswith("rpc.RetryInfo"):
            return _duration_seconds(item.get("retryDelay"))
    return None


def _transport_classes() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeout classes, transport classes) of httpx and httpx2, whichever the SDK uses."""
    timeouts: list[type[BaseException]] = []
    transports: list[type[BaseException]] = []
    for module in ("httpx", "httpx2"):
        try:
            mod = __import__(module)
        except ImportError:  # pragma: no cover - one of them is installed with the SDK
            continue
        timeouts.append(mod.TimeoutException)
        transports.append(mod.TransportError)
    return tuple(timeouts), tuple(transports)


_TIMEOUTS, _TRANSPORTS = _transport_classes()
_CONTEXT_MARKERS = ("input token count", "exceeds the maximum number of tokens")


def map_error(exc: BaseException, provider: str = "gemini") -> ProviderError:
    """Classify an SDK / transport failure (§5.4, §5.11.4): the HTTP status of an
    ``APIError`` first (an error inside the stream carries one too), with ``retry_after``
    from ``Retry-After`` or the body's ``RetryInfo``; then timeout and transport classes;
    missing Google Cloud credentials are ``authentication``."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, genai_errors.APIError):
        body = exc.details
        message = exc.message or str(exc)
        status = exc.code if isinstance(exc.code, int) else 500
        headers = getattr(exc.response, "headers", None)
        error = error_for_status(status, message, provider=provider, body=body, headers=headers)
        lowered = message.lower()
        if status == 400 and all(m in lowered for m in _CONTEXT_MARKERS):
            error.code, error.retryable = "context_length", False
        elif status == 400 and error.code == "invalid_request":
            refined = code_from_text(message)
            if refined is not None:
                error.code = refined
        if error.retry_after is None:
            error.retry_after = retry_delay(body)
        return error
    if isinstance(exc, auth_exceptions.DefaultCredentialsError | auth_exceptions.RefreshError):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ProviderError(
            f"Google Cloud credentials are not available: {first}",
            code="authentication",
            retryable=False,
            provider=provider,
        )
    if isinstance(exc, _TIMEOUTS):
        return ProviderError(str(exc) or "request timed out", code="timeout", provider=provider)
    if isinstance(exc, _TRANSPORTS):
        return ProviderError(str(exc) or "connection error", code="connection", provider=provider)
    return ProviderError(str(exc) or type(exc).__name__, code="unknown", provider=provider)


# --------------------------------------------------------------------------------------
# Stream mapping (§5.11.3)


def finish_reason_for(reason: str | None) -> FinishReason:
    """The neutral finish reason of a Gemini ``finishReason`` (others → ``stop``)."""
    return _FINISH.get(reason or "", "stop")


@dataclass(slots=True)
class _Thought:
    text: list[str] = field(default_factory=list)
    signature: str | None = None


class StreamMapper:
    """Turns ``GenerateContentResponse`` chunks into neutral events, one chunk at a time.

    Thought parts become ``ReasoningDelta`` events; a thought part with a signature ends a
    thought block (a ``"\\n\\n"`` delta separates the next block's text). Every function
    call is complete in its part: ``ToolCallStart`` (the API's id, else ``call_`` + 32 hex)
    and ``ToolCallEnd`` with the arguments. Signatures are collected with the part that
    carried them and returned as details with ``Finish``.
    """

    def __init__(self) -> None:
        self.thoughts: list[_Thought] = []
        self.text_signature: str | None = None
        self.calls: list[tuple[str, str | None]] = []  # (call id, signature)
        self.order: list[tuple[str, int]] = []  # ("thought"|"text"|"call", position)
        self.text_seen = False
        self.finish_reason: str | None = None
        self.blocked = False
        self.usage_metadata: Any = None
        self.response_id: str | None = None
        self.response_model: str | None = None

    def _thought(self, text: str, signature: str | None) -> Iterator[StreamEvent]:
        current = self.thoughts[-1] if self.thoughts else None
        if current is None or current.signature is not None:
            if current is not None and text:
                yield ReasoningDelta(text="\n\n")
            current = _Thought()
            self.thoughts.append(current)
            self.order.append(("thought", len(self.thoughts) - 1))
        if text:
            current.text.append(text)
            yield ReasoningDelta(text=text)
        if signature:
            current.signature = signature

    def _part(self, part: Any) -> Iterator[StreamEvent]:
        raw = getattr(part, "thought_signature", None)
        signature = signature_text(raw) if isinstance(raw, bytes) and raw else None
        call = getattr(part, "function_call", None)
        text = getattr(part, "text", None)
        if call is not None:
            index = len(self.calls)
            call_id = str(getattr(call, "id", None) or new_call_id())
            self.calls.append((call_id, signature))
            self.order.append(("call", index))
            yield ToolCallStart(index=index, id=call_id, name=str(call.name or ""))
            args = call.args if isinstance(call.args, dict) else {}
            yield ToolCallEnd(index=index, arguments=json.dumps(args, separators=(",", ":")))
        elif getattr(part, "thought", None):
            yield from self._thought(text or "", signature)
        elif text is not None:
            if not self.text_seen:
                self.text_seen = True
                self.order.append(("text", 0))
            if text:
                yield TextDelta(text=text)
            if signature:
                self.text_signature = signature

    def feed(self, response: Any) -> Iterator[StreamEvent]:
        """The neutral events for one streamed chunk."""
        self.response_id = getattr(response, "response_id", None) or self.response_id
        self.response_model = getattr(response, "model_version", None) or self.response_model
        if getattr(response, "usage_metadata", None) is not None:
            self.usage_metadata = response.usage_metadata
        feedback = getattr(response, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            self.blocked = True
        for candidate in getattr(response, "candidates", None) or []:
            content = getattr(candidate, "content", None)
            for part in getattr(content, "parts", None) or []:
                yield from self._part(part)
            reason = getattr(candidate, "finish_reason", None)
            if reason is not None:
                self.finish_reason = str(getattr(reason, "value", reason))

    def usage(self) -> Usage:
        """Normalised usage (§5.11.3): output counts thoughts; input counts tool-use
        prompt tokens; cached = ``cachedContentTokenCount``."""
        u = self.usage_metadata
        counts = {
            name: getattr(u, name, None) or 0
            for name in (
                "prompt_token_count",
                "tool_use_prompt_token_count",
                "candidates_token_count",
                "thoughts_token_count",
                "cached_content_token_count",
                "total_token_count",
            )
        }
        return Usage.from_counts(
            input_tokens=counts["prompt_token_count"] + counts["tool_use_prompt_token_count"],
            output_tokens=counts["candidates_token_count"] + counts["thoughts_token_count"],
            cached_tokens=counts["cached_content_token_count"],
            reasoning_tokens=counts["thoughts_token_count"],
            total_tokens=counts["total_token_count"],
        )

    def details(self) -> list[dict[str, Any]] | None:
        """The reasoning details in part order (None when there are none): thought blocks
        as ``reasoning.text`` (with their signature), signatures of a function call as
        ``reasoning.encrypted`` with the call's ``id``, a text part's without ``id``."""
        out: list[dict[str, Any]] = []
        for position, (kind, index) in enumerate(self.order):
            if kind == "thought":
                thought = self.thoughts[index]
                text = "".join(thought.text)
                out.append(
                    text_detail(
                        text, format=FORMAT_GEMINI, signature=thought.signature, index=position
                    )
                )
            elif kind == "call" and self.calls[index][1]:
                call_id, signature = self.calls[index]
                assert signature is not None
                out.append(
                    encrypted_detail(signature, format=FORMAT_GEMINI, id=call_id, index=position)
                )
            elif kind == "text" and self.text_signature:
                out.append(
                    encrypted_detail(self.text_signature, format=FORMAT_GEMINI, index=position)
                )
        return out or None

    def finish(self) -> Finish:
        """The ``Finish`` event: tool calls with ``STOP`` → ``tool_calls``; a blocked
        prompt (no candidate) → ``content_filter``."""
        if self.blocked and not self.order:
            reason: FinishReason = "content_filter"
        else:
            reason = finish_reason_for(self.finish_reason)
        if self.calls and reason == "stop":
            reason = "tool_calls"
        return Finish(
            finish_reason=reason,
            usage=self.usage(),
            reasoning_details=self.details(),
            response_id=self.response_id,
            response_model=self.response_model,
        )


# --------------------------------------------------------------------------------------
# The provider


def _env_key() -> str | None:
    for variable in API_KEY_ENVS:
        value = os.environ.get(variable)
        if value:
            return value
    return None


def _env_vertex() -> bool:
    return os.environ.get(VERTEX_ENV, "").strip().lower() in ("true", "1")


class GeminiProvider:
    """Google Gemini behind the Provider protocol (spec 05 §5.11), on ``google-genai``.

    ``vertexai`` None follows ``GOOGLE_GENAI_USE_VERTEXAI`` (as the SDK does). Gemini API:
    ``api_key`` or ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``. Vertex AI: ``project`` /
    ``GOOGLE_CLOUD_PROJECT`` and ``location`` / ``GOOGLE_CLOUD_LOCATION`` (default
    ``global``) with ``credentials`` or Application Default Credentials, or an API key
    alone (express mode). Read at the first request; the client is shared and never
    retries. ``base_url`` points the SDK elsewhere (a proxy, a test server).
    """

    def __init__(
        self,
        name: str = "gemini",
        api_key: str | None = None,
        *,
        vertexai: bool | None = None,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        base_url: str | None = None,
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.vertexai = vertexai
        self.project = project
        self.location = location
        self.credentials = credentials
        self.base_url = base_url
        self._client: genai.Client | None = None

    @property
    def uses_vertex(self) -> bool:
        """True when requests go to Vertex AI."""
        return self.vertexai if self.vertexai is not None else _env_vertex()

    def build_request(self, request: ProviderRequest) -> GeminiRequest:
        """The SDK arguments this provider would send for ``request`` (nothing is sent)."""
        return build_request(request)

    def missing_credential(self) -> str | None:
        """The environment variable to set when no credential is configured (§5.2.3):
        ``GEMINI_API_KEY`` (Gemini API), ``GOOGLE_CLOUD_PROJECT`` (Vertex AI without a
        project or key; credentials themselves are found at the first request)."""
        if self._client is not None or self.api_key:
            return None
        if self.uses_vertex:
            if self.project or os.environ.get(PROJECT_ENV) or _env_key():
                return None
            return PROJECT_ENV
        return None if _env_key() else API_KEY_ENV

    def _fail(self, message: str) -> ProviderError:
        return ProviderError(message, code="authentication", retryable=False, provider=self.name)

    def client(self) -> genai.Client:
        """The SDK client, created on first use; raises ``authentication`` without a key
        (Gemini API) or without a project and key (Vertex AI)."""
        if self._client is not None:
            return self._client
        options = genai_types.HttpOptions(base_url=self.base_url, timeout=_TIMEOUT_MS)
        if self.uses_vertex:
            project = self.project or os.environ.get(PROJECT_ENV)
            key = self.api_key if not self.project else None
            if project and not key:
                location = self.location or os.environ.get(LOCATION_ENV) or DEFAULT_LOCATION
                self._client = genai.Client(
                    vertexai=True,
                    project=project,
                    location=location,
                    credentials=self.credentials,
                    http_options=options,
                )
            elif key or _env_key():  # express mode: an API key, no project
                key = key or _env_key()
                self._client = genai.Client(vertexai=True, api_key=key, http_options=options)
            else:
                raise self._fail(f"{PROJECT_ENV} is not set")
        else:
            key = self.api_key or _env_key()
            if not key:
                raise self._fail(f"{API_KEY_ENV} is not set")
            self._client = genai.Client(vertexai=False, api_key=key, http_options=options)
        return self._client

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Send one streaming request and yield neutral events ending with ``Finish``.

        Failures raise ``ProviderError``; cancellation (or closing this iterator) closes
        the HTTP response and lets ``CancelledError`` propagate.
        """
        wire = self.build_request(request)
        client = self.client()
        mapper = StreamMapper()
        try:
            chunks = await client.aio.models.generate_content_stream(
                model=wire.model,
                contents=wire.contents,
                config=wire.config,  # type: ignore[arg-type]
            )
        except Exception as exc:
            raise map_error(exc, self.name) from exc
        try:
            async for response in chunks:
                for event in mapper.feed(response):
                    yield event
        except Exception as exc:
            raise map_error(exc, self.name) from exc
        finally:
            aclose = getattr(chunks, "aclose", None)
            if callable(aclose):
                await aclose()
        if mapper.finish_reason is None and not mapper.blocked:
            raise ProviderError(
                "Gemini stream ended without a finishReason", code="connection", provider=self.name
            )
        yield mapper.finish()

    async def aclose(self) -> None:
        """Close the SDK client's async side (its connection pool) if one was created."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aio.aclose()


__all__ = [
    "DUMMY_SIGNATURE",
    "GeminiProvider",
    "GeminiRequest",
    "StreamMapper",
    "build_request",
    "finish_reason_for",
    "legacy_model",
    "map_error",
    "retry_delay",
    "signature_bytes",
    "signature_text",
    "thinking_config",
    "wire_contents",
]
