"""Tool-call approvals of a thread (spec 14 §14.3): list them, decide one.

Who may decide: whoever may act on the thread (its owner, an admin: ``deps.thread_row``
answers 404/403 for anyone else, as every thread route does).
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.wire.approvals import ApprovalDecided, ApprovalItem, ApprovalList, DecideApproval

router = Router(prefix="/api/threads/{id}/approvals", tags=["approvals"])


def decider(who: Principal) -> str:
    """How a decision records who made it: the user id, or the kind of credential."""
    if who.has_user_row:
        return who.id
    return f"{who.auth_type}:{who.id}"


@router.get("", summary="The thread's tool-call approvals")
async def list_approvals(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    found = await deps.runtime(request).store.list_approvals(row.id)
    return ApprovalList(
        approvals=[ApprovalItem.of(a) for a in found],
        pending=sum(1 for a in found if a.state == "pending"),
    ).to_wire()


@router.post("/{tool_call_id}", summary="Approve or reject a pending tool call")
async def decide_approval(
    tool_call_id: str,
    request: Request,
    row: ThreadRow = Depends(deps.thread_row),
    who: Principal = Depends(deps.principal),
) -> dict[str, Any]:
    body = await deps.body_of(request, DecideApproval)
    state = deps.state_of(request, row)
    decided = await state.decide_approval(
        tool_call_id,
        approve=body.approve,
        arguments_hash=body.arguments_hash,
        reason=body.reason,
        arguments=body.arguments,
        decided_by=decider(who),
    )
    return ApprovalDecided(approval=ApprovalItem.of(decided)).to_wire()
