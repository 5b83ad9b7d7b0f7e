"""Tool-call approvals as AG-UI interrupts (spec 14, "Surfaces"; AG-UI "Interrupts").

A thread parked for approval ends its AG-UI run with ``RUN_FINISHED`` whose outcome is the
interrupt outcome: one ``Interrupt`` per pending approval — ``id`` and ``toolCallId`` the
tool call's id, ``reason`` ``"tool_call"`` (AG-UI's core value for a tool call awaiting a
decision), a ``message`` naming the tool, a ``responseSchema`` of the answer, and in
``metadata`` what the decision is bound to: ``tool``, ``arguments`` and ``argumentsHash``.

The next run answers with ``resume`` entries (``answer_of`` reads one): ``status:
"resolved"`` with ``payload: {"approved": true, "argumentsHash": "<the hash shown>"}``
approves (``editedArgs`` replaces the arguments, ``reason`` is kept), ``{"approved":
false, "reason": …}`` rejects, and ``status: "cancelled"`` rejects too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ag_ui.core import Interrupt

from threadloom.client.models import Approval

TOOL_CALL = "tool_call"
"""The interrupt ``reason`` of a tool call awaiting a decision (an AG-UI core value)."""


def response_schema(approval: Approval) -> dict[str, Any]:
    """The JSON Schema of a resume payload answering ``approval``."""
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "argumentsHash": {
                "type": "string",
                "const": approval.arguments_hash,
                "description": "Required to approve: the hash of the arguments shown.",
            },
            "editedArgs": {
                "type": "object",
                "description": "Full replacement of the tool's arguments (approve only).",
            },
            "reason": {"type": "string"},
        },
        "required": ["approved"],
    }


def approval_interrupt(approval: Approval) -> Interrupt:
    """The AG-UI interrupt of one pending approval."""
    return Interrupt(
        id=approval.tool_call_id,
        reason=TOOL_CALL,
        message=f"Approve the call of {approval.tool}?",
        tool_call_id=approval.tool_call_id,
        response_schema=response_schema(approval),
        metadata={
            "tool": approval.tool,
            "arguments": approval.arguments,
            "argumentsHash": approval.arguments_hash,
            "messageId": approval.message_id,
        },
    )


def approval_interrupts(approvals: Iterable[Approval]) -> list[Interrupt]:
    """The interrupts of the pending ones among ``approvals``, oldest first."""
    waiting = sorted((a for a in approvals if a.state == "pending"), key=lambda a: a.requested_at)
    return [approval_interrupt(a) for a in waiting]


class AnswerError(ValueError):
    """A resume entry that is not an answer to an approval: ``field`` (under the entry's
    ``payload``) and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Answer:
    """A decision read from a resume entry."""

    approve: bool
    arguments_hash: str | None = None
    arguments: dict[str, Any] | None = None
    reason: str | None = None


def _first(payload: Mapping[str, Any], *names: str) -> tuple[str, Any]:
    for name in names:
        if name in payload:
            return name, payload[name]
    return names[0], None


def answer_of(status: str, payload: Any) -> Answer:
    """The decision of a resume entry (``status``, ``payload``); ``AnswerError`` when the
    payload does not say one. ``approve``, ``arguments_hash`` and ``arguments`` (the HTTP
    API's names) are read too."""
    if status == "cancelled":
        reason = payload.get("reason") if isinstance(payload, Mapping) else None
        return Answer(False, reason=reason if isinstance(reason, str) else "cancelled")
    if not isinstance(payload, Mapping):
        raise AnswerError("payload", "must be an object with approved: true or false")
    name, approved = _first(payload, "approved", "approve")
    if not isinstance(approved, bool):
        raise AnswerError(name, "must be true or false")
    name, reason = _first(payload, "reason")
    if reason is not None and not isinstance(reason, str):
        raise AnswerError(name, "must be a string")
    if not approved:
        return Answer(False, reason=reason)
    name, shown = _first(payload, "argumentsHash", "arguments_hash")
    if not isinstance(shown, str) or not shown.startswith("sha256:"):
        raise AnswerError(name, "must be the argumentsHash the interrupt shows (sha256:…)")
    name, edited = _first(payload, "editedArgs", "arguments")
    if edited is not None and not isinstance(edited, dict):
        raise AnswerError(name, "must be a JSON object")
    return Answer(True, shown, edited, reason)
