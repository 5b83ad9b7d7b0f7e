"""One model request of a step: the request, retries, fallbacks, the LLM log rows and
cost (spec 04 §4.12, §4.25). The stream of one attempt is read by ``stream.py``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import traceback
from collections.abc import Sequence
from typing import Any

from threadloom.define.prices import catalog_cost
from threadloom.engine.env import StepEnv
from threadloom.engine.request.compacted import native_in
from threadloom.engine.request.context import Assembly
from threadloom.engine.request.fragments import calls_json, fragment, json_string
from threadloom.engine.request.presentation import RequestMessage, normalize, provider_message
from threadloom.engine.request.request_body import RequestBody, request_body
from threadloom.engine.request.request_head import SLOT, head_for
from threadloom.engine.step.outcome import ModelResult
from threadloom.engine.step.pending import begin_attempt, release_hold, row_as_stored
from threadloom.engine.step.stream import stream_model
from threadloom.errors import (
    DEFAULT_FALLBACK_ON,
    PROVIDER_ERROR_FALLBACK_CLASS,
    ProviderError,
    ThreadloomError,
)
from threadloom.providers.types import (
    ProviderRequest,
    SystemMessage,
    ToolCallSpec,
    Usage,
    trusted,
)
from threadloom.records import LogRow, copy_with, json_compact, new_id

MAX_ERROR_LINES = 100
JITTER = 1.25
"""A retry's delay is stretched by a random factor in [1, JITTER) (§4.12.3)."""
logger = logging.getLogger("threadloom.engine")


class StepError(ThreadloomError):
    """A step failed (spec 04 §4.21); the run ends with ``step_error``."""


class ModelFailed(StepError):
    """Every attempt on every model of a request failed (spec 04 §4.12.3): ``error`` is the
    last attempt's provider error, ``log_id`` its LLM row, ``summary`` the one line the
    run's status keeps (``Model "fast" (openai): OPENAI_API_KEY is not set``)."""

    def __init__(self, message: str, *, error: ProviderError, log_id: str, summary: str) -> None:
        super().__init__(message)
        self.error = error
        self.log_id = log_id
        self.summary = summary


def cut_error(text: str) -> str:
    """Error texts longer than 100 lines keep 100 lines and a note (spec 04 §4.25)."""
    lines = text.splitlines()
    if len(lines) <= MAX_ERROR_LINES:
        return text
    extra = len(lines) - MAX_ERROR_LINES
    return "\n".join(lines[:MAX_ERROR_LINES]) + f"\n\n[Truncated: {extra} additional lines]"


def price(
    model: Any, usage: Usage
) -> tuple[float | None, float | None, float | None, float | None]:
    """``(cost_input, cost_cached, cost_output, cost_total)`` per spec 04 §4.25."""
    inp, out = getattr(model, "input_price", None), getattr(model, "output_price", None)
    if inp is None or out is None:
        if usage.cost is not None:
            return None, None, None, round(usage.cost, 12)
        provider = getattr(model, "provider", None)  # a name: the catalog may know it
        found = (  # spec 15 §15.7: a model without prices of its own
            catalog_cost(
                provider,
                getattr(model, "model", ""),
                usage.input_tokens,
                usage.cached_tokens,
                usage.output_tokens,
            )
            if type(provider) is str
            else None
        )
        if found is None:
            return None, None, None, None  # unknown: never 0
        cached = round(found.cached, 12) if found.cached is not None else None
        return round(found.input, 12), cached, round(found.output, 12), round(found.total, 12)
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


# -- log rows ------------------------------------------------------------------------

_NO_NAME = object()
_TEXT_COLUMNS = ("provider", "model", "model_name", "prompt_name", "system_prompt", "message_id")


def _new_row(values: dict[str, Any]) -> LogRow:
    """``LogRow(**values)``: built without validation when the columns that come from
    definitions and providers (names, the system text) are strings, as they are unless a
    duck-typed provider or model says otherwise; then validated as before."""
    for key in _TEXT_COLUMNS:
        value = values[key]
        if type(value) is not str and value is not None:
            return LogRow(**values)
    return trusted(LogRow, values)


# -- request building ----------------------------------------------------------------


