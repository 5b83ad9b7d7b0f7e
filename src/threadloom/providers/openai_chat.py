"""``OpenAIChatProvider``: the Chat Completions adapter (spec 05 §5.8.1).

One class serves three dialects that differ in what they accept:

- ``openai`` — api.openai.com: no reasoning input at all, ``max_completion_tokens``;
- ``openrouter`` — OpenRouter: ``reasoning_details`` round-trip, ``reasoning`` request
  object, ``usage.include`` so the response reports its cost;
- ``compatible`` — any other OpenAI-compatible server (vLLM, Ollama, LM Studio, DeepSeek,
  Google's endpoint, …): reasoning is sent back only when ``reasoning_input=
  "reasoning_content"`` says the server accepts it (many return reasoning they reject).

``dialect="auto"`` picks one from the base URL. Which persisted reasoning is sent is the
§5.6.2 table, applied through :func:`threadloom.providers.reasoning.supply_reasoning`;
request messages are read, never modified.

``provider_options`` are merged into the wire body (see :mod:`threadloom.providers.openai`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import openai

from threadloom.errors import ProviderError
from threadloom.providers.openai import (
    OPENROUTER_BASE_URL,
    RESPONSES_ITEM_ID,
    OpenAIClientOwner,
    as_dict,
    embedded_error,
    float_or_none,
    image_data_url,
    int_or_zero,
    map_sdk_error,
    merge_options,
    split_body,
)
from threadloom.providers.reasoning import ReasoningTarget, supply_reasoning
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    FinishReason,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ReasoningDelta,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
    ToolMessage,
    Usage,
    UserMessage,
)

Dialect = Literal["openai", "openrouter", "compatible"]
ReasoningInput = Literal["none", "reasoning_content"]

_DIALECTS = ("auto", "openai", "openrouter", "compatible")
_OWNED_KEYS = frozenset({"model", "messages", "stream", "stream_options"})
TOOL_IMAGES_TEXT = "Images from tool results:"

_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
#: Reasoning-detail string fields that arrive in pieces and are concatenated (§5.8.1).
_DETAIL_TEXT_KEYS = ("text", "summary", "data")


def detect_dialect(base_url: str | None) -> Dialect:
    """The dialect ``"auto"`` stands for: no base URL or host api.openai.com → ``openai``;
    host openrouter.ai → ``openrouter``; anything else → ``compatible``."""
    if not base_url:
        return "openai"
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "api.openai.com":
        return "openai"
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    return "compatible"


class OpenAIChatProvider(OpenAIClientOwner):
    """Chat Completions through the official SDK, streaming (spec 05 §5.8.1).

    ``api_key`` defaults to ``OPENROUTER_API_KEY`` for the ``openrouter`` dialect and to
    ``OPENAI_API_KEY`` otherwise (a local server that needs no key still needs
    ``api_key="EMPTY"`` or the variable); ``base_url`` defaults to ``OPENAI_BASE_URL``, or
    to OpenRouter's URL for ``dialect="openrouter"``. Both are read at the first request.
    """

    def __init__(
        self,
        name: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        dialect: str = "auto",
        reasoning_input: str | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        if dialect not in _DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(_DIALECTS)}, got {dialect!r}")
        if reasoning_input not in (None, "none", "reasoning_content"):
            raise ValueError(
                f'reasoning_input must be "none" or "reasoning_content", got {reasoning_input!r}'
            )
        super().__init__(
            name=name, api_key=api_key, base_url=base_url, default_headers=default_headers
        )
        self._dialect_option = dialect
        self.reasoning_input: ReasoningInput = cast(ReasoningInput, reasoning_input or "none")

    @property
    def base_url(self) -> str | None:
        """As for every OpenAI adapter, except that an explicit ``openrouter`` dialect
        without a base URL talks to OpenRouter rather than to ``OPENAI_BASE_URL``."""
        if self._client is None and not self._base_url and self._dialect_option == "openrouter":
            return OPENROUTER_BASE_URL
        return super().base_url

    @property
    def dialect(self) -> Dialect:
        """The dialect in effect: the constructor's, or the one detected from the base URL."""
        if self._dialect_option != "auto":
            return cast(Dialect, self._dialect_option)
        return detect_dialect(self.base_url)

    @property
    def key_env(self) -> str:
        return "OPENROUTER_API_KEY" if self.dialect == "openrouter" else "OPENAI_API_KEY"

    @property
    def reasoning_target(self) -> ReasoningTarget:
        """The row of the §5.6.2 table this adapter applies to persisted reasoning."""
        dialect = self.dialect
        if dialect == "compatible" and self.reasoning_input == "reasoning_content":
            return "compatible-reasoning-content"
        return dialect

    # ----------------------------------------------------------------------------------
    # Request

    def request_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (what the fake server in the tests sees)."""
        dialect = self.dialect
        body: dict[str, Any] = {
            "model": request.model,
            "messages": wire_messages(request.messages, self.reasoning_target, dialect),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            choice = request.tool_choice
            if isinstance(choice, Mapping):
                body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
            elif choice is not None:
                body["tool_choice"] = choice
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_output_tokens is not None:
            key = "max_completion_tokens" if dialect == "openai" else "max_tokens"
            body[key] = request.max_output_tokens
        reasoning = request.reasoning
        if reasoning is not None:
            if dialect == "openrouter":
                wire: dict[str, Any]
                if reasoning.max_tokens is not None:
                    wire = {"max_tokens": reasoning.max_tokens}
                elif reasoning.effort is not None:
                    wire = {"effort": reasoning.effort}
                else:
                    wire = {"enabled": True}
                if reasoning.exclude:
                    wire["exclude"] = True
                body["reasoning"] = wire
            elif reasoning.effort is not None:
                body["reasoning_effort"] = reasoning.effort
        if dialect == "openrouter":
            body["usage"] = {"include": True}
        merged = merge_options(body, request.provider_options, _OWNED_KEYS)
        output = request.output
        if output is not None:  # the declared output type wins over the options (spec 24)
            merged["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": output.name,
                    "schema": output.json_schema,
                    "strict": output.strict,
                },
            }
        return merged

    # ----------------------------------------------------------------------------------
    # Streaming

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """One ``chat.completions.create(stream=True)`` request as neutral events.

        Raises only ``ProviderError``; cancellation closes the HTTP response and lets
        ``asyncio.CancelledError`` propagate (spec 05 §5.4, C05-039).
        """
        client = self.client()
        body = self.request_body(request)
        create = client.chat.completions.create
        kwargs, extra = split_body(create, body)
        try:
            sdk_stream = cast(
                "openai.AsyncStream[Any]", await create(**kwargs, extra_body=extra or None)
            )
        except Exception as exc:
            raise map_sdk_error(exc, self.name) from exc
        state = ChatStreamState(self.name)
        try:
            async for chunk in sdk_stream:
                for event in state.feed(as_dict(chunk)):
                    yield event
            for event in state.finish():
                yield event
        except ProviderError:
            raise
        except Exception as exc:
            raise map_sdk_error(exc, self.name) from exc
        finally:
            await sdk_stream.close()


# --------------------------------------------------------------------------------------
# Request mapping


def _parts(content: str | Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part.text}
        if isinstance(part, TextPart)
        else {
            "type": "image_url",
            "image_url": {"url": image_data_url(part), "detail": part.detail},
        }
        for part in content
    ]


def _tool_images_message(images: list[ImagePart]) -> dict[str, Any]:
    """The extra ``user`` message that carries a block's tool images (tool messages take
    text only)."""
    return {"role": "user", "content": _parts([TextPart(text=TOOL_IMAGES_TEXT), *images])}


def _wire_call(call: ToolCallSpec, dialect: Dialect) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    # Round-trip data of OpenAI-compatible servers (Google keeps thought signatures here).
    # api.openai.com never returns any, and the Responses adapter's item id is not ours.
    if call.extra_content and dialect != "openai":
        extra = {k: v for k, v in call.extra_content.items() if k != RESPONSES_ITEM_ID}
        if extra:
            wire["extra_content"] = extra
    return wire


#: Where each §5.6.2 row puts the supplied reasoning on the assistant message:
#: (field for ``ReasoningSupply.details``, field for ``ReasoningSupply.text``).
_REASONING_FIELDS: dict[str, tuple[str | None, str | None]] = {
    "openrouter": ("reasoning_details", "reasoning"),
    "compatible-reasoning-content": (None, "reasoning_content"),
}


def _assistant(msg: AssistantMessage, target: ReasoningTarget, dialect: Dialect) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": msg.content}
    if msg.tool_calls:
        wire["tool_calls"] = [_wire_call(call, dialect) for call in msg.tool_calls]
    details_field, text_field = _REASONING_FIELDS.get(target, (None, None))
    if details_field or text_field:
        supply = supply_reasoning(target, msg.reasoning_content, msg.reasoning_details)
        if details_field and supply.details is not None:
            wire[details_field] = supply.details
        if text_field and supply.text is not None:
            wire[text_field] = supply.text
    return wire


def wire_messages(
    messages: Sequence[ProviderMessage], target: ReasoningTarget, dialect: Dialect
) -> list[dict[str, Any]]:
    """Neutral messages as Chat Completions messages (the §5.8.1 request table).

    The neutral ``name`` of tool messages is never sent (labels may contain characters
    the API rejects); images returned by a block of consecutive tool messages follow the
    block's last tool message in one ``user`` message.
    """
    out: list[dict[str, Any]] = []
    images: list[ImagePart] = []
    for msg in messages:
        if images and not isinstance(msg, ToolMessage):
            out.append(_tool_images_message(images))
            images = []
        if isinstance(msg, SystemMessage):
            out.append({"role": "system", "content": msg.content})
        elif isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _parts(msg.content)})
        elif isinstance(msg, AssistantMessage):
            out.append(_assistant(msg, target, dialect))
        else:
            out.append({"role": "tool", "tool_call_id": msg.tool_call_id, "content": msg.content})
            images.extend(msg.images)
    if images:
        out.append(_tool_images_message(images))
    return out


# --------------------------------------------------------------------------------------
# Stream mapping


class _Call:
    """A tool call being assembled from ``delta.tool_calls`` fragments."""

    __slots__ = ("extra_content", "id", "index", "name", "pending", "started")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = ""
        self.name = ""
        self.started = False
        self.pending: list[str] = []
        self.extra_content: dict[str, Any] | None = None


class ChatStreamState:
    """Turns Chat Completions chunks (as JSON objects) into neutral events (§5.8.1).

    Tool calls are keyed by their wire ``index`` (a fragment carrying a different id at a
    known index starts a new call, for servers that number every call 0); a call is
    started once its name is known and fragments seen before are replayed then.
    ``reasoning_details`` fragments are merged per ``index`` (position in the delta when a
    fragment has none). Neutral call indexes count from 0 in start order.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.calls: list[_Call] = []
        self._by_wire: dict[int, _Call] = {}
        self.details: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.response_id: str | None = None
        self.response_model: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """The events of one chunk; raises ``ProviderError`` for an embedded error."""
        if chunk.get("error"):
            raise embedded_error(chunk["error"], self.provider)
        if self.response_id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            self.response_id = chunk["id"]
        if self.response_model is None and isinstance(chunk.get("model"), str) and chunk["model"]:
            self.response_model = chunk["model"]
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.usage = chat_usage(usage)
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                events.extend(self._delta(delta))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        return events

    def _delta(self, delta: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        details = [d for d in delta.get("reasoning_details") or () if isinstance(d, Mapping)]
        reasoning = next(
            (
                v
                for v in (delta.get("reasoning_content"), delta.get("reasoning"))
                if isinstance(v, str) and v
            ),
            None,
        )
        if reasoning is not None:
            events.append(ReasoningDelta(text=reasoning))
        for position, piece in enumerate(details):
            self._merge_detail(position, piece)
            # Servers that stream details without the plain-text field still return text.
            value = piece.get("text") if piece.get("text") is not None else piece.get("summary")
            if reasoning is None and isinstance(value, str) and value:
                events.append(ReasoningDelta(text=value))
        for key in ("content", "refusal"):  # a refusal is the visible answer too
            text = delta.get(key)
            if isinstance(text, str) and text:
                events.append(TextDelta(text=text))
        for position, fragment in enumerate(delta.get("tool_calls") or ()):
            if isinstance(fragment, Mapping):
                events.extend(self._tool_fragment(position, fragment))
        return events

    def _merge_detail(self, position: int, piece: Mapping[str, Any]) -> None:
        index = piece.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        entry = self.details.setdefault(key, {})
        for name, value in piece.items():
            if name in _DETAIL_TEXT_KEYS and isinstance(value, str):
                previous = entry.get(name)
                entry[name] = (previous if isinstance(previous, str) else "") + value
            elif value is not None:
                entry[name] = value

    def _tool_fragment(self, position: int, fragment: Mapping[str, Any]) -> list[StreamEvent]:
        index = fragment.get("index")
        wire_index = index if isinstance(index, int) and not isinstance(index, bool) else position
        call_id = fragment.get("id") if isinstance(fragment.get("id"), str) else ""
        call = self._by_wire.get(wire_index)
        if call is None or (call_id and call.id and call_id != call.id):
            call = _Call(len(self.calls))
            self.calls.append(call)
            self._by_wire[wire_index] = call
        if call_id and not call.id:
            call.id = call_id
        function = fragment.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name")
        if isinstance(name, str) and name and not call.name:
            call.name = name
        extra = fragment.get("extra_content")
        if isinstance(extra, Mapping):
            call.extra_content = {**(call.extra_content or {}), **extra}
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, separators=(",", ":"))
        if arguments:
            call.pending.append(arguments)
        return self._start(call) if call.name else []

    def _start(self, call: _Call) -> list[StreamEvent]:
        """Start ``call`` if needed and flush its buffered argument fragments."""
        events: list[StreamEvent] = []
        if not call.started:
            call.started = True
            events.append(ToolCallStart(index=call.index, id=call.id, name=call.name))
        if call.pending:
            events.append(ToolCallDelta(index=call.index, arguments="".join(call.pending)))
            call.pending = []
        return events

    def finish(self) -> list[StreamEvent]:
        """``ToolCallEnd`` per call, then ``Finish``, once the stream has ended."""
        events: list[StreamEvent] = []
        for call in self.calls:
            events.extend(self._start(call))
            events.append(ToolCallEnd(index=call.index, extra_content=call.extra_content))
        reason = _FINISH_REASONS.get(self.finish_reason or "stop", "stop")
        if reason == "stop" and self.calls:
            reason = "tool_calls"
        details = [self.details[key] for key in sorted(self.details)]
        events.append(
            Finish(
                finish_reason=reason,
                usage=self.usage,
                reasoning_details=details or None,
                response_id=self.response_id,
                response_model=self.response_model,
            )
        )
        return events


def chat_usage(usage: Mapping[str, Any]) -> Usage:
    """Normalise a Chat Completions ``usage`` object (§5.5; ``cost`` from OpenRouter)."""
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    return Usage.from_counts(
        input_tokens=int_or_zero(usage.get("prompt_tokens")),
        output_tokens=int_or_zero(usage.get("completion_tokens")),
        cached_tokens=int_or_zero(
            prompt_details.get("cached_tokens") if isinstance(prompt_details, Mapping) else 0
        ),
        reasoning_tokens=int_or_zero(
            completion_details.get("reasoning_tokens")
            if isinstance(completion_details, Mapping)
            else 0
        ),
        total_tokens=int_or_zero(usage.get("total_tokens")),
        cost=float_or_none(usage.get("cost")),
    )


__all__ = [
    "TOOL_IMAGES_TEXT",
    "ChatStreamState",
    "Dialect",
    "OpenAIChatProvider",
    "ReasoningInput",
    "chat_usage",
    "detect_dialect",
    "wire_messages",
]
