"""Classifying provider failures into :class:`ProviderError` codes (spec 05 §5.4).

Shared by the SDK adapters so every provider maps HTTP statuses, embedded stream error
codes and ``Retry-After`` headers the same way: status first, then (in the adapter) the
SDK's connection / timeout exception classes, then the body text for ``context_length``
and ``content_filter``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from threadloom.errors import ProviderError, ProviderErrorCode
from threadloom.retry_after import seconds as retry_after_seconds

_CONTEXT_LENGTH_MARKERS = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
    "context length",
    "context window",
)
_CONTENT_FILTER_MARKERS = (
    "content_filter",
    "content_policy",
    "content management policy",
    "flagged by moderation",
    "safety system",
)

#: Embedded error types / codes (Anthropic ``error.type``, OpenAI ``error.code``).
_NAMED_CODES: dict[str, ProviderErrorCode] = {
    "rate_limit_error": "rate_limit",
    "rate_limit_exceeded": "rate_limit",
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "server_error": "server_error",
    "internal_server_error": "server_error",
    "timeout_error": "timeout",
    "authentication_error": "authentication",
    "invalid_api_key": "authentication",
    "permission_error": "permission",
    "not_found_error": "invalid_request",
    "request_too_large": "invalid_request",
    "invalid_request_error": "invalid_request",
    "invalid_prompt": "invalid_request",
    "context_length_exceeded": "context_length",
    "content_filter": "content_filter",
    # Amazon Bedrock's exception events in an InvokeModelWithResponseStream stream
    "throttlingException": "rate_limit",
    "serviceUnavailableException": "overloaded",
    "internalServerException": "server_error",
    "modelStreamErrorException": "server_error",
    "modelTimeoutException": "timeout",
    "validationException": "invalid_request",
}


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, str | bytes):
        return body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        return json.dumps(body, default=str)
    except (TypeError, ValueError):
        return str(body)


def code_from_text(text: str) -> ProviderErrorCode | None:
    """``context_length`` or ``content_filter`` when the error text says so, else None."""
    lowered = text.lower()
    if any(marker in lowered for marker in _CONTEXT_LENGTH_MARKERS):
        return "context_length"
    if any(marker in lowered for marker in _CONTENT_FILTER_MARKERS):
        return "content_filter"
    return None


def code_for_status(status: int, body: Any = None) -> ProviderErrorCode:
    """The §5.4 code of an HTTP error status (``body`` refines 400 / 413 / 422)."""
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status >= 500 or status == 409:
        return "server_error"
    if status == 408:
        return "timeout"
    if status == 401:
        return "authentication"
    if status == 403:
        return "permission"
    if status in (400, 404, 413, 422):
        refined = code_from_text(_body_text(body)) if status != 404 else None
        return refined or "invalid_request"
    return "unknown"


def code_for_error(code: str | int | None, message: str = "") -> ProviderErrorCode:
    """The §5.4 code of an error event inside a stream (OpenRouter, Anthropic, Responses).

    A numeric ``code`` is read as an HTTP status; a known error type is mapped by name;
    otherwise the message text decides ``context_length`` / ``content_filter``; else
    ``unknown``.
    """
    if isinstance(code, int) or (isinstance(code, str) and code.isdigit()):
        return code_for_status(int(code), message)
    named = _NAMED_CODES.get(code or "")
    if named == "invalid_request":
        return code_from_text(message) or named
    if named is not None:
        return named
    return code_from_text(f"{code or ''} {message}") or "unknown"


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (ms) or ``retry-after`` (seconds or an HTTP
    date); None when absent or unreadable (``threadloom.retry_after``)."""
    return retry_after_seconds(headers)


def error_for_status(
    status: int,
    message: str,
    *,
    provider: str,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """A :class:`ProviderError` for an HTTP error response, with ``retry_after`` read
    from its headers and ``retryable`` the default of the code."""
    return ProviderError(
        message,
        code=code_for_status(status, body),
        status=status,
        retry_after=retry_after_from_headers(headers),
        provider=provider,
        body=body,
    )


def missing_setting(variable: str, provider: str) -> ProviderError:
    """The error of a request whose credential or required setting is absent (spec 05
    §5.2.2): ``authentication``, not retryable, ``"<VAR> is not set"``."""
    return ProviderError(
        f"{variable} is not set", code="authentication", retryable=False, provider=provider
    )


__all__ = [
    "code_for_error",
    "code_for_status",
    "code_from_text",
    "error_for_status",
    "missing_setting",
    "retry_after_from_headers",
]
