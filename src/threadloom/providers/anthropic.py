"""The Anthropic Messages adapter (spec 05 §5.9), built on the official ``anthropic`` SDK.

One ``stream()`` call is one streaming ``POST /v1/messages`` (SDK retries off: the engine
owns retries, fallbacks and stream timers). Requests are shaped into Anthropic's
alternating user/assistant form with thinking enabled only where the API allows it
(§5.9.2); thinking comes back as ``reasoning.text`` / ``reasoning.encrypted`` details
(§5.6.1) so later requests can replay it verbatim, as the API requires. The request
builder is pure, so the engine can learn ``_metadata.thinkingDisabled`` for its log row
without sending anything (:meth:`AnthropicProvider.log_metadata`).

Compaction (spec 23 §23.2 rule 7, §23.4 rule 5): Anthropic compacts server-side as a
context-management edit (``compact_20260112``, beta ``compact-2026-01-12``) that fires
when a request's input reaches its trigger (at least 50,000 tokens). ``compact`` asks for
it on demand — the folded messages with the edit at that minimum and
``pause_after_compaction``, so the answer is only the ``compaction`` block (stop reason
``compaction``) — once ``compactable`` has counted (``/v1/messages/count_tokens``, free)
that the messages reach the minimum. A later request whose ``native_compaction`` is of
this adapter's kind sends the block in an assistant message in place of the text summary.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx

from threadloom.errors import ProviderError
from threadloom.providers.errormap import code_for_error, error_for_status, missing_setting
from threadloom.providers.reasoning import (
    FORMAT_ANTHROPIC,
    encrypted_detail,
    supply_reasoning,
    text_detail,
)
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    FinishReason,
    ImagePart,
    NativeCompacted,
    ProviderMessage,
    ProviderRequest,
    ReasoningDelta,
    ReasoningRequest,
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolMessage,
    Usage,
)

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
CONVERSATION_START = "(conversation start)"
#: Thinking budgets by effort (§5.6.3); the API's minimum budget is 1024.
EFFORT_BUDGETS: dict[str, int] = {"low": 1024, "medium": 4096, "high": 16384}
MIN_THINKING_BUDGET = 1024
#: Head room added to ``max_tokens`` when the thinking budget would consume all of it.
THINKING_HEADROOM = 4096
#: Body keys the adapter computes; ``provider_options`` cannot override them.
OWNED_KEYS = frozenset(
    {"model", "messages", "stream", "system", "tools", "tool_choice", "thinking", "max_tokens"}
)
NATIVE_COMPACTION = "anthropic.compact_20260112"
"""The ``type`` of the ``provider_item`` this adapter's ``compact`` answers."""
COMPACT_BETA = "compact-2026-01-12"
"""The beta (``anthropic-beta`` header) of server-side compaction."""
COMPACT_EDIT = "compact_20260112"
"""The context-management edit that compacts."""
COMPACT_MIN_TRIGGER = 50_000
"""The smallest input-token trigger the API takes: ``compact`` asks for it, and only for
messages that reach it (below it the API would answer a turn, not compact)."""
REPLAY_TRIGGER = 1_000_000
"""The trigger of the edit a request replaying a compaction block declares (the API takes
a block only with its edit declared): beyond the 1M-token window of the models that
compact, so the API never compacts during a turn."""
CHECKPOINT_TEXT = "(End of the conversation to compact.)"
"""The user text that ends a compact request whose folded messages end with the assistant
(the models that compact take no assistant prefill)."""
_COMPACTION_FIELDS = ("type", "content", "encrypted_content")
"""The fields of a ``compaction`` block the API takes back."""
_THINKING_TYPES = ("thinking", "redacted_thinking")
_TOOL_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_USAGE_KEYS = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
]
# Stream timers are the engine's (spec 04 §4.12.4): no read timeout here.
TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)

#: The SDK clients this adapter drives: Anthropic's API, or Claude on Bedrock / Vertex AI
#: (their clients share ``messages.create``; only the transport differs).
AnthropicClient = (
    anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex
)
Block = dict[str, Any]
WireMessage = dict[str, Any]


# --------------------------------------------------------------------------------------
# Request mapping (§5.9.1, §5.9.2)


