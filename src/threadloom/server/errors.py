"""The one error shape of the HTTP API (spec 08 §8.1.3) and the mapping from Threadloom's
exceptions to it.

Every 4xx/5xx body is ``{"error", "code"}`` plus ``details`` for validation failures and the
few extra keys a section names (``terminated`` on 423, ``threadId`` on a failed delete).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from threadloom import errors as E

log = logging.getLogger("threadloom.server")


class ApiError(Exception):
    """An answer other than 2xx: raise it anywhere in a route or dependency."""

    def __init__(
        self,
        status: int,
        code: str,
        error: str,
        *,
        details: Sequence[Mapping[str, str]] | None = None,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(error)
        self.status = status
        self.code = code
        self.error = error
        self.details = [dict(d) for d in details] if details else None
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.error, "code": self.code}
        if self.details is not None:
            out["details"] = self.details
        out.update(self.extra)
        return out

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def invalid(message: str, details: Sequence[tuple[str, str]] | None = None) -> ApiError:
    """A 400 ``invalid_request``; ``details`` defaults to one entry derived from nothing."""
    return ApiError(
        400,
        "invalid_request",
        message,
        details=[{"field": f, "problem": p} for f, p in (details or [])],
    )


def bad_field(field: str, problem: str, message: str | None = None) -> ApiError:
    return invalid(message or f"{field} {problem}", [(field, problem)])


def not_found(message: str = "Not found", code: str = "not_found") -> ApiError:
    return ApiError(404, code, message)


def from_threadloom(exc: E.ThreadloomError) -> ApiError:
    """The HTTP answer for an exception raised by the thread core or the engine."""
    message = str(exc)
    if isinstance(exc, E.ThreadNotFound):
        return ApiError(404, "thread_not_found", message)
    if isinstance(exc, E.MessageNotFound):
        return ApiError(404, "message_not_found", "Message not found")
    if isinstance(exc, E.AgentNotFound):
        return ApiError(404, "agent_not_found", message)
    if isinstance(exc, E.MessageGenerating):
        return ApiError(409, "message_generating", "Message is being generated")
    if isinstance(exc, E.ThreadTerminated):
        return ApiError(423, "thread_terminated", message, extra={"terminated": exc.terminated_at})
    if isinstance(exc, E.CompactionNotFound):
        return ApiError(404, "compaction_not_found", message)
    if isinstance(exc, E.NothingToCompact):
        return ApiError(409, "nothing_to_compact", message)
    if isinstance(exc, E.MemoryConflict):
        return ApiError(409, "memory_conflict", message, extra={"version": exc.version})
    if isinstance(exc, E.ScheduleNotFound):
        return ApiError(404, "schedule_not_found", message)
    if isinstance(exc, E.ScheduleExists):
        return ApiError(409, "schedule_exists", message)
    if isinstance(exc, E.TriggerNotFound):
        return ApiError(404, "trigger_not_found", message)
    if isinstance(exc, E.TriggerExists):
        return ApiError(409, "trigger_exists", message)
    if isinstance(exc, E.ApprovalNotFound):
        return ApiError(404, "approval_not_found", message)
    if isinstance(exc, E.ApprovalForbidden):
        return ApiError(403, "approval_forbidden", message)
    if isinstance(exc, E.ApprovalConflict):
        return ApiError(409, "approval_conflict", message, extra={"state": exc.state})
    if isinstance(exc, E.StateConflict):
        return ApiError(409, "state_conflict", message, extra={"version": exc.version})
    if isinstance(exc, E.StateTooLarge):
        return ApiError(413, "payload_too_large", message)
    if isinstance(exc, E.ThreadBusy):
        return ApiError(409, "thread_running", message)
    if isinstance(exc, E.ForkPointUnfinished):
        return ApiError(409, "fork_point_unfinished", message, extra={"message_id": exc.message_id})
    if isinstance(exc, E.FileTooLarge):
        return ApiError(413, "payload_too_large", message)
    if isinstance(exc, E.FileNotFound):
        return ApiError(404, "not_found", message)
    if isinstance(exc, E.FileExists | E.IsADirectory | E.NotADirectory):
        return ApiError(409, "conflict", message)
    if isinstance(exc, E.ThreadExists):
        return ApiError(409, "thread_exists", message, extra={"id": exc.existing_id})
    if isinstance(exc, E.FormatTooNew):
        return ApiError(
            400,
            "unsupported_version",
            message,
            extra={"version": exc.found, "supported": exc.supported},
        )
    if isinstance(exc, E.PortableFormatError):
        return invalid(message, [(exc.field, exc.problem)])
    if isinstance(exc, E.FileError | E.InvalidArgument):
        return invalid(message, [("body", message)])
    if isinstance(exc, E.StoreUnavailable):
        return unavailable(exc.retry_after_s)
    return internal_error(None)


def unavailable(retry_after_s: int = E.StoreUnavailable.retry_after_s) -> ApiError:
    """503 ``unavailable``: the store cannot be reached now, nothing (or, where a commit
    broke, nothing known) was done; ``Retry-After`` says when to try again (§8.1.3)."""
    return ApiError(
        503,
        "unavailable",
        "The store cannot be reached now; try again later",
        headers={"Retry-After": str(retry_after_s)},
    )


def internal_error(request_id: str | None) -> ApiError:
    return ApiError(
        500,
        "internal_error",
        "Internal server error",
        extra={"requestId": request_id} if request_id else None,
    )


def _validation_field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "request"


def install(app: Any) -> None:
    """Register the handlers that turn every failure into the spec 08 error shape."""
    for exc_class, handler in (
        (ApiError, _api),
        (E.ThreadloomError, _core),
        (Exception, _fault),
        (RequestValidationError, _validation),
        (StarletteHTTPException, _http),
    ):
        app.add_exception_handler(exc_class, handler)


async def _api(request: Request, exc: ApiError) -> JSONResponse:
    return exc.response()


async def _core(request: Request, exc: E.ThreadloomError) -> JSONResponse:
    error = from_threadloom(exc)
    if error.status == 503:
        log.info("request %s: %s", _request_id(request), exc)
    elif error.status >= 500:
        log.exception("request %s failed", _request_id(request), exc_info=exc)
        error = internal_error(_request_id(request))
    return error.response()


async def _fault(request: Request, exc: Exception) -> JSONResponse:
    return internal_error(_request_id(request)).response()


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    details = [
        {"field": _validation_field(e.get("loc", ())), "problem": str(e.get("msg", ""))}
        for e in exc.errors()
    ]
    first = details[0] if details else {"field": "request", "problem": "is invalid"}
    return ApiError(
        400, "invalid_request", f"{first['field']}: {first['problem']}", details=details
    ).response()


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    if exc.status_code == 404:
        return not_found().response()
    if exc.status_code == 405:
        allow = ", ".join(_allowed_methods(request))
        return ApiError(
            405, "method_not_allowed", "Method not allowed", headers={"Allow": allow}
        ).response()
    return ApiError(exc.status_code, "error", str(exc.detail)).response()


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on this path (Starlette reports only one route's);
    ``HEAD`` wherever ``GET`` is (the pipeline serves it as a ``GET``)."""
    allowed: list[str] = []
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    if "GET" in allowed:
        allowed.insert(1, "HEAD")
    return allowed


def _request_id(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None
