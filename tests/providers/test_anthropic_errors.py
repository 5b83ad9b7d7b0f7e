"""Errors of the Anthropic adapter (spec 05 §5.4, §5.2.2): HTTP statuses, error events
inside the stream, transport failures and missing credentials, through the real SDK
against the local fake server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import fake_anthropic as fa
import pytest

from threadloom.errors import ProviderError
from threadloom.providers import ProviderRequest, TextDelta, UserMessage, generate
from threadloom.providers.anthropic import AnthropicProvider


@pytest.fixture
async def fake() -> AsyncIterator[fa.FakeAnthropic]:
    async with fa.FakeAnthropic() as server:
        yield server


@pytest.fixture
async def provider(fake: fa.FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key="sk-test", base_url=fake.base_url)
    yield p
    await p.aclose()


def hi() -> ProviderRequest:
    return ProviderRequest(model="claude-test", messages=[UserMessage(content="hi")])


def body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


async def fail(provider: AnthropicProvider) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await generate(provider, hi())
    return info.value


async def test_429_retry_after_and_single_request(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.error(429, body("rate_limit_error", "slow down"), {"retry-after": "3"})
    error = await fail(provider)
    assert (error.code, error.retryable, error.retry_after, error.status) == (
        "rate_limit",
        True,
        3.0,
        429,
    )
    assert error.provider == "anthropic" and error.message == "slow down"
    assert error.body == body("rate_limit_error", "slow down")
    assert len(fake.requests) == 1  # max_retries=0


async def test_retry_after_ms_wins(fake: fa.FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.error(429, body("rate_limit_error", "x"), {"retry-after-ms": "1500", "retry-after": "9"})
    assert (await fail(provider)).retry_after == 1.5


@pytest.mark.parametrize(
    ("status", "error_body", "code", "retryable"),
    [
        (401, body("authentication_error", "invalid x-api-key"), "authentication", False),
        (403, body("permission_error", "no"), "permission", False),
        (
            400,
            body("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
            "context_length",
            False,
        ),
        (400, body("invalid_request_error", "messages: field required"), "invalid_request", False),
        (404, body("not_found_error", "model: claude-nope"), "invalid_request", False),
        (413, body("request_too_large", "too big"), "invalid_request", False),
        (529, body("overloaded_error", "Overloaded"), "overloaded", True),
        (503, body("api_error", "unavailable"), "overloaded", True),
        (500, body("api_error", "Internal server error"), "server_error", True),
        (500, body("overloaded_error", "Overloaded"), "overloaded", True),
        (409, body("api_error", "conflict"), "server_error", True),
        (408, body("timeout_error", "timeout"), "timeout", True),
    ],
)
async def test_http_status_mapping(
    fake: fa.FakeAnthropic,
    provider: AnthropicProvider,
    status: int,
    error_body: dict[str, Any],
    code: str,
    retryable: bool,
) -> None:
    fake.error(status, error_body)
    error = await fail(provider)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("kind", "code", "retryable"),
    [
        ("overloaded_error", "overloaded", True),
        ("rate_limit_error", "rate_limit", True),
        ("api_error", "server_error", True),
        ("invalid_request_error", "invalid_request", False),
        ("mystery_error", "unknown", True),
    ],
)
async def test_error_event_inside_the_stream(
    fake: fa.FakeAnthropic, provider: AnthropicProvider, kind: str, code: str, retryable: bool
) -> None:
    fake.stream([fa.message_start(), *fa.text_block(0, "part"), fa.error_event(kind, "went wrong")])
    events: list[Any] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(hi()):
            events.append(event)
    assert events == [TextDelta(text="part")]  # partial output, then the error
    error = info.value
    assert (error.code, error.retryable, error.message) == (code, retryable, "went wrong")
    assert error.status is None and error.body == body(kind, "went wrong")


async def test_stream_ending_without_message_stop(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream([fa.message_start(), *fa.text_block(0, "cut off")])
    error = await fail(provider)
    assert (error.code, error.retryable) == ("connection", True)


async def test_connection_dropped_mid_stream(
    fake: fa.FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.stream([fa.message_start(), *fa.text_block(0, "par")], truncate=True)
    events: list[Any] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider.stream(hi()):
            events.append(event)
    assert events == [TextDelta(text="par")]
    assert (info.value.code, info.value.retryable) == ("connection", True)


async def test_connection_refused() -> None:
    # the socket stays bound, never listening, until the request failed: no other process
    # can start listening on the port meanwhile (as it could once the socket was closed)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        provider = AnthropicProvider(api_key="sk-test", base_url=f"http://127.0.0.1:{port}")
        try:
            error = await fail(provider)
        finally:
            await provider.aclose()
    assert (error.code, error.retryable, error.status) == ("connection", True, None)


async def test_missing_key_fails_at_first_request_without_http(
    fake: fa.FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = AnthropicProvider(base_url=fake.base_url)  # constructing needs no key
    error = await fail(provider)
    assert (error.code, error.retryable, error.message) == (
        "authentication",
        False,
        "ANTHROPIC_API_KEY is not set",
    )
    assert fake.requests == []


async def test_credentials_and_base_url_from_environment(
    fake: fa.FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = AnthropicProvider()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    try:
        response = await generate(provider, hi())
    finally:
        await provider.aclose()
    assert response.content == "ok"
    assert fake.requests[0].headers["x-api-key"] == "sk-env"
