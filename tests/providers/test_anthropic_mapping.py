"""Request and stream mapping of the Anthropic adapter (spec 05 §5.9) beyond the
conformance cases: pure request building, and streams through the real SDK against the
local fake server."""

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
    ImagePart,
    ProviderRegistry,
    ProviderRequest,
    ReasoningDelta,
    ReasoningRequest,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
    ToolMessage,
    ToolSpec,
    UserMessage,
    generate,
)
from threadloom.providers.anthropic import (
    AnthropicProvider,
    build_request,
    finish_reason_for,
    thinking_budget,
)

FMT = "anthropic-claude-v1"
TOOLS = [ToolSpec(name="echo", description="Echo it", parameters={"type": "object"})]
PNG = ImagePart(media_type="image/png", data="iVBORw0KGgo=")


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


def signed(text: str = "th", signature: str = "sig") -> dict[str, Any]:
    return {"type": "reasoning.text", "text": text, "signature": signature, "format": FMT}


def tool_turn(details: list[dict[str, Any]] | None = None) -> list[Any]:
    return [
        UserMessage(content="hi"),
        AssistantMessage(
            tool_calls=[ToolCallSpec(id="t1", name="echo", arguments="{}")],
            reasoning_details=details,
        ),
        ToolMessage(tool_call_id="t1", name="echo", content="ok"),
    ]


async def collect(provider: AnthropicProvider, req: ProviderRequest) -> list[Any]:
    return [event async for event in provider.stream(req)]


# -- request mapping (pure) -----------------------------------------------------------


def test_registry_builds_the_adapter_lazily() -> None:
    provider = ProviderRegistry().get("anthropic")
    assert isinstance(provider, AnthropicProvider)
    assert (provider.name, provider.default_max_tokens) == ("anthropic", 8192)


def test_system_messages_leading_joined_later_wrapped() -> None:
    body = build_request(
        request(
            [
                SystemMessage(content="one"),
                SystemMessage(content="two"),
                UserMessage(content="hi"),
                SystemMessage(content="late"),
            ]
        )
    ).body
    assert body["system"] == "one\n\ntwo"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "text", "text": "<system>\nlate\n</system>"},
            ],
        }
    ]
    assert "system" not in build_request(request([UserMessage(content="hi")])).body


def test_user_images_and_tool_result_images() -> None:
    messages = [
        UserMessage(content=[TextPart(text="look"), PNG]),
        AssistantMessage(tool_calls=[ToolCallSpec(id="t1", name="shot", arguments="[1]")]),
        ToolMessage(tool_call_id="t1", name="shot", content="", images=[PNG]),
    ]
    wire = build_request(request(messages)).body["messages"]
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert wire[0]["content"] == [{"type": "text", "text": "look"}, image]
    # Arguments that are not a JSON object are sent as {}.
    assert wire[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": [image], "is_error": False}
    ]


def test_tools_and_default_tool_choice_omitted() -> None:
    body = build_request(request([UserMessage(content="hi")], tools=TOOLS)).body
    assert body["tools"] == [
        {"name": "echo", "description": "Echo it", "input_schema": {"type": "object"}}
    ]
    assert "tool_choice" not in body
    assert "tools" not in build_request(request([UserMessage(content="hi")])).body


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ({"name": "echo"}, None, {"type": "tool", "name": "echo"}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (
            {"name": "echo"},
            False,
            {"type": "tool", "name": "echo", "disable_parallel_tool_use": True},
        ),
        ("none", False, {"type": "none"}),
        ("auto", True, {"type": "auto"}),
    ],
)
def test_tool_choice_mapping(choice: Any, parallel: bool | None, wire: dict[str, Any]) -> None:
    req = request(
        [UserMessage(content="hi")], tools=TOOLS, tool_choice=choice, parallel_tool_calls=parallel
    )
    assert build_request(req).body["tool_choice"] == wire


