"""Claude on Amazon Bedrock through ``anthropic.AsyncAnthropicBedrock`` (spec 05 §5.12.2):
C05-160 … C05-165.

Requests go through the real SDK client (SigV4 signing by botocore) to
``fake_bedrock.FakeBedrock``, which verifies the signature with the test's secret key and
answers in AWS event-stream framing, as InvokeModelWithResponseStream does.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import fake_anthropic as fa
import fake_bedrock as fb
import pytest

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
from threadloom.providers.anthropic_bedrock import AnthropicBedrockProvider

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
TOOLS = [ToolSpec(name="lookup", description="Look up", parameters={"type": "object"})]
FMT = "anthropic-claude-v1"
_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "ANTHROPIC_BEDROCK_BASE_URL",
)


@pytest.fixture(autouse=True)
def _no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credential from this machine: no AWS variables, no shared files, no IMDS."""
    for name in _AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
async def fake() -> AsyncIterator[fb.FakeBedrock]:
    async with fb.FakeBedrock() as server:
        yield server


@pytest.fixture
async def provider(fake: fb.FakeBedrock) -> AsyncIterator[AnthropicBedrockProvider]:
    p = AnthropicBedrockProvider(
        aws_region="eu-west-1",
        aws_access_key=fb.ACCESS_KEY,
        aws_secret_key=fb.SECRET_KEY,
        base_url=fake.base_url,
    )
    yield p
    await p.aclose()


def request(*messages: Any, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL, messages=list(messages) or [UserMessage(content="hi")], **fields
    )


def thinking_and_two_calls() -> list[fa.SSEEvent]:
    return [
        fa.message_start(input_tokens=30, cache_read=100),
        *fa.thinking_block(0, "plan", "sig-b"),
        *fa.redacted_block(1, "REDACTED"),
        *fa.tool_use_block(2, "toolu_a", "lookup", '{"q":', '"a"}'),
        *fa.tool_use_block(3, "toolu_b", "lookup", '{"q":"b"}'),
        fa.message_delta("tool_use", 25),
        fa.message_stop(),
    ]


async def test_c05_160_event_stream_sigv4_thinking_and_parallel_calls(
    fake: fb.FakeBedrock, provider: AnthropicBedrockProvider
) -> None:
    """The stream arrives in AWS event-stream framing at ``/model/{id}/
    invoke-with-response-stream`` of a SigV4-signed request (the fake verified the
    signature); thinking, redacted thinking, two tool calls and usage map as on Anthropic's
    API; the body has ``anthropic_version`` ``bedrock-2023-05-31`` and no model / stream."""
    fake.stream(thinking_and_two_calls())
    reasoning = ReasoningRequest(effort="low")
    response = await generate(provider, request(tools=TOOLS, reasoning=reasoning))
    assert fake.auth_failures == []
    [sent] = fake.requests
    assert sent.path == f"/model/{MODEL}/invoke-with-response-stream"
    assert sent.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={fb.ACCESS_KEY}/")
    assert "/eu-west-1/bedrock/aws4_request" in sent.headers["authorization"]
    assert sent.body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in sent.body and "stream" not in sent.body
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert response.reasoning_content == "plan"
    assert response.reasoning_details == [
        {"type": "reasoning.text", "text": "plan", "signature": "sig-b", "format": FMT, "index": 0},
        {"type": "reasoning.encrypted", "data": "REDACTED", "format": FMT, "index": 1},
    ]
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        ("toolu_a", '{"q":"a"}'),
        ("toolu_b", '{"q":"b"}'),
    ]
    assert response.finish_reason == "tool_calls"
    usage = response.usage
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (130, 100, 25)


async def test_c05_161_thinking_replayed_verbatim_with_the_tool_results(
    fake: fb.FakeBedrock, provider: AnthropicBedrockProvider
) -> None:
    """The tool round's request replays the thinking blocks (text, signature, redacted
    data unchanged) before both ``tool_use`` blocks, with both results in one user
    message, and keeps thinking enabled."""
    fake.stream(thinking_and_two_calls())
    reasoning = ReasoningRequest(effort="low")
    first = await generate(provider, request(tools=TOOLS, reasoning=reasoning))
    fake.stream(fa.simple_text_stream("done"))
    assistant = AssistantMessage(
        content=None,
        tool_calls=first.tool_calls,
        reasoning_content=first.reasoning_content,
        reasoning_details=first.reasoning_details,
    )
    results = [ToolMessage(tool_call_id=c.id, name="lookup", content="r") for c in first.tool_calls]
    second = await generate(
        provider,
        request(UserMessage(content="hi"), assistant, *results, tools=TOOLS, reasoning=reasoning),
    )
    assert second.content == "done" and fake.auth_failures == []
    body = fake.last_body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "sig-b"},
            {"type": "redacted_thinking", "data": "REDACTED"},
            {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"q": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"q": "b"}},
        ],
    }
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ["toolu_a", "toolu_b"]