@dataclass(frozen=True, slots=True)
class AnthropicRequest:
    """The wire request for one neutral request.

    ``body`` holds the ``messages.create`` arguments the adapter computes (without
    ``stream``); ``extra_body`` holds the ``provider_options`` merged into the JSON body;
    ``thinking_disabled`` is the reason thinking was requested but not enabled (recorded
    by the engine as the log's ``_metadata.thinkingDisabled``), else None.
    """

    body: dict[str, Any]
    extra_body: dict[str, Any] = field(default_factory=dict)
    thinking_disabled: str | None = None
    betas: tuple[str, ...] = ()
    """The betas the request needs (the ``anthropic-beta`` header)."""

    @property
    def headers(self) -> dict[str, str] | None:
        """The extra headers of the request (its betas), None when there are none."""
        return {"anthropic-beta": ",".join(self.betas)} if self.betas else None

    @property
    def metadata(self) -> dict[str, Any]:
        """Entries for the logged request's ``_metadata`` (empty when nothing to record)."""
        return {"thinkingDisabled": self.thinking_disabled} if self.thinking_disabled else {}


def thinking_budget(reasoning: ReasoningRequest) -> int:
    """``budget_tokens`` for a reasoning request: ``max_tokens``, else by effort (medium
    when unset), never below the API minimum of 1024 (§5.6.3)."""
    budget = reasoning.max_tokens
    if budget is None:
        budget = EFFORT_BUDGETS[reasoning.effort or "medium"]
    return max(MIN_THINKING_BUDGET, budget)


def _image_block(image: ImagePart) -> Block:
    source = {"type": "base64", "media_type": image.media_type, "data": image.data}
    return {"type": "image", "source": source}


def _text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def _user_blocks(content: str | list[Any]) -> list[Block]:
    """Text and image blocks of a user message; empty texts are skipped (the API rejects
    empty text blocks)."""
    parts = [TextPart(text=content)] if isinstance(content, str) else content
    return [
        _image_block(p) if isinstance(p, ImagePart) else _text_block(p.text)
        for p in parts
        if isinstance(p, ImagePart) or p.text
    ]


def _tool_input(arguments: str) -> dict[str, Any]:
    """The parsed arguments when they are a JSON object, else ``{}`` (§5.9.1)."""
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _assistant_blocks(message: AssistantMessage) -> list[Block]:
    """Thinking blocks first (converted by the shared §5.6.2 row, verbatim), then text,
    then tool_use blocks. Only thinking blocks → nothing (the message is dropped)."""
    thinking = supply_reasoning(
        "anthropic", message.reasoning_content, message.reasoning_details
    ).wire
    blocks: list[Block] = []
    if message.content:
        blocks.append(_text_block(message.content))
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _tool_input(call.arguments),
            }
        )
    return [*thinking, *blocks] if blocks else []


def _tool_result_block(message: ToolMessage) -> Block:
    content = [_text_block(message.content)] if message.content else []
    content.extend(_image_block(image) for image in message.images)
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
        "is_error": message.is_error,
    }


def _split_system(messages: list[ProviderMessage]) -> tuple[str | None, list[ProviderMessage]]:
    """The leading system texts joined by a blank line, and the remaining messages."""
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    texts = [m.content for m in messages[:start] if isinstance(m, SystemMessage) and m.content]
    return ("\n\n".join(texts) or None), messages[start:]


def wire_messages(
    messages: list[ProviderMessage], lead: list[Block] | None = None
) -> list[WireMessage]:
    """The ``messages`` array for the non-leading-system part of a request (§5.9.1).

    Tool results become ``tool_result`` blocks of a user message; later system messages
    become ``<system>`` user text blocks; consecutive messages of one role are merged (so
    consecutive tool results and a following user message form one user message); empty
    messages are dropped; ``(conversation start)`` is prepended when the first message
    would not be a user message. ``lead``: the blocks of an assistant message put before
    the messages (a compaction block, spec 23 §23.4 rule 5; the API ignores what comes
    before it).
    """
    out: list[WireMessage] = [{"role": "assistant", "content": list(lead)}] if lead else []
    for message in messages:
        if isinstance(message, SystemMessage):
            role, blocks = "user", [_text_block(f"<system>\n{message.content}\n</system>")]
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolMessage):
            role, blocks = "user", [_tool_result_block(message)]
        else:
            role, blocks = "user", _user_blocks(message.content)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if not out or out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": [_text_block(CONVERSATION_START)]})
    return out


