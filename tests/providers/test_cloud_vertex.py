"""Claude on Google Vertex AI through ``anthropic.AsyncAnthropicVertex`` (spec 05 §5.12.3):
C05-170 … C05-174.

Requests go through the real SDK client to the Anthropic fake, which checks Vertex's
``:streamRawPredict`` path and the bearer token; Application Default Credentials are
exercised for real: ``google-auth`` signs a service-account assertion and exchanges it at a
local token endpoint, which verifies the signature.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import fake_anthropic as fa
import pytest

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    ProviderRegistry,
    ProviderRequest,
    ReasoningRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
    generate,
)
from threadloom.providers.anthropic_vertex import AnthropicVertexProvider

MODEL = "claude-sonnet-4@20250514"
PROJECT, REGION = "team-project", "us-east5"
TOKEN = "ya29.fake-access-token"
TOOLS = [ToolSpec(name="lookup", description="Look up", parameters={"type": "object"})]
PATH = (
    f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/{MODEL}"
    ":streamRawPredict"
)
_GOOGLE_ENV = (
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "ANTHROPIC_VERTEX_BASE_URL",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
)


class FakeVertex(fa.FakeAnthropic):
    """The Anthropic fake behind Vertex's rules: the ``rawPredict`` / ``streamRawPredict``
    path of a publisher model and a bearer token from ``tokens`` (else Google's 401)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens = {TOKEN}

    def refuse(self, request: fa.Recorded, raw: bytes) -> fa.ErrorReply | None:
        if not request.path.startswith("/v1/projects/") or ":" not in request.path:
            return fa.ErrorReply(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.tokens:
            error = {
                "code": 401,
                "message": "Request had invalid authentication credentials.",
                "status": "UNAUTHENTICATED",
            }
            return fa.ErrorReply(401, {"error": error})
        return None


@pytest.fixture(autouse=True)
def _no_google_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _GOOGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))  # no gcloud login
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # google-auth: do not probe the metadata server


@pytest.fixture
async def fake() -> AsyncIterator[FakeVertex]:
    async with FakeVertex() as server:
        yield server


@pytest.fixture
async def provider(fake: FakeVertex) -> AsyncIterator[AnthropicVertexProvider]:
    p = AnthropicVertexProvider(
        region=REGION, project_id=PROJECT, access_token=TOKEN, base_url=f"{fake.base_url}/v1"
    )
    yield p
    await p.aclose()


def request(*messages: Any, **fields: Any) -> ProviderRequest:
    return ProviderRequest(
        model=MODEL, messages=list(messages) or [UserMessage(content="hi")], **fields
    )


async def test_c05_170_stream_raw_predict_with_thinking_and_tools(
    fake: FakeVertex, provider: AnthropicVertexProvider
) -> None:
    """``POST …/publishers/anthropic/models/{model}:streamRawPredict`` with ``Authorization:
    Bearer``; the body is the Messages body with ``anthropic_version`` ``vertex-2023-10-16``
    and no ``model``; the Messages event stream maps as on Anthropic's API."""
    fake.stream(
        [
            fa.message_start(input_tokens=12),
            *fa.thinking_block(0, "plan", "sig-v"),
            *fa.tool_use_block(1, "toolu_a", "lookup", '{"q":"a"}'),
            *fa.tool_use_block(2, "toolu_b", "lookup", '{"q":"b"}'),
            fa.message_delta("tool_use", 9),
            fa.message_stop(),
        ]
    )
    reasoning = ReasoningRequest(max_tokens=2048)
    response = await generate(provider, request(tools=TOOLS, reasoning=reasoning))
    [sent] = fake.requests
    assert sent.path == PATH
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.body["anthropic_version"] == "vertex-2023-10-16"
    assert "model" not in sent.body and sent.body["stream"] is True
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert response.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "plan",
            "signature": "sig-v",
            "format": "anthropic-claude-v1",
            "index": 0,
        }
    ]
    assert [c.id for c in response.tool_calls] == ["toolu_a", "toolu_b"]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 9)


async def test_c05_171_thinking_replayed_before_the_tool_use_blocks(
    fake: FakeVertex, provider: AnthropicVertexProvider
) -> None:
    """The tool round on Vertex replays the signed thinking block unchanged before the
    ``tool_use`` block and keeps thinking enabled."""
    fake.stream(
        [
            fa.message_start(),
            *fa.thinking_block(0, "plan", "sig-v"),
            *fa.tool_use_block(1, "toolu_a", "lookup", '{"q":"a"}'),
            fa.message_delta("tool_use"),
            fa.message_stop(),
        ]
    )
    reasoning = ReasoningRequest(effort="low")
    first = await generate(provider, request(tools=TOOLS, reasoning=reasoning))
    fake.stream(fa.simple_text_stream("done"))
    assistant = AssistantMessage(
        content=None, tool_calls=first.tool_calls, reasoning_details=first.reasoning_details
    )
    result = ToolMessage(tool_call_id="toolu_a", name="lookup", content="r")
    second = await generate(
        provider, request(UserMessage(content="hi"), assistant, result, reasoning=reasoning)
    )
    assert second.content == "done"
    assert fake.last_body["thinking"]["type"] == "enabled"
    assert fake.last_body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig-v"},
        {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"q": "a"}},
    ]