def test_max_tokens_default_and_thinking_headroom() -> None:
    hi = [UserMessage(content="hi")]
    assert build_request(request(hi)).body["max_tokens"] == 8192
    assert build_request(request(hi), default_max_tokens=100).body["max_tokens"] == 100
    assert build_request(request(hi, max_output_tokens=2000)).body["max_tokens"] == 2000
    high = build_request(request(hi, reasoning=ReasoningRequest(effort="high"))).body
    assert high["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert high["max_tokens"] == 16384 + 4096
    small = build_request(
        request(hi, max_output_tokens=20000, reasoning=ReasoningRequest(effort="medium"))
    ).body
    assert (small["thinking"]["budget_tokens"], small["max_tokens"]) == (4096, 20000)


@pytest.mark.parametrize(
    ("reasoning", "budget"),
    [
        (ReasoningRequest(effort="low"), 1024),
        (ReasoningRequest(effort="medium"), 4096),
        (ReasoningRequest(effort="high"), 16384),
        (ReasoningRequest(effort="low", max_tokens=3000), 3000),
        (ReasoningRequest(max_tokens=100), 1024),
        (ReasoningRequest(effort="high", max_tokens=0), 1024),
        (ReasoningRequest(), 4096),
    ],
)
def test_thinking_budget(reasoning: ReasoningRequest, budget: int) -> None:
    assert thinking_budget(reasoning) == budget


def test_thinking_enabled_when_trailing_tool_call_has_thinking() -> None:
    req = request(
        tool_turn([signed()]), tools=TOOLS, tool_choice="auto", reasoning=ReasoningRequest()
    )
    built = build_request(req)
    assert built.body["thinking"]["type"] == "enabled" and built.metadata == {}
    assert built.body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "th",
        "signature": "sig",
    }


def test_thinking_not_requested_records_nothing_but_replays_earlier_blocks() -> None:
    messages = [*tool_turn([signed()]), AssistantMessage(content="done"), UserMessage(content="q")]
    built = build_request(request(messages, tools=TOOLS, tool_choice="auto"))
    assert "thinking" not in built.body and built.metadata == {}
    # Blocks are still supplied in earlier assistant messages without thinking enabled.
    assert built.body["messages"][1]["content"][0]["type"] == "thinking"


