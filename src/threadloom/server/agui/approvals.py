"""Tool-call approvals on the AG-UI endpoint (spec 14, "Surfaces"; spec 13 §13.2).

A run that parks for approval ends with the interrupt outcome: one interrupt per pending
approval (``client.convert.agui.interrupts``). A request whose ``resume`` entries answer
those interrupts decides them — as ``POST /api/threads/{id}/approvals/{tool_call_id}``
would, by the caller — before its new messages are stored; once none is pending the run
goes on and the request's stream follows it. Everything is checked before anything is
decided: a payload that says no decision is a 400 naming it, an answer that contradicts a
decision already made is a 409 ``approval_conflict``. Replaying the same answer is safe
(AG-UI's rule 5): an approval already decided that way is left as it is. An entry naming no
approval of the thread is left out, with a ``threadloom.warning`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import Interrupt

from threadloom.client.convert.agui.interrupts import (
    Answer,
    AnswerError,
    answer_of,
    approval_interrupts,
)
from threadloom.engine.run.runtime import Runtime
from threadloom.errors import ApprovalConflict
from threadloom.records import Approval
from threadloom.server.errors import bad_field
from threadloom.wire.approvals import ApprovalItem


@dataclass
class Resume:
    """What a request's ``resume`` entries ask: the decisions to make, in order, and the
    ids of entries that answer nothing of this thread."""

    decisions: list[tuple[str, Answer]] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)


def _replayed(approval: Approval, answer: Answer) -> bool:
    """``answer`` is the decision ``approval`` already has (a replayed resume)."""
    if approval.state == "approved":
        return answer.approve and answer.arguments_hash == approval.arguments_hash
    return approval.state == "rejected" and not answer.approve


async def read_resume(runtime: Runtime, thread_id: str | None, entries: Sequence[Any]) -> Resume:
    """The decisions of ``entries`` (``RunAgentInput.resume``), checked against the
    thread's approvals now; raises (400, 409) before anything is decided."""
    resume = Resume()
    if not entries:
        return resume
    known = await runtime.store.list_approvals(thread_id) if thread_id is not None else []
    by_id = {a.tool_call_id: a for a in known}
    for index, entry in enumerate(entries):
        approval = by_id.get(entry.interrupt_id)
        if approval is None:  # answers nothing of this thread: warned about, whatever it says
            resume.unrecognised.append(entry.interrupt_id)
            continue
        try:
            answer = answer_of(entry.status, entry.payload)
        except AnswerError as exc:
            where = "payload" if exc.field == "payload" else f"payload.{exc.field}"
            raise bad_field(f"resume[{index}].{where}", exc.problem) from None
        if approval.state == "pending":
            resume.decisions.append((approval.tool_call_id, answer))
        elif not _replayed(approval, answer):
            raise ApprovalConflict(
                f"The approval of tool call {approval.tool_call_id} is {approval.state}",
                approval.state,
            )
    return resume


async def decide(runtime: Runtime, thread_id: str, resume: Resume, decided_by: str) -> int:
    """Make the decisions of ``resume`` (the run goes on once none is pending); how many."""
    state = await runtime.thread(thread_id)
    for tool_call_id, answer in resume.decisions:
        await state.decide_approval(
            tool_call_id,
            approve=answer.approve,
            arguments_hash=answer.arguments_hash,
            reason=answer.reason,
            arguments=answer.arguments,
            decided_by=decided_by,
        )
    return len(resume.decisions)


async def pending(runtime: Runtime, thread_id: str) -> list[Interrupt]:
    """The interrupts of the thread's pending approvals, oldest first."""
    found = await runtime.store.list_approvals(thread_id)
    return approval_interrupts(ApprovalItem.of(a) for a in found if a.state == "pending")
