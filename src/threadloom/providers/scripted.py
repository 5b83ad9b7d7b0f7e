"""The scripted provider: deterministic model responses for tests and the offline demo
(spec 05 §5.7).

Modes:

- **default** — ``ScriptedProvider()`` answers every request with ``Test response
  received.`` (so the registered name ``scripted`` always answers);
- **sequence** — ``ScriptedProvider([Reply…])`` or ``ScriptedProvider(Script()…)``:
  replies are consumed strictly in order, one per ``stream()`` call (retries and
  fallback attempts that reach the instance consume replies too); an element may be a
  function of the request, sync or async;
- **function** — ``ScriptedProvider(fn)``: ``fn(request)`` returns the reply (or raises
  ``ProviderError``); ``ScriptedProvider.echo()`` is one such function.

Requests are recorded (``requests``, ``last_request``) as deep copies of what was
received — including assistant reasoning, which this provider accepts in every form —
so tests see exactly what the engine sent. The record is bounded: ``requests`` keeps the
most recent ``max_records`` (default 100, ``DEFAULT_MAX_RECORDS``) and drops the oldest, so
a scripted model that serves for hours (an offline demo, a soak) holds a fixed amount of
memory; ``request_count`` counts every request since the last ``reset()``, kept or not.
``max_records=None`` keeps every request (a test that needs all of a long run), and
``record=False`` keeps none and skips the copy (benchmarks, served demos that never read
them).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from threadloom.errors import ProviderError
from threadloom.providers.script import (
    Call,
    CallLike,
    Expect,
    Fail,
    Reply,
    ReplyFunction,
    ReplySource,
    Script,
    split_text,
)
from threadloom.providers.types import (
    AssistantMessage,
    Finish,
    ProviderRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserMessage,
)

DEFAULT_TEXT = "Test response received."
DEFAULT_MAX_RECORDS = 100
"""How many recent requests a ``ScriptedProvider`` keeps by default."""

ScriptedMode = Literal["default", "sequence", "function"]
ScriptInput = Script | Sequence[ReplySource] | Reply | ReplyFunction | None


def estimate_tokens(text: str | None) -> int:
    """The scripted token estimate: ceil(characters / 4)."""
    return math.ceil(len(text) / 4) if text else 0


def synthetic_usage(request: ProviderRequest, reply: Reply) -> Usage:
    """Usage for a scripted response (spec 05 §5.7.4 step 7), with the reply's overrides.

    input = Σ ceil(len(text) / 4) over the request messages, a message's text being its
    content (text parts joined by a space) followed, for assistant messages, by the
    arguments texts of its calls; reasoning = ceil(len(reasoning_content) / 4); output =
    ceil(len(content) / 4) + reasoning; cached 0; total = input + output; cost None.
    Fields the reply sets win; fields it does not set but that derive from set ones
    (output from reasoning, total from input and output) follow the overrides.
    """
    over = reply.usage_overrides()
    input_tokens = over.get("input_tokens")
    if input_tokens is None:
        input_tokens = sum(estimate_tokens(_usage_text(m)) for m in request.messages)
    reasoning = over.get("reasoning_tokens", estimate_tokens(reply.reasoning_content))
    output = over.get("output_tokens", estimate_tokens(reply.content) + reasoning)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output,
        cached_tokens=over.get("cached_tokens", 0),
        reasoning_tokens=reasoning,
        total_tokens=over.get("total_tokens", input_tokens + output),
        cost=over.get("cost"),
    )


def _usage_text(message: Any) -> str:
    text: str = message.text
    if isinstance(message, AssistantMessage):
        text += "".join(call.arguments for call in message.tool_calls)
    return text


def _echo(request: ProviderRequest) -> Reply:
    last = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
    return Reply.text(f"You said: {last.text if last is not None else ''}")


class ScriptedProvider:
    """A provider whose answers are scripted (spec 05 §5.7). See the module docstring."""

    def __init__(
        self,
        script: ScriptInput = None,
        *,
        name: str = "scripted",
        record: bool = True,
        max_records: int | None = DEFAULT_MAX_RECORDS,
    ) -> None:
        if max_records is not None and (isinstance(max_records, bool) or max_records < 1):
            raise ValueError(
                f"max_records must be a positive integer or None, got {max_records!r} "
                "(record=False keeps no request)"
            )
        self.name = name
        self.requests: list[ProviderRequest] = []
        """Deep copies of the most recent requests, oldest first (see ``max_records``)."""
        self.record = record
        """Whether requests are recorded at all (``False``: no copy is made)."""
        self.max_records = max_records
        """How many recent requests ``requests`` keeps; ``None``: all of them."""
        self._served = 0
        self.index = 0
        self.mode: ScriptedMode = "default"
        self._replies: list[ReplySource] = []
        self._function: ReplyFunction | None = None
        self._load(script)

    @classmethod
    def echo(cls, *, name: str = "scripted") -> ScriptedProvider:
        """A provider that answers ``You said: <text of the last user message>``."""
        return cls(_echo, name=name)

    def _load(self, script: ScriptInput) -> None:
        self._function = None
        self._replies = []
        if script is None:
            self.mode = "default"
        elif isinstance(script, Reply):
            self.mode, self._replies = "sequence", [script]
        elif isinstance(script, Script | Sequence):
            replies = list(script)
            for reply in replies:
                if not isinstance(reply, Reply) and not callable(reply):
                    raise TypeError(f"a script element must be a Reply or a function: {reply!r}")
            self.mode, self._replies = "sequence", replies
        elif callable(script):
            self.mode, self._function = "function", script
        else:
            raise TypeError(f"ScriptedProvider takes replies, a Script or a function: {script!r}")

    def __repr__(self) -> str:
        return (
            f"ScriptedProvider(name={self.name!r}, mode={self.mode!r}, index={self.index}, "
            f"remaining={self.remaining})"
        )

    # -- inspection ---------------------------------------------------------------------

    @property
    def last_request(self) -> ProviderRequest | None:
        """The most recent request, or None."""
        return self.requests[-1] if self.requests else None

    @property
    def request_count(self) -> int:
        """Requests received since construction or the last ``reset()``, recorded or not."""
        return self._served

    @property
    def remaining(self) -> int:
        """Unconsumed replies (sequence mode; always 0 in the other modes)."""
        return len(self._replies) - self.index if self.mode == "sequence" else 0

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` listing the replies no request consumed."""
        if self.remaining:
            left = self._replies[self.index :]
            raise AssertionError(
                f"ScriptedProvider: {len(left)} unconsumed "
                f"{'reply' if len(left) == 1 else 'replies'}: {left!r}"
            )

    def reset(self, script: ScriptInput = None) -> None:
        """Clear the request log and the index; replace the script when one is given."""
        self.requests.clear()
        self._served = 0
        self.index = 0
        if script is not None:
            self._load(script)

    # -- the Provider protocol ----------------------------------------------------------

    async def aclose(self) -> None:
        """Nothing to release."""

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Answer one request per spec 05 §5.7.4."""
        if self.record:
            self.requests.append(request.model_copy(deep=True))
            excess = len(self.requests) - (self.max_records or len(self.requests))
            if excess > 0:
                del self.requests[:excess]
        self._served += 1
        number = self._served
        reply = await self._pick(request)
        if reply.expect is not None:
            detail = reply.expect.failure(request)
            if detail is not None:
                raise ProviderError(
                    f"Scripted expectation failed: {detail}",
                    code="invalid_request",
                    retryable=False,
                    provider=self.name,
                )
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        error = reply.error
        if error is not None and reply.fail_after_chunks is None:
            raise error.to_error(self.name)

        if reply.reasoning_content:
            for piece in split_text(reply.reasoning_content, reply.chunk_size):
                yield ReasoningDelta(text=piece)
                await self._chunk_pause(reply)
        for emitted, piece in enumerate(reply.content_chunks()):
            if error is not None and emitted == reply.fail_after_chunks:
                raise error.to_error(self.name)
            yield TextDelta(text=piece)
            await self._chunk_pause(reply)
        if error is not None:  # fail_after_chunks ≥ the number of chunks
            raise error.to_error(self.name)

        calls = reply.tool_calls
        for index, call in enumerate(calls):
            call_id = call.id or "call_" + os.urandom(4).hex()  # 8 random hex digits
            yield ToolCallStart(index=index, id=call_id, name=call.name)
            yield ToolCallDelta(index=index, arguments=call.arguments_text)
            yield ToolCallEnd(index=index, extra_content=call.extra_content)
        yield Finish(
            finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
            usage=synthetic_usage(request, reply),
            reasoning_details=copy.deepcopy(reply.reasoning_details)
            if reply.reasoning_details is not None
            else None,
            response_id=f"scripted-{number}",
        )

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    async def _chunk_pause(reply: Reply) -> None:
        if reply.chunk_delay > 0:
            await asyncio.sleep(reply.chunk_delay)

    async def _pick(self, request: ProviderRequest) -> Reply:
        """The reply for this request; consumes it (sequence mode) before it is checked."""
        source: ReplySource
        if self.mode == "default":
            self.index += 1
            return Reply.text(DEFAULT_TEXT)
        if self.mode == "function":
            assert self._function is not None
            self.index += 1
            source = self._function
        else:
            if self.index >= len(self._replies):
                raise self._exhausted(request)
            source = self._replies[self.index]
            self.index += 1
        if isinstance(source, Reply):
            return source
        result = source(request)
        if type(result) is not Reply and inspect.isawaitable(result):
            result = await result
        if not isinstance(result, Reply):
            raise TypeError(f"a scripted reply function must return a Reply, got {result!r}")
        return result

    def _exhausted(self, request: ProviderRequest) -> ProviderError:
        last = request.messages[-1] if request.messages else None
        role = last.role if last is not None else "none"
        content = last.text[:100] if last is not None else ""
        return ProviderError(
            f"ScriptedProvider: script exhausted after {len(self._replies)} responses. "
            f"Received request with {len(request.messages)} messages. "
            f'Last message role: "{role}", content: "{content}"',
            code="invalid_request",
            retryable=False,
            provider=self.name,
        )


__all__ = [
    "DEFAULT_MAX_RECORDS",
    "DEFAULT_TEXT",
    "Call",
    "CallLike",
    "Expect",
    "Fail",
    "Reply",
    "ReplyFunction",
    "ReplySource",
    "Script",
    "ScriptedProvider",
    "estimate_tokens",
    "synthetic_usage",
]
