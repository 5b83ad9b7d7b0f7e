"""The reducer's error for a failed run (spec 11 §11.5.4 rule 4, spec 01 §1.7.4): case
C11-046. Pure reducer on literal frames."""

from __future__ import annotations

from typing import Any

from threadloom.client.reduce import FrameEvent, ThreadView, empty_view, reduce_all
from threadloom.records import StatusError

CAUSE = {
    "type": "ProviderError",
    "message": 'Model "M" (openai): OPENAI_API_KEY is not set',
    "log_id": "row-1",
    "code": "authentication",
    "retryable": False,
}


def _status(state: str, since: int, reason: str | None, error: Any = None) -> FrameEvent:
    body: dict[str, Any] = {"state": state, "since": since, "reason": reason}
    if error is not None:
        body["error"] = error
    return FrameEvent({"type": "thread_status", "seq": 0, "status": body, "terminated": None})


def _run(*events: FrameEvent) -> ThreadView:
    return reduce_all(empty_view("T"), events)


def test_c11_046_view_error_says_why_the_run_failed() -> None:
    view = _run(_status("running", 1, None), _status("failed", 2, "step_error", CAUSE))
    error = view.error
    assert error is not None
    assert (error.kind, error.message, error.retryable, error.recovery) == (
        "server",
        'Model "M" (openai): OPENAI_API_KEY is not set',
        False,
        "check",
    )
    assert error.detail == StatusError.model_validate(CAUSE)
    assert view.status is not None and view.status.error == error.detail

    retryable = {**CAUSE, "code": "rate_limit", "retryable": True, "message": "busy"}
    view = _run(_status("running", 1, None), _status("failed", 2, "step_error", retryable))
    assert view.error is not None
    assert (view.error.retryable, view.error.recovery) == (True, "retry")

    older = _run(_status("running", 1, None), _status("failed", 2, "step_error"))
    assert older.error is not None
    assert (older.error.message, older.error.retryable, older.error.recovery) == (
        "step_error",
        True,
        "check",
    )
    cleared = reduce_all(older, [_status("running", 3, None)])
    assert cleared.error is None
