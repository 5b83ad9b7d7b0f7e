"""Conformance cases C05-001 … C05-015: the scripted provider (spec 05 §5.7)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    Finish,
    ProviderRequest,
    ReasoningDelta,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
    ToolMessage,
    UserMessage,
    generate,
)
from threadloom.providers.scripted import Expect, Fail, Reply, ScriptedProvider


def request(*messages: Any, **kw: Any) -> ProviderRequest:
    return ProviderRequest(model="m", messages=list(messages), **kw)


async def collect(provider: ScriptedProvider, req: ProviderRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(req)]


HELLO = request(UserMessage(content="hello"))


async def test_c05_001_sequence_consumed_in_order() -> None:
    provider = ScriptedProvider([Reply.text("a"), Reply.text("b")])
    first = await generate(provider, HELLO)
    second = await generate(provider, HELLO)
    assert (first.content, second.content) == ("a", "b")
    assert provider.remaining == 0
    provider.assert_complete()


async def test_c05_002_exhausted_script_fails_the_same_way_every_time() -> None:
    provider = ScriptedProvider([Reply.text("a"), Reply.text("b")])
    await generate(provider, HELLO)
    await generate(provider, HELLO)
    errors = []
    for _ in range(2):
        with pytest.raises(ProviderError) as info:
            await generate(provider, HELLO)
        errors.append(info.value)
    third, fourth = errors
    assert third.code == "invalid_request"
    assert third.retryable is False
    assert third.message.startswith("ScriptedProvider: script exhausted after 2 responses.")
    assert third.message == (
        "ScriptedProvider: script exhausted after 2 responses. Received request with 1 "
        'messages. Last message role: "user", content: "hello"'
    )
    assert fourth.message == third.message and fourth.code == third.code
    assert provider.index == 2


async def test_c05_003_default_mode_answers_every_request() -> None:
    provider = ScriptedProvider()
    for _ in range(3):
        response = await generate(provider, HELLO)
        assert response.content == "Test response received."
    assert provider.remaining == 0
    provider.assert_complete()


async def test_c05_004_echo_repeats_the_last_user_text() -> None:
    provider = ScriptedProvider.echo()
    req = request(
        SystemMessage(content="sys"),
        UserMessage(content="first"),
        AssistantMessage(content="reply"),
        UserMessage(content="hey"),
    )
    assert (await generate(provider, req)).content == "You said: hey"


async def test_c05_005_function_mode_sees_the_request() -> None:
    provider = ScriptedProvider(lambda req: Reply.text(str(len(req.messages))))
    req = request(SystemMessage(content="s"), UserMessage(content="u"), UserMessage(content="v"))
    assert (await generate(provider, req)).content == "3"
    assert (await generate(provider, HELLO)).content == "1"


async def test_c05_006_chunked_text() -> None:
    provider = ScriptedProvider([Reply.text("abcde", chunk_size=2)])
    events = await collect(provider, HELLO)
    assert events[:3] == [TextDelta(text="ab"), TextDelta(text="cd"), TextDelta(text="e")]
    assert isinstance(events[3], Finish) and len(events) == 4


async def test_c05_007_reasoning_streams_before_content() -> None:
    provider = ScriptedProvider([Reply.reasoning("ok", "think")])
    events = await collect(provider, HELLO)
    assert events[0] == ReasoningDelta(text="think")
    assert events[1] == TextDelta(text="ok")
    response = await generate(ScriptedProvider([Reply.reasoning("ok", "think")]), HELLO)
    assert (response.reasoning_content, response.content) == ("think", "ok")


async def test_c05_008_tool_call_events() -> None:
    provider = ScriptedProvider([Reply.tool_calls(("echo", {"v": 1}))])
    start, delta, end, finish = await collect(provider, HELLO)
    assert isinstance(start, ToolCallStart) and start.name == "echo" and start.index == 0
    assert re.fullmatch(r"call_[0-9a-f]{8}", start.id)
    assert delta == ToolCallDelta(index=0, arguments='{"v":1}')
    assert isinstance(end, ToolCallEnd) and end.index == 0
    assert isinstance(finish, Finish) and finish.finish_reason == "tool_calls"


async def test_c05_009_error_reply_is_a_retryable_provider_error() -> None:
    provider = ScriptedProvider([Reply.error("busy", code="rate_limit", retry_after=2)])
    with pytest.raises(ProviderError) as info:
        await collect(provider, HELLO)
    error = info.value
    assert (error.message, error.code, error.retryable) == ("busy", "rate_limit", True)
    assert error.retry_after == 2.0 and isinstance(error.retry_after, float)
    assert error.provider == "scripted"


async def test_c05_010_fail_after_chunks_emits_partial_output_first() -> None:
    reply = Reply(content="abcdef", chunk_size=2, error=Fail("x"), fail_after_chunks=1)
    provider = ScriptedProvider([reply])
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(HELLO):
            seen.append(event)
    assert seen == [TextDelta(text="ab")]
    assert info.value.message == "x" and info.value.code == "server_error"


async def test_c05_011_message_count_expectation() -> None:
    provider = ScriptedProvider([Reply.text("a", expect=Expect(message_count=3))])
    req = request(SystemMessage(content="s"), UserMessage(content="u"))
    with pytest.raises(ProviderError) as info:
        await collect(provider, req)
    assert str(info.value) == "Scripted expectation failed: Expected 3 messages, got 2"
    assert info.value.code == "invalid_request" and info.value.retryable is False
    assert provider.remaining == 0  # the reply is consumed even though it failed


async def test_c05_012_tool_result_expectation_respects_the_tool_name() -> None:
    expect = Expect(contains_tool_result=("echo", "ok"))
    call = AssistantMessage(tool_calls=[ToolCallSpec(id="c1", name="other", arguments="{}")])
    other = ToolMessage(tool_call_id="c1", name="other", content="all ok")
    provider = ScriptedProvider([Reply.text("a", expect=expect)])
    with pytest.raises(ProviderError) as info:
        await collect(provider, request(UserMessage(content="u"), call, other))
    assert str(info.value) == (
        'Scripted expectation failed: Expected tool result for "echo" containing "ok"'
    )
    echo = ToolMessage(tool_call_id="c1", name="echo", content="all ok")
    provider = ScriptedProvider([Reply.text("a", expect=expect)])
    assert (await generate(provider, request(UserMessage(content="u"), call, echo))).content == "a"


async def test_c05_013_synthetic_usage() -> None:
    provider = ScriptedProvider([Reply.text("abcde")])
    req = request(SystemMessage(content="abcd"), UserMessage(content="abcdefgh"))
    usage = (await generate(provider, req)).usage
    assert usage.input_tokens == 3
    assert usage.output_tokens == 2
    assert usage.total_tokens == 5
    assert usage.cached_tokens == 0 and usage.reasoning_tokens == 0 and usage.cost is None


async def test_c05_014_usage_overrides() -> None:
    provider = ScriptedProvider([Reply.text("x", usage={"input_tokens": 100, "cost": 0.01})])
    usage = (await generate(provider, HELLO)).usage
    assert usage.input_tokens == 100 and usage.cost == 0.01
    assert usage.output_tokens == 1 and usage.cached_tokens == 0 and usage.reasoning_tokens == 0
    assert usage.total_tokens == 101  # derived from the overridden input


async def test_c05_015_request_log_keeps_reasoning_details_unchanged() -> None:
    details = [
        {"type": "reasoning.text", "text": "t", "signature": "s", "format": "anthropic-claude-v1"},
        {"type": "reasoning.encrypted", "data": "E", "id": "rs_1", "format": "openai-responses-v1"},
        {"type": "vendor.custom", "blob": [1, 2, {"x": None}]},
    ]
    assistant = AssistantMessage(content="a", reasoning_content="why", reasoning_details=details)
    provider = ScriptedProvider()
    await generate(provider, request(UserMessage(content="u"), assistant, UserMessage(content="v")))
    logged = provider.last_request
    assert logged is not None
    sent = logged.messages[1]
    assert isinstance(sent, AssistantMessage)
    assert sent.reasoning_details == details
    assert sent.reasoning_content == "why"
    assert json.dumps(sent.reasoning_details) == json.dumps(details)  # order and keys kept
