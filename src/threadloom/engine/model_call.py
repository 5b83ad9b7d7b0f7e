"""One model request of a step: streaming, retries, fallbacks, the LLM log rows and cost
(spec 04 §4.12, §4.25).

The engine always streams. Text and reasoning deltas are published as ephemeral chunk
events for the pending message; the stored content is written once, at finalisation.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadloom.engine.request_body import RequestBody, request_body
from threadloom.engine.request_head import SLOT, head_for
from threadloom.errors import ProviderError
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    ImagePart,
    ProviderRequest,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
    ToolMessage,
    Usage,
    UserMessage,
)
from threadloom.records import LogRow, json_compact, new_call_id, new_id

if TYPE_CHECKING:
    from threadloom.engine.context import Assembly, RequestMessage
    from threadloom.engine.step import StepEnv

MAX_ERROR_LINES = 100
GENERATION_EVERY = 80  # characters between `generation` telemetry records (spec 04 §4.12.2)


class StepError(Exception):
    """A step failed (spec 04 §4.21); the run ends with ``step_error``."""


@dataclass
class ModelResult:
    """What one successful attempt returned."""

    content: str
    tool_calls: list[ToolCallSpec]
    reasoning_content: str
    reasoning_details: list[dict[str, Any]] | None
    finish_reason: str
    usage: Usage
    log_id: str
    model_name: str
    reasoning_duration_ms: int | None = None
    started_call_ids: set[str] = field(default_factory=set)
    log_row: LogRow | None = None
    """The attempt's completed LLM row, committed with the finalised message."""


def cut_error(text: str) -> str:
    """Error texts longer than 100 lines keep 100 lines and a note (spec 04 §4.25)."""
    lines = text.splitlines()
    if len(lines) <= MAX_ERROR_LINES:
        return text
    extra = len(lines) - MAX_ERROR_LINES
    return "\n".join(lines[:MAX_ERROR_LINES]) + f"\n\n[Truncated: {extra} additional lines]"


_STRING = r'"((?:[^"\\]|\\.)*)"'


def _streamed_string(arguments: str, name: str) -> str | None:
    """The value of string argument ``name`` once it has completely streamed, else None."""
    match = re.search(r'"' + re.escape(name) + r'"\s*:\s*' + _STRING, arguments)
    if match is None:
        return None
    try:
        value = json.loads('"' + match.group(1) + '"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def price(
    model: Any, usage: Usage
) -> tuple[float | None, float | None, float | None, float | None]:
    """``(cost_input, cost_cached, cost_output, cost_total)`` per spec 04 §4.25."""
    inp, out = getattr(model, "input_price", None), getattr(model, "output_price", None)
    if inp is None or out is None:
        total = round(usage.cost, 12) if usage.cost is not None else None
        return None, None, None, total
    cached_price = getattr(model, "cached_price", None)
    reasoning_price = getattr(model, "reasoning_price", None)
    uncached = max(usage.input_tokens - usage.cached_tokens, 0)
    cost_input = uncached * inp / 1e6
    cost_cached = usage.cached_tokens * (cached_price if cached_price is not None else inp) / 1e6
    visible = max(usage.output_tokens - usage.reasoning_tokens, 0)
    cost_output = (
        visible * out / 1e6
        + usage.reasoning_tokens * (reasoning_price if reasoning_price is not None else out) / 1e6
    )
    total = usage.cost if usage.cost is not None else cost_input + cost_cached + cost_output
    return round(cost_input, 12), round(cost_cached, 12), round(cost_output, 12), round(total, 12)


# -- request building ----------------------------------------------------------------


def _provider_message(m: RequestMessage) -> Any:
    if m.role == "system":
        return SystemMessage(content=m.content if isinstance(m.content, str) else "")
    if m.role == "user":
        return UserMessage(content=m.content if m.content is not None else "")
    if m.role == "tool":
        text = m.content if isinstance(m.content, str) else ""
        images = [
            ImagePart(media_type=i["media_type"], data=i["data"], name=i.get("name"))
            for i in (m.images or [])
            if i.get("type") == "image"
        ]
        return ToolMessage(
            tool_call_id=m.tool_call_id or "",
            name=m.name or "",
            content=text,
            is_error=m.is_error,
            images=images,
        )
    return AssistantMessage(
        content=m.content if isinstance(m.content, str) else None,
        tool_calls=[
            ToolCallSpec(
                id=c.id,
                name=c.function.name,
                arguments=c.function.arguments,
                extra_content=c.extra_content,
            )
            for c in (m.tool_calls or [])
        ],
        reasoning_content=m.reasoning_content,
        reasoning_details=m.reasoning_details,
    )