def build_request(
    env: StepEnv, assembly: Assembly, model: Any, provider: Any = None
) -> tuple[ProviderRequest, RequestBody]:
    """The neutral request for ``model`` and the ``request_body`` of its log rows."""
    prompt = env.prompt
    prepared = assembly.prepared  # the incremental path: normalised, no images
    head = head_for(env.run.manager.request_heads, prompt, model, env.tools)
    provider_messages: list[Any] = []
    fragments: Sequence[str] = []
    messages: list[RequestMessage] = []
    if prepared is not None:
        provider_messages, fragments = prepared.providers, prepared.fragment_view
    else:
        messages = normalize(assembly.messages, bool(getattr(model, "supports_images", True)))
    own: list[str] = []
    for message in messages:
        item = assembly.presented.get(id(message))
        if item is not None and item.request is message:
            if item.provider is None:  # remembered with the stored record (history memo)
                item.provider = provider_message(message)
                item.fragment = fragment(item.provider)
            provider_messages.append(item.provider)
            own.append(item.fragment or fragment(item.provider))
        else:
            converted = provider_message(message)
            provider_messages.append(converted)
            own.append(fragment(converted))
    if prepared is None:
        fragments = own
    request = head.request(
        model.model, provider_messages, {"thread_id": env.state.thread_id, "prompt": prompt.name}
    )
    native = native_in(assembly.compaction, messages, provider, model.model)
    if native is not None:  # spec 23 §23.4 rule 5: the provider's own item in its place
        request = request.model_copy(update={"native_compaction": native})
    describe = getattr(provider, "log_metadata", None)
    # what the adapter decided, e.g. Anthropic's thinkingDisabled
    extra = (describe(request) or None) if callable(describe) else None
    text = head.body_head(prompt.name, assembly.system, extra)
    system = bool(provider_messages) and isinstance(provider_messages[0], SystemMessage)
    body = request_body(text, SLOT, fragments, prepared, system)
    body.tools_schema = head.tools_schema
    return request, body


# -- streaming -----------------------------------------------------------------------


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
    tracing = run.manager.tracing
    previous_log: str | None = None
    failure: tuple[Any, str, ProviderError] | None = None  # the last (model, provider, error)
    left: tuple[str, ...] = ()  # "<model>: <code>" of each model left for a fallback
    for position, model in enumerate(models):
        if position:
            if failure is None or not _falls_back(primary, failure[2]):
                break  # the error is not one a fallback is used on (§4.12.3)
            reason = failure[2].code
            left = (*left, f"{models[position - 1].name}: {reason}")
            run.publish_telemetry(
                "fallback_triggered",
                **{
                    "from": models[position - 1].name,
                    "to": model.name,
                    "reason": reason,
                    "log_id": previous_log,
                },
            )
        provider = run.providers_for(model)
        provider_name = getattr(provider, "name", _NO_NAME)
        if provider_name is _NO_NAME:
            provider_name = str(model.provider)
        request, body = build_request(env, assembly, model, provider)
        attempts = int(getattr(model, "max_attempts", 2) or 1)
        for attempt in range(1, attempts + 1):
            delta = body.delta()  # the body given lazily: joined only if stored as text
            row = await begin_attempt(
                env,
                _new_row(
                    {
                        "id": new_id(),
                        "kind": None,
                        "message_id": run.root_message_id,
                        "provider": provider_name,
                        "model": model.name,
                        "model_name": model.model,
                        "endpoint": "chat.completions",
                        "prompt_name": env.prompt.name,
                        "request_body": None if delta is not None else body.text,
                        "request_delta": delta,
                        "system_prompt": assembly.system or None,
                        "tools_schema": body.tools_schema,
                        "tools_available": len(request.tools),
                        "message_history_length": len(request.messages),
                        "parent_log_id": env.parent_log_id,
                        "retry_of_log_id": previous_log,
                        "is_complete": False,
                        "created_at": 0,
                        "standard_agents_router_used": False,
                    }
                ),
            )
            previous_log = row.id
            body.stored(row.id)
            env.current_log = row
            if run.listened:
                run.publish_telemetry("llm_request", model=model.name, attempt=attempt)
            span = token = None
            if tracing is not None:
                span, token = tracing.start_chat(
                    env, str(provider_name), model, request, attempt, row.id
                )
            sent = time.monotonic()
            try:
                result, first_at, last_at = await stream_model(env, provider, request, pending_id)
            except asyncio.CancelledError:
                if tracing is not None:
                    tracing.cancel(span, token)
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
                if tracing is not None:
                    tracing.fail_chat(span, token, exc, error.code)
                run.manager.metrics.model_failed(model.name, str(provider_name), error.code)
                await release_hold(env)  # the failure is recorded on the stored row
                row = row_as_stored(env, row)
                switch = None  # the row of the attempt that leaves for a fallback says so
                if position + 1 < len(models) and (
                    attempt >= attempts or not error.retryable or error.code == "timeout"
                ):
                    switch = models[position + 1].name if _falls_back(primary, error) else None
                await _record_failure(env, row, error, started, switch)
                if run.budget is not None:  # a request made, of no tokens (spec 15 §15.5)
                    run.budget.spent(row)
                failure = (model, str(provider_name), error)
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug(
                        "thread %s: model %s (%s) attempt %d failed: %s; the request: %s",
                        run.thread_id,
                        model.name,
                        provider_name,
                        attempt,
                        error.message,
                        body.text,
                    )
                if not error.retryable or error.code == "timeout":
                    break
                if attempt < attempts:
                    await asyncio.sleep(_backoff(run.options, attempt, error.retry_after))
                continue
            row = row_as_stored(env, row)
            if time.monotonic() - sent < run.options.pending_hold_s:
                run.manager.slow_models.discard(model.name)
            else:
                run.manager.slow_models.add(model.name)
            result.log_id = row.id
            result.model_name = model.name
            result.log_row = _record_success(
                env, row, model, result, started, sent, first_at, last_at
            )
            if run.budget is not None:
                run.budget.spent(result.log_row)
            run.manager.metrics.model_ok(
                model.name, str(provider_name), time.monotonic() - sent, result.log_row
            )
            if tracing is not None:
                tracing.end_chat(env, span, token, result, request.model)
            if run.listened:
                run.publish_telemetry(
                    "llm_response",
                    tokens=result.usage.total_tokens,
                    latency=int((time.monotonic() - started) * 1000),
                )
            return result
    text = f"All retry attempts exhausted for model {primary.name} and {len(left)} fallbacks"
    if failure is None or previous_log is None:  # no attempt was made
        raise StepError(text)
    model, provider_name, error = failure
    cause = error.message or str(error)
    summary = f'Model "{model.name}" ({provider_name}): {cause}'
    if model is not primary:
        tried = ", ".join(left)
        summary = f'Model "{primary.name}" and its fallbacks failed ({tried}); the last, {summary}'
    raise ModelFailed(f"{text}: {cause}", error=error, log_id=previous_log, summary=summary)


