"""Conformance cases C05-100…C05-118 (spec 05 §5.11): the Gemini adapter.

Each test runs the real ``google-genai`` SDK (through :class:`GeminiProvider`) against the
local fake of the Gemini HTTP API in ``fake_gemini.py``, which answers recorded-shape
``GenerateContentResponse`` chunks and validates every request against the documented
rules (function call / response pairing, thought signatures on the part that carried
them, Gemini 3's current-turn signature check). Tests inspect the neutral events, the
aggregated response or the recorded wire body (field names normalised to lowerCamelCase,
as the API's proto3 JSON parser reads them).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import sys
from collections.abc import AsyncIterator
from typing import Any

import fake_gemini as fg
import pytest
from google.oauth2.credentials import Credentials

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    ImagePart,
    ProviderRegistry,
    ProviderRequest,
    ReasoningDelta,
    ReasoningRequest,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallSpec,
    ToolMessage,
    ToolSpec,
    UserMessage,
    generate,
)
from threadloom.providers.gemini import GeminiProvider
from threadloom.providers.reasoning import supply_reasoning

GEMINI_FMT = "google-gemini-v1"
MODEL = "gemini-3-flash-preview"
TOOLS = [
    ToolSpec(name="weather", description="Weather", parameters={"type": "object"}),
    ToolSpec(name="time", description="Time", parameters={"type": "object"}),
]
#: Signatures as the API sends them (standard base64, with "+" and "/" in them).
SIG_A = base64.b64encode(b"\xfa\xfb\xfc-signature-A-\xfe\xff").decode()
SIG_B = base64.b64encode(b"\xfb\xef\xbe-signature-B-\xff\xfe").decode()
SIG_T = base64.b64encode(b"\xff\xfe-text-signature").decode()


@pytest.fixture
async def fake() -> AsyncIterator[fg.FakeGemini]:
    async with fg.FakeGemini() as server:
        yield server


@pytest.fixture
async def provider(fake: fg.FakeGemini) -> AsyncIterator[GeminiProvider]:
    p = GeminiProvider(api_key="gm-test", base_url=fake.base_url)
    yield p
    await p.aclose()


def request(messages: list[Any], model: str = MODEL, **kw: Any) -> ProviderRequest:
    return ProviderRequest(model=model, messages=messages, **kw)


def assistant_from(response: Any) -> AssistantMessage:
    """The assistant message the engine would persist from ``response``."""
    return AssistantMessage(
        content=response.content,
        tool_calls=response.tool_calls,
        reasoning_content=response.reasoning_content,
        reasoning_details=response.reasoning_details,
    )


def parallel_calls() -> list[dict[str, Any]]:
    """Gemini 3 answering with two parallel calls: the signature on the first call only."""
    return [
        fg.chunk(fg.thought_part("Two lookups.")),
        fg.chunk(
            fg.call_part("weather", {"city": "Paris"}, id="fc-1", signature=SIG_A),
            fg.call_part("time", {"city": "Paris"}, id="fc-2"),
        ),
        fg.chunk(finish="STOP", usage_metadata=fg.usage(prompt=20, candidates=8, thoughts=12)),
    ]


async def test_c05_100_text_stream(fake: fg.FakeGemini, provider: GeminiProvider) -> None:
    fake.stream(
        [
            fg.chunk(fg.text_part("Hel")),
            fg.chunk(fg.text_part("lo")),
            fg.chunk(fg.text_part(""), finish="STOP", usage_metadata=fg.usage(12, 3)),
        ]
    )
    events = [e async for e in provider.stream(request([UserMessage(content="hi")]))]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    finish = events[-1]
    assert finish.type == "finish" and finish.finish_reason == "stop"
    assert (finish.response_id, finish.response_model) == ("resp-fake-1", MODEL)
    assert finish.reasoning_details is None
    recorded = fake.requests[-1]
    assert recorded.path == f"/v1/models/{MODEL}:streamGenerateContent?alt=sse"
    assert recorded.headers["x-goog-api-key"] == "gm-test"
    assert fake.last_body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


async def test_c05_101_parallel_calls_and_their_signature(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream(parallel_calls())
    response = await generate(provider, request([UserMessage(content="hi")], tools=TOOLS))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("fc-1", "weather", '{"city":"Paris"}'),
        ("fc-2", "time", '{"city":"Paris"}'),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.reasoning_content == "Two lookups."
    assert response.reasoning_details == [
        {"type": "reasoning.text", "text": "Two lookups.", "format": GEMINI_FMT, "index": 0},
        {
            "type": "reasoning.encrypted",
            "data": SIG_A,
            "format": GEMINI_FMT,
            "id": "fc-1",
            "index": 1,
        },
    ]


async def test_c05_102_replay_puts_the_signature_back_on_its_call(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream(parallel_calls())
    first = await generate(provider, request([UserMessage(content="hi")], tools=TOOLS))
    assistant = assistant_from(first)
    persisted = copy.deepcopy(assistant.model_dump())
    messages = [
        UserMessage(content="hi"),
        assistant,
        ToolMessage(tool_call_id="fc-1", name="weather", content="sunny"),
        ToolMessage(tool_call_id="fc-2", name="time", content="noon", is_error=True),
    ]
    fake.stream(fg.text_stream("Sunny at noon."))
    second = await generate(provider, request(messages, tools=TOOLS))
    assert second.content == "Sunny at noon." and fake.rejected == []
    model_turn, results = fake.last_body["contents"][1:]
    assert model_turn["role"] == "model"
    first_call, second_call = model_turn["parts"]  # the unsigned thought summary is omitted
    assert first_call["functionCall"] == {
        "id": "fc-1",
        "name": "weather",
        "args": {"city": "Paris"},
    }
    assert fg.sig_bytes(first_call["thoughtSignature"]) == base64.b64decode(SIG_A)
    assert "thoughtSignature" not in second_call
    assert results == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "fc-1",
                    "name": "weather",
                    "response": {"output": "sunny"},
                }
            },
            {"functionResponse": {"id": "fc-2", "name": "time", "response": {"error": "noon"}}},
        ],
    }
    assert assistant.model_dump() == persisted  # the persisted record is never changed


async def test_c05_103_sequential_steps_each_return_their_signature(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream(
        [fg.chunk(fg.call_part("weather", {}, signature=SIG_A), finish="STOP")]
    )  # no call id from the API: the adapter assigns one
    step1 = await generate(provider, request([UserMessage(content="hi")], tools=TOOLS))
    call_id = step1.tool_calls[0].id
    assert call_id.startswith("call_")
    assert step1.reasoning_details == [
        {
            "type": "reasoning.encrypted",
            "data": SIG_A,
            "format": GEMINI_FMT,
            "id": call_id,
            "index": 0,
        }
    ]
    messages: list[Any] = [
        UserMessage(content="hi"),
        assistant_from(step1),
        ToolMessage(tool_call_id=call_id, name="weather", content="sunny"),
    ]
    fake.stream([fg.chunk(fg.call_part("time", {}, id="fc-9", signature=SIG_B), finish="STOP")])
    step2 = await generate(provider, request(messages, tools=TOOLS))
    messages += [assistant_from(step2), ToolMessage(tool_call_id="fc-9", name="time", content="9")]
    fake.stream(fg.text_stream("done"))
    done = await generate(provider, request(messages, tools=TOOLS))
    assert done.content == "done" and fake.rejected == []
    turns = fake.last_body["contents"]
    signed = [p for c in turns for p in c["parts"] if "thoughtSignature" in p]
    assert [fg.sig_bytes(p["thoughtSignature"]) for p in signed] == [
        base64.b64decode(SIG_A),
        base64.b64decode(SIG_B),
    ]
    assert [p["functionCall"]["name"] for p in signed] == ["weather", "time"]


async def test_c05_104_a_signature_moved_or_dropped_is_rejected_by_the_fake(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    """The fake holds the documented rules: the adapter's request passes, the same history
    with the signature on the other call is refused (so the tests above prove something)."""
    fake.stream(parallel_calls())
    first = await generate(provider, request([UserMessage(content="hi")], tools=TOOLS))
    moved = [dict(d) for d in first.reasoning_details or []]
    moved[1]["id"] = "fc-2"
    assistant = assistant_from(first).model_copy(update={"reasoning_details": moved})
    messages = [
        UserMessage(content="hi"),
        assistant,
        ToolMessage(tool_call_id="fc-1", name="weather", content="sunny"),
        ToolMessage(tool_call_id="fc-2", name="time", content="noon"),
    ]
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request(messages, tools=TOOLS))
    assert caught.value.code == "invalid_request" and caught.value.status == 400
    assert "not on the part it was issued on" in fake.rejected[-1]


async def test_c05_105_history_from_another_provider_gets_the_dummy_signature(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    anthropic_turn = AssistantMessage(
        content=None,
        tool_calls=[ToolCallSpec(id="toolu_1", name="weather", arguments='{"city":"Rome"}')],
        reasoning_content="th",
        reasoning_details=[
            {
                "type": "reasoning.text",
                "text": "th",
                "signature": "anthropic-sig",
                "format": "anthropic-claude-v1",
                "index": 0,
            }
        ],
    )
    messages = [
        UserMessage(content="weather?"),
        anthropic_turn,
        ToolMessage(tool_call_id="toolu_1", name="weather", content="rain"),
    ]
    fake.stream(fg.text_stream("Rain."))
    response = await generate(provider, request(messages, tools=TOOLS))
    assert response.content == "Rain." and fake.rejected == []
    model_turn = fake.last_body["contents"][1]
    assert model_turn["parts"] == [
        {
            "functionCall": {"id": "toolu_1", "name": "weather", "args": {"city": "Rome"}},
            "thoughtSignature": "skip_thought_signature_validator",
        }
    ]
    assert "anthropic-sig" not in str(fake.requests[-1].body)


async def test_c05_106_signed_thoughts_and_text_signature_round_trip(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream(
        [
            fg.chunk(fg.thought_part("first idea")),
            fg.chunk(fg.thought_part(" more", signature=SIG_B)),
            fg.chunk(fg.text_part("Answer")),
            fg.chunk(fg.text_part("", signature=SIG_T), finish="STOP"),
        ]
    )
    events = [e async for e in provider.stream(request([UserMessage(content="q")]))]
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["first idea", " more"]
    first = events[-1]
    assert first.type == "finish"
    assert first.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "first idea more",
            "signature": SIG_B,
            "format": GEMINI_FMT,
            "index": 0,
        },
        {"type": "reasoning.encrypted", "data": SIG_T, "format": GEMINI_FMT, "index": 1},
    ]
    assistant = AssistantMessage(
        content="Answer",
        reasoning_content="first idea more",
        reasoning_details=first.reasoning_details,
    )
    fake.stream(fg.text_stream("ok"))
    await generate(
        provider, request([UserMessage(content="q"), assistant, UserMessage(content="more")])
    )
    assert fake.rejected == []
    thought, text = fake.last_body["contents"][1]["parts"]
    assert (thought["text"], thought["thought"]) == ("first idea more", True)
    assert fg.sig_bytes(thought["thoughtSignature"]) == base64.b64decode(SIG_B)
    assert text["text"] == "Answer"
    assert fg.sig_bytes(text["thoughtSignature"]) == base64.b64decode(SIG_T)


@pytest.mark.parametrize(
    ("model", "reasoning", "expected"),
    [
        (
            MODEL,
            ReasoningRequest(effort="high"),
            {"includeThoughts": True, "thinkingLevel": "HIGH"},
        ),
        (
            "gemini-2.5-flash",
            ReasoningRequest(effort="low"),
            {"includeThoughts": True, "thinkingBudget": 1024},
        ),
        (
            MODEL,
            ReasoningRequest(effort="low", max_tokens=2048, exclude=True),
            {"includeThoughts": False, "thinkingBudget": 2048},
        ),
    ],
)
async def test_c05_107_thinking_budget_or_level(
    fake: fg.FakeGemini,
    provider: GeminiProvider,
    model: str,
    reasoning: ReasoningRequest,
    expected: dict[str, Any],
) -> None:
    await generate(provider, request([UserMessage(content="q")], model=model, reasoning=reasoning))
    assert fake.last_body["generationConfig"]["thinkingConfig"] == expected


async def test_c05_108_usage_mapping(fake: fg.FakeGemini, provider: GeminiProvider) -> None:
    fake.stream(
        [
            fg.chunk(fg.text_part("a"), usage_metadata=fg.usage(100, 1)),
            fg.chunk(
                fg.text_part("b"),
                finish="STOP",
                usage_metadata=fg.usage(100, 20, thoughts=30, cached=40, tool_prompt=5),
            ),
        ]
    )
    response = await generate(provider, request([UserMessage(content="q")]))
    usage = response.usage
    assert (usage.input_tokens, usage.cached_tokens) == (105, 40)
    assert (usage.output_tokens, usage.reasoning_tokens) == (50, 30)
    assert usage.total_tokens == 155 and usage.cost is None


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("OTHER", "stop"),
    ],
)
async def test_c05_109_finish_reasons(
    fake: fg.FakeGemini, provider: GeminiProvider, finish: str, expected: str
) -> None:
    fake.stream([fg.chunk(fg.text_part("x"), finish=finish)])
    response = await generate(provider, request([UserMessage(content="q")]))
    assert response.finish_reason == expected


async def test_c05_109_a_blocked_prompt_is_content_filter(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream([{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": fg.usage(4, 0)}])
    response = await generate(provider, request([UserMessage(content="q")]))
    assert (response.finish_reason, response.content) == ("content_filter", None)


async def test_c05_110_request_mapping(fake: fg.FakeGemini, provider: GeminiProvider) -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    messages = [
        SystemMessage(content="Be brief."),
        SystemMessage(content="Use tools."),
        UserMessage(content=[TextPart(text="look"), ImagePart(media_type="image/png", data=png)]),
        AssistantMessage(content="Looking."),
        SystemMessage(content="later"),
        UserMessage(content="go"),
    ]
    await generate(
        provider,
        request(
            messages,
            tools=TOOLS,
            tool_choice={"name": "time"},
            parallel_tool_calls=False,
            max_output_tokens=300,
            provider_options={"temperature": 0.2, "system_instruction": "ignored"},
        ),
    )
    body = fake.last_body
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief.\n\nUse tools."}]
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": png}}],
        },
        {"role": "model", "parts": [{"text": "Looking."}]},
        {"role": "user", "parts": [{"text": "<system>\nlater\n</system>"}, {"text": "go"}]},
    ]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "Weather",
                    "parametersJsonSchema": {"type": "object"},
                },
                {"name": "time", "description": "Time", "parametersJsonSchema": {"type": "object"}},
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["time"]}
    }
    assert body["generationConfig"] == {"maxOutputTokens": 300, "temperature": 0.2}
    assert "parallel" not in str(body).lower()


@pytest.mark.parametrize(
    ("choice", "mode"), [("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")]
)
async def test_c05_110_tool_choice_modes(
    fake: fg.FakeGemini, provider: GeminiProvider, choice: str, mode: str
) -> None:
    await generate(provider, request([UserMessage(content="q")], tools=TOOLS, tool_choice=choice))
    assert fake.last_body["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


async def test_c05_111_rate_limit_with_retry_info(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
    fake.error(
        429,
        fg.google_error(
            429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", details=[retry_info]
        ),
    )
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request([UserMessage(content="q")]))
    error = caught.value
    assert (error.code, error.retryable, error.retry_after, error.status) == (
        "rate_limit",
        True,
        37.0,
        429,
    )
    assert len(fake.requests) == 1  # the SDK does not retry: the engine owns retries


@pytest.mark.parametrize(
    ("status", "google_status", "message", "code", "retryable"),
    [
        (
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            "overloaded",
            True,
        ),
        (500, "INTERNAL", "An internal error has occurred.", "server_error", True),
        (
            400,
            "INVALID_ARGUMENT",
            "Request contains an invalid argument.",
            "invalid_request",
            False,
        ),
        (
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            "context_length",
            False,
        ),
        (403, "PERMISSION_DENIED", "Permission denied.", "permission", False),
        (401, "UNAUTHENTICATED", "API key not valid.", "authentication", False),
        (404, "NOT_FOUND", "models/nope is not found", "invalid_request", False),
    ],
)
async def test_c05_112_error_statuses(
    fake: fg.FakeGemini,
    provider: GeminiProvider,
    status: int,
    google_status: str,
    message: str,
    code: str,
    retryable: bool,
) -> None:
    fake.error(status, fg.google_error(status, google_status, message))
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request([UserMessage(content="q")]))
    assert (caught.value.code, caught.value.retryable) == (code, retryable)
    assert caught.value.message == message and caught.value.provider == "gemini"


async def test_c05_112_error_inside_the_stream(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream(
        [fg.chunk(fg.text_part("par"))],
        error_after=fg.google_error(503, "UNAVAILABLE", "The model is overloaded."),
    )
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request([UserMessage(content="q")]))
    assert (caught.value.code, caught.value.retryable) == ("overloaded", True)


async def test_c05_112_connection_refused() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    provider = GeminiProvider(api_key="k", base_url=f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ProviderError) as caught:
            await generate(provider, request([UserMessage(content="q")]))
    finally:
        await provider.aclose()
    assert (caught.value.code, caught.value.retryable) == ("connection", True)


def _clear_google_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_ENTERPRISE",
    ):
        monkeypatch.delenv(variable, raising=False)


async def test_c05_113_missing_key_is_one_authentication_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clear_google_env(monkeypatch)
    registry = ProviderRegistry()
    model = type("M", (), {"name": "G", "provider": "gemini"})()
    vertex = type("M", (), {"name": "V", "provider": "gemini-vertex"})()
    missing = registry.missing_credentials([model, vertex])
    assert [str(m) for m in missing] == [
        'Model "G" (provider gemini): GEMINI_API_KEY is not set; its requests will fail '
        "until it is",
        'Model "V" (provider gemini-vertex): GOOGLE_CLOUD_PROJECT is not set; its requests '
        "will fail until it is",
    ]
    with pytest.raises(ProviderError) as caught:
        await generate(registry.get("gemini"), request([UserMessage(content="q")]))
    error = caught.value
    assert (error.code, error.retryable, error.message) == (
        "authentication",
        False,
        "GEMINI_API_KEY is not set",
    )
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    assert registry.missing_credentials([model]) == []


def test_c05_114_missing_sdk_is_the_registry_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "threadloom.providers.gemini", raising=False)
    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(ProviderError) as caught:
        ProviderRegistry().get("gemini")
    error = caught.value
    assert error.message.startswith("provider gemini is not available: ")
    assert "google.genai" in error.message and "\n" not in error.message
    assert (error.code, error.retryable) == ("invalid_request", False)


async def test_c05_115_vertex_project_location_and_credentials(fake: fg.FakeGemini) -> None:
    provider = GeminiProvider(
        vertexai=True,
        project="proj-1",
        location="europe-west4",
        credentials=Credentials(token="ya29.fake-token"),
        base_url=fake.base_url,
    )
    try:
        fake.stream(fg.text_stream("from vertex"))
        response = await generate(provider, request([UserMessage(content="q")]))
    finally:
        await provider.aclose()
    assert response.content == "from vertex"
    recorded = fake.requests[-1]
    assert recorded.route["project"] == "proj-1" and recorded.route["location"] == "europe-west4"
    assert recorded.route["model"] == MODEL
    assert recorded.headers["authorization"] == "Bearer ya29.fake-token"


async def test_c05_115_vertex_is_selected_by_name_or_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clear_google_env(monkeypatch)
    registry = ProviderRegistry()
    vertex = registry.get("gemini-vertex")
    assert isinstance(vertex, GeminiProvider) and vertex.uses_vertex
    assert vertex.name == "gemini-vertex"
    plain = registry.get("gemini")
    assert isinstance(plain, GeminiProvider) and not plain.uses_vertex
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    assert plain.uses_vertex
    assert plain.missing_credential() == "GOOGLE_CLOUD_PROJECT"
    with pytest.raises(ProviderError) as caught:
        plain.client()
    assert (caught.value.code, caught.value.message) == (
        "authentication",
        "GOOGLE_CLOUD_PROJECT is not set",
    )


async def test_c05_116_cancellation_closes_the_stream(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    fake.stream([fg.chunk(fg.text_part("partial"))], hold_open=True)
    seen: list[str] = []

    async def consume() -> None:
        async for event in provider.stream(request([UserMessage(content="q")])):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(fake.held.wait(), 10)
    while not seen:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake.client_closed.wait(), 10)
    assert seen == ["partial"]


def test_c05_117_conversion_rows_for_gemini_details() -> None:
    """§5.6.2: Gemini details go to Gemini only; other providers omit them; the Gemini row
    omits other formats and unsigned thought summaries."""
    details = [
        {"type": "reasoning.text", "text": "t", "format": GEMINI_FMT, "index": 0},
        {"type": "reasoning.text", "text": "s", "signature": SIG_B, "format": GEMINI_FMT},
        {"type": "reasoning.encrypted", "data": SIG_A, "id": "fc-1", "format": GEMINI_FMT},
        {"type": "reasoning.text", "text": "a", "signature": "x", "format": "anthropic-claude-v1"},
        {"type": "reasoning.encrypted", "data": "E", "id": "rs_1", "format": "openai-responses-v1"},
    ]
    before = copy.deepcopy(details)
    gemini = supply_reasoning("gemini", "t", details)
    assert gemini.wire == [{"text": "s", "thought": True, "thoughtSignature": SIG_B}]
    assert gemini.details == [details[2]] and gemini.text is None
    assert supply_reasoning("anthropic", "t", details[:3]).empty
    assert supply_reasoning("openai-responses", "t", details[:3]).empty
    assert supply_reasoning("openai", "t", details[:3]).empty
    assert details == before


async def test_c05_118_gemini_2_gets_no_dummy_signature(
    provider: GeminiProvider,
) -> None:
    """Gemini 1.x / 2.x do not validate signatures: history from another provider is sent
    without the dummy (only Gemini 3 and later get it)."""
    messages = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=[ToolCallSpec(id="call_1", name="weather")]),
        ToolMessage(tool_call_id="call_1", name="weather", content="x"),
    ]
    wire = provider.build_request(request(messages, model="gemini-2.5-flash", tools=TOOLS))
    assert all("thought_signature" not in p for c in wire.contents for p in c["parts"])
    wire3 = provider.build_request(request(messages, tools=TOOLS))
    assert wire3.contents[1]["parts"][0]["thought_signature"] == base64.urlsafe_b64decode(
        "skip_thought_signature_validator"
    )


async def test_c05_110_structured_output_through_provider_options(
    fake: fg.FakeGemini, provider: GeminiProvider
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fake.stream(fg.text_stream('{"city":"Paris"}'))
    options = {"response_mime_type": "application/json", "response_json_schema": schema}
    response = await generate(
        provider, request([UserMessage(content="q")], provider_options=options)
    )
    assert response.content == '{"city":"Paris"}'
    config = fake.last_body["generationConfig"]
    assert config == {"responseMimeType": "application/json", "responseJsonSchema": schema}
