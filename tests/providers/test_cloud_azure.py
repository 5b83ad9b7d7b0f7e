"""Azure OpenAI through ``openai.AsyncAzureOpenAI`` (spec 05 §5.12.1): C05-150 … C05-157.

Every request goes through the real SDK client to ``fake_azure.FakeAzureOpenAI``, which
answers only Azure's routes (deployment path, ``api-version``) and credentials (``api-key``
or an Entra ID bearer token), as Azure documents them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_azure import API_KEY, FakeAzureOpenAI
from fake_openai import JSONResponse, ResponsesEvents, SSEResponse, chat_chunk, chat_text_stream

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    ProviderRegistry,
    ProviderRequest,
    ReasoningRequest,
    TextDelta,
    ToolMessage,
    ToolSpec,
    UserMessage,
    generate,
)
from threadloom.providers.azure_openai import AzureOpenAIChatProvider, AzureOpenAIResponsesProvider

VERSION = "2024-10-21"
DEPLOYMENT = "gpt-4o-team"
TOOLS = [ToolSpec(name="lookup", description="Look up", parameters={"type": "object"})]
ANTHROPIC_DETAIL = {
    "type": "reasoning.text",
    "text": "t",
    "signature": "s",
    "format": "anthropic-claude-v1",
}
_AZURE_ENV = (
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "OPENAI_API_VERSION",
)


@pytest.fixture(autouse=True)
def _no_azure_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _AZURE_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAzureOpenAI]:
    async with FakeAzureOpenAI() as server:
        yield server


def chat(fake: FakeAzureOpenAI, **options: Any) -> AzureOpenAIChatProvider:
    options.setdefault("api_key", API_KEY)
    provider = AzureOpenAIChatProvider(azure_endpoint=fake.endpoint, api_version=VERSION, **options)
    return fake.adopt(provider)


def request(*messages: Any, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=DEPLOYMENT, messages=list(messages) or [UserMessage(content="hi")], **fields
    )


def parallel_calls_stream() -> SSEResponse:
    """Two tool calls streamed interleaved (Azure streams OpenAI's chunk shapes)."""
    first = {"index": 0, "id": "call_a", "type": "function"}
    second = {"index": 1, "id": "call_b", "type": "function"}
    return SSEResponse(
        [
            chat_chunk({"role": "assistant", "content": None}),
            chat_chunk(
                {"tool_calls": [{**first, "function": {"name": "lookup", "arguments": ""}}]}
            ),
            chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q":"a"}'}}]}),
            chat_chunk(
                {"tool_calls": [{**second, "function": {"name": "lookup", "arguments": ""}}]}
            ),
            chat_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"q":"b"}'}}]}),
            chat_chunk({}, finish_reason="tool_calls"),
            chat_chunk(
                choices=False,
                usage={
                    "prompt_tokens": 40,
                    "completion_tokens": 12,
                    "total_tokens": 52,
                    "prompt_tokens_details": {"cached_tokens": 8},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            ),
        ]
    )


async def test_c05_150_chat_text_on_a_deployment(fake: FakeAzureOpenAI) -> None:
    """Deployment path, ``api-version`` query, ``api-key`` header; the body is the
    ``openai`` dialect's (``max_completion_tokens``, ``reasoning_effort``)."""
    fake.enqueue(chat_text_stream("hello", {"prompt_tokens": 9, "completion_tokens": 2}))
    reasoning = ReasoningRequest(effort="low")
    response = await generate(chat(fake), request(max_output_tokens=50, reasoning=reasoning))
    assert response.content == "hello"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 2)
    [sent] = fake.requests
    assert sent.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions?api-version={VERSION}"
    assert sent.headers["api-key"] == API_KEY and "authorization" not in sent.headers
    assert sent.body["model"] == DEPLOYMENT
    assert sent.body["max_completion_tokens"] == 50
    assert sent.body["reasoning_effort"] == "low"
    assert "max_tokens" not in sent.body