def _thinking_block_reason(messages: list[WireMessage]) -> str | None:
    """Why the trailing tool exchange forbids thinking, or None when it does not.

    With thinking enabled the API requires the assistant turn whose tool calls are being
    answered to start with a thinking block; when we have none to replay we cannot enable it.
    """
    if len(messages) < 2 or messages[-2]["role"] != "assistant":
        return None
    results, blocks = messages[-1]["content"], messages[-2]["content"]
    if not any(b["type"] == "tool_result" for b in results):
        return None
    if not any(b["type"] == "tool_use" for b in blocks) or blocks[0]["type"] in _THINKING_TYPES:
        return None
    return "the newest tool-calling assistant message has no thinking block to replay"


def _tool_choice(request: ProviderRequest) -> dict[str, Any] | None:
    """The wire ``tool_choice`` (§5.9.1); None when no tools are offered, or when no
    choice is given and parallel calls are not restricted (the API default applies)."""
    choice = request.tool_choice
    if not request.tools or (choice is None and request.parallel_tool_calls is not False):
        return None
    if isinstance(choice, dict):
        wire: dict[str, Any] = {"type": "tool", "name": choice["name"]}
    else:
        wire = {"type": _TOOL_CHOICES[choice or "auto"]}
    if request.parallel_tool_calls is False and wire["type"] != "none":
        wire["disable_parallel_tool_use"] = True
    return wire


def output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The output type's schema as Anthropic's structured outputs take it (spec 24 §24.2):
    the SDK's own ``transform_schema`` — what ``messages.parse`` sends —, which moves the
    constraints the API refuses (``minimum``, ``minLength`` …) into descriptions and closes
    objects. The engine checks answers against the full schema. Sent as given when the
    installed SDK has no such function or the transform refuses the schema."""
    transform = getattr(anthropic, "transform_schema", None)
    if not callable(transform):
        return schema
    try:
        transformed: dict[str, Any] = transform(schema)
    except (ValueError, TypeError, KeyError):
        return schema
    return transformed


def compaction_blocks(request: ProviderRequest, rest: int) -> list[Block] | None:
    """The compaction blocks sent in place of the text summary (spec 23 §23.4 rule 5):
    those of the request's ``native_compaction`` when it is this adapter's kind and
    stands right after the leading system text (``rest`` messages follow it: the API drops
    whatever precedes a compaction block, so a summary a hook moved behind other messages
    goes as text). Each block with the fields the API takes back, as issued."""
    native = request.native_compaction
    if native is None or native.kind != NATIVE_COMPACTION:
        return None
    if native.at != len(request.messages) - rest:
        return None
    blocks = [
        {key: item[key] for key in _COMPACTION_FIELDS if key in item}
        for item in native.items
        if item.get("type") == "compaction"
    ]
    return blocks or None


def compact_edit(trigger: int, *, pause: bool) -> dict[str, Any]:
    """The ``compact_20260112`` edit at an input-token ``trigger``."""
    return {
        "type": COMPACT_EDIT,
        "trigger": {"type": "input_tokens", "value": trigger},
        "pause_after_compaction": pause,
    }


def with_edit(extra: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any]:
    """``extra`` (the merged ``provider_options``) whose ``context_management`` has
    ``edit`` first, in place of any compaction edit, beside the caller's other edits."""
    config = extra.get("context_management")
    config = config if isinstance(config, dict) else {}
    edits = config.get("edits")
    others = [
        e
        for e in (edits if isinstance(edits, list) else [])
        if not (isinstance(e, dict) and e.get("type") == COMPACT_EDIT)
    ]
    return {**extra, "context_management": {**config, "edits": [edit, *others]}}