def build_request(
    env: StepEnv, assembly: Assembly, model: Any, provider: Any = None
) -> tuple[ProviderRequest, RequestBody]:
    """The neutral request for ``model`` and the ``request_body`` of its log rows."""
    from threadloom.engine.context import normalize

    prompt = env.prompt
    prepared = assembly.prepared  # the incremental path: normalised, no images
    messages = (
        prepared.messages
        if prepared is not None
        else normalize(assembly.messages, bool(getattr(model, "supports_images", True)))
    )
    head = head_for(env.run.manager.request_heads, prompt, model, env.tools)
    provider_messages: list[Any] = []
    fragments: list[str] = []
    if prepared is not None:
        provider_messages, fragments = prepared.providers, prepared.fragments
        messages = []
    for message in messages:
        item = assembly.presented.get(id(message))
        if item is not None and item.request is message:
            if item.provider is None:  # remembered with the stored record (history memo)
                item.provider = _provider_message(message)
                item.fragment = _fragment(item.provider)
            provider_messages.append(item.provider)
            fragments.append(item.fragment or _fragment(item.provider))
        else:
            converted = _provider_message(message)
            provider_messages.append(converted)
            fragments.append(_fragment(converted))
    request = head.request(
        model.model, provider_messages, {"thread_id": env.state.thread_id, "prompt": prompt.name}
    )
    describe = getattr(provider, "log_metadata", None)
    # what the adapter decided, e.g. Anthropic's thinkingDisabled
    extra = (describe(request) or None) if callable(describe) else None
    text = head.body_head(prompt.name, assembly.system, extra)
    system = bool(provider_messages) and isinstance(provider_messages[0], SystemMessage)
    body = request_body(text, SLOT, fragments, prepared, system)
    body.tools_schema = head.tools_schema
    return request, body


def _fragment(message: Any) -> str:
    """The JSON text of one provider message in a log's request body (images omitted)."""
    data = message.model_dump(mode="json")
    content = data.get("content")
    if isinstance(content, list):
        for part in content:
            if part.get("type") == "image":
                part["data"] = "[base64 omitted]"
    for image in data.get("images") or []:
        image["data"] = "[base64 omitted]"
    return json_compact(data)


# -- streaming -----------------------------------------------------------------------


