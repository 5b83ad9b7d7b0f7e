"""``OpenAIResponsesProvider``: the Responses API adapter (spec 05 §5.8.2, §5.8.3).

Unlike Chat Completions, the Responses API returns reasoning as output *items* (a summary
and, when asked for, opaque ``encrypted_content``) and accepts them back as input items.
This adapter stores them as ``openai-responses-v1`` reasoning details and replays them in
front of the assistant message they belong to, so multi-turn reasoning survives with
``store=False`` (nothing kept at OpenAI). Details of other formats are never sent
(seed §1.3.4); request messages are never modified.

``provider_options`` are merged into the wire body (see :mod:`threadloom.providers.openai`),
so e.g. ``{"store": True}`` or ``{"text": {"verbosity": "low"}}`` reach the API.

Compaction (spec 23 §23.2 rule 7, §23.4 rule 5): ``compact`` asks ``POST
/responses/compact`` for the API's own compacted window — the user messages kept and one
``compaction`` item of encrypted content — and a later request whose
``native_compaction`` is of this adapter's kind sends that window in place of the text
summary it stands beside.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

import openai

from threadloom.errors import ProviderError
from threadloom.providers.openai import (
    RESPONSES_ITEM_ID,
    OpenAIClientOwner,
    as_dict,
    embedded_error,
    image_data_url,
    int_or_zero,
    map_sdk_error,
    merge_options,
    split_body,
)
from threadloom.providers.openai_chat import TOOL_IMAGES_TEXT
from threadloom.providers.reasoning import (
    FORMAT_OPENAI_RESPONSES,
    encrypted_detail,
    summary_detail,
    supply_reasoning,
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
    StreamEvent,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolMessage,
    Usage,
    UserMessage,
)

_OWNED_KEYS = frozenset({"model", "input", "stream"})
NATIVE_COMPACTION = "openai.responses.compact"
"""The ``type`` of the ``provider_item`` this adapter's ``compact`` answers."""
_COMPACTION_FIELDS = ("type", "id", "encrypted_content")
"""The fields of a ``compaction`` item the API takes back as input."""
_INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