async def test_c05_151_chat_parallel_tool_calls_and_their_results(fake: FakeAzureOpenAI) -> None:
    """Two streamed calls → two calls; the next request carries them and both results, and
    no reasoning field (Azure Chat Completions takes no reasoning input)."""
    fake.enqueue(parallel_calls_stream(), chat_text_stream("done"))
    provider = chat(fake)
    first = await generate(provider, request(tools=TOOLS, parallel_tool_calls=True))
    assert [(c.id, c.arguments) for c in first.tool_calls] == [
        ("call_a", '{"q":"a"}'),
        ("call_b", '{"q":"b"}'),
    ]
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.cached_tokens) == (40, 8)
    assistant = AssistantMessage(
        content=None,
        tool_calls=first.tool_calls,
        reasoning_content="thought",
        reasoning_details=[ANTHROPIC_DETAIL],
    )
    results = [
        ToolMessage(tool_call_id=c.id, name="lookup", content=f"r{c.id}") for c in first.tool_calls
    ]
    second = await generate(
        provider, request(UserMessage(content="hi"), assistant, *results, tools=TOOLS)
    )
    assert second.content == "done"
    messages = fake.last_body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": "lookup", "arguments": c.arguments},
            }
            for c in first.tool_calls
        ],
    }
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "rcall_a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rcall_b"},
    ]
    assert fake.requests[0].body["parallel_tool_calls"] is True


async def test_c05_152_entra_id_token_provider(fake: FakeAzureOpenAI) -> None:
    """An async token provider is asked for every request; its token is sent as
    ``Authorization: Bearer`` and no ``api-key`` is sent."""
    issued: list[str] = []

    async def token() -> str:
        issued.append(f"entra-{len(issued)}")
        return issued[-1]

    fake.tokens.update({"entra-0", "entra-1"})
    fake.enqueue(chat_text_stream("a"), chat_text_stream("b"))
    provider = chat(fake, api_key=None, azure_ad_token_provider=token)
    assert provider.missing_credential() is None
    assert (await generate(provider, request())).content == "a"
    assert (await generate(provider, request())).content == "b"
    assert [r.headers["authorization"] for r in fake.requests] == [
        "Bearer entra-0",
        "Bearer entra-1",
    ]
    assert all("api-key" not in r.headers for r in fake.requests)


async def test_c05_153_responses_reasoning_replay_and_tool_call(fake: FakeAzureOpenAI) -> None:
    """Responses on Azure: ``/openai/responses?api-version=…`` with the deployment as the
    body's model; the reasoning item is stored as details and replayed from its encrypted
    content before the function call it produced."""
    fake.tokens.add("tok")
    provider = fake.adopt(
        AzureOpenAIResponsesProvider(
            azure_endpoint=fake.endpoint,
            api_version="2025-04-01-preview",
            azure_ad_token_provider=lambda: "tok",
        )
    )
    events = ResponsesEvents(model=DEPLOYMENT).created().reasoning("rs_1", ["plan"], "ENC")
    events.function_call("fc_1", "call_1", "lookup", ['{"q":', '"x"}']).completed()
    fake.enqueue(events.stream())
    reasoning = ReasoningRequest(effort="high")
    first = await generate(provider, request(tools=TOOLS, reasoning=reasoning))
    sent = fake.requests[0]
    assert sent.path == "/openai/responses?api-version=2025-04-01-preview"
    assert sent.headers["authorization"] == "Bearer tok"
    assert sent.body["model"] == DEPLOYMENT
    assert sent.body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert sent.body["include"] == ["reasoning.encrypted_content"] and sent.body["store"] is False
    assert first.reasoning_content == "plan"
    assert [d["type"] for d in first.reasoning_details or []] == [
        "reasoning.summary",
        "reasoning.encrypted",
    ]
    fake.enqueue(ResponsesEvents().created().message("done").completed().stream())
    assistant = AssistantMessage(
        content=None,
        tool_calls=first.tool_calls,
        reasoning_content=first.reasoning_content,
        reasoning_details=first.reasoning_details,
    )
    result = ToolMessage(tool_call_id="call_1", name="lookup", content="found")
    second = await generate(
        provider, request(UserMessage(content="hi"), assistant, result, reasoning=reasoning)
    )
    assert second.content == "done"
    assert fake.last_body["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "plan"}],
            "encrypted_content": "ENC",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"q":"x"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
    ]


