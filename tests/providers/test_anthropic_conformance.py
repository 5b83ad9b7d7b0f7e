"""Conformance cases C05-029…C05-037 and the Anthropic side of C05-039 (spec 05 §5.10).

Each test runs the real ``anthropic`` SDK (through :class:`AnthropicProvider`) against the
local fake HTTP server in ``fake_anthropic.py`` and inspects the recorded wire body or the
neutral events.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import fake_anthropic as fa
import pytest

from threadloom.providers import (
    AssistantMessage,
    Finish,
    ProviderRequest,
    ReasoningRequest,
    SystemMessage,
    TextDelta,
    ToolCallSpec,
    ToolMessage,
    ToolSpec,
    UserMessage,
    generate,
)
from threadloom.providers.anthropic import AnthropicProvider

ANTHROPIC_FMT = "anthropic-claude-v1"
TOOLS = [ToolSpec(name="echo", description="Echo", parameters={"type": "object"})]


@pytest.fixture
async def fake() -> AsyncIterator[fa.FakeAnthropic]:
    async with fa.FakeAnthropic() as server:
        yield server


@pytest.fixture
async def provider(fake: fa.FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key="sk-test", base_url=fake.base_url)
    yield p
    await p.aclose()


def request(messages: list[Any], **kw: Any) -> ProviderRequest:
    return ProviderRequest(model="claude-test", messages=messages, **kw)


def call(call_id: str = "toolu_1", name: str = "echo", args: str = '{"v":1}') -> ToolCallSpec:
    return ToolCallSpec(id=call_id, name=name, arguments=args)


def signed(text: str = "th", signature: str = "sig", index: int = 0) -> dict[str, Any]:
    return {
        "type": "reasoning.text",
        "text": text,
        "signature": signature,
        "format": ANTHROPIC_FMT,
        "index": index,
    }


async def test_c05_029_thinking_text_and_tool_use_stream(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(
        [
            fa.message_start(),
            *fa.thinking_block(0, "th", "sig"),
            *fa.text_block(1, "o", "k"),
            *fa.tool_use_block(2, "toolu_9", "echo", '{"v"', ":1}"),
            fa.message_delta("tool_use", 30),
            fa.message_stop(),
        ]
    )
    response = await generate(provider, request([UserMessage(content="hi")], tools=TOOLS))
    assert response.reasoning_content == "th"
    assert response.content == "ok"
    assert response.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "th",
            "signature": "sig",
            "format": ANTHROPIC_FMT,
            "index": 0,
        }
    ]
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_9", "echo", '{"v":1}')
    ]
    assert response.finish_reason == "tool_calls"
    assert response.id == "msg_01FAKE"


async def test_c05_030_replay_thinking_redacted_and_tool_use(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    details = [
        signed("let me think\n  carefully", "c2lnbmF0dXJl+/=="),
        {"type": "reasoning.encrypted", "data": "R", "format": ANTHROPIC_FMT, "index": 1},
    ]
    assistant = AssistantMessage(
        content=None,
        tool_calls=[call()],
        reasoning_content="let me think\n  carefully",
        reasoning_details=details,
    )
    persisted = copy.deepcopy(assistant.model_dump())
    messages = [
        UserMessage(content="hi"),
        assistant,
        ToolMessage(tool_call_id="toolu_1", name="echo", content="1"),
    ]
    await generate(
        provider,
        request(
            messages, tools=TOOLS, tool_choice="auto", reasoning=ReasoningRequest(effort="low")
        ),
    )
    body = fake.last_body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "let me think\n  carefully",
                "signature": "c2lnbmF0dXJl+/==",
            },
            {"type": "redacted_thinking", "data": "R"},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"v": 1}},
        ],
    }
    assert assistant.model_dump() == persisted  # the record is never altered


@pytest.mark.parametrize(
    "detail",
    [
        {
            "type": "reasoning.summary",
            "summary": "s",
            "id": "rs_1",
            "format": "openai-responses-v1",
        },
        {"type": "reasoning.encrypted", "data": "E", "id": "rs_1", "format": "openai-responses-v1"},
        {"type": "reasoning.text", "text": "unsigned", "format": ANTHROPIC_FMT},
    ],
    ids=["responses-summary", "responses-encrypted", "unsigned-text"],
)
async def test_c05_031_foreign_or_unsigned_details_send_no_thinking_block(
    fake: fa.FakeAnthropic, provider: AnthropicProvider, detail: dict[str, Any]
) -> None:
    messages = [
        UserMessage(content="hi"),
        AssistantMessage(content="hello", reasoning_content="t", reasoning_details=[detail]),
        UserMessage(content="again"),
    ]
    await generate(provider, request(messages))
    assistant = fake.last_body["messages"][1]
    assert assistant == {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}
    assert "reasoning" not in str(fake.last_body) and "unsigned" not in str(fake.last_body)


@pytest.mark.parametrize("choice", ["required", {"name": "echo"}], ids=["required", "named"])
async def test_c05_032_forced_tool_choice_disables_thinking(
    fake: fa.FakeAnthropic, provider: AnthropicProvider, choice: Any
) -> None:
    req = request(
        [UserMessage(content="hi")],
        tools=TOOLS,
        tool_choice=choice,
        reasoning=ReasoningRequest(effort="high"),
    )
    await generate(provider, req)
    assert "thinking" not in fake.last_body
    assert fake.last_body["max_tokens"] == 8192  # not raised: no thinking budget
    reason = provider.log_metadata(req)["thinkingDisabled"]
    assert isinstance(reason, str) and "tool_choice" in reason


async def test_c05_033_trailing_tool_exchange_without_thinking_block(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    messages = [
        UserMessage(content="hi"),
        AssistantMessage(content="calling", tool_calls=[call()]),
        ToolMessage(tool_call_id="toolu_1", name="echo", content="1"),
    ]
    req = request(messages, tools=TOOLS, tool_choice="auto", reasoning=ReasoningRequest())
    await generate(provider, req)
    assert "thinking" not in fake.last_body
    assert "thinking block" in provider.log_metadata(req)["thinkingDisabled"]


async def test_c05_034_tool_results_merged_then_user_text(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    messages = [
        UserMessage(content="do three things"),
        AssistantMessage(tool_calls=[call("t1"), call("t2"), call("t3")]),
        ToolMessage(tool_call_id="t1", name="echo", content="one"),
        ToolMessage(tool_call_id="t2", name="echo", content="boom", is_error=True),
        ToolMessage(tool_call_id="t3", name="echo", content="three"),
        UserMessage(content="and now?"),
    ]
    await generate(provider, request(messages, tools=TOOLS, tool_choice="auto"))
    wire = fake.last_body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "one"}],
            "is_error": False,
        },
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": [{"type": "text", "text": "boom"}],
            "is_error": True,
        },
        {
            "type": "tool_result",
            "tool_use_id": "t3",
            "content": [{"type": "text", "text": "three"}],
            "is_error": False,
        },
        {"type": "text", "text": "and now?"},
    ]


async def test_c05_035_usage_with_cache(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(
        [
            fa.message_start(input_tokens=10, cache_creation=5, cache_read=100),
            *fa.text_block(0, "ok"),
            fa.message_delta("end_turn", 20),
            fa.message_stop(),
        ]
    )
    response = await generate(provider, request([UserMessage(content="hi")]))
    usage = response.usage
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens, usage.total_tokens) == (
        115,
        100,
        20,
        135,
    )
    assert usage.reasoning_tokens == 0 and usage.cost is None


async def test_c05_036_conversation_start_prepended(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    messages = [
        SystemMessage(content="be brief"),
        AssistantMessage(content="Hello! How can I help?"),
        UserMessage(content="hi"),
    ]
    await generate(provider, request(messages))
    body = fake.last_body
    assert body["system"] == "be brief"
    assert body["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "(conversation start)"}],
    }
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


async def test_c05_037_disable_parallel_tool_use(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    req = request(
        [UserMessage(content="hi")], tools=TOOLS, tool_choice="auto", parallel_tool_calls=False
    )
    await generate(provider, req)
    assert fake.last_body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


async def test_c05_039_cancel_closes_http_stream(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(
        [
            fa.message_start(),
            fa.block_start(0, {"type": "text", "text": ""}),
            fa.block_delta(0, {"type": "text_delta", "text": "partial"}),
        ],
        hold_open=True,
    )
    received: list[Any] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in provider.stream(request([UserMessage(content="hi")])):
            received.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    assert received == [TextDelta(text="partial")]
    assert not fake.client_closed.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # not a ProviderError
    await asyncio.wait_for(fake.client_closed.wait(), 5)
    assert not any(isinstance(e, Finish) for e in received)
    assert task.cancelled()
