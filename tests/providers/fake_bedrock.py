"""A local fake of Amazon Bedrock's InvokeModelWithResponseStream for Claude (spec 05
§5.12.2).

The Anthropic fake with Bedrock's transport: every request must carry a valid AWS SigV4
``Authorization`` header (the fake recomputes the signature from the documented algorithm
with the test's secret key; a bad or missing one is answered 403 as AWS does) unless it
carries a Bedrock API key as a bearer token; the answer is
``application/vnd.amazon.eventstream``: one binary event-stream message per Messages
event, ``:event-type`` ``chunk`` with the JSON payload ``{"bytes": <base64 event>}``, or an
``exception`` message (``throttlingException``, …) — the framing of the AWS event-stream
format (prelude with lengths and CRC32, typed headers, payload, message CRC32).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import struct
import zlib
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from fake_anthropic import ErrorReply, FakeAnthropic, Recorded

ACCESS_KEY = "AKIDFAKEEXAMPLE"
SECRET_KEY = "fake/secret/key+EXAMPLE"
BEARER = "bedrock-api-key-fake"

_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<scope>[^,]+), "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$"
)


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # name length, name, value type 7 (string), value length, value
    return (
        struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value))
    ) + raw_value


def event_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", zlib.crc32(body))


def chunk(data: dict[str, Any]) -> bytes:
    """A ``chunk`` event carrying one Messages API event."""
    inner = base64.b64encode(json.dumps(data).encode()).decode()
    payload = json.dumps({"bytes": inner, "p": "abcdefghij"}).encode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return event_message(headers, payload)


def exception(kind: str, message: str) -> bytes:
    """An exception message inside the stream (``throttlingException``, …)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return event_message(headers, json.dumps({"message": message}).encode())


#: ``(event name, data)`` with this name is sent as an exception message, data
#: ``{"type": <exception type>, "message": ...}``.
EXCEPTION = "__exception__"


def sigv4_problem(request: Recorded, raw: bytes, secret: str = SECRET_KEY) -> str | None:
    """Why ``request`` is not correctly SigV4-signed for service ``bedrock``; None if it is.

    Recomputes the signature as AWS documents it (canonical request → string to sign →
    HMAC chain of date, region, service, ``aws4_request``).
    """
    match = _AUTH.match(request.headers.get("authorization", ""))
    if match is None:
        return "no SigV4 Authorization header"
    date = request.headers.get("x-amz-date", "")
    scope = match["scope"]
    day, region, service, terminator = scope.split("/")
    if service != "bedrock" or terminator != "aws4_request" or not date.startswith(day):
        return f"bad credential scope {scope}"
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    url = urlsplit(request.path)
    query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
        for k, v in sorted(parse_qsl(url.query, keep_blank_values=True))
    )
    headers = "".join(f"{h}:{' '.join(request.headers.get(h, '').split())}\n" for h in signed)
    canonical = "\n".join(
        [
            request.method,
            quote(url.path, safe="/~"),
            query,
            headers,
            match["signed"],
            hashlib.sha256(raw).hexdigest(),
        ]
    )
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret).encode()
    for part in (day, region, service, terminator):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, match["signature"]):
        return "signature does not match"
    return None


class FakeBedrock(FakeAnthropic):
    """``async with FakeBedrock() as fake``; point ``AnthropicBedrockProvider(base_url=
    fake.base_url, aws_access_key=ACCESS_KEY, aws_secret_key=SECRET_KEY)`` at it."""

    stream_content_type = "application/vnd.amazon.eventstream"

    def __init__(self) -> None:
        super().__init__()
        self.auth_failures: list[str] = []

    def frame(self, name: str, data: dict[str, Any]) -> bytes:
        if name == EXCEPTION:
            return exception(data["type"], data["message"])
        return chunk(data)

    def refuse(self, request: Recorded, raw: bytes) -> ErrorReply | None:
        if request.headers.get("authorization") == f"Bearer {BEARER}":
            return None
        problem = sigv4_problem(request, raw)
        if problem is None:
            return None
        self.auth_failures.append(problem)
        return ErrorReply(403, {"message": f"fake Bedrock: {problem}"})