class _Watch:
    """The chunk timeouts of one stream on one timer (spec 04 §4.12.2). A timeout per chunk
    costs a timer and a context manager per event; here an event moves a deadline, and the
    timer, when it fires before that deadline, re-arms itself for it. At the deadline it
    cancels the waiting task, as ``asyncio.timeout`` does, and ``timed_out`` tells that
    cancellation from one of the step itself (the same ``uncancel`` check)."""

    __slots__ = ("cancelling", "deadline", "expired", "handle", "loop", "task")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.cancelling = task.cancelling()
        self.deadline = 0.0
        self.expired = False
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, limit: float) -> None:
        """The next event is due within ``limit`` seconds from now."""
        deadline = self.deadline = self.loop.time() + limit
        handle = self.handle
        if handle is None or deadline < handle.when():
            if handle is not None:
                handle.cancel()
            self.handle = self.loop.call_at(deadline, self._check)

    def _check(self) -> None:
        self.handle = None
        if self.loop.time() >= self.deadline:
            self.expired = True
            self.task.cancel()
        else:
            self.handle = self.loop.call_at(self.deadline, self._check)

    def timed_out(self) -> bool:
        """Withdraw this timer's cancellation: True when it was the only one pending."""
        self.expired = False
        return self.task.uncancel() <= self.cancelling

    def close(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


async def _stream(
    env: StepEnv, provider: Any, request: ProviderRequest, pending_id: str, sent_at: float
) -> tuple[ModelResult, float | None, float | None]:
    run, options = env.run, env.run.options
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: Finish | None = None
    first_at: float | None = None
    last_at: float | None = None
    reasoning_started: float | None = None
    reasoning_ended: float | None = None
    run.partial[pending_id] = ""
    run.partial_reasoning[pending_id] = ""
    stream = provider.stream(request)
    iterator = stream.__aiter__()
    limit = options.first_chunk_timeout_s
    exhausted = False
    watchdog = _Watch()
    try:
        try:
            while True:
                limit = (
                    options.first_chunk_timeout_s if first_at is None else options.stall_timeout_s
                )
                watchdog.arm(limit)
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    exhausted = True
                    break
                if watchdog.expired and watchdog.timed_out():  # an answer despite the cancel
                    raise TimeoutError
                now = time.monotonic()
                first_at = first_at or now
                last_at = now
                if isinstance(event, TextDelta):
                    if reasoning_started is not None and reasoning_ended is None:
                        reasoning_ended = now
                    offset = len(run.partial[pending_id])
                    text.append(event.text)
                    run.partial[pending_id] += event.text
                    env.publish_chunk("message_chunk", pending_id, event.text, offset)
                    produced = len(run.partial[pending_id])
                    if produced // GENERATION_EVERY > offset // GENERATION_EVERY:
                        run.publish_telemetry("generation", outputTokens=math.ceil(produced / 4))
                elif isinstance(event, ReasoningDelta):
                    reasoning_started = reasoning_started or now
                    offset = sum(len(r) for r in reasoning)
                    reasoning.append(event.text)
                    run.partial_reasoning[pending_id] += event.text
                    env.publish_chunk("reasoning_chunk", pending_id, event.text, offset)
                elif isinstance(event, ToolCallStart):
                    if reasoning_started is not None and reasoning_ended is None:
                        reasoning_ended = now
                    call_id = event.id or new_call_id()
                    watch = env.progress_argument(event.name)
                    calls[event.index] = {
                        "id": call_id,
                        "name": event.name,
                        "parts": [],
                        "full": None,
                        "extra": None,
                        "watch": watch,
                    }
                    if watch is None:
                        env.announce_call(call_id, event.name, "", None)
                elif isinstance(event, ToolCallDelta):
                    calls.setdefault(
                        event.index,
                        {
                            "id": new_call_id(),
                            "name": "",
                            "parts": [],
                            "full": None,
                            "extra": None,
                        },
                    )
                    entry = calls[event.index]
                    entry["parts"].append(event.arguments)
                    if entry.get("watch") and entry["id"] not in env.announced:
                        value = _streamed_string("".join(entry["parts"]), entry["watch"])
                        if value is not None:
                            env.announce_call(
                                entry["id"], entry["name"], "".join(entry["parts"]), value
                            )
                elif isinstance(event, ToolCallEnd):
                    ended = calls.get(event.index)
                    if ended is not None:
                        if event.arguments is not None:
                            ended["full"] = event.arguments
                        ended["extra"] = event.extra_content
                elif isinstance(event, Finish):
                    finish = event
        except (TimeoutError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and not (
                watchdog.expired and watchdog.timed_out()
            ):
                raise  # a cancellation of the step itself (stop, terminate)
            raise ProviderError(
                f"no response data within {limit:g} s",
                code="timeout",
                retryable=False,
                provider=getattr(provider, "name", ""),
            ) from None
        finally:
            watchdog.close()
    finally:
        closer = getattr(iterator, "aclose", None)
        if closer is not None:
            try:
                if exhausted and inspect.isasyncgen(iterator):  # an exhausted generator: at once
                    await closer()
                else:
                    async with asyncio.timeout(5):
                        await closer()
            except (TimeoutError, Exception):
                pass
    for entry in calls.values():  # calls not announced while streaming are announced now
        arguments = entry["full"] if entry["full"] is not None else "".join(entry["parts"])
        progress = _streamed_string(arguments, entry["watch"]) if entry.get("watch") else None
        env.announce_call(entry["id"], entry["name"], arguments, progress)
    if finish is None:
        raise ProviderError(
            "stream ended without a finish event",
            code="server_error",
            provider=getattr(provider, "name", ""),
        )
    tool_calls = [
        ToolCallSpec(
            id=c["id"],
            name=c["name"],
            arguments=c["full"] if c["full"] is not None else "".join(c["parts"]),
            extra_content=c["extra"],
        )
        for _, c in sorted(calls.items())
    ]
    if reasoning_started is not None and reasoning_ended is None:
        reasoning_ended = last_at
    duration = (
        int((reasoning_ended - reasoning_started) * 1000)
        if reasoning_started is not None and reasoning_ended is not None
        else None
    )
    result = ModelResult(
        content="".join(text),
        tool_calls=tool_calls,
        reasoning_content="".join(reasoning),
        reasoning_details=finish.reasoning_details or None,
        finish_reason="tool_calls" if tool_calls else finish.finish_reason,
        usage=finish.usage,
        log_id="",
        model_name="",
        reasoning_duration_ms=duration,
        started_call_ids={c.id for c in tool_calls},
    )
    return result, first_at, last_at


async def call_model(env: StepEnv, assembly: Assembly, pending_id: str) -> ModelResult:
    """Retries and fallbacks around the stream (spec 04 §4.12.3)."""
    run = env.run
    primary = run.definitions.model(env.prompt.model)
    if primary is None:
        raise StepError(f'Model "{env.prompt.model}" is not defined')
    models = [primary]
    for name in getattr(primary, "fallbacks", ()) or ():
        fallback = run.definitions.model(name)
        if fallback is not None:
            models.append(fallback)
    started = time.monotonic()
    previous_log: str | None = None
    for position, model in enumerate(models):
        if position:
            run.publish_telemetry(
                "fallback_triggered", **{"from": models[position - 1].name, "to": model.name}
            )
        provider = run.providers_for(model)
        request, body = build_request(env, assembly, model, provider)
        attempts = int(getattr(model, "max_attempts", 2) or 1)
        for attempt in range(1, attempts + 1):
            row = await env.begin_attempt(
                LogRow(
                    id=new_id(),
                    kind=None,
                    message_id=run.root_message_id,
                    provider=getattr(provider, "name", str(model.provider)),
                    model=model.name,
                    model_name=model.model,
                    endpoint="chat.completions",
                    prompt_name=env.prompt.name,
                    request_body=body.text,
                    request_delta=body.delta(),
                    system_prompt=assembly.system or None,
                    tools_schema=body.tools_schema,
                    tools_available=len(request.tools),
                    message_history_length=len(request.messages),
                    parent_log_id=env.parent_log_id,
                    retry_of_log_id=previous_log,
                    is_complete=False,
                    created_at=0,
                    standard_agents_router_used=False,
                ),
            )
            previous_log = row.id
            body.stored(row.id)
            env.current_log = row
            run.publish_telemetry("llm_request", model=model.name, attempt=attempt)
            sent = time.monotonic()
            try:
                result, first_at, last_at = await _stream(env, provider, request, pending_id, sent)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, ProviderError)
                    else ProviderError(
                        f"{type(exc).__name__}: {exc}",
                        code="unknown",
                        provider=getattr(provider, "name", ""),
                    )
                )
                await _record_failure(env, row, error, started)
                if not error.retryable or error.code == "timeout":
                    break
                if attempt < attempts:
                    await asyncio.sleep(_backoff(run.options, attempt, error.retry_after))
                continue
            result.log_id = row.id
            result.model_name = model.name
            result.log_row = _record_success(
                env, row, model, result, started, sent, first_at, last_at
            )
            run.publish_telemetry(
                "llm_response",
                tokens=result.usage.total_tokens,
                latency=int((time.monotonic() - started) * 1000),
            )
            return result
    raise StepError(
        f"All retry attempts exhausted for model {primary.name} and {len(models) - 1} fallbacks"
    )