@pytest.fixture
def token_endpoint() -> Iterator[tuple[str, list[dict[str, list[str]]]]]:
    """A local OAuth token endpoint answering every grant with ``TOKEN``; the grants it
    received (form fields) are listed."""
    grants: list[dict[str, list[str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            grants.append(parse_qs(self.rfile.read(length).decode()))
            payload = json.dumps(
                {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token", grants
    finally:
        server.shutdown()
        server.server_close()


def service_account_file(path: Path, token_uri: str) -> Any:
    """A service-account key file (a fresh RSA key) whose token endpoint is ``token_uri``;
    returns the public key to verify its assertions with."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "key-1",
        "private_key": pem,
        "client_email": f"runner@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(info))
    return key.public_key()


def verified_claims(assertion: str, public_key: Any) -> dict[str, Any]:
    """The claims of an RS256 JWT assertion whose signature ``public_key`` verifies."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    def b64(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    header, payload, signature = assertion.split(".")
    public_key.verify(
        b64(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    claims: dict[str, Any] = json.loads(b64(payload))
    return claims


async def test_c05_172_application_default_credentials_from_the_environment(
    fake: FakeVertex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    token_endpoint: tuple[str, list[dict[str, list[str]]]],
) -> None:
    """The built-in ``anthropic-vertex`` with ``CLOUD_ML_REGION``,
    ``ANTHROPIC_VERTEX_PROJECT_ID`` and ``GOOGLE_APPLICATION_CREDENTIALS`` (a
    service-account key file): google-auth signs a JWT assertion and exchanges it at the
    file's token endpoint; the request carries the access token."""
    token_uri, grants = token_endpoint
    adc = tmp_path / "adc.json"
    public_key = service_account_file(adc, token_uri)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    monkeypatch.setenv("CLOUD_ML_REGION", REGION)
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", PROJECT)
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", f"{fake.base_url}/v1")
    registry = ProviderRegistry()
    fake.stream(fa.simple_text_stream("adc"))
    try:
        assert (await generate(registry.get("anthropic-vertex"), request())).content == "adc"
    finally:
        await registry.aclose()
    assert fake.requests[0].path == PATH
    assert fake.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    [grant] = grants
    assert grant["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    claims = verified_claims(grant["assertion"][0], public_key)
    assert claims["iss"] == f"runner@{PROJECT}.iam.gserviceaccount.com"
    assert claims["scope"] == "https://www.googleapis.com/auth/cloud-platform"


async def test_c05_173_missing_settings_credentials_and_sdk(
    fake: FakeVertex, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No region → ``CLOUD_ML_REGION``; no project → ``ANTHROPIC_VERTEX_PROJECT_ID`` (at
    load and as the first request's ``authentication`` error); credentials that cannot be
    loaded → one-line ``authentication`` error naming Google's reason; without google-auth
    the registry's one-line error names the extra."""
    registry = ProviderRegistry()

    class M:
        name, provider = "claude", "anthropic-vertex"

    for variable, value in [
        ("CLOUD_ML_REGION", REGION),
        ("ANTHROPIC_VERTEX_PROJECT_ID", PROJECT),
    ]:
        [missing] = registry.missing_credentials([M()])
        assert missing.variable == variable
        with pytest.raises(ProviderError) as caught:
            await generate(registry.get("anthropic-vertex"), request())
        assert (caught.value.code, caught.value.message) == (
            "authentication",
            f"{variable} is not set",
        )
        monkeypatch.setenv(variable, value)
    assert registry.missing_credentials([M()]) == []
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", f"{fake.base_url}/v1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "absent.json"))
    with pytest.raises(ProviderError) as caught:
        await generate(registry.get("anthropic-vertex"), request())
    error = caught.value
    assert (error.code, error.retryable) == ("authentication", False)
    assert error.message.startswith("Google credentials: ") and "\n" not in error.message
    assert "absent.json" in error.message
    assert fake.requests == []
    await registry.aclose()

    monkeypatch.setitem(sys.modules, "google.auth", None)
    with pytest.raises(ProviderError) as caught:
        ProviderRegistry().get("anthropic-vertex")
    assert caught.value.message == (
        "provider anthropic-vertex is not available:"
        " google-auth is not installed (pip install 'threadloom[vertex]')"
    )


async def test_c05_174_errors_in_google_and_anthropic_envelopes(
    fake: FakeVertex, provider: AnthropicVertexProvider
) -> None:
    """Google's 429 envelope → ``rate_limit``; a 529 ``overloaded_error`` → ``overloaded``;
    an invalid token → 401 → ``authentication``; an ``overloaded_error`` event inside the
    stream → ``overloaded``."""
    quota = {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}
    fake.error(429, {"error": quota})
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Over"}}
    fake.error(529, overloaded)
    fake.stream([fa.message_start(), fa.error_event("overloaded_error", "Overloaded")])
    codes = []
    for _ in range(3):
        with pytest.raises(ProviderError) as caught:
            await generate(provider, request())
        codes.append(caught.value.code)
    assert codes == ["rate_limit", "overloaded", "overloaded"]
    fake.tokens.clear()
    with pytest.raises(ProviderError) as caught:
        await generate(provider, request())
    assert (caught.value.code, caught.value.status) == ("authentication", 401)
