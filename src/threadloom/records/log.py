"""Log rows (spec 01 §1.9): ``LogRow``, the one shape of every kind of row, its list wire
keys, the entry ``ThreadState.log()`` takes, and the request delta of an LLM row — how its
request body shares its leading messages with an earlier row's, so a store can keep the
body as that delta (store/core/bodies.py). Plain data, no I/O; ``threadloom.records``
re-exports every name, ``threadloom.store.shapes`` the request delta."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from threadloom.records.trusted import SharingModel


@dataclass(frozen=True, slots=True)
class RequestDelta:
    """How a log row's request body shares its leading messages with an earlier row's.

    Invariant::

        row.request_body == prefix + ",".join(base_messages[:keep] + list(fragments)) + suffix

    where base_messages are the message fragments of row `base_log_id`'s request body
    (base_log_id None: keep is 0 and fragments are all the messages).

    A storage hint only (``LogRow.request_delta``): never serialised, never a column, never
    read back; a store may keep the body as this delta and must read back exactly
    ``request_body``.

    A row may leave ``request_body`` ``None`` and give its body lazily instead: ``whole``
    builds the text (a store calls it only when it keeps the body as text) and ``length``
    is that text's length. The body is then ``whole()`` in every respect: reads return
    it. On a long thread this spares joining the whole history (hundreds of KB) for a
    row stored as a few new messages."""

    base_log_id: str | None
    keep: int
    prefix: str  # e.g. '{"model":"m","messages":['
    fragments: tuple[str, ...]  # JSON text of each message after the kept ones
    suffix: str  # e.g. '],"tools":[...],"_metadata":{...}}'
    whole: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    length: int | None = None


# The keys of a log list row: the reference's, in its order, then the app_* keys.
# fmt: off
LOG_LIST_KEYS: tuple[str, ...] = (
    "id", "kind", "message_id", "provider", "actual_provider", "standard_agents_router_used",
    "model", "model_name", "prompt_name", "tools_called", "queued_tools", "provider_tools",
    "parent_log_id", "retry_of_log_id", "error", "error_type", "error_origin", "cost_total",
    "input_tokens", "cached_tokens", "output_tokens", "total_tokens", "is_complete",
    "created_at", "app_level", "app_message", "app_status", "app_error", "app_duration_ms",
    "app_cost", "app_request", "app_response", "app_trigger", "app_data",
)
# fmt: on


class LogRow(SharingModel):
    """One log row of any kind (spec 01 §1.9); every column is a field, and
    ``request_delta``, a storage hint that is never serialised nor read back. Rows built
    with ``trusted`` (each model call's and tool call's) share their fields sets
    (``SharingModel``): a set of a row's names is 2.2 KB, and a run holds a few rows and
    their copies at once (issue 40, memory per active thread)."""

    id: str
    kind: str | None = None
    message_id: str | None = None
    provider: str
    model: str
    created_at: int
    is_complete: bool = True
    error: str | None = None
    error_type: str | None = None
    error_origin: str | None = None
    # LLM request columns (spec 01 §1.9.3)
    endpoint: str | None = None
    model_name: str | None = None
    actual_provider: str | None = None
    standard_agents_router_used: bool | None = None
    prompt_name: str | None = None
    parent_log_id: str | None = None
    retry_of_log_id: str | None = None
    request_body: str | None = None
    response_body: str | None = None
    request_headers: str | None = None
    response_headers: str | None = None
    status_code: int | None = None
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: int | None = None
    time_to_first_token_ms: int | None = None
    generation_ms: int | None = None
    finish_reason: str | None = None
    errors: str | None = None
    cost_input: float | None = None
    cost_cached: float | None = None
    cost_output: float | None = None
    cost_router_fee: float | None = None
    router_fee_percent: float | None = None
    cost_total: float | None = None
    message_history_length: int | None = None
    tools_available: int | None = None
    tools_called: str | None = None
    tools_schema: str | None = None
    system_prompt: str | None = None
    reasoning_content: str | None = None
    tool_results: str | None = None
    provider_tools: str | None = None
    queued_tools: str | None = None
    # application columns (spec 01 §1.9.7)
    app_level: str | None = None
    app_message: str | None = None
    app_status: str | None = None
    app_error: str | None = None
    app_duration_ms: float | None = None
    app_cost: float | None = None
    app_request: str | None = None
    app_response: str | None = None
    app_trigger: str | None = None
    app_data: str | None = None
    request_delta: SkipJsonSchema[RequestDelta | None] = Field(
        default=None, exclude=True, repr=False
    )

    def to_list_wire(self) -> dict[str, Any]:
        """The list row of ``GET …/logs`` and ``log_data`` frames (spec 01 §1.9.8)."""
        out = {key: getattr(self, key) for key in LOG_LIST_KEYS}
        duration = out["app_duration_ms"]
        if isinstance(duration, float) and math.isfinite(duration) and duration.is_integer():
            out["app_duration_ms"] = int(duration)
        return out


LOG_COLUMNS: tuple[str, ...] = tuple(f for f in LogRow.model_fields if f != "request_delta")


class ThreadLogEntry(TypedDict, total=False):
    """An application log entry for ``ThreadState.log()`` (seed, Thread "Application Logs")."""

    name: str
    message: str
    level: Literal["debug", "info", "warn", "error"]
    status: Literal["success", "error", "skipped"]
    trigger: Mapping[str, Any]
    request: Any
    response: Any
    error: str | BaseException
    duration_ms: float
    cost: float
    data: Any
