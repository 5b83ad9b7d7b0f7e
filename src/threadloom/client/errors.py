"""The client's error hierarchy (spec 11 §11.2.4).

``APIError`` subclasses carry the server's error body of spec 08 §8.1.3: ``code`` and
``details`` as sent, ``message`` = the body's ``error``. The credential never appears in them.
Every error derives from ``threadloom.ThreadloomError``, the base of every error Threadloom
raises, in-process or over HTTP: one ``except`` catches them all.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from threadloom.errors import ThreadloomError as ThreadloomError
from threadloom.retry_after import seconds as retry_after_seconds


class TransportError(ThreadloomError):
    """No HTTP answer: connect error, timeout, dropped connection."""

    def __init__(self, message: str, *, maybe_sent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.maybe_sent = maybe_sent
        """False only when the request provably never left (connection refused or not made)."""


class APIError(ThreadloomError):
    """Any 4xx/5xx answer."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        *,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: list[dict[str, Any]] = list(details or [])
        self.request_id = request_id
        self.body = body


class BadRequestError(APIError):
    """400 (also 413, 415)."""


class AuthenticationError(APIError):
    """401."""


class PermissionDeniedError(APIError):
    """403."""


class NotFoundError(APIError):
    """404."""


class ConflictError(APIError):
    """409."""


class ApprovalNotFoundError(NotFoundError):
    """404 ``approval_not_found``: the thread has no approval of that tool call (spec 14)."""


class ApprovalConflictError(ConflictError):
    """409 ``approval_conflict``: the decision cannot apply — the approval was decided or
    cancelled already (``state`` says which), or the arguments hash is not the one shown."""

    state: str | None = None


class ThreadTerminatedError(APIError):
    """423: the thread is terminated; ``terminated`` is its timestamp (µs)."""

    terminated: int | None = None


class RateLimitError(APIError):
    """429; ``retry_after`` in seconds when the server said."""

    retry_after: float | None = None


class ServerError(APIError):
    """5xx."""


class StreamClosed(ThreadloomError):
    """The stream ended for good."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"stream closed: {code} {reason}")
        self.code = code
        self.reason = reason


class ThreadDeletedError(StreamClosed):
    """Close code 1000 ``Thread deleted``."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    413: BadRequestError,
    415: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    423: ThreadTerminatedError,
    429: RateLimitError,
}


_BY_CODE: dict[str, type[APIError]] = {
    "approval_not_found": ApprovalNotFoundError,
    "approval_conflict": ApprovalConflictError,
}
"""A more precise error for some codes (a subclass of the status's class)."""


def _retry_after(response: httpx.Response, body: Any) -> float | None:
    waited = retry_after_seconds(response.headers)
    if waited is not None:
        return waited
    if isinstance(body, dict) and isinstance(body.get("retryAfter"), int | float):
        return float(body["retryAfter"])
    return None


def error_from_response(response: httpx.Response) -> APIError:
    """The typed error of a 4xx/5xx answer."""
    status = response.status_code
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    try:
        body: Any = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        body = None
    request_id = response.headers.get("x-request-id")
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code = body.get("code") if isinstance(body.get("code"), str) else "unknown"
        details = body.get("details") if isinstance(body.get("details"), list) else []
        if isinstance(body.get("requestId"), str):
            request_id = body["requestId"]
        precise = _BY_CODE.get(str(code))
        if precise is not None and issubclass(precise, cls):
            cls = precise
        error = cls(status, str(code), body["error"], details, request_id=request_id, body=body)
    else:
        error = cls(status, "unknown", response.text, [], request_id=request_id, body=body)
    if isinstance(error, ThreadTerminatedError) and isinstance(body, dict):
        terminated = body.get("terminated")
        error.terminated = terminated if isinstance(terminated, int) else None
    if isinstance(error, ApprovalConflictError) and isinstance(body, dict):
        state = body.get("state")
        error.state = state if isinstance(state, str) else None
    if isinstance(error, RateLimitError):
        error.retry_after = _retry_after(response, body)
    return error
