"""OpenAIChatProvider against a fake Chat Completions server (spec 05 §5.6, §5.8.1).

Conformance cases C05-016 … C05-021, plus the request and stream mapping tables. Every
request goes through the real ``openai`` SDK to a local HTTP server that records bodies.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_openai import FakeOpenAIServer, SSEResponse, chat_chunk, chat_text_stream

from threadloom.providers import (
    AssistantMessage,
    Finish,
    ImagePart,
    ProviderRegistry,
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
from threadloom.providers.openai import OPENROUTER_BASE_URL, OpenAIChatProvider
from threadloom.providers.openai_chat import detect_dialect

MODEL = "gpt-fake"
DETAILS = [
    {"type": "reasoning.text", "text": "t", "format": "anthropic-claude-v1", "signature": "s"},
    {"type": "reasoning.summary", "summary": "sum", "format": "openai-responses-v1", "id": "rs"},
]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


def chat(server: FakeOpenAIServer, **options: Any) -> OpenAIChatProvider:
    return server.adopt(OpenAIChatProvider(api_key="sk-test", base_url=server.base_url, **options))


def request(*messages: Any, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL, messages=list(messages) or [UserMessage(content="hi")], **fields
    )


def reasoned(content: str | None = "prev", details: Any = DETAILS) -> AssistantMessage:
    return AssistantMessage(
        content="answer", reasoning_content=content, reasoning_details=copy.deepcopy(details)
    )


async def send(provider: OpenAIChatProvider, server: FakeOpenAIServer, req: ProviderRequest) -> Any:
    """Send ``req`` (answered by a short text stream) and return the wire body."""
    server.enqueue(chat_text_stream())
    await generate(provider, req)
    return server.last_body


async def collect(provider: OpenAIChatProvider, req: ProviderRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(req)]


def assistant_of(body: Any) -> dict[str, Any]:
    return next(m for m in body["messages"] if m["role"] == "assistant")


# --------------------------------------------------------------------------------------
# Conformance cases


async def test_c05_016_openai_dialect_sends_no_reasoning(server: FakeOpenAIServer) -> None:
    message = reasoned()
    before = message.model_dump()
    body = await send(
        chat(server, dialect="openai"),
        server,
        request(UserMessage(content="q"), message, UserMessage(content="again")),
    )
    wire = assistant_of(body)
    assert wire == {"role": "assistant", "content": "answer"}
    assert not {"reasoning_content", "reasoning", "reasoning_details"} & set(wire)
    assert message.model_dump() == before  # the persisted record is not altered


async def test_c05_017_openrouter_sends_details_unchanged(server: FakeOpenAIServer) -> None:
    details = [
        {"type": "reasoning.text", "text": "t", "format": "anthropic-claude-v1", "signature": "s"}
    ]
    body = await send(
        chat(server, dialect="openrouter"),
        server,
        request(UserMessage(content="q"), reasoned("thinking", details)),
    )
    wire = assistant_of(body)
    assert wire["reasoning_details"] == details
    assert "reasoning" not in wire and "reasoning_content" not in wire


async def test_openrouter_details_filter_and_text_fallback(server: FakeOpenAIServer) -> None:
    provider = chat(server, dialect="openrouter")
    # Entries whose type is not reasoning.* are omitted; unknown formats still travel.
    odd = [{"type": "other", "x": 1}, {"type": "reasoning.encrypted", "data": "E", "format": "x"}]
    wire = assistant_of(await send(provider, server, request(reasoned("thinking", odd))))
    assert wire["reasoning_details"] == [odd[1]] and "reasoning" not in wire
    # Without any sendable detail, the text goes as `reasoning`.
    only_text = assistant_of(await send(provider, server, request(reasoned("thinking", None))))
    assert only_text["reasoning"] == "thinking" and "reasoning_details" not in only_text
    junk = assistant_of(await send(provider, server, request(reasoned(None, [odd[0]]))))
    assert not {"reasoning", "reasoning_details", "reasoning_content"} & set(junk)


async def test_c05_018_compatible_reasoning_content_converted(server: FakeOpenAIServer) -> None:
    details = [{"type": "reasoning.summary", "summary": "sum", "format": "openai-responses-v1"}]
    provider = chat(server, dialect="compatible", reasoning_input="reasoning_content")
    wire = assistant_of(await send(provider, server, request(reasoned(None, details))))
    assert wire["reasoning_content"] == "sum"
    assert "reasoning_details" not in wire and "reasoning" not in wire
    # A persisted text is sent as it is.
    wire = assistant_of(await send(provider, server, request(reasoned("raw", details))))
    assert wire["reasoning_content"] == "raw"


async def test_compatible_default_sends_no_reasoning(server: FakeOpenAIServer) -> None:
    provider = chat(server)  # 127.0.0.1 → compatible, reasoning_input "none"
    assert provider.dialect == "compatible" and provider.reasoning_target == "compatible"
    wire = assistant_of(await send(provider, server, request(reasoned())))
    assert not {"reasoning_content", "reasoning", "reasoning_details"} & set(wire)


def test_c05_019_dialect_auto_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIChatProvider(base_url="http://localhost:8000/v1").dialect == "compatible"
    openrouter = OpenAIChatProvider(base_url="https://openrouter.ai/api/v1")
    assert openrouter.dialect == "openrouter" and openrouter.key_env == "OPENROUTER_API_KEY"
    assert OpenAIChatProvider().dialect == "openai"
    assert OpenAIChatProvider(base_url="https://api.openai.com/v1").dialect == "openai"
    assert detect_dialect("https://api.deepseek.com") == "compatible"
    # OPENAI_BASE_URL counts when no base URL is given.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert OpenAIChatProvider().dialect == "compatible"
    # An explicit dialect wins; explicit openrouter defaults to OpenRouter's URL.
    assert OpenAIChatProvider(base_url="http://x/v1", dialect="openai").dialect == "openai"
    explicit = OpenAIChatProvider(dialect="openrouter")
    assert explicit.base_url == OPENROUTER_BASE_URL
    with pytest.raises(ValueError):
        OpenAIChatProvider(dialect="azure")
    with pytest.raises(ValueError):
        OpenAIChatProvider(reasoning_input="reasoning")


def test_registry_builds_the_openai_adapters(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadloom.providers.openai import OpenAIResponsesProvider

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    registry = ProviderRegistry()
    openrouter = registry.get("openrouter")
    assert isinstance(openrouter, OpenAIChatProvider)
    assert (openrouter.name, openrouter.dialect) == ("openrouter", "openrouter")
    assert openrouter.base_url == OPENROUTER_BASE_URL
    openai_chat = registry.get("openai")
    assert isinstance(openai_chat, OpenAIChatProvider)
    assert (openai_chat.name, openai_chat.dialect) == ("openai", "openai")
    responses = registry.get("openai-responses")
    assert isinstance(responses, OpenAIResponsesProvider)
    assert (responses.name, responses.store) == ("openai-responses", False)


async def test_c05_020_tool_call_deltas_and_usage(server: FakeOpenAIServer) -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"role": "assistant", "content": None}),
                chat_chunk(
                    {"tool_calls": [{**call, "function": {"name": "lookup", "arguments": ""}}]}
                ),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": '}}]}),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
                chat_chunk({}, finish_reason="tool_calls"),
                chat_chunk(
                    choices=False,
                    usage={
                        "prompt_tokens": 120,
                        "completion_tokens": 30,
                        "total_tokens": 150,
                        "prompt_tokens_details": {"cached_tokens": 50, "audio_tokens": 0},
                        "completion_tokens_details": {"reasoning_tokens": 7},
                    },
                ),
            ]
        )
    )
    events = await collect(chat(server), request())
    assert events[0] == ToolCallStart(index=0, id="call_1", name="lookup")
    deltas = [e.arguments for e in events if isinstance(e, ToolCallDelta)]
    assert deltas == ['{"ci', 'ty": ', '"Oslo"}']
    assert events[-2] == ToolCallEnd(index=0)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.finish_reason == "tool_calls"
    assert finish.response_id == "chatcmpl-fake1"
    usage = finish.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 30, 150)
    assert (usage.cached_tokens, usage.reasoning_tokens, usage.cost) == (50, 7, None)
    assert len(server.requests) == 1


async def test_c05_020_aggregated_call(server: FakeOpenAIServer) -> None:
    """The same stream through ``generate``: one call with the joined arguments."""
    server.enqueue(
        SSEResponse(
            [
                chat_chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": '{"a"'},
                            }
                        ]
                    }
                ),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1"}}]}),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
                chat_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    response = await generate(chat(server), request())
    assert response.tool_calls == [ToolCallSpec(id="call_1", name="lookup", arguments='{"a":1}')]
    assert response.content is None and response.finish_reason == "tool_calls"


async def test_c05_021_openrouter_reasoning_details_and_cost(server: FakeOpenAIServer) -> None:
    piece = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    server.enqueue(
        SSEResponse(
            [
                ": OPENROUTER PROCESSING",
                chat_chunk(
                    {
                        "role": "assistant",
                        "content": "",
                        "reasoning": "Let me ",
                        "reasoning_details": [{**piece, "text": "Let me "}],
                    }
                ),
                chat_chunk(
                    {
                        "content": "",
                        "reasoning": "think.",
                        "reasoning_details": [{**piece, "text": "think.", "signature": "sig"}],
                    }
                ),
                chat_chunk({"content": "Hi"}),
                chat_chunk({}, finish_reason="stop"),
                chat_chunk(
                    choices=False,
                    usage={
                        "prompt_tokens": 10,
                        "completion_tokens": 4,
                        "total_tokens": 14,
                        "cost": 0.00042,
                    },
                ),
            ]
        )
    )
    provider = chat(server, dialect="openrouter")
    response = await generate(provider, request(reasoning=ReasoningRequest(effort="high")))
    assert response.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "Let me think.",
            "signature": "sig",
            "format": "anthropic-claude-v1",
            "index": 0,
        }
    ]
    assert response.reasoning_content == "Let me think." and response.content == "Hi"
    assert response.usage.cost == pytest.approx(0.00042)
    body = server.last_body
    assert body["usage"] == {"include": True}
    assert body["reasoning"] == {"effort": "high"}


# --------------------------------------------------------------------------------------
# Request mapping (§5.8.1 table)


async def test_request_mapping_messages(server: FakeOpenAIServer) -> None:
    image = ImagePart(media_type="image/png", data="iVBOR", name="a.png")
    shot = ImagePart(media_type="image/jpeg", data="/9j/", detail="low")
    messages = [
        SystemMessage(content="be brief"),
        UserMessage(content=[TextPart(text="look"), image]),
        AssistantMessage(
            content=None,
            tool_calls=[
                ToolCallSpec(id="c1", name="shot", arguments='{"u":1}'),
                ToolCallSpec(id="c2", name="echo", arguments="{}"),
            ],
        ),
        ToolMessage(tool_call_id="c1", name="shot (browser)", content="done", images=[shot]),
        ToolMessage(tool_call_id="c2", name="echo", content="boom", is_error=True),
        UserMessage(content="next"),
        AssistantMessage(content="fine"),
    ]
    body = await send(chat(server), server, request(*messages))
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "auto"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shot", "arguments": '{"u":1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "tool", "tool_call_id": "c2", "content": "boom"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images from tool results:"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/jpeg;base64,/9j/", "detail": "low"},
                },
            ],
        },
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "fine"},
    ]
    assert body["model"] == MODEL and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert not {"tools", "tool_choice", "parallel_tool_calls", "usage"} & set(body)
    headers = server.requests[-1].headers
    assert headers["authorization"] == "Bearer sk-test"
    assert server.requests[-1].path == "/v1/chat/completions"


async def test_tool_images_at_the_end_of_the_request(server: FakeOpenAIServer) -> None:
    shot = ImagePart(media_type="image/png", data="AA")
    messages = [
        AssistantMessage(tool_calls=[ToolCallSpec(id="c1", name="shot")]),
        ToolMessage(tool_call_id="c1", name="shot", content="ok", images=[shot]),
    ]
    body = await send(chat(server), server, request(*messages))
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"][1]["image_url"]["url"] == "data:image/png;base64,AA"


TOOLS = [ToolSpec(name="lookup", description="Find", parameters={"type": "object"})]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"name": "lookup"}, {"type": "function", "function": {"name": "lookup"}}),
    ],
)
async def test_tools_and_tool_choice(server: FakeOpenAIServer, choice: Any, wire: Any) -> None:
    body = await send(chat(server), server, request(tools=TOOLS, tool_choice=choice))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Find", "parameters": {"type": "object"}},
        }
    ]
    assert body["tool_choice"] == wire
    assert "parallel_tool_calls" not in body  # None: not sent


@pytest.mark.parametrize("parallel", [True, False])
async def test_parallel_tool_calls_sent_when_set(server: FakeOpenAIServer, parallel: bool) -> None:
    body = await send(
        chat(server), server, request(tools=TOOLS, tool_choice="auto", parallel_tool_calls=parallel)
    )
    assert body["parallel_tool_calls"] is parallel
    # Without tools neither the choice nor the flag is sent.
    body = await send(chat(server), server, request(parallel_tool_calls=parallel))
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)


async def test_max_output_tokens_per_dialect(server: FakeOpenAIServer) -> None:
    body = await send(chat(server, dialect="openai"), server, request(max_output_tokens=99))
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    body = await send(chat(server), server, request(max_output_tokens=99))
    assert body["max_tokens"] == 99 and "max_completion_tokens" not in body
    body = await send(chat(server), server, request())
    assert "max_tokens" not in body and "max_completion_tokens" not in body


async def test_reasoning_request_per_dialect(server: FakeOpenAIServer) -> None:
    effort = ReasoningRequest(effort="low", max_tokens=500, exclude=True)
    body = await send(chat(server, dialect="openai"), server, request(reasoning=effort))
    assert body["reasoning_effort"] == "low" and "reasoning" not in body
    body = await send(chat(server), server, request(reasoning=ReasoningRequest(max_tokens=9)))
    assert "reasoning_effort" not in body and "reasoning" not in body
    router = chat(server, dialect="openrouter")
    body = await send(router, server, request(reasoning=effort))
    assert body["reasoning"] == {"max_tokens": 500, "exclude": True}  # max_tokens wins
    body = await send(router, server, request(reasoning=ReasoningRequest()))
    assert body["reasoning"] == {"enabled": True}
    body = await send(router, server, request())
    assert "reasoning" not in body and body["usage"] == {"include": True}


async def test_provider_options_passthrough(server: FakeOpenAIServer) -> None:
    options = {
        "temperature": 0.2,  # a parameter the SDK knows
        "top_k": 40,  # one it does not (extra_body)
        "provider": {"order": ["x"]},  # OpenRouter routing
        "max_tokens": 7,  # overrides the adapter's value
        "model": "other",  # adapter-owned: ignored
        "stream": False,  # adapter-owned: ignored
    }
    body = await send(
        chat(server), server, request(max_output_tokens=100, provider_options=options)
    )
    assert body["temperature"] == 0.2 and body["top_k"] == 40
    assert body["provider"] == {"order": ["x"]} and body["max_tokens"] == 7
    assert body["model"] == MODEL and body["stream"] is True


async def test_extra_content_round_trip(server: FakeOpenAIServer) -> None:
    google = {"google": {"thought_signature": "c2ln"}}
    message = AssistantMessage(
        tool_calls=[
            ToolCallSpec(id="c1", name="f", extra_content=google),
            ToolCallSpec(id="c2", name="g", extra_content={"responses_item_id": "fc_1"}),
        ]
    )
    # the calls answered, as the API requires (the fake server refuses them unanswered)
    answers = [ToolMessage(tool_call_id=i, name="f", content="r") for i in ("c1", "c2")]
    wire = assistant_of(await send(chat(server), server, request(message, *answers)))
    assert wire["tool_calls"][0]["extra_content"] == google
    assert "extra_content" not in wire["tool_calls"][1]  # the Responses adapter's own data
    openai = chat(server, dialect="openai")
    wire = assistant_of(await send(openai, server, request(message, *answers)))
    assert all("extra_content" not in call for call in wire["tool_calls"])


async def test_default_headers_sent(server: FakeOpenAIServer) -> None:
    provider = chat(server, default_headers={"HTTP-Referer": "https://example.test"})
    await send(provider, server, request())
    assert server.requests[-1].headers["http-referer"] == "https://example.test"
    await provider.aclose()
    await provider.aclose()  # idempotent


# --------------------------------------------------------------------------------------
# Stream mapping


async def test_text_and_reasoning_content_deltas(server: FakeOpenAIServer) -> None:
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"role": "assistant", "reasoning_content": "hmm"}),
                chat_chunk({"reasoning_content": " ok", "content": None}),
                chat_chunk({"content": "Hel"}),
                chat_chunk({"content": "lo"}),
                chat_chunk({}, finish_reason="stop"),
            ]
        )
    )
    events = await collect(chat(server), request())
    assert events[:4] == [
        ReasoningDelta(text="hmm"),
        ReasoningDelta(text=" ok"),
        TextDelta(text="Hel"),
        TextDelta(text="lo"),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reasoning_details is None
    assert finish.usage.total_tokens == 0  # no usage chunk: zeros


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
        ("eos", "stop"),
    ],
)
async def test_finish_reason_mapping(server: FakeOpenAIServer, wire: str, neutral: str) -> None:
    server.enqueue(SSEResponse([chat_chunk({"content": "x"}), chat_chunk({}, finish_reason=wire)]))
    events = await collect(chat(server), request())
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == neutral


async def test_stop_with_tool_calls_reports_tool_calls(server: FakeOpenAIServer) -> None:
    fn = {"name": "f", "arguments": "{}"}
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"tool_calls": [{"index": 0, "id": "a", "function": fn}]}),
                chat_chunk({}, finish_reason="stop"),
            ]
        )
    )
    events = await collect(chat(server), request())
    assert isinstance(events[-1], Finish) and events[-1].finish_reason == "tool_calls"


async def test_parallel_calls_and_extra_content(server: FakeOpenAIServer) -> None:
    def fragment(index: int, **fields: Any) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, **fields}]}

    extra = {"google": {"thought_signature": "sig"}}
    server.enqueue(
        SSEResponse(
            [
                chat_chunk(fragment(0, id="a", function={"name": "f", "arguments": ""})),
                chat_chunk(fragment(1, id="b", function={"name": "g", "arguments": "{}"})),
                chat_chunk(fragment(0, function={"arguments": "{}"})),
                # Some servers number every call 0: a new id at a used index is a new call.
                chat_chunk(
                    fragment(0, id="c", function={"name": "h", "arguments": "{}"}),
                ),
                chat_chunk(fragment(0, extra_content=extra)),
                chat_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    response = await generate(chat(server), request())
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("a", "f", "{}"),
        ("b", "g", "{}"),
        ("c", "h", "{}"),
    ]
    assert response.tool_calls[2].extra_content == extra
    assert response.tool_calls[0].extra_content is None


async def test_call_without_name_yet_is_started_when_named(server: FakeOpenAIServer) -> None:
    server.enqueue(
        SSEResponse(
            [
                chat_chunk(
                    {"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": "{"}}]}
                ),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "f"}}]}),
                chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
                chat_chunk({}, finish_reason="tool_calls"),
            ]
        )
    )
    events = await collect(chat(server), request())
    assert events[:3] == [
        ToolCallStart(index=0, id="a", name="f"),
        ToolCallDelta(index=0, arguments="{"),
        ToolCallDelta(index=0, arguments="}"),
    ]


async def test_details_without_reasoning_text_still_give_text(server: FakeOpenAIServer) -> None:
    summary = {"type": "reasoning.summary", "format": "openai-responses-v1", "index": 0}
    encrypted = {"type": "reasoning.encrypted", "format": "openai-responses-v1", "index": 1}
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"reasoning_details": [{**summary, "summary": "a"}]}),
                chat_chunk({"reasoning_details": [{**summary, "summary": "b"}]}),
                chat_chunk({"reasoning_details": [{**encrypted, "data": "E1", "id": "rs"}]}),
                chat_chunk({"reasoning_details": [{**encrypted, "data": "E2"}]}),
                chat_chunk({"content": "ok"}, finish_reason="stop"),
            ]
        )
    )
    response = await generate(chat(server, dialect="openrouter"), request())
    assert response.reasoning_content == "ab"
    assert response.reasoning_details == [
        {**summary, "summary": "ab"},
        {**encrypted, "data": "E1E2", "id": "rs"},
    ]


async def test_refusal_is_visible_text(server: FakeOpenAIServer) -> None:
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"refusal": "I can't"}),
                chat_chunk({"refusal": " help."}, finish_reason="stop"),
            ]
        )
    )
    response = await generate(chat(server), request())
    assert response.content == "I can't help." and response.finish_reason == "stop"
