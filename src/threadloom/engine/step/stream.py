"""One attempt's stream (spec 04 §4.12.1, §4.12.2): text and reasoning deltas published as
ephemeral chunk events for the pending message, tool calls announced as they start, the
first-chunk and stall timeouts on one timer; the stored content is written once, at
finalisation (``step.finalise``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
import time
from typing import Any

from threadloom.engine.env import StepEnv
from threadloom.engine.step.outcome import ModelResult
from threadloom.engine.step.pending import publish_chunk
from threadloom.engine.step.tools import announce_call, progress_argument
from threadloom.errors import ProviderError
from threadloom.providers.types import (
    Finish,
    ProviderRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
)
from threadloom.records import new_call_id

GENERATION_EVERY = 80  # characters between `generation` telemetry records (spec 04 §4.12.2)


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

    def arm(self, limit: float, sooner: float | None = None) -> None:
        """The next event is due within ``limit`` seconds from now. ``sooner``: a shorter
        limit the next events will have; a new timer then fires no later than that, so
        moving the deadline closer later needs no second timer (it re-arms if early)."""
        now = self.loop.time()
        deadline = self.deadline = now + limit
        handle = self.handle
        if handle is None or deadline < handle.when():
            if handle is not None:
                handle.cancel()
            when = now + sooner if sooner is not None and sooner < limit else deadline
            self.handle = self.loop.call_at(when, self._check)

    def extend(self, limit: float) -> None:
        """``arm(limit)`` once the first event is in: the deadline only moves later from
        then on (the first arm's timer fires no later than the stall limit), so the timer
        stays and only the deadline moves."""
        if self.handle is None:
            self.arm(limit)
        else:
            self.deadline = self.loop.time() + limit

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


async def stream_model(
    env: StepEnv, provider: Any, request: ProviderRequest, pending_id: str
) -> tuple[ModelResult, float | None, float | None]:
    run, options = env.run, env.run.options
    listened = env.state.hub.bus.listened  # the table itself: chunks are built while true
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
                if first_at is None:
                    limit = options.first_chunk_timeout_s
                    watchdog.arm(limit, options.stall_timeout_s)
                else:
                    limit = options.stall_timeout_s
                    watchdog.extend(limit)
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
                    if listened:
                        publish_chunk(env, "message_chunk", pending_id, event.text, offset)
                    produced = len(run.partial[pending_id])
                    if run.listened and produced // GENERATION_EVERY > offset // GENERATION_EVERY:
                        run.publish_telemetry("generation", outputTokens=math.ceil(produced / 4))
                elif isinstance(event, ReasoningDelta):
                    reasoning_started = reasoning_started or now
                    offset = sum(len(r) for r in reasoning)
                    reasoning.append(event.text)
                    run.partial_reasoning[pending_id] += event.text
                    if listened:
                        publish_chunk(env, "reasoning_chunk", pending_id, event.text, offset)
                elif isinstance(event, ToolCallStart):
                    if reasoning_started is not None and reasoning_ended is None:
                        reasoning_ended = now
                    call_id = event.id or new_call_id()
                    watch = progress_argument(env, event.name)
                    calls[event.index] = {
                        "id": call_id,
                        "name": event.name,
                        "parts": [],
                        "full": None,
                        "extra": None,
                        "watch": watch,
                    }
                    if watch is None:
                        announce_call(env, call_id, event.name, "", None)
                elif isinstance(event, ToolCallDelta):
                    entry = calls.get(event.index)
                    if entry is None:  # a delta without a start: the call gets an id here
                        entry = calls[event.index] = {
                            "id": new_call_id(),
                            "name": "",
                            "parts": [],
                            "full": None,
                            "extra": None,
                        }
                    entry["parts"].append(event.arguments)
                    if entry.get("watch") and entry["id"] not in env.announced:
                        value = _streamed_string("".join(entry["parts"]), entry["watch"])
                        if value is not None:
                            announce_call(
                                env, entry["id"], entry["name"], "".join(entry["parts"]), value
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
        announce_call(env, entry["id"], entry["name"], arguments, progress)
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
        response_id=finish.response_id,
        response_model=finish.response_model,
    )
    return result, first_at, last_at


__all__ = ["GENERATION_EVERY", "stream_model"]
