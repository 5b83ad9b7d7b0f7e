"""Tool-call approvals over HTTP (spec 14 §14.3): the list of a thread's approvals and a
decision on one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import model_validator

from threadloom.records import Approval
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import check, refuse
from threadloom.wire.query import LIMIT, OFFSET, choices, text


def _approve(value: Any) -> bool:
    # fail closed: only a JSON boolean decides; absent, null, "yes", 1 are refused
    if not isinstance(value, bool):
        raise refuse("must be true or false", "approve must be true or false")
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise refuse("must be a string")
    if len(value) > 10_000:
        raise refuse("must be at most 10000 characters")
    return value


def _hash(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("sha256:"):
        raise refuse("must be the arguments_hash the approval shows (sha256:…)")
    return value


def _arguments(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise refuse("must be a JSON object")
    return value


def _decision_rules(schema: dict[str, Any]) -> None:
    """What the server checks, stated in the schema (spec 08 §8.11.3 rule 3): a hash is
    ``sha256:…``, a reason at most 10,000 characters; approving names the hash; edited
    arguments only with an approve."""
    props = schema["properties"]
    for branch in props["arguments_hash"].get("anyOf", ()):
        if branch.get("type") == "string":
            branch["pattern"] = "^sha256:"
    for branch in props["reason"].get("anyOf", ()):
        if branch.get("type") == "string":
            branch["maxLength"] = 10_000
    schema["allOf"] = [
        {
            "if": {"properties": {"approve": {"const": True}}},
            "then": {
                "required": ["arguments_hash"],
                "properties": {"arguments_hash": {"type": "string"}},
            },
            "else": {"properties": {"arguments": {"type": "null"}}},
        }
    ]


class DecideApproval(Body):
    """``POST /api/threads/{id}/approvals/{tool_call_id}``: approve (naming the hash of
    the arguments shown, optionally with edited arguments) or reject, with a reason."""

    model_config = examples(
        {"approve": False, "reason": "not this one"},
        {"approve": True, "arguments_hash": "sha256:" + "0" * 64},
        extra=_decision_rules,
    )

    approve: Annotated[bool, check(_approve)]
    arguments_hash: Annotated[str | None, check(_hash)] = None
    reason: Annotated[str | None, check(_text)] = None
    arguments: Annotated[dict[str, Any] | None, check(_arguments)] = None

    @model_validator(mode="after")
    def _bound(self) -> DecideApproval:
        # approving names what was shown (spec 14 §14.3 rule 4); edits come with an approve
        if self.approve and self.arguments_hash is None:
            raise refuse(
                "is required to approve",
                "arguments_hash is required to approve: the hash of the arguments shown",
                at="arguments_hash",
            )
        if not self.approve and self.arguments is not None:
            raise refuse("can only be given with approve: true", at="arguments")
        return self


class ApprovalItem(Answer):
    """An approval as the API answers it (``records.Approval``)."""

    thread_id: str
    tool_call_id: str
    message_id: str
    tool: str
    arguments: dict[str, Any]
    arguments_hash: str
    state: Literal["pending", "approved", "rejected", "cancelled"]
    requested_at: int
    decided_at: int | None
    decided_by: str | None
    reason: str | None
    edited_arguments: dict[str, Any] | None
    started_at: int | None

    @classmethod
    def of(cls, approval: Approval) -> ApprovalItem:
        return cls.model_validate(approval.to_wire())


class ApprovalList(Answer):
    """``GET /api/threads/{id}/approvals``: every approval of the thread, oldest first."""

    approvals: list[ApprovalItem]
    pending: int


class ApprovalDecided(Answer):
    approval: ApprovalItem


INBOX_STATES = ("pending", "approved", "rejected", "cancelled")

INBOX_QUERY = (
    LIMIT,
    OFFSET,
    choices(
        "status",
        (*INBOX_STATES, "all"),
        "Comma-separated approval states (default pending; `all`: every state)",
    ),
    text("agent_id", "Only threads of this agent"),
    text("user_id", "Only threads of this owner (admins; ignored for others)"),
)
"""The query of ``GET /api/approvals`` (spec 14 §14.9)."""


class InboxItem(ApprovalItem):
    """An approval of the inbox: the approval and the agent and owner of its thread."""

    agent_id: str
    user_id: str | None


class ApprovalInbox(Answer):
    """``GET /api/approvals``: approvals across the threads the caller may act on, newest
    request first, paged (spec 14 §14.9)."""

    approvals: list[InboxItem]
    total: int
    hasMore: bool
