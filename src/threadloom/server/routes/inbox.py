"""The approvals inbox (spec 14 §14.9): the tool calls awaiting a person across every
thread the caller may act on, so a reviewer need not open each thread to find them.

Decisions go through the thread's own route (``routes/approvals.py``), which keeps every
rule of a decision (the hash shown, the hook, one transaction) in one place.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query
from threadloom.server.routing import Router
from threadloom.store.shapes import ApprovalQuery
from threadloom.wire.approvals import INBOX_STATES, ApprovalInbox, InboxItem

router = Router(prefix="/api/approvals", tags=["approvals"])


@router.get("", summary="Tool-call approvals across threads (the inbox)")
async def approval_inbox(
    request: Request,
    who: Principal = Depends(deps.principal),
    q: Query = Depends(deps.query),
) -> dict[str, Any]:
    limit = q.int("limit", 50, cap=1000)
    offset = q.int("offset", 0) or 0
    picked = q.enum_list("status", (*INBOX_STATES, "all"))
    states: tuple[str, ...] = () if "all" in picked else tuple(dict.fromkeys(picked))
    query = ApprovalQuery(
        # who may act on a thread may decide its approvals (§14.3 rule 6): an admin every
        # thread (optionally one owner's), anyone else their own
        user_id=(q.raw("user_id") or None) if who.is_admin else who.id,
        agent_id=q.raw("agent_id") or None,
        states=states or (() if picked else ("pending",)),
        limit=limit if limit is not None else 50,
        offset=offset,
    )
    if not who.is_admin and not who.has_user_row:
        return ApprovalInbox(approvals=[], total=0, hasMore=False).to_wire()
    found, total = await deps.runtime(request).store.query_approvals(query)
    items = [
        InboxItem.model_validate(
            {**f.approval.to_wire(), "agent_id": f.agent_id, "user_id": f.user_id}
        )
        for f in found
    ]
    return ApprovalInbox(
        approvals=items, total=total, hasMore=offset + len(items) < total
    ).to_wire()
