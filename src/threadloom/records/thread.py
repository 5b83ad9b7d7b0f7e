"""The persisted shapes of a thread itself (spec 01 §1.6-§1.8): its record, its run
status with the error a failed run keeps, and its subagent registry entries. Plain typed
data, no I/O; ``threadloom.records`` re-exports every name."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from threadloom.errors import InvalidArgument, StateTooLarge

RunState = Literal["idle", "running", "failed"]

FAILED_REASONS: frozenset[str] = frozenset(
    ("step_error", "repeated_tool_error", "execution_lost", "aborted", "budget_exceeded")
)
"""The reasons a run ends with that settle its thread ``failed`` (spec 01 §1.7.2)."""


class StatusError(BaseModel):
    """Why a run failed: kept with its ``failed`` status (spec 01 §1.7.4, a Threadloom
    addition beside the seed's ``{state, since, reason}``)."""

    model_config = ConfigDict(frozen=True)

    type: str
    """What failed: the exception's class name (``ProviderError``, ``KeyError`` …), or
    ``RepeatedToolError``, ``ExecutionLost``, ``ResumesExhausted`` (spec 16), ``Shutdown``
    for the failures that are not one exception."""
    message: str
    """One line that says why, in the words a user acts on."""
    log_id: str | None = None
    """The log row with the details (the failed model request, or the step's runtime row
    with its traceback)."""
    code: str | None = None
    """A provider error's code (``authentication``, ``rate_limit`` …, spec 05 §5.4)."""
    retryable: bool = False
    """Whether sending again (or continuing) may succeed without changing anything."""

    @staticmethod
    def of_exception(
        exc: BaseException, log_id: str | None = None, message: str | None = None
    ) -> StatusError:
        """The error of a run ended by ``exc`` (a ``ProviderError`` gives its code and
        whether it is retryable)."""
        code = getattr(exc, "code", None)
        retryable = getattr(exc, "retryable", None)
        return StatusError(
            type=type(exc).__name__,
            message=one_line(message if message is not None else str(exc)) or type(exc).__name__,
            log_id=log_id,
            code=code if isinstance(code, str) else None,
            retryable=retryable if isinstance(retryable, bool) else False,
        )


ERROR_LINE_MAX = 300
"""The longest ``StatusError.message``: longer first lines are cut (… at the end)."""


def one_line(text: str) -> str:
    """The first non-empty line of ``text``, whitespace collapsed, at most
    ``ERROR_LINE_MAX`` characters."""
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            if len(line) > ERROR_LINE_MAX:
                return line[: ERROR_LINE_MAX - 1] + "…"
            return line
    return ""


#: The error a ``failed`` status carries when the failure was not one exception (or its
#: cause is not known: a status written before the column existed is read without one).
REASON_ERRORS: Mapping[str, tuple[str, str, bool]] = {
    "step_error": ("StepError", "A step of the run failed", True),
    "repeated_tool_error": (
        "RepeatedToolError",
        "The same tool error happened 8 times in a row",
        False,
    ),
    "execution_lost": (
        "ExecutionLost",
        "The run was lost: the process running it stopped before it finished",
        True,
    ),
    "aborted": (
        "Shutdown",
        "The runtime shut down before the run finished",
        True,
    ),
    "budget_exceeded": ("BudgetExceeded", "A budget of the run was exhausted", False),
}


class ThreadStatus(BaseModel):
    """The thread's authoritative run status (spec 01 §1.7); ``error`` says why a
    ``failed`` run failed (§1.7.4), ``None`` otherwise."""

    model_config = ConfigDict(frozen=True)

    state: RunState
    since: int
    reason: str | None = None
    error: StatusError | None = None

    def to_wire(self) -> dict[str, Any]:
        """``model_dump()``, built directly (a status is published at every run start and
        end)."""
        error = self.error
        return {
            "state": self.state,
            "since": self.since,
            "reason": self.reason,
            "error": None if error is None else error.model_dump(),
        }

    @staticmethod
    def settled(reason: str, since: int, error: StatusError | None = None) -> ThreadStatus:
        """The status a run ending with ``reason`` settles to (spec 01 §1.7.2 rule 4); a
        failed one carries ``error``, or the reason's own (``REASON_ERRORS``)."""
        if reason not in FAILED_REASONS:
            return ThreadStatus(state="idle", since=since, reason=reason)
        if error is None:
            kind, text, retryable = REASON_ERRORS[reason]
            error = StatusError(type=kind, message=text, retryable=retryable)
        return ThreadStatus(state="failed", since=since, reason=reason, error=error)


class ThreadRecord(BaseModel):
    """The thread record (spec 01 §1.6.1); ``created_at`` is in seconds (conflict C13)."""

    id: str
    agent_id: str
    origin_agent_id: str
    user_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    parent: str | None = None
    terminated: int | None = None
    created_at: int
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: ThreadStatus


def thread_name(tags: Sequence[str]) -> str | None:
    """The thread's human-friendly name: its first non-empty ``name:<value>`` tag."""
    for tag in tags:
        if tag.startswith("name:"):
            value = " ".join(tag[5:].split())
            if value:
                return value
    return None


class SubagentRegistryEntry(BaseModel):
    """One child in a thread's subagent registry (spec 01 §1.8)."""

    reference: str
    relationship: str
    owner: Literal["a", "b"] = "a"
    name: str
    title: str | None = None
    description: str | None = None
    blocking: bool = False
    resumable: bool = False
    parent_communication: Literal["implicit", "explicit"] = "implicit"
    status: str = "running"
    initial_arguments: dict[str, Any] | None = None
    thread_name: str | None = None
    spawn_group_id: str | None = None
    created_at: int = 0


SHARED_STATE_MAX_BYTES = 262_144
"""The largest shared state (spec 02 §2.20): its compact JSON text, UTF-8, in bytes."""
RUN_CONTEXT_MAX_BYTES = 65_536
"""The largest run context (spec 13 §13.2.11): the compact JSON text of its entries."""


class SharedState(BaseModel):
    """A thread's shared state (spec 02 §2.20): one JSON object that the client and the
    agent both read and write, with the version of its last change (0: never written)."""

    model_config = ConfigDict(frozen=True)

    value: dict[str, Any] = Field(default_factory=dict)
    version: int = 0
    updated_at: int | None = None
    """µs of the last change (``None``: never written)."""

    def to_wire(self) -> dict[str, Any]:
        """The HTTP and stream form: ``{state, version, updated_at}``."""
        return {"state": self.value, "version": self.version, "updated_at": self.updated_at}


class ContextEntry(BaseModel):
    """One entry of a run's context (AG-UI's ``Context``, spec 13 §13.2.11): what the
    client application tells the model, never stored as a message."""

    model_config = ConfigDict(frozen=True)

    description: str
    value: str


def state_json(
    value: object, what: str = "state", limit: int = SHARED_STATE_MAX_BYTES
) -> tuple[dict[str, Any], str]:
    """``value`` as a shared state: the JSON object it is (a fresh copy) and its compact
    JSON text. ``InvalidArgument`` when it is not a JSON object (a value JSON cannot hold:
    NaN, infinity, a set, a cycle …); ``StateTooLarge`` when its text is over ``limit``
    bytes (spec 02 §2.20)."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{what} must be a JSON object")
    try:
        text = json.dumps(dict(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{what} is not JSON: {exc}") from None
    size = len(text.encode())
    if size > limit:
        raise StateTooLarge(f"{what} is {size} bytes of JSON, over the limit of {limit}")
    loaded: dict[str, Any] = json.loads(text)
    return loaded, text
