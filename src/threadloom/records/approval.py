"""Tool-call approvals and the effect ledger (spec 14): a row per tool call that needs a
person's decision or whose start a resumable run records. Plain data, no I/O;
``threadloom.records`` re-exports them.

An approval is bound to its call: the thread, the tool call id, the tool and the hash of
the canonical arguments that were shown (``arguments_hash``). A decision names that hash;
one whose hash no longer matches is refused (spec 14 §14.3).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

ApprovalState = Literal["pending", "approved", "rejected", "cancelled"]
"""``pending`` until decided; ``approved`` / ``rejected`` by a decision; ``cancelled`` when
the call can no longer run (a stop, a termination, a run that ended without it)."""

APPROVAL_STATES: tuple[str, ...] = ("pending", "approved", "rejected", "cancelled")


def canonical_json(arguments: Any) -> str:
    """The canonical text of a JSON value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(arguments: Any) -> str:
    """``sha256:<hex>`` of the canonical arguments (spec 14 §14.3): what a decision names."""
    digest = hashlib.sha256(canonical_json(arguments).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"


class Approval(BaseModel):
    """One tool call waiting for, or decided by, a person (spec 14 §14.2)."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    tool_call_id: str
    message_id: str
    """The model message that issued the call."""
    tool: str
    arguments: dict[str, Any]
    """The arguments shown for the decision (the model's, canonical)."""
    arguments_hash: str
    state: ApprovalState
    requested_at: int
    """µs since the epoch."""
    decided_at: int | None = None
    decided_by: str | None = None
    """Who decided: a user id, ``"admin"``/``"api-key:<id>"`` over HTTP, or the label
    in-process code gave (``ThreadState.decide_approval``); ``"runtime"`` for a
    cancellation."""
    reason: str | None = None
    edited_arguments: dict[str, Any] | None = None
    """The arguments the tool runs with when the approver edited them."""
    started_at: int | None = None
    """When the approved call started (the decision was consumed)."""

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump()

    @property
    def run_arguments(self) -> dict[str, Any]:
        """The arguments the approved call runs with."""
        return self.edited_arguments if self.edited_arguments is not None else self.arguments


class ApprovalDecision(BaseModel):
    """A decision on one pending approval (spec 14 §14.3). ``approve`` must be given as a
    boolean: nothing else is read as one."""

    model_config = ConfigDict(extra="forbid")

    approve: bool
    arguments_hash: str | None = None
    """Required to approve: the hash of the arguments the decider was shown."""
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    """Edited arguments to run the tool with (approve only)."""
    decided_by: str | None = None
