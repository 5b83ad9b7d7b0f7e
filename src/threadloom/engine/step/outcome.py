"""What a step produced: a model call's result and its tool calls' outcomes (spec 04
§4.12–§4.14). Data only: ``stream.py`` and ``tools.py`` make them, the step, the run's
stop conditions and the traces (``engine/telemetry.py``) read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadloom.define.tool import ToolResult
from threadloom.providers.types import ToolCallSpec, Usage
from threadloom.records import LogRow, Message, ToolCall


@dataclass
class ModelResult:
    """What one successful attempt returned."""

    content: str
    tool_calls: list[ToolCallSpec]
    reasoning_content: str
    reasoning_details: list[dict[str, Any]] | None
    finish_reason: str
    usage: Usage
    log_id: str
    model_name: str
    reasoning_duration_ms: int | None = None
    started_call_ids: set[str] = field(default_factory=set)
    log_row: LogRow | None = None
    """The attempt's completed LLM row, committed with the finalised message."""
    response_id: str | None = None
    response_model: str | None = None
    """The provider's id of the response and the model it names, when it says (traces)."""


@dataclass(slots=True)
class CallOutcome:
    """One call after execution and hooks; ``dropped`` when a hook returned DROP."""

    call: ToolCall
    result: ToolResult
    executed: bool
    kind: str = "tool"
    message_id: str = ""
    dropped: bool = False
    notifications: Sequence[dict[str, Any]] = ()
    detail: str | None = None
    subagent_id: str | None = None
    """The child a subagent call created or messaged (its result carries it, spec 06)."""


@dataclass(slots=True)
class ToolRound:
    """What the step's tool calls produced, in call order."""

    outcomes: list[CallOutcome] = field(default_factory=list)
    stored: list[Message] = field(default_factory=list)
    # empty: tuples (most steps; an empty list is an object the collector tracks, issue 40)
    awaiting: Sequence[str] = ()
    """Calls parked for a person's approval (spec 14 §14.2): the run parks after the
    others ran."""
    client: Sequence[str] = ()
    """Calls of tools the client runs (spec 13 §13.7): left without a result, the run
    ends ``awaiting_client_tool`` after the others ran."""
