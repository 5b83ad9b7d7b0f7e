"""OpenAIResponsesProvider against a fake Responses API server (spec 05 §5.8.2, §5.8.3).

Conformance cases C05-026 … C05-028, plus the request and stream mapping tables.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_openai import FakeOpenAIServer, ResponsesEvents, SSEResponse

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    Finish,
    ImagePart,
    ProviderRequest,
    ReasoningDelta,
    ReasoningRequest,
    StreamEvent,
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
from threadloom.providers.openai import OpenAIResponsesProvider

MODEL = "gpt-fake"
FORMAT = "openai-responses-v1"


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def responses(server: FakeOpenAIServer, **options: Any) -> OpenAIResponsesProvider:
    provider = OpenAIResponsesProvider(api_key="sk-test", base_url=server.base_url, **options)
    return server.adopt(provider)


def request(*messages: Any, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL, messages=list(messages) or [UserMessage(content="hi")], **fields
    )


def ok_stream() -> SSEResponse:
    return ResponsesEvents().created().message("ok").completed().stream()


async def send(
    provider: OpenAIResponsesProvider, server: FakeOpenAIServer, req: ProviderRequest
) -> Any:
    server.enqueue(ok_stream())
    await generate(provider, req)
    return server.last_body


async def collect(provider: OpenAIResponsesProvider, req: ProviderRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(req)]


C05_026_DETAILS = [
    {"type": "reasoning.summary", "summary": "s", "format": FORMAT, "id": "rs_1", "index": 0},
    {"type": "reasoning.encrypted", "data": "E", "format": FORMAT, "id": "rs_1", "index": 1},
]


# --------------------------------------------------------------------------------------
# Conformance cases


async def test_c05_026_reasoning_item_to_details(server: FakeOpenAIServer) -> None:
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 12},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 20},
        "total_tokens": 70,
    }
    stream = ResponsesEvents().created().reasoning("rs_1", ["s"], "E").message("ok")
    server.enqueue(stream.completed(usage).stream())
    provider = responses(server)
    response = await generate(provider, request(reasoning=ReasoningRequest(effort="high")))
    assert response.reasoning_content == "s"
    assert response.content == "ok"
    assert response.reasoning_details == C05_026_DETAILS
    assert response.finish_reason == "stop" and response.id == "resp_fake1"
    u = response.usage
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (
        40,
        12,
        30,
        20,
    )
    assert (u.total_tokens, u.cost) == (70, None)
    body = server.last_body
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False and body["stream"] is True
    assert server.requests[-1].path == "/v1/responses"


async def test_c05_027_replay_reasoning_items(server: FakeOpenAIServer) -> None:
    provider = responses(server)
    server.enqueue(
        ResponsesEvents().created().reasoning("rs_1", ["s"], "E").message("ok").completed().stream()
    )
    produced = await generate(provider, request(reasoning=ReasoningRequest(effort="low")))
    message = AssistantMessage(
        content=produced.content,
        reasoning_content=produced.reasoning_content,
        reasoning_details=produced.reasoning_details,
    )
    before = message.model_dump()
    body = await send(
        provider, server, request(UserMessage(content="q"), message, UserMessage(content="more"))
    )
    items = body["input"]
    assert items[1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s"}],
        "encrypted_content": "E",
    }
    assert items[2] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok"}],
    }
    assert len(items) == 4
    assert message.model_dump() == before  # the persisted record is not altered


async def test_c05_028_foreign_details_not_sent(server: FakeOpenAIServer) -> None:
    details = [
        {
            "type": "reasoning.text",
            "text": "t",
            "signature": "sig",
            "format": "anthropic-claude-v1",
        },
        {"type": "reasoning.encrypted", "data": "R", "format": "anthropic-claude-v1", "id": "x"},
    ]
    message = AssistantMessage(content="ok", reasoning_content="t", reasoning_details=details)
    body = await send(responses(server), server, request(message))
    assert [item["type"] for item in body["input"]] == ["message"]
    assert "reasoning" not in str(body["input"])


# --------------------------------------------------------------------------------------
# Replay details (§5.8.3)


async def test_replay_groups_by_id_before_calls(server: FakeOpenAIServer) -> None:
    details = [
        {"type": "reasoning.summary", "summary": "a", "format": FORMAT, "id": "rs_1"},
        {"type": "reasoning.summary", "summary": "b", "format": FORMAT, "id": "rs_2"},
        {"type": "reasoning.encrypted", "data": "E2", "format": FORMAT, "id": "rs_2"},
        {"type": "reasoning.summary", "summary": "a2", "format": FORMAT, "id": "rs_1"},
        {"type": "reasoning.encrypted", "data": "E1", "format": FORMAT, "id": "rs_1"},
        {"type": "reasoning.encrypted", "data": "no id", "format": FORMAT},
    ]
    message = AssistantMessage(
        tool_calls=[
            ToolCallSpec(
                id="call_1",
                name="f",
                arguments='{"x":1}',
                extra_content={"responses_item_id": "fc_1"},
            ),
            ToolCallSpec(id="call_2", name="g"),
        ],
        reasoning_details=details,
    )
    answers = [ToolMessage(tool_call_id=i, name="f", content="r") for i in ("call_1", "call_2")]
    body = await send(responses(server), server, request(message, *answers))
    assert body["input"][:-2] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "a"},
                {"type": "summary_text", "text": "a2"},
            ],
            "encrypted_content": "E1",
        },
        {
            "type": "reasoning",
            "id": "rs_2",
            "summary": [{"type": "summary_text", "text": "b"}],
            "encrypted_content": "E2",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"x":1}',
        },
        {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{}"},
    ]


async def test_reasoning_not_replayed_without_its_item_or_encrypted_data(
    server: FakeOpenAIServer,
) -> None:
    summary_only = [{"type": "reasoning.summary", "summary": "s", "format": FORMAT, "id": "rs_9"}]
    # No encrypted content and store=False: the id refers to nothing at OpenAI.
    body = await send(
        responses(server),
        server,
        request(AssistantMessage(content="x", reasoning_details=summary_only)),
    )
    assert [item["type"] for item in body["input"]] == ["message"]
    # With store=True the id alone is a valid reference.
    body = await send(
        responses(server, store=True),
        server,
        request(AssistantMessage(content="x", reasoning_details=summary_only)),
    )
    assert [item["type"] for item in body["input"]] == ["reasoning", "message"]
    assert body["store"] is True
    # Reasoning of a message with no output item of its own would stand alone: omitted.
    empty = AssistantMessage(content="", reasoning_details=copy.deepcopy(C05_026_DETAILS))
    body = await send(responses(server), server, request(UserMessage(content="q"), empty))
    assert [item["type"] for item in body["input"]] == ["message"]


# --------------------------------------------------------------------------------------
# Request mapping (§5.8.2 table)


async def test_request_mapping_items(server: FakeOpenAIServer) -> None:
    shot = ImagePart(media_type="image/png", data="AA")
    messages = [
        SystemMessage(content="be brief"),
        UserMessage(
            content=[TextPart(text="see"), ImagePart(media_type="image/jpeg", data="/9j/")]
        ),
        AssistantMessage(content="calling", tool_calls=[ToolCallSpec(id="c1", name="shot")]),
        ToolMessage(tool_call_id="c1", name="shot", content="done", images=[shot]),
        UserMessage(content="thanks"),
    ]
    body = await send(responses(server), server, request(*messages, max_output_tokens=64))
    assert body["input"] == [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "be brief"}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {
                    "type": "input_image",
                    "image_url": "data:image/jpeg;base64,/9j/",
                    "detail": "auto",
                },
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "calling"}],
        },
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Images from tool results:"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"},
            ],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]},
    ]
    assert body["max_output_tokens"] == 64
    assert not {"tools", "tool_choice", "parallel_tool_calls", "reasoning", "include"} & set(body)


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"name": "lookup"}, {"type": "function", "name": "lookup"}),
    ],
)
async def test_tools_and_tool_choice(server: FakeOpenAIServer, choice: Any, wire: Any) -> None:
    tools = [ToolSpec(name="lookup", description="Find", parameters={"type": "object"})]
    body = await send(
        responses(server),
        server,
        request(tools=tools, tool_choice=choice, parallel_tool_calls=False),
    )
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["tool_choice"] == wire and body["parallel_tool_calls"] is False
    body = await send(responses(server), server, request(tools=tools, tool_choice="auto"))
    assert "parallel_tool_calls" not in body


async def test_reasoning_default_effort_and_options(server: FakeOpenAIServer) -> None:
    options = {"text": {"verbosity": "low"}, "truncation": "auto", "input": "ignored"}
    body = await send(
        responses(server),
        server,
        request(reasoning=ReasoningRequest(max_tokens=100), provider_options=options),
    )
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["text"] == {"verbosity": "low"} and body["truncation"] == "auto"
    assert isinstance(body["input"], list)


# --------------------------------------------------------------------------------------
# Stream mapping


async def test_function_call_stream(server: FakeOpenAIServer) -> None:
    stream = ResponsesEvents().created().reasoning("rs_1", [], "E")
    stream.function_call("fc_1", "call_1", "lookup", ['{"q":', '"x"}'])
    stream.function_call("fc_2", "call_2", "echo", ["{}"])
    server.enqueue(stream.completed().stream())
    events = await collect(responses(server), request())
    calls = [e for e in events if not isinstance(e, Finish)]
    assert calls == [
        ToolCallStart(index=0, id="call_1", name="lookup"),
        ToolCallDelta(index=0, arguments='{"q":'),
        ToolCallDelta(index=0, arguments='"x"}'),
        ToolCallEnd(index=0, arguments='{"q":"x"}', extra_content={"responses_item_id": "fc_1"}),
        ToolCallStart(index=1, id="call_2", name="echo"),
        ToolCallDelta(index=1, arguments="{}"),
        ToolCallEnd(index=1, arguments="{}", extra_content={"responses_item_id": "fc_2"}),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "tool_calls"
    assert finish.reasoning_details == [
        {"type": "reasoning.encrypted", "data": "E", "format": FORMAT, "id": "rs_1", "index": 0}
    ]


async def test_function_call_round_trip(server: FakeOpenAIServer) -> None:
    """A call produced by the adapter is replayed with its item id."""
    stream = ResponsesEvents().created().function_call("fc_7", "call_7", "f", ["{}"])
    server.enqueue(stream.completed().stream())
    provider = responses(server)
    response = await generate(provider, request())
    message = AssistantMessage(tool_calls=response.tool_calls)
    answer = ToolMessage(tool_call_id="call_7", name="f", content="r")  # the API requires it
    body = await send(provider, server, request(message, answer))
    assert body["input"][0] == {
        "type": "function_call",
        "id": "fc_7",
        "call_id": "call_7",
        "name": "f",
        "arguments": "{}",
    }


async def test_summary_parts_are_separated(server: FakeOpenAIServer) -> None:
    stream = ResponsesEvents().created().reasoning("rs_1", ["one", "two"], "E1")
    stream.reasoning("rs_2", ["three"]).message("ok")
    server.enqueue(stream.completed().stream())
    response = await generate(responses(server), request())
    assert response.reasoning_content == "one\n\ntwo\n\nthree"
    assert [d["summary"] for d in response.reasoning_details or [] if "summary" in d] == [
        "one",
        "two",
        "three",
    ]
    assert [d["index"] for d in response.reasoning_details or []] == [0, 1, 2, 3]


async def test_reasoning_text_deltas_and_done_only_summary(server: FakeOpenAIServer) -> None:
    stream = ResponsesEvents().created()
    stream.add(
        "response.reasoning_text.delta",
        item_id="rs_1",
        output_index=0,
        content_index=0,
        delta="raw",
    )
    # A reasoning item whose summary arrives only with the done event.
    stream.add(
        "response.output_item.done",
        output_index=1,
        item={
            "id": "rs_2",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "S"}],
        },
    )
    server.enqueue(stream.completed().stream())
    events = await collect(responses(server), request())
    assert [e for e in events if isinstance(e, ReasoningDelta)] == [
        ReasoningDelta(text="raw"),
        ReasoningDelta(text="\n\n"),
        ReasoningDelta(text="S"),
    ]


@pytest.mark.parametrize(
    ("reason", "finish"), [("max_output_tokens", "length"), ("content_filter", "content_filter")]
)
async def test_incomplete(server: FakeOpenAIServer, reason: str, finish: str) -> None:
    stream = ResponsesEvents().created().message("partial").incomplete(reason)
    server.enqueue(stream.stream())
    events = await collect(responses(server), request())
    assert events[0] == TextDelta(text="p")
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == finish


async def test_response_failed_and_error_event(server: FakeOpenAIServer) -> None:
    failed = ResponsesEvents().created()
    failed.add(
        "response.failed",
        response={
            "id": "resp_fake1",
            "status": "failed",
            "error": {"code": "rate_limit_exceeded", "message": "slow down"},
        },
    )
    server.enqueue(failed.stream())
    with pytest.raises(ProviderError) as info:
        await generate(responses(server), request())
    assert (info.value.code, info.value.retryable, info.value.message) == (
        "rate_limit",
        True,
        "slow down",
    )
    error = ResponsesEvents().created()
    error.add("error", code="context_length_exceeded", message="Too long", param=None)
    server.enqueue(error.stream())
    with pytest.raises(ProviderError) as info:
        await generate(responses(server), request())
    assert (info.value.code, info.value.retryable) == ("context_length", False)


async def test_stream_without_completion_is_an_error(server: FakeOpenAIServer) -> None:
    server.enqueue(ResponsesEvents().created().message("cut").stream())
    with pytest.raises(ProviderError) as info:
        await generate(responses(server), request())
    assert (info.value.code, info.value.retryable) == ("unknown", True)


async def test_refusal_is_visible_text(server: FakeOpenAIServer) -> None:
    stream = ResponsesEvents().created()
    common = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    stream.add("response.refusal.delta", delta="No.", **common).completed()
    server.enqueue(stream.stream())
    response = await generate(responses(server), request())
    assert response.content == "No."