class OpenAIResponsesProvider(OpenAIClientOwner):
    """The Responses API through the official SDK, streaming (spec 05 §5.8.2).

    ``store`` is sent as the request's ``store`` flag (default False: OpenAI keeps
    nothing, and reasoning is replayed from the encrypted content Threadloom persisted).
    Credentials as for the chat adapter: ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, read
    at the first request.
    """

    def __init__(
        self,
        name: str = "openai-responses",
        api_key: str | None = None,
        base_url: str | None = None,
        store: bool = False,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            name=name, api_key=api_key, base_url=base_url, default_headers=default_headers
        )
        self.store = store

    native_compaction = NATIVE_COMPACTION
    """The kind of compaction item this adapter makes and sends (spec 23 §23.2 rule 7)."""

    def input(self, request: ProviderRequest, store: bool) -> list[dict[str, Any]]:
        """The request's ``input`` items: its messages, with a compaction item of this
        adapter's kind in place of the two messages it stands for."""
        replay = not store
        native = request.native_compaction
        if native is None or native.kind != NATIVE_COMPACTION:
            return input_items(request.messages, replay_needs_encrypted=replay)
        at = native.at
        return [
            *input_items(request.messages[:at], replay_needs_encrypted=replay),
            *(_window_item(item) for item in native.items),
            *input_items(request.messages[at + 2 :], replay_needs_encrypted=replay),
        ]

    async def compact(self, request: ProviderRequest) -> NativeCompacted:
        """The API's own compaction of ``request``'s messages (``POST /responses/compact``):
        the window it answers (the user messages and one ``compaction`` item) kept as the
        ``provider_item``, with the model it was made for; raises only ``ProviderError``."""
        client = self.client()
        try:
            compacted = await client.responses.compact(
                model=request.model, input=cast(Any, self.input(request, store=False))
            )
        except Exception as exc:
            raise map_sdk_error(exc, self.name) from exc
        body = as_dict(compacted)
        output = body.get("output")
        if not isinstance(output, list) or not any(
            isinstance(i, Mapping) and i.get("type") == "compaction" for i in output
        ):
            raise ProviderError(
                "The compact endpoint answered no compaction item",
                code="unknown",
                provider=self.name,
            )
        usage = body.get("usage")
        item = {
            "type": NATIVE_COMPACTION,
            "provider": self.name,
            "model": request.model,
            "id": body.get("id"),
            "output": output,
        }
        return NativeCompacted(
            item=item,
            usage=responses_usage(usage if isinstance(usage, Mapping) else {}),
            body=body,
        )

    def request_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (what the fake server in the tests sees)."""
        store = request.provider_options.get("store", self.store)
        body: dict[str, Any] = {
            "model": request.model,
            "input": self.input(request, store),
            "stream": True,
            "store": store,
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": False,
                }
                for tool in request.tools
            ]
            choice = request.tool_choice
            if isinstance(choice, Mapping):
                body["tool_choice"] = {"type": "function", "name": choice["name"]}
            elif choice is not None:
                body["tool_choice"] = choice
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if request.reasoning is not None:
            body["reasoning"] = {"effort": request.reasoning.effort or "medium", "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        merged = merge_options(body, request.provider_options, _OWNED_KEYS)
        output = request.output
        if output is not None:  # text.format, beside any other text option (spec 24)
            text = merged.get("text")
            merged["text"] = {
                **(text if isinstance(text, Mapping) else {}),
                "format": {
                    "type": "json_schema",
                    "name": output.name,
                    "schema": output.json_schema,
                    "strict": output.strict,
                },
            }
        return merged

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """One ``responses.create(stream=True)`` request as neutral events.

        Raises only ``ProviderError``; cancellation closes the HTTP response and lets
        ``asyncio.CancelledError`` propagate (spec 05 §5.4).
        """
        client = self.client()
        body = self.request_body(request)
        create = client.responses.create
        kwargs, extra = split_body(create, body)
        try:
            sdk_stream = cast(
                "openai.AsyncStream[Any]", await create(**kwargs, extra_body=extra or None)
            )
        except Exception as exc:
            raise map_sdk_error(exc, self.name) from exc
        state = ResponsesStreamState(self.name)
        try:
            async for event in sdk_stream:
                for neutral in state.feed(as_dict(event)):
                    yield neutral
                if state.finished:
                    break
            if not state.finished:
                raise ProviderError(
                    "Responses stream ended without response.completed",
                    code="unknown",
                    provider=self.name,
                )
        except ProviderError:
            raise
        except Exception as exc:
            raise map_sdk_error(exc, self.name) from exc
        finally:
            await sdk_stream.close()


# --------------------------------------------------------------------------------------
# Request mapping


def _input_content(content: str | Sequence[TextPart | ImagePart]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [
        {"type": "input_text", "text": part.text}
        if isinstance(part, TextPart)
        else {"type": "input_image", "image_url": image_data_url(part), "detail": part.detail}
        for part in content
    ]


def _assistant_items(msg: AssistantMessage, replay_needs_encrypted: bool) -> list[dict[str, Any]]:
    """The reasoning items (§5.8.3), the output message and the function calls of ``msg``.

    Reasoning items are sent only in front of at least one item of their own (the API
    rejects a reasoning item not followed by the item it produced) and, when the request
    is not stored, only with encrypted content (an id alone refers to nothing).
    """
    own: list[dict[str, Any]] = []
    if msg.content:
        own.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": msg.content}],
            }
        )
    for call in msg.tool_calls:
        item: dict[str, Any] = {"type": "function_call"}
        item_id = (call.extra_content or {}).get(RESPONSES_ITEM_ID)
        if isinstance(item_id, str) and item_id:
            item["id"] = item_id
        item.update(call_id=call.id, name=call.name, arguments=call.arguments)
        own.append(item)
    if not own:
        return []
    supply = supply_reasoning("openai-responses", msg.reasoning_content, msg.reasoning_details)
    reasoning = [
        item
        for item in supply.wire
        if not replay_needs_encrypted or item.get("encrypted_content") is not None
    ]
    return [*reasoning, *own]


def input_items(
    messages: Sequence[ProviderMessage], *, replay_needs_encrypted: bool = True
) -> list[dict[str, Any]]:
    """Neutral messages as Responses input items, in message order (§5.8.2 table).

    Images returned by a block of consecutive tool messages follow its last
    ``function_call_output`` in one ``user`` message item.
    """
    items: list[dict[str, Any]] = []
    images: list[ImagePart] = []
    for msg in messages:
        if images and not isinstance(msg, ToolMessage):
            items.append(_images_item(images))
            images = []
        if isinstance(msg, SystemMessage | UserMessage):
            items.append(
                {"type": "message", "role": msg.role, "content": _input_content(msg.content)}
            )
        elif isinstance(msg, AssistantMessage):
            items.extend(_assistant_items(msg, replay_needs_encrypted))
        else:
            items.append(
                {"type": "function_call_output", "call_id": msg.tool_call_id, "output": msg.content}
            )
            images.extend(msg.images)
    if images:
        items.append(_images_item(images))
    return items


def _window_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item of a compacted window as input: a ``compaction`` item with the fields the
    API takes back, any other (the user messages it kept) as it came."""
    if item.get("type") == "compaction":
        return {key: item[key] for key in _COMPACTION_FIELDS if item.get(key) is not None}
    return copy.deepcopy(dict(item))