def test_final_assistant_message_loses_thinking_when_not_enabled() -> None:
    redacted = {"type": "reasoning.encrypted", "data": "R", "format": FMT}
    final = AssistantMessage(content="partial", reasoning_details=[signed(), redacted])
    body = build_request(request([UserMessage(content="hi"), final])).body
    assert body["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "partial"}],
    }
    # With thinking enabled the final message keeps its blocks.
    enabled = build_request(
        request([UserMessage(content="hi"), final], reasoning=ReasoningRequest())
    ).body
    assert [b["type"] for b in enabled["messages"][-1]["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
    ]


def test_assistant_with_only_thinking_is_dropped_and_neighbours_merge() -> None:
    messages = [
        UserMessage(content="a"),
        AssistantMessage(content="", reasoning_content="th", reasoning_details=[signed()]),
        UserMessage(content="b"),
    ]
    wire = build_request(request(messages)).body["messages"]
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


def test_consecutive_assistants_merge_and_persisted_record_untouched() -> None:
    first = AssistantMessage(content="one", reasoning_details=[signed("x", "s1")])
    second = AssistantMessage(content="two")
    before = copy.deepcopy([first.model_dump(), second.model_dump()])
    messages = [UserMessage(content="hi"), first, second, UserMessage(content="go")]
    wire = build_request(request(messages)).body["messages"]
    assert wire[1]["content"] == [
        {"type": "thinking", "thinking": "x", "signature": "s1"},
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two"},
    ]
    wire[1]["content"][0]["thinking"] = "mutated"
    assert [first.model_dump(), second.model_dump()] == before


def test_provider_options_go_into_the_body_except_owned_keys() -> None:
    req = request(
        [UserMessage(content="hi")],
        provider_options={"temperature": 0.2, "max_tokens": 5, "model": "x", "top_k": 3},
    )
    built = build_request(req)
    assert built.extra_body == {"temperature": 0.2, "top_k": 3}
    assert (built.body["model"], built.body["max_tokens"]) == ("claude-test", 8192)


# -- over the wire ----------------------------------------------------------------------


async def test_one_instance_serves_concurrent_requests(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(fa.simple_text_stream("first", msg_id="msg_a"))
    fake.stream(fa.simple_text_stream("second", msg_id="msg_b"))
    responses = await asyncio.gather(
        generate(provider, request([UserMessage(content="one")])),
        generate(provider, request([UserMessage(content="two")])),
    )
    assert sorted(r.content or "" for r in responses) == ["first", "second"]
    assert len(fake.requests) == 2
    await provider.aclose()
    await provider.aclose()  # idempotent; a later request would create a new client


async def test_wire_request_headers_and_options(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    await generate(
        provider,
        request([UserMessage(content="hi")], provider_options={"temperature": 0.5}),
    )
    sent = fake.requests[-1]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-test"
    assert sent.body["stream"] is True and sent.body["temperature"] == 0.5
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


async def test_two_thinking_blocks_and_redacted(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(
        [
            fa.message_start(),
            fa.ping(),
            *fa.thinking_block(0, "first", "s0"),
            *fa.redacted_block(1, "REDACTED"),
            *fa.thinking_block(2, "second", None),
            *fa.text_block(3, "answer"),
            fa.message_delta("end_turn", 9),
            fa.message_stop(),
        ]
    )
    events = await collect(provider, request([UserMessage(content="hi")]))
    reasoning = [e.text for e in events if isinstance(e, ReasoningDelta)]
    assert reasoning == ["first", "\n\n", "second"]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "stop"
    assert finish.reasoning_details == [
        {"type": "reasoning.text", "text": "first", "signature": "s0", "format": FMT, "index": 0},
        {"type": "reasoning.encrypted", "data": "REDACTED", "format": FMT, "index": 1},
        {"type": "reasoning.text", "text": "second", "format": FMT, "index": 2},
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["answer"]


async def test_tool_calls_event_sequence_and_empty_input(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream(
        [
            fa.message_start(),
            *fa.tool_use_block(0, "toolu_a", "echo", '{"a":', "2}"),
            *fa.tool_use_block(1, "toolu_b", "noargs"),
            fa.message_delta("tool_use"),
            fa.message_stop(),
        ]
    )
    events = await collect(provider, request([UserMessage(content="hi")], tools=TOOLS))
    assert events[:-1] == [
        ToolCallStart(index=0, id="toolu_a", name="echo"),
        ToolCallDelta(index=0, arguments='{"a":'),
        ToolCallDelta(index=0, arguments="2}"),
        ToolCallEnd(index=0),
        ToolCallStart(index=1, id="toolu_b", name="noargs"),
        ToolCallEnd(index=1, arguments="{}"),
    ]
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("something_new", "stop"),
        (None, "stop"),
    ],
)
def test_stop_reason_mapping(stop_reason: str | None, finish: str) -> None:
    assert finish_reason_for(stop_reason) == finish


async def test_stop_reason_on_the_wire(fake: fa.FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.stream(
        [
            fa.message_start(),
            *fa.text_block(0, "cut"),
            fa.message_delta("max_tokens", 3),
            fa.message_stop(),
        ]
    )
    response = await generate(provider, request([UserMessage(content="hi")]))
    assert (response.finish_reason, response.content, response.usage.output_tokens) == (
        "length",
        "cut",
        3,
    )
    assert response.reasoning_details is None and response.reasoning_content is None


async def test_message_delta_usage_overrides_start_counts(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    delta = fa.message_delta("end_turn", 40)
    delta[1]["usage"].update(
        {"input_tokens": 12, "cache_read_input_tokens": 3, "output_tokens_details": None}
    )
    fake.stream([fa.message_start(input_tokens=10), *fa.text_block(0, "x"), delta])
    fake.queue[-1].events.append(fa.message_stop())
    usage = (await generate(provider, request([UserMessage(content="hi")]))).usage
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (15, 3, 40)
    assert usage.total_tokens == 55


async def test_thinking_tokens_reported_as_reasoning_tokens(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    delta = fa.message_delta("end_turn", 50)
    delta[1]["usage"]["output_tokens_details"] = {"thinking_tokens": 30}
    fake.stream([fa.message_start(), *fa.thinking_block(0, "t", "s"), delta, fa.message_stop()])
    usage = (await generate(provider, request([UserMessage(content="hi")]))).usage
    assert (usage.output_tokens, usage.reasoning_tokens) == (50, 30)