def build_request(request: ProviderRequest, *, default_max_tokens: int = 8192) -> AnthropicRequest:
    """Convert a neutral request into the Messages API request (§5.9.1, §5.9.2).

    Pure: the request (and its persisted reasoning) is never modified. Thinking is enabled
    only when reasoning is requested, ``tool_choice`` is not forced, and the trailing tool
    exchange has a thinking block to replay; when it is not enabled, thinking blocks are
    removed from a final assistant message (the API rejects them there only). A
    compaction block of this adapter (``compaction_blocks``) goes in an assistant message
    in place of the summary and its acknowledgement, with the compaction beta and its
    edit declared at ``REPLAY_TRIGGER``.
    """
    system, rest = _split_system(list(request.messages))
    lead = compaction_blocks(request, len(rest))
    messages = wire_messages(rest[2:] if lead else rest, lead)
    body: dict[str, Any] = {"model": request.model}
    if system is not None:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    choice = _tool_choice(request)
    if choice is not None:
        body["tool_choice"] = choice

    disabled: str | None = None
    thinking: dict[str, Any] | None = None
    if request.reasoning is not None:
        if request.tool_choice == "required" or isinstance(request.tool_choice, dict):
            disabled = "tool_choice forces a tool; thinking allows only auto or none"
        else:
            disabled = _thinking_block_reason(messages)
        if disabled is None:
            thinking = {"type": "enabled", "budget_tokens": thinking_budget(request.reasoning)}
    if thinking is None and messages[-1]["role"] == "assistant":
        kept = [b for b in messages[-1]["content"] if b.get("type") not in _THINKING_TYPES]
        if kept:
            messages[-1] = {"role": "assistant", "content": kept}
        else:
            messages.pop()

    max_tokens = request.max_output_tokens or default_max_tokens
    if thinking is not None:
        body["thinking"] = thinking
        if thinking["budget_tokens"] >= max_tokens:
            max_tokens = thinking["budget_tokens"] + THINKING_HEADROOM
    body["max_tokens"] = max_tokens
    body["messages"] = messages
    extra = {k: v for k, v in request.provider_options.items() if k not in OWNED_KEYS}
    if request.output is not None:  # structured outputs: output_config.format (spec 24)
        config = extra.get("output_config")
        extra["output_config"] = {
            **(config if isinstance(config, dict) else {}),
            "format": {"type": "json_schema", "schema": output_schema(request.output.json_schema)},
        }
    if lead is None:
        return AnthropicRequest(body=body, extra_body=extra, thinking_disabled=disabled)
    return AnthropicRequest(
        body=body,
        extra_body=with_edit(extra, compact_edit(REPLAY_TRIGGER, pause=False)),
        thinking_disabled=disabled,
        betas=(COMPACT_BETA,),
    )


def compact_request(request: ProviderRequest, *, default_max_tokens: int) -> AnthropicRequest:
    """The request of an on-demand compaction (spec 23 §23.2 rule 7): ``request``'s
    messages (a previous compaction block of this adapter in place of its summary),
    ending with a user message, with the compaction edit at the API's minimum trigger and
    ``pause_after_compaction`` — so the API answers only the compaction block."""
    wire = build_request(request, default_max_tokens=default_max_tokens)
    body = copy.deepcopy(wire.body)
    if body["messages"][-1]["role"] == "assistant":
        body["messages"].append({"role": "user", "content": [_text_block(CHECKPOINT_TEXT)]})
    return AnthropicRequest(
        body=body,
        extra_body=with_edit(wire.extra_body, compact_edit(COMPACT_MIN_TRIGGER, pause=True)),
        betas=(COMPACT_BETA,),
    )


def iterations_usage(usage: Any) -> Usage:
    """Normalised usage of a response whose ``usage`` may list ``iterations`` (a
    compaction's): their sum when listed — the top-level counts leave the compaction
    iteration out —, else the top-level counts; input includes cache writes and reads."""
    usage = usage if isinstance(usage, dict) else {}
    iterations = usage.get("iterations")
    parts = [i for i in iterations if isinstance(i, dict)] if isinstance(iterations, list) else []
    counts = {key: sum(_int(p.get(key)) for p in parts or [usage]) for key in _USAGE_KEYS}
    cache_read = counts["cache_read_input_tokens"]
    return Usage.from_counts(
        input_tokens=counts["input_tokens"] + counts["cache_creation_input_tokens"] + cache_read,
        output_tokens=counts["output_tokens"],
        cached_tokens=cache_read,
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


# --------------------------------------------------------------------------------------
# Errors (§5.4)


def _error_fields(body: object) -> tuple[str | None, str | None]:
    """``(error.type, error.message)`` of an Anthropic error body, when present."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    kind, message = error.get("type"), error.get("message")
    return _str_or_none(kind), _str_or_none(message)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def map_error(exc: BaseException, provider: str = "anthropic") -> ProviderError:
    """Classify an SDK / transport failure (§5.4): HTTP status first, then the SDK's
    connection and timeout classes; an ``error`` event inside a 200 stream is mapped from
    its embedded ``error.type`` (``overloaded_error`` → ``overloaded``, …)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, anthropic.APIStatusError):
        kind, text = _error_fields(exc.body)
        message = text or str(exc)
        if exc.status_code < 400:  # an `error` event in an otherwise successful stream
            code = code_for_error(kind, message)
            return ProviderError(message, code=code, provider=provider, body=exc.body)
        error = error_for_status(
            exc.status_code, message, provider=provider, body=exc.body, headers=exc.response.headers
        )
        if error.code == "server_error" and kind == "overloaded_error":
            error.code = "overloaded"  # both retryable; the body is more specific than 5xx
        return error
    if isinstance(exc, anthropic.APITimeoutError | httpx.TimeoutException):
        return ProviderError(str(exc) or "request timed out", code="timeout", provider=provider)
    if isinstance(exc, anthropic.APIConnectionError | httpx.TransportError):
        return ProviderError(str(exc) or "connection error", code="connection", provider=provider)
    return ProviderError(str(exc) or type(exc).__name__, code="unknown", provider=provider)