def _backoff(options: Any, attempt: int, retry_after: float | None) -> float:
    delay = max(options.backoff_base_s * 2 ** (attempt - 1), retry_after or 0.0)
    return float(min(delay, options.backoff_cap_s))


async def _record_failure(env: StepEnv, row: LogRow, error: ProviderError, started: float) -> None:
    origin = f"provider:{error.provider or row.provider}"
    text = cut_error(error.message or str(error))
    errors = [
        {
            "message": text,
            "type": error.code,
            "origin": origin,
            "timestamp": int(time.time() * 1000),
        }
    ]
    await env.state.hub.update_log(
        env.state.thread_id,
        row.model_copy(
            update={
                "error": text,
                "error_type": "api_error",
                "error_origin": origin,
                "errors": json_compact(errors),
                "is_complete": True,
                "latency_ms": int((time.monotonic() - started) * 1000),
            }
        ),
    )


def _record_success(
    env: StepEnv,
    row: LogRow,
    model: Any,
    result: ModelResult,
    started: float,
    sent: float,
    first_at: float | None,
    last_at: float | None,
) -> LogRow:
    """The completed LLM row of a successful attempt (spec 04 §4.25). It is written in the
    transaction that finalises the model message (one commit for both)."""
    usage = result.usage
    cost_input, cost_cached, cost_output, cost_total = price(model, usage)
    response = {
        "content": result.content or None,
        "tool_calls": [c.model_dump() for c in result.tool_calls],
        "reasoning_content": result.reasoning_content or None,
        "reasoning_details": result.reasoning_details,
        "finish_reason": result.finish_reason,
        "usage": usage.model_dump(),
    }
    updated = row.model_copy(
        update={
            "response_body": json_compact(response),
            "finish_reason": result.finish_reason,
            "input_tokens": usage.input_tokens,
            "cached_tokens": usage.cached_tokens,
            "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "total_tokens": usage.total_tokens,
            "cost_input": cost_input,
            "cost_cached": cost_cached,
            "cost_output": cost_output,
            "cost_total": cost_total,
            "latency_ms": int((time.monotonic() - started) * 1000),
            "time_to_first_token_ms": int((first_at - sent) * 1000) if first_at else None,
            "generation_ms": int((last_at - first_at) * 1000) if first_at and last_at else None,
            "tools_called": json_compact([c.name for c in result.tool_calls]),
            "reasoning_content": result.reasoning_content or None,
            "is_complete": True,
        }
    )
    env.current_log = updated
    return updated


def format_exception(exc: BaseException) -> str:
    """``<message>\\n\\nStack trace:\\n<traceback>`` cut to 100 lines (spec 04 §4.21)."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return cut_error(f"{exc}\n\nStack trace:\n{trace}")


__all__ = ["ModelResult", "StepError", "build_request", "call_model", "price"]
