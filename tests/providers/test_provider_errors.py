"""ProviderError (spec 05 §5.4) and the shared classification helpers."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from threadloom.errors import PROVIDER_ERROR_RETRYABLE, ProviderError, ThreadloomError
from threadloom.providers import ProviderError as ReExported
from threadloom.providers.errormap import (
    code_for_error,
    code_for_status,
    error_for_status,
    retry_after_from_headers,
)


def test_fields_and_defaults() -> None:
    error = ProviderError("boom")
    assert isinstance(error, ThreadloomError) and ReExported is ProviderError
    assert (error.message, str(error), error.code, error.retryable) == (
        "boom",
        "boom",
        "unknown",
        True,
    )
    assert (error.status, error.retry_after, error.provider, error.body) == (None, None, "", None)

    full = ProviderError(
        "slow down",
        code="rate_limit",
        retryable=False,
        status=429,
        retry_after=3,
        provider="openai",
        body={"error": {"code": "x"}},
    )
    assert full.retryable is False  # an explicit flag wins over the code default
    assert full.retry_after == 3.0 and isinstance(full.retry_after, float)
    assert (full.status, full.provider, full.body) == (429, "openai", {"error": {"code": "x"}})


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("rate_limit", True),
        ("overloaded", True),
        ("server_error", True),
        ("connection", True),
        ("timeout", True),
        ("context_length", False),
        ("content_filter", False),
        ("invalid_request", False),
        ("authentication", False),
        ("permission", False),
        ("unknown", True),
    ],
)
def test_retryable_default_per_code(code: str, retryable: bool) -> None:
    assert ProviderError("x", code=code).retryable is retryable  # type: ignore[arg-type]
    assert PROVIDER_ERROR_RETRYABLE[code] is retryable


def test_unknown_code_is_rejected() -> None:
    with pytest.raises(ValueError):
        ProviderError("x", code="teapot")  # type: ignore[arg-type]


def test_pickle_round_trip() -> None:
    error = ProviderError("x", code="timeout", status=408, retry_after=1.5, provider="p")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.message, copy.code, copy.status, copy.retry_after, copy.provider) == (
        "x",
        "timeout",
        408,
        1.5,
        "p",
    )


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (429, None, "rate_limit"),
        (503, None, "overloaded"),
        (529, None, "overloaded"),
        (500, None, "server_error"),
        (502, None, "server_error"),
        (504, None, "server_error"),
        (599, None, "server_error"),
        (409, None, "server_error"),
        (408, None, "timeout"),
        (400, {"error": {"code": "context_length_exceeded"}}, "context_length"),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", "context_length"),
        (400, {"error": {"message": "maximum context length is 8192"}}, "context_length"),
        (400, {"error": {"code": "content_filter"}}, "content_filter"),
        (400, {"error": {"message": "bad field"}}, "invalid_request"),
        (404, None, "invalid_request"),
        (413, None, "invalid_request"),
        (422, None, "invalid_request"),
        (401, None, "authentication"),
        (403, None, "permission"),
        (418, None, "unknown"),
    ],
)
def test_code_for_status(status: int, body: object, code: str) -> None:
    assert code_for_status(status, body) == code


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("overloaded_error", "", "overloaded"),
        ("rate_limit_error", "", "rate_limit"),
        ("invalid_request_error", "prompt is too long", "context_length"),
        ("invalid_request_error", "bad", "invalid_request"),
        (502, "upstream", "server_error"),
        ("429", "", "rate_limit"),
        ("mystery", "", "unknown"),
        (None, "maximum context length exceeded", "context_length"),
    ],
)
def test_code_for_error(code: str | int | None, message: str, expected: str) -> None:
    assert code_for_error(code, message) == expected


def test_retry_after_headers() -> None:
    assert retry_after_from_headers(None) is None
    assert retry_after_from_headers({"Retry-After": "3"}) == 3.0
    assert retry_after_from_headers({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    value = retry_after_from_headers({"retry-after": later})
    assert value is not None and 25 <= value <= 31


def test_error_for_status() -> None:
    error = error_for_status(
        429, "Too many", provider="openai", body={"e": 1}, headers={"retry-after": "3"}
    )
    assert (error.code, error.retryable, error.retry_after, error.status) == (
        "rate_limit",
        True,
        3.0,
        429,
    )
    assert (error.provider, error.body) == ("openai", {"e": 1})