# --------------------------------------------------------------------------------------
# Stream mapping (§5.9.3)


def finish_reason_for(stop_reason: str | None) -> FinishReason:
    """The neutral finish reason of an Anthropic ``stop_reason`` (unknown → ``stop``)."""
    return _STOP_REASONS.get(stop_reason or "", "stop")


@dataclass(slots=True)
class _Block:
    kind: str
    call_index: int = -1
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    data: str = ""
    input: Any = None


class StreamMapper:
    """Turns Messages API stream events into neutral events, one event at a time.

    Thinking blocks become ``ReasoningDelta`` events (a ``"\\n\\n"`` delta separates a
    later block's text from earlier thinking) and ``reasoning.text`` details with their
    signature; redacted thinking becomes ``reasoning.encrypted`` details; tool_use blocks
    become calls numbered in start order. Details are emitted with ``Finish`` in block order.
    """

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.calls = 0
        self.reasoning_seen = False
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.stop_reason: str | None = None
        self.counts: dict[str, int] = {}
        self.finished = False

    def _usage_counts(self, usage: Any) -> None:
        for key in _USAGE_KEYS:
            value = getattr(usage, key, None)
            if isinstance(value, int):
                self.counts[key] = value
        details = getattr(usage, "output_tokens_details", None)
        thinking = getattr(details, "thinking_tokens", None)
        if isinstance(thinking, int):
            self.counts["thinking_tokens"] = thinking

    def usage(self) -> Usage:
        """Normalised usage (§5.9.3): input includes cache writes and reads."""
        c = self.counts
        cache_read = c.get("cache_read_input_tokens", 0)
        return Usage.from_counts(
            input_tokens=c.get("input_tokens", 0)
            + c.get("cache_creation_input_tokens", 0)
            + cache_read,
            output_tokens=c.get("output_tokens", 0),
            cached_tokens=cache_read,
            reasoning_tokens=c.get("thinking_tokens", 0),
        )

    def _reasoning(self, block: _Block, text: str) -> Iterator[StreamEvent]:
        if not text:
            return
        if not block.text and self.reasoning_seen:
            yield ReasoningDelta(text="\n\n")
        block.text.append(text)
        self.reasoning_seen = True
        yield ReasoningDelta(text=text)

    def _start(self, index: int, content: Any) -> Iterator[StreamEvent]:
        kind = str(getattr(content, "type", ""))
        block = self.blocks[index] = _Block(kind)
        if kind == "thinking":
            block.signature = getattr(content, "signature", None) or None
            yield from self._reasoning(block, getattr(content, "thinking", "") or "")
        elif kind == "redacted_thinking":
            block.data = getattr(content, "data", "") or ""
        elif kind == "text" and content.text:
            yield TextDelta(text=content.text)
        elif kind == "tool_use":
            block.call_index, self.calls = self.calls, self.calls + 1
            block.input = getattr(content, "input", None)
            yield ToolCallStart(
                index=block.call_index, id=str(content.id or ""), name=str(content.name)
            )

    def _delta(self, index: int, delta: Any) -> Iterator[StreamEvent]:
        block = self.blocks.get(index)
        kind = getattr(delta, "type", "")
        if block is None:
            return
        if kind == "thinking_delta":
            yield from self._reasoning(block, delta.thinking or "")
        elif kind == "signature_delta":
            block.signature = delta.signature or block.signature
        elif kind == "text_delta" and delta.text:
            yield TextDelta(text=delta.text)
        elif kind == "input_json_delta" and block.kind == "tool_use" and delta.partial_json:
            block.text.append(delta.partial_json)
            yield ToolCallDelta(index=block.call_index, arguments=delta.partial_json)

    def _stop(self, index: int) -> Iterator[StreamEvent]:
        block = self.blocks.get(index)
        if block is None or block.kind != "tool_use":
            return
        # No fragments (a call without arguments): send the start's input, at least "{}".
        full = None if block.text else json.dumps(block.input or {}, separators=(",", ":"))
        yield ToolCallEnd(index=block.call_index, arguments=full)

    def details(self) -> list[dict[str, Any]] | None:
        """The response's reasoning details in block order; None when there were none."""
        out: list[dict[str, Any]] = []
        fmt = FORMAT_ANTHROPIC
        for i, block in sorted(self.blocks.items()):
            text = "".join(block.text)
            if block.kind == "thinking":
                out.append(text_detail(text, format=fmt, signature=block.signature, index=i))
            elif block.kind == "redacted_thinking":
                out.append(encrypted_detail(block.data, format=fmt, index=i))
        return out or None

    def feed(self, event: Any) -> Iterator[StreamEvent]:
        """The neutral events for one SDK stream event (unknown events yield nothing)."""
        kind = getattr(event, "type", "")
        if kind == "message_start":
            self.response_id = getattr(event.message, "id", None) or None
            model = getattr(event.message, "model", None)
            self.response_model = model if isinstance(model, str) and model else None
            self._usage_counts(getattr(event.message, "usage", None))
        elif kind == "content_block_start":
            yield from self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            yield from self._stop(event.index)
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            self._usage_counts(getattr(event, "usage", None))
        elif kind == "message_stop":
            self.finished = True
            reason = finish_reason_for(self.stop_reason)
            if self.calls and reason == "stop":
                reason = "tool_calls"
            yield Finish(
                finish_reason=reason,
                usage=self.usage(),
                reasoning_details=self.details(),
                response_id=self.response_id,
                response_model=self.response_model,
            )


