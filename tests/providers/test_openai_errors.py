"""Errors, credentials and cancellation of the OpenAI adapters (spec 05 §5.2.2, §5.4).

Conformance cases C05-022 … C05-025 and C05-039, run against a local fake server through
the real SDK (``max_retries=0``: exactly one HTTP request per ``stream()``).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from fake_openai import (
    FakeOpenAIServer,
    JSONResponse,
    ResponsesEvents,
    SSEResponse,
    chat_chunk,
    chat_text_stream,
    error_body,
)

from threadloom.define import Definitions, Model, Prompt
from threadloom.errors import ProviderError
from threadloom.providers import (
    ProviderRegistry,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    UserMessage,
    generate,
)
from threadloom.providers.openai import (
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    map_sdk_error,
)

REQUEST = ProviderRequest(model="gpt-fake", messages=[UserMessage(content="hi")])

Factory = Callable[[str], OpenAIChatProvider | OpenAIResponsesProvider]
ADAPTERS: dict[str, Factory] = {
    "chat": lambda url: OpenAIChatProvider(api_key="sk-test", base_url=url),
    "responses": lambda url: OpenAIResponsesProvider(api_key="sk-test", base_url=url),
}


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest, server: FakeOpenAIServer) -> Any:
    return server.adopt(ADAPTERS[request.param](server.base_url))


async def fail(provider: Any, req: ProviderRequest = REQUEST) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await generate(provider, req)
    return info.value


# --------------------------------------------------------------------------------------
# HTTP errors


async def test_c05_022_rate_limit_with_retry_after(server: FakeOpenAIServer, adapter: Any) -> None:
    body = error_body("Rate limit reached", "rate_limit_exceeded", "requests")
    server.enqueue(JSONResponse(429, body, {"retry-after": "3"}))
    error = await fail(adapter)
    assert (error.code, error.retryable, error.retry_after) == ("rate_limit", True, 3.0)
    assert error.status == 429 and error.provider == adapter.name
    assert error.body == body["error"]
    assert len(server.requests) == 1  # max_retries=0: the SDK did not retry


async def test_retry_after_ms_wins(server: FakeOpenAIServer) -> None:
    server.enqueue(JSONResponse(429, error_body("slow"), {"retry-after-ms": "1500"}))
    error = await fail(server.adopt(ADAPTERS["chat"](server.base_url)))
    assert error.retry_after == 1.5 and len(server.requests) == 1


async def test_c05_023_context_length(server: FakeOpenAIServer, adapter: Any) -> None:
    server.enqueue(
        JSONResponse(
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        )
    )
    error = await fail(adapter)
    assert (error.code, error.retryable, error.status) == ("context_length", False, 400)


async def test_c05_024_authentication(server: FakeOpenAIServer, adapter: Any) -> None:
    server.enqueue(JSONResponse(401, error_body("Incorrect API key", "invalid_api_key")))
    error = await fail(adapter)
    assert (error.code, error.retryable, error.status) == ("authentication", False, 401)


async def test_c05_024_overloaded(server: FakeOpenAIServer, adapter: Any) -> None:
    server.enqueue(JSONResponse(503, error_body("The engine is currently overloaded")))
    error = await fail(adapter)
    assert (error.code, error.retryable, error.status) == ("overloaded", True, 503)
    assert len(server.requests) == 1


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port that refuses connections while the block runs: bound but never listening, so
    no other process can start listening on it meanwhile (as on a port closed before use)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_c05_024_connection_refused(kind: str) -> None:
    with refusing_port() as port:
        provider = ADAPTERS[kind](f"http://127.0.0.1:{port}/v1")
        error = await fail(provider)
        await provider.aclose()
    assert (error.code, error.retryable) == ("connection", True)
    assert isinstance(error.__cause__, openai.APIConnectionError)


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (400, error_body("Invalid value for 'tool_choice'"), "invalid_request", False),
        (
            400,
            error_body("Your request was rejected by our safety system"),
            "content_filter",
            False,
        ),
        (403, error_body("Country not supported"), "permission", False),
        (404, error_body("The model does not exist", "model_not_found"), "invalid_request", False),
        (408, error_body("timeout"), "timeout", True),
        (409, error_body("conflict"), "server_error", True),
        (413, error_body("too large"), "invalid_request", False),
        (422, error_body("unprocessable"), "invalid_request", False),
        (500, error_body("oops", type="server_error"), "server_error", True),
        (502, "<html>Bad gateway</html>", "server_error", True),
    ],
)
async def test_status_codes(
    server: FakeOpenAIServer, status: int, body: Any, code: str, retryable: bool
) -> None:
    server.enqueue(JSONResponse(status, body))
    error = await fail(server.adopt(ADAPTERS["chat"](server.base_url)))
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert len(server.requests) == 1


# --------------------------------------------------------------------------------------
# Errors inside a stream


async def test_openrouter_error_chunk_after_partial_output(server: FakeOpenAIServer) -> None:
    server.enqueue(
        SSEResponse(
            [
                chat_chunk({"content": "par"}),
                {
                    "id": "gen-1",
                    "object": "chat.completion.chunk",
                    "error": {"code": 502, "message": "Provider returned error"},
                    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
                },
            ]
        )
    )
    provider = server.adopt(
        OpenAIChatProvider(api_key="k", base_url=server.base_url, dialect="openrouter")
    )
    events: list[StreamEvent] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(REQUEST):
            events.append(event)
    assert events == [TextDelta(text="par")]
    error = info.value
    assert (error.code, error.retryable, error.status) == ("server_error", True, 502)
    assert error.message == "Provider returned error"


async def test_named_error_chunk(server: FakeOpenAIServer) -> None:
    server.enqueue(
        SSEResponse(
            [{"error": {"code": "rate_limit_exceeded", "message": "slow down", "type": None}}]
        )
    )
    error = await fail(server.adopt(ADAPTERS["chat"](server.base_url)))
    assert (error.code, error.retryable, error.status) == ("rate_limit", True, None)


async def test_connection_dropped_mid_stream(server: FakeOpenAIServer, adapter: Any) -> None:
    if isinstance(adapter, OpenAIChatProvider):
        events: list[Any] = [chat_chunk({"content": "a"})]
    else:
        events = ResponsesEvents().created().events
    server.enqueue(SSEResponse(events, done=False, drop=True))
    error = await fail(adapter)
    assert (error.code, error.retryable) == ("connection", True)


def test_timeout_and_other_exception_classes() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert map_sdk_error(openai.APITimeoutError(request), "p").code == "timeout"
    assert map_sdk_error(httpx.ReadTimeout("slow", request=request), "p").code == "timeout"
    assert map_sdk_error(httpx.ReadError("reset", request=request), "p").code == "connection"
    unknown = map_sdk_error(ValueError("bad json"), "p")
    assert (unknown.code, unknown.retryable, unknown.provider) == ("unknown", True, "p")
    same = ProviderError("x", code="permission")
    assert map_sdk_error(same, "p") is same


# --------------------------------------------------------------------------------------
# Credentials (§5.2.2)


async def test_c05_025_missing_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    registry = ProviderRegistry()
    # The project loads: validation and provider creation read no credentials.
    definitions = Definitions().add(
        Model(name="M", provider="openai", model="gpt-fake"), Prompt(name="P", model="M")
    )
    definitions.validate(providers=registry.names())
    provider = registry.get("openai")
    error = await fail(provider)
    assert (error.code, error.retryable) == ("authentication", False)
    assert error.message == "OPENAI_API_KEY is not set" and error.provider == "openai"
    responses = await fail(registry.get("openai-responses"))
    assert responses.message == "OPENAI_API_KEY is not set"


async def test_missing_openrouter_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-openrouter")
    error = await fail(ProviderRegistry().get("openrouter"))
    assert (error.code, error.message) == ("authentication", "OPENROUTER_API_KEY is not set")


async def test_key_read_at_first_request(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = server.adopt(OpenAIChatProvider(base_url=server.base_url))
    assert (await fail(provider)).code == "authentication"
    assert server.requests == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.enqueue(chat_text_stream("hello"))
    assert (await generate(provider, REQUEST)).content == "hello"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    await provider.aclose()


# --------------------------------------------------------------------------------------
# Cancellation (C05-039)


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_c05_039_cancel_closes_the_stream(server: FakeOpenAIServer, kind: str) -> None:
    if kind == "chat":
        events: list[Any] = [chat_chunk({"content": "a"}), chat_chunk({"content": "b"})]
    else:
        events = ResponsesEvents().created().add("response.output_text.delta", delta="a").events
    server.enqueue(SSEResponse(events, done=False, hang=True))
    provider = server.adopt(ADAPTERS[kind](server.base_url))
    first = asyncio.Event()
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in provider.stream(REQUEST):
            seen.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # not ProviderError
        await task
    await asyncio.wait_for(server.client_disconnected.wait(), 5)
    assert seen[0] == TextDelta(text="a")
    await provider.aclose()