async def test_c05_154_missing_settings_one_line_each(
    fake: FakeAzureOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-in ``azure-openai`` names the first missing setting at load and fails
    its first request with ``"<VAR> is not set"``; with all three it works from the
    environment alone (``AZURE_OPENAI_AD_TOKEN`` counts as the credential)."""
    registry = ProviderRegistry()

    async def first_error() -> str:
        provider = registry.get("azure-openai")
        with pytest.raises(ProviderError) as caught:
            await generate(provider, request())
        assert (caught.value.code, caught.value.retryable) == ("authentication", False)
        return caught.value.message

    class M:
        name, provider = "m", "azure-openai"

    steps = [
        ("AZURE_OPENAI_ENDPOINT", fake.endpoint),
        ("OPENAI_API_VERSION", VERSION),
        ("AZURE_OPENAI_API_KEY", None),
    ]
    for variable, value in steps:
        [missing] = registry.missing_credentials([M()])
        assert str(missing) == (
            f'Model "m" (provider azure-openai): {variable} is not set;'
            " its requests will fail until it is"
        )
        assert await first_error() == f"{variable} is not set"
        if value is not None:
            monkeypatch.setenv(variable, value)
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "ad-token")
    fake.tokens.add("ad-token")
    assert registry.missing_credentials([M()]) == []
    fake.enqueue(chat_text_stream("from env"))
    assert (await generate(registry.get("azure-openai"), request())).content == "from env"
    assert fake.last_body["model"] == DEPLOYMENT
    assert fake.requests[-1].headers["authorization"] == "Bearer ad-token"
    await registry.aclose()


async def test_c05_155_errors_map_as_for_openai(fake: FakeAzureOpenAI) -> None:
    """429 with ``retry-after`` → ``rate_limit`` after exactly one HTTP request (SDK retries
    off); a wrong key → Azure's 401 → ``authentication``; a content-filtered prompt (400,
    ``content_filter``) → ``content_filter``."""
    fake.enqueue(
        JSONResponse(
            429,
            {"error": {"code": "429", "message": "Rate limit is exceeded."}},
            {"retry-after": "4"},
        )
    )
    with pytest.raises(ProviderError) as caught:
        await generate(chat(fake), request())
    assert (caught.value.code, caught.value.retry_after, caught.value.retryable) == (
        "rate_limit",
        4.0,
        True,
    )
    assert len(fake.requests) == 1
    with pytest.raises(ProviderError) as caught:
        await generate(chat(fake, api_key="wrong"), request())
    assert (caught.value.code, caught.value.status) == ("authentication", 401)
    filtered = {
        "error": {
            "code": "content_filter",
            "message": "The response was filtered due to the prompt triggering Azure"
            " OpenAI's content management policy.",
            "status": 400,
        }
    }
    fake.enqueue(JSONResponse(400, filtered))
    with pytest.raises(ProviderError) as caught:
        await generate(chat(fake), request())
    assert (caught.value.code, caught.value.retryable) == ("content_filter", False)


async def test_c05_156_structured_output_through_provider_options(fake: FakeAzureOpenAI) -> None:
    """``provider_options`` reach the body on Azure as on OpenAI: ``response_format``
    (Chat Completions) and ``text.format`` (Responses) for structured output."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}
    fake.enqueue(chat_text_stream('{"a":"x"}'))
    response = await generate(chat(fake), request(provider_options={"response_format": fmt}))
    assert response.content == '{"a":"x"}'
    assert fake.last_body["response_format"] == fmt
    responses = fake.adopt(
        AzureOpenAIResponsesProvider(
            azure_endpoint=fake.endpoint, api_version=VERSION, api_key=API_KEY
        )
    )
    text = {"format": {"type": "json_schema", "name": "out", "schema": schema}}
    fake.enqueue(ResponsesEvents().created().message('{"a":"y"}').completed().stream())
    response = await generate(responses, request(provider_options={"text": text}))
    assert response.content == '{"a":"y"}' and fake.last_body["text"] == text


async def test_c05_157_streamed_as_it_arrives_and_cancellation_closes_it(
    fake: FakeAzureOpenAI,
) -> None:
    """Deltas reach the consumer while Azure's response is still open; cancelling closes
    the HTTP stream and ``CancelledError`` propagates (no ``ProviderError``)."""
    fake.enqueue(
        SSEResponse(
            [chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "par"})],
            done=False,
            hang=True,
        )
    )
    received: list[Any] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in chat(fake).stream(request()):
            received.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    assert received == [TextDelta(text="par")]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake.client_disconnected.wait(), 5)
    assert task.cancelled()