# --------------------------------------------------------------------------------------
# The provider


class AnthropicProvider:
    """Anthropic Messages API behind the Provider protocol (spec 05 §5.9).

    Credentials are read at the first request (``api_key`` or ``ANTHROPIC_API_KEY``;
    ``base_url`` or ``ANTHROPIC_BASE_URL``), so a project whose unused models have no key
    still loads. The SDK client is created then and shared by all requests; it never
    retries (``max_retries=0``). No per-thread state is kept.
    """

    def __init__(
        self,
        name: str = "anthropic",
        api_key: str | None = None,
        base_url: str | None = None,
        default_max_tokens: int = 8192,
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.base_url = base_url
        self.default_max_tokens = default_max_tokens
        self._client: AnthropicClient | None = None

    def build_request(self, request: ProviderRequest) -> AnthropicRequest:
        """The wire request this provider would send for ``request`` (nothing is sent)."""
        return build_request(request, default_max_tokens=self.default_max_tokens)

    def log_metadata(self, request: ProviderRequest) -> dict[str, Any]:
        """Entries to add to the logged request's ``_metadata`` (``thinkingDisabled``)."""
        return self.build_request(request).metadata

    def missing_credential(self) -> str | None:
        """The environment variable to set when this adapter has no API key (none given,
        the variable unset): reported when definitions are loaded (spec 05 §5.2.3)."""
        if self._client is not None or self.api_key or os.environ.get(API_KEY_ENV):
            return None
        return API_KEY_ENV

    def client(self) -> AnthropicClient:
        """The SDK client, created on first use; raises ``authentication`` without a key."""
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def new_client(self) -> AnthropicClient:
        """A new SDK client from the settings: the one hook the cloud variants replace
        (:mod:`threadloom.providers.anthropic_bedrock`, ``anthropic_vertex``)."""
        key = self.api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise missing_setting(API_KEY_ENV, self.name)
        return anthropic.AsyncAnthropic(
            api_key=key,
            base_url=self.base_url or os.environ.get(BASE_URL_ENV) or None,
            max_retries=0,
            timeout=TIMEOUT,
        )

    def map_error(self, exc: BaseException) -> ProviderError:
        """Classify a failure of this provider's SDK client (§5.4; see :func:`map_error`)."""
        return map_error(exc, self.name)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Send one streaming request and yield neutral events ending with ``Finish``.

        Failures raise ``ProviderError``; cancellation (or closing this iterator) closes
        the HTTP response and lets ``CancelledError`` propagate.
        """
        wire = self.build_request(request)
        client = self.client()
        try:
            response = await client.messages.create(
                **wire.body,
                stream=True,
                extra_body=wire.extra_body or None,
                extra_headers=wire.headers,
            )
        except Exception as exc:
            raise self.map_error(exc) from exc
        events = cast("anthropic.AsyncStream[Any]", response)
        mapper = StreamMapper()
        try:
            async for event in events:
                for neutral in mapper.feed(event):
                    yield neutral
                if mapper.finished:
                    break
        except Exception as exc:
            raise self.map_error(exc) from exc
        finally:
            await events.close()
        if not mapper.finished:
            raise ProviderError(
                "Anthropic stream ended without message_stop", code="connection", provider=self.name
            )

    def beta_messages(self) -> Any:
        """The client's beta Messages resource (compaction's requests; the Bedrock
        client's has no token counting, so it is typed loosely)."""
        return self.client().beta.messages

    native_compaction: str | None = NATIVE_COMPACTION
    """The kind of compaction item this adapter makes and sends (spec 23 §23.2 rule 7)."""

    async def compactable(self, request: ProviderRequest) -> bool:
        """Whether the API would compact ``request``'s messages: their input tokens,
        counted by ``/v1/messages/count_tokens`` (free; no model call), reach
        ``COMPACT_MIN_TRIGGER``. Raises only ``ProviderError``."""
        wire = compact_request(request, default_max_tokens=self.default_max_tokens)
        fields = {k: v for k, v in wire.body.items() if k != "max_tokens"}
        try:
            counted = await self.beta_messages().count_tokens(
                **fields, extra_body=wire.extra_body or None, extra_headers=wire.headers
            )
        except Exception as exc:
            raise self.map_error(exc) from exc
        answer = counted.to_dict()
        managed = answer.get("context_management")
        original = managed.get("original_input_tokens") if isinstance(managed, dict) else None
        tokens = _int(original) or _int(answer.get("input_tokens"))
        return tokens >= COMPACT_MIN_TRIGGER

    async def compact(self, request: ProviderRequest) -> NativeCompacted:
        """The API's own compaction of ``request``'s messages (``compact_request``): the
        ``compaction`` block it answers, as issued, kept as the ``provider_item`` with the
        model it was made for; the usage summed over the answer's iterations. Raises only
        ``ProviderError`` (an answer without a compaction block is one)."""
        wire = compact_request(request, default_max_tokens=self.default_max_tokens)
        try:
            response = await self.beta_messages().create(
                **wire.body, extra_body=wire.extra_body or None, extra_headers=wire.headers
            )
        except Exception as exc:
            raise self.map_error(exc) from exc
        body = response.to_dict()
        content = body.get("content")
        blocks = [
            b
            for b in (content if isinstance(content, list) else [])
            if b.get("type") == "compaction"
        ]
        if not blocks:
            raise ProviderError(
                f"The API answered no compaction block (stop reason {body.get('stop_reason')})",
                code="unknown",
                provider=self.name,
                body=body,
            )
        item = {
            "type": NATIVE_COMPACTION,
            "provider": self.name,
            "model": request.model,
            "id": body.get("id"),
            "output": blocks,
        }
        return NativeCompacted(item=item, usage=iterations_usage(body.get("usage")), body=body)

    async def aclose(self) -> None:
        """Close the SDK client (and its connection pool) if one was created."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


__all__ = [
    "COMPACT_BETA",
    "NATIVE_COMPACTION",
    "TIMEOUT",
    "AnthropicClient",
    "AnthropicProvider",
    "AnthropicRequest",
    "StreamMapper",
    "build_request",
    "compact_request",
    "finish_reason_for",
    "iterations_usage",
    "map_error",
    "thinking_budget",
    "wire_messages",
]