def _images_item(images: list[ImagePart]) -> dict[str, Any]:
    content = _input_content([TextPart(text=TOOL_IMAGES_TEXT), *images])
    return {"type": "message", "role": "user", "content": content}


# --------------------------------------------------------------------------------------
# Stream mapping


class _Call:
    __slots__ = ("extra_content", "id", "index", "name")

    def __init__(self, index: int, id: str, name: str, extra: dict[str, Any] | None) -> None:
        self.index = index
        self.id = id
        self.name = name
        self.extra_content = extra


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


class ResponsesStreamState:
    """Turns Responses stream events (as JSON objects) into neutral events (§5.8.2).

    Reasoning text arrives as summary (or raw reasoning) deltas, one part after another;
    a ``ReasoningDelta("\\n\\n")`` is put between parts. A reasoning item whose text never
    arrived as deltas contributes its summary texts when the item is done, so
    ``reasoning_content`` is set whenever there was reasoning text. Details are built with
    the shared builders of :mod:`threadloom.providers.reasoning`; their ``index`` counts
    the details of the response.
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.calls: list[_Call] = []
        self._calls_by_key: dict[str, _Call] = {}
        self.details: list[dict[str, Any]] = []
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.finished = False
        self._part: tuple[str, str, int] | None = None
        self._streamed_items: set[str] = set()

    # -- helpers -----------------------------------------------------------------------

    def _reasoning(self, key: tuple[str, str, int], text: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self._part is not None and self._part != key:
            events.append(ReasoningDelta(text="\n\n"))
        self._part = key
        self._streamed_items.add(key[0])
        if text:
            events.append(ReasoningDelta(text=text))
        return events

    def _call_for(self, event: Mapping[str, Any]) -> _Call | None:
        item_id = _str(event.get("item_id"))
        return self._calls_by_key.get(item_id) or self._calls_by_key.get(
            f"#{event.get('output_index')}"
        )

    def _add_call(self, item: Mapping[str, Any], output_index: Any) -> _Call:
        item_id = _str(item.get("id"))
        extra = {RESPONSES_ITEM_ID: item_id} if item_id else None
        call = _Call(len(self.calls), _str(item.get("call_id")), _str(item.get("name")), extra)
        self.calls.append(call)
        if item_id:
            self._calls_by_key[item_id] = call
        self._calls_by_key[f"#{output_index}"] = call
        return call

    # -- events ------------------------------------------------------------------------

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        """The neutral events of one stream event; raises ``ProviderError`` on failure."""
        kind = event.get("type")
        response = event.get("response")
        response = response if isinstance(response, Mapping) else {}
        if self.response_id is None and _str(response.get("id")):
            self.response_id = response["id"]
        if _str(response.get("model")):
            self.response_model = response["model"]
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            text = _str(event.get("delta"))
            return [TextDelta(text=text)] if text else []
        if kind == "response.reasoning_summary_text.delta":
            key = (_str(event.get("item_id")), "summary", int_or_zero(event.get("summary_index")))
            return self._reasoning(key, _str(event.get("delta")))
        if kind == "response.reasoning_text.delta":
            key = (_str(event.get("item_id")), "text", int_or_zero(event.get("content_index")))
            return self._reasoning(key, _str(event.get("delta")))
        if kind == "response.function_call_arguments.delta":
            call = self._call_for(event)
            delta = _str(event.get("delta"))
            return [ToolCallDelta(index=call.index, arguments=delta)] if call and delta else []
        item = event.get("item")
        item = item if isinstance(item, Mapping) else {}
        if kind == "response.output_item.added" and item.get("type") == "function_call":
            call = self._add_call(item, event.get("output_index"))
            return [ToolCallStart(index=call.index, id=call.id, name=call.name)]
        if kind == "response.output_item.done":
            return self._item_done(item, event.get("output_index"))
        if kind in ("response.completed", "response.incomplete"):
            return [self._finish(kind, response)]
        if kind == "response.failed":
            raise embedded_error(response.get("error"), self.provider, "Response failed")
        if kind == "error":
            raise embedded_error(event, self.provider)
        return []

    def _item_done(self, item: Mapping[str, Any], output_index: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if item.get("type") == "function_call":
            call = self._calls_by_key.get(_str(item.get("id"))) or self._calls_by_key.get(
                f"#{output_index}"
            )
            if call is None:  # no output_item.added was seen: start it now
                call = self._add_call(item, output_index)
                events.append(ToolCallStart(index=call.index, id=call.id, name=call.name))
            arguments = item.get("arguments")
            events.append(
                ToolCallEnd(
                    index=call.index,
                    arguments=arguments if isinstance(arguments, str) else None,
                    extra_content=call.extra_content,
                )
            )
        elif item.get("type") == "reasoning":
            item_id = _str(item.get("id")) or None
            summaries = [
                _str(part.get("text"))
                for part in item.get("summary") or ()
                if isinstance(part, Mapping)
            ]
            for text in summaries:
                self.details.append(
                    summary_detail(
                        text, format=FORMAT_OPENAI_RESPONSES, id=item_id, index=len(self.details)
                    )
                )
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str) and encrypted:
                self.details.append(
                    encrypted_detail(
                        encrypted,
                        format=FORMAT_OPENAI_RESPONSES,
                        id=item_id,
                        index=len(self.details),
                    )
                )
            if (item_id or "") not in self._streamed_items:
                for number, text in enumerate(summaries):
                    events.extend(self._reasoning((item_id or "", "summary", number), text))
        return events

    def _finish(self, kind: str, response: Mapping[str, Any]) -> Finish:
        self.finished = True
        reason: FinishReason = "tool_calls" if self.calls else "stop"
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            reason = _INCOMPLETE_REASONS.get(_str(why), "length")
        usage = response.get("usage")
        return Finish(
            finish_reason=reason,
            usage=responses_usage(usage if isinstance(usage, Mapping) else {}),
            reasoning_details=list(self.details) or None,
            response_id=self.response_id,
            response_model=self.response_model,
        )


def responses_usage(usage: Mapping[str, Any]) -> Usage:
    """Normalise a Responses ``usage`` object (§5.5)."""
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    return Usage.from_counts(
        input_tokens=int_or_zero(usage.get("input_tokens")),
        output_tokens=int_or_zero(usage.get("output_tokens")),
        cached_tokens=int_or_zero(
            input_details.get("cached_tokens") if isinstance(input_details, Mapping) else 0
        ),
        reasoning_tokens=int_or_zero(
            output_details.get("reasoning_tokens") if isinstance(output_details, Mapping) else 0
        ),
        total_tokens=int_or_zero(usage.get("total_tokens")),
    )


__all__ = [
    "NATIVE_COMPACTION",
    "OpenAIResponsesProvider",
    "ResponsesStreamState",
    "input_items",
    "responses_usage",
]