def _backoff(options: Any, attempt: int, retry_after: float | None) -> float:
    """Seconds before attempt ``attempt + 1`` (§4.12.3): the exponential delay or the
    provider's ``retry_after``, capped, then stretched by up to a quarter at random, so
    that threads refused together (a 429 for a whole deployment) do not retry together.
    Never shorter than the capped delay, so never sooner than the provider asked."""
    delay = min(
        max(options.backoff_base_s * 2 ** (attempt - 1), retry_after or 0.0), options.backoff_cap_s
    )
    return float(delay * random.uniform(1.0, JITTER))


def _falls_back(primary: Any, error: ProviderError) -> bool:
    """Whether ``error`` is of a class the primary's fallbacks are used on (§4.12.3)."""
    kind = PROVIDER_ERROR_FALLBACK_CLASS.get(error.code)
    return kind is not None and kind in getattr(primary, "fallback_on", DEFAULT_FALLBACK_ON)


async def _record_failure(
    env: StepEnv, row: LogRow, error: ProviderError, started: float, switch: str | None = None
) -> None:
    """The failed attempt's row; ``switch`` names the fallback the request goes on to."""
    origin = f"provider:{error.provider or row.provider}"
    text = cut_error(error.message or str(error))
    entry: dict[str, Any] = {
        "message": text,
        "type": error.code,
        "origin": origin,
        "timestamp": int(time.time() * 1000),
    }
    if switch is not None:
        entry["fallback"] = {"from": row.model, "to": switch, "reason": error.code}
    errors = [entry]
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
        fence=env.state.fence,
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
    calls = result.tool_calls
    updated = copy_with(
        row,
        {
            "response_body": _response_body(result),
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
            "tools_called": _names(calls),
            "reasoning_content": result.reasoning_content or None,
            "is_complete": True,
        },
    )
    env.current_log = updated
    return updated


def _response_body(result: ModelResult) -> str:
    """The LLM row's ``response_body``: the JSON of the response as received."""
    usage = result.usage
    counts = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        usage.reasoning_tokens,
        usage.total_tokens,
    )
    content, reasoning = result.content or None, result.reasoning_content or None
    calls = calls_json(result.tool_calls)
    if (
        calls is None
        or result.reasoning_details is not None
        or usage.cost is not None
        or type(usage) is not Usage
        or any(type(count) is not int for count in counts)
        or type(result.finish_reason) is not str
        or (content is not None and type(content) is not str)
        or (reasoning is not None and type(reasoning) is not str)
    ):
        return _generic_response_body(result)
    # json_compact of _generic_response_body's dict, written directly (test_fragments.py)
    return (
        f'{{"content":{json_string(content) if content is not None else "null"},'
        f'"tool_calls":{calls},'
        f'"reasoning_content":{json_string(reasoning) if reasoning is not None else "null"},'
        f'"reasoning_details":null,"finish_reason":{json_string(result.finish_reason)},'
        f'"usage":{{"input_tokens":{counts[0]},"output_tokens":{counts[1]},'
        f'"cached_tokens":{counts[2]},"reasoning_tokens":{counts[3]},'
        f'"total_tokens":{counts[4]},"cost":null}}}}'
    )


def _generic_response_body(result: ModelResult) -> str:
    response = {
        "content": result.content or None,
        "tool_calls": [c.model_dump() for c in result.tool_calls],
        "reasoning_content": result.reasoning_content or None,
        "reasoning_details": result.reasoning_details,
        "finish_reason": result.finish_reason,
        "usage": result.usage.model_dump(),
    }
    return json_compact(response)


def _names(calls: list[ToolCallSpec]) -> str:
    """``tools_called``: the JSON array of the calls' names."""
    names = [c.name for c in calls]
    if all(type(name) is str for name in names):
        return f"[{','.join(map(json_string, names))}]"
    return json_compact(names)


def format_exception(exc: BaseException) -> str:
    """``<message>\\n\\nStack trace:\\n<traceback>`` cut to 100 lines (spec 04 §4.21)."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return cut_error(f"{exc}\n\nStack trace:\n{trace}")


__all__ = ["ModelFailed", "StepError", "build_request", "call_model", "price"]