async def test_c05_162_bedrock_api_key_is_a_bearer_token(
    fake: fb.FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AWS_BEARER_TOKEN_BEDROCK`` (a Bedrock API key) is sent as ``Authorization:
    Bearer`` instead of a SigV4 signature, and counts as the credential."""
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", fb.BEARER)
    provider = AnthropicBedrockProvider(aws_region="us-east-1", base_url=fake.base_url)
    try:
        assert provider.missing_credential() is None
        fake.stream(fa.simple_text_stream("keyed"))
        assert (await generate(provider, request())).content == "keyed"
    finally:
        await provider.aclose()
    assert fake.requests[0].headers["authorization"] == f"Bearer {fb.BEARER}"
    assert "x-amz-date" not in fake.requests[0].headers


async def test_c05_163_errors_http_and_inside_the_event_stream(
    fake: fb.FakeBedrock, provider: AnthropicBedrockProvider
) -> None:
    """A wrong secret → Bedrock's 403 → ``permission``; HTTP 429 ThrottlingException →
    ``rate_limit``; exception messages inside the event stream map by their type:
    ``throttlingException`` → ``rate_limit``, ``modelStreamErrorException`` →
    ``server_error`` (both retryable); one HTTP request each (SDK retries off)."""
    wrong = AnthropicBedrockProvider(
        aws_region="us-east-1",
        aws_access_key=fb.ACCESS_KEY,
        aws_secret_key="not-the-secret",
        base_url=fake.base_url,
    )
    try:
        with pytest.raises(ProviderError) as caught:
            await generate(wrong, request())
    finally:
        await wrong.aclose()
    assert (caught.value.code, caught.value.retryable) == ("permission", False)
    assert fake.auth_failures == ["signature does not match"]
    fake.error(429, {"message": "Too many requests, please wait before trying again."})
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request())
    assert (caught.value.code, caught.value.retryable) == ("rate_limit", True)
    for kind, code in [
        ("throttlingException", "rate_limit"),
        ("modelStreamErrorException", "server_error"),
    ]:
        fake.stream(
            [fa.message_start(), (fb.EXCEPTION, {"type": kind, "message": "stream failed"})]
        )
        with pytest.raises(ProviderError) as caught:
            await generate(provider, request())
        assert (caught.value.code, caught.value.retryable) == (code, True)
        assert caught.value.message == f"Bedrock stream exception: {kind}"
    assert len(fake.requests) == 4


async def test_c05_164_missing_credential_and_missing_sdk(
    fake: fb.FakeBedrock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No AWS credential anywhere → ``AWS_ACCESS_KEY_ID`` is reported at load and the first
    request fails ``authentication`` ``AWS_ACCESS_KEY_ID is not set`` (nothing is sent);
    with the variables set it works. Without boto3 the registry's one-line error names the
    extra to install."""
    registry = ProviderRegistry()
    monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", fake.base_url)
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    class M:
        name, provider = "claude", "anthropic-bedrock"

    [missing] = registry.missing_credentials([M()])
    assert missing.variable == "AWS_ACCESS_KEY_ID"
    with pytest.raises(ProviderError) as caught:
        await generate(registry.get("anthropic-bedrock"), request())
    assert (caught.value.code, caught.value.message) == (
        "authentication",
        "AWS_ACCESS_KEY_ID is not set",
    )
    assert fake.requests == []
    assert [m.variable for m in registry.missing_credentials([M()])] == ["AWS_ACCESS_KEY_ID"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", fb.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", fb.SECRET_KEY)
    assert registry.missing_credentials([M()]) == []
    fake.stream(fa.simple_text_stream("from env"))
    assert (await generate(registry.get("anthropic-bedrock"), request())).content == "from env"
    assert fake.auth_failures == []
    await registry.aclose()

    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(ProviderError) as caught:
        ProviderRegistry().get("anthropic-bedrock")
    assert (caught.value.code, caught.value.retryable) == ("invalid_request", False)
    assert caught.value.message == (
        "provider anthropic-bedrock is not available:"
        " boto3 is not installed (pip install 'threadloom[bedrock]')"
    )


async def test_c05_165_streamed_as_it_arrives_and_cancellation_closes_it(
    fake: fb.FakeBedrock, provider: AnthropicBedrockProvider
) -> None:
    """Event-stream messages are decoded as they arrive: the first text delta reaches the
    consumer while the response is still open; cancelling then closes the HTTP stream and
    ``CancelledError`` propagates (no ``ProviderError``)."""
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
        async for event in provider.stream(request()):
            received.append(event)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    assert received == [TextDelta(text="partial")]
    assert not fake.client_closed.is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake.client_closed.wait(), 5)
    assert task.cancelled()
