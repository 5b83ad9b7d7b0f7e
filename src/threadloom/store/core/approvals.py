"""The tool-call ledger (spec 14): approvals and recorded tool starts, once over a
DB-API connection for both backends.

Every write is one ``Tx`` on the thread (which, on PostgreSQL, locks the thread row and
checks a run's fence): two decisions of one call, from two requests or two nodes, are
serialised there, and the second finds the first's state and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadloom.errors import ApprovalConflict, ApprovalNotFound, InvalidArgument
from threadloom.records import (
    Approval,
    ApprovalDecision,
    Message,
    ToolCall,
    arguments_hash,
    canonical_json,
    new_id,
)
from threadloom.store.core import outbox
from threadloom.store.core.codec import MESSAGE_COLUMNS, message_from_row
from threadloom.store.core.conn import Conn
from threadloom.store.core.messages import insert_in_tx
from threadloom.store.core.tx import Tx
from threadloom.store.shapes import ApprovalQuery, Clock, Decided, InboxApproval, StoredEvent

LEDGER_COLUMNS = (
    "thread_id, tool_call_id, message_id, tool, arguments, arguments_hash, approval,"
    " requested_at, decided_at, decided_by, reason, edited_arguments, started_at"
)
_SELECT = f"SELECT {LEDGER_COLUMNS} FROM tool_ledger"


def _object(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def approval_from_row(row: Sequence[Any]) -> Approval:
    return Approval(
        thread_id=row[0],
        tool_call_id=row[1],
        message_id=row[2],
        tool=row[3],
        arguments=_object(row[4]) or {},
        arguments_hash=row[5],
        state=row[6],
        requested_at=int(row[7]),
        decided_at=None if row[8] is None else int(row[8]),
        decided_by=row[9],
        reason=row[10],
        edited_arguments=_object(row[11]),
        started_at=None if row[12] is None else int(row[12]),
    )


def _row(conn: Conn, thread_id: str, tool_call_id: str) -> Sequence[Any] | None:
    found: Sequence[Any] | None = conn.execute(
        f"{_SELECT} WHERE thread_id = ? AND tool_call_id = ?", (thread_id, tool_call_id)
    ).fetchone()
    return found


def _event(tx: Tx, approval: Approval) -> StoredEvent:
    data = {"approval": approval.to_wire()}
    kind = "approval.requested" if approval.state == "pending" else "approval.decided"
    outbox.emit(tx.conn, tx.now, kind, {"thread_id": tx.thread_id, **data})
    return tx.event("approval", approval.tool_call_id, {"state": approval.state}, data=data)


def request_approvals(
    conn: Conn, clock: Clock, thread_id: str, approvals: Sequence[Approval]
) -> list[StoredEvent]:
    """Store pending approvals (``requested_at`` from the thread's clock), one event each;
    a call already in the ledger keeps its row."""
    tx = Tx(conn, thread_id, clock)
    for approval in approvals:
        if _row(conn, thread_id, approval.tool_call_id) is not None:
            continue
        row = approval.model_copy(update={"state": "pending", "requested_at": tx.now})
        conn.execute(
            f"INSERT INTO tool_ledger({LEDGER_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, NULL, NULL, NULL, NULL, NULL)",
            (
                thread_id,
                row.tool_call_id,
                row.message_id,
                row.tool,
                canonical_json(row.arguments),
                row.arguments_hash,
                row.requested_at,
            ),
        )
        _event(tx, row)
    return tx.flush()


def list_approvals(conn: Conn, thread_id: str) -> list[Approval]:
    rows = conn.execute(
        f"{_SELECT} WHERE thread_id = ? AND approval IS NOT NULL"
        " ORDER BY requested_at, tool_call_id",
        (thread_id,),
    ).fetchall()
    return [approval_from_row(r) for r in rows]


_LEDGER_OF = ", ".join(f"l.{c.strip()}" for c in LEDGER_COLUMNS.split(","))


def query_approvals(conn: Conn, q: ApprovalQuery) -> tuple[list[InboxApproval], int]:
    """A page of approvals across threads, newest request first, with the total matching
    (spec 14 §14.9): one join of the ledger with the threads it belongs to."""
    clauses = ["l.approval IS NOT NULL"]
    params: list[Any] = []
    if q.states:
        clauses.append(f"l.approval IN ({', '.join('?' for _ in q.states)})")
        params.extend(q.states)
    if q.user_id is not None:
        clauses.append("t.user_id = ?")
        params.append(q.user_id)
    if q.agent_id is not None:
        clauses.append("t.agent_id = ?")
        params.append(q.agent_id)
    where = " WHERE " + " AND ".join(clauses)
    joined = " FROM tool_ledger l JOIN threads t ON t.id = l.thread_id"
    total = int(conn.execute(f"SELECT COUNT(*){joined}{where}", params).fetchone()[0])
    rows = conn.execute(
        f"SELECT {_LEDGER_OF}, t.agent_id, t.user_id{joined}{where}"
        " ORDER BY l.requested_at DESC, l.thread_id, l.tool_call_id LIMIT ? OFFSET ?",
        (*params, q.limit, q.offset),
    ).fetchall()
    return [InboxApproval(approval_from_row(r[:13]), r[13], r[14]) for r in rows], total


def get_approval(conn: Conn, thread_id: str, tool_call_id: str) -> Approval | None:
    row = _row(conn, thread_id, tool_call_id)
    if row is None or row[6] is None:
        return None
    return approval_from_row(row)


def decide_approval(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    tool_call_id: str,
    decision: ApprovalDecision,
) -> Decided:
    """Record a decision on a pending approval, or refuse it and change nothing (spec 14
    §14.3): unknown → ``ApprovalNotFound``; decided or cancelled already, the thread
    terminated, or arguments not the ones shown → ``ApprovalConflict``; approving without
    the hash of the arguments shown → ``InvalidArgument``."""
    tx = Tx(conn, thread_id, clock)
    row = _row(conn, thread_id, tool_call_id)
    if row is None or row[6] is None:
        raise ApprovalNotFound(thread_id, tool_call_id)
    current = approval_from_row(row)
    if current.state != "pending":
        raise ApprovalConflict(
            f"The approval of tool call {tool_call_id} is {current.state} already",
            current.state,
        )
    if tx.terminated is not None:
        raise ApprovalConflict(f"Thread {thread_id} is terminated", current.state)
    if decision.approve:
        if not decision.arguments_hash:
            raise InvalidArgument(
                "arguments_hash is required to approve: the hash of the arguments shown"
            )
        if decision.arguments_hash != current.arguments_hash:
            raise ApprovalConflict(
                f"The arguments of tool call {tool_call_id} are not the ones shown"
                f" (arguments_hash {decision.arguments_hash} != {current.arguments_hash})",
                current.state,
            )
    elif decision.arguments is not None:
        raise InvalidArgument("arguments can only be given with approve: true")
    decided = current.model_copy(
        update={
            "state": "approved" if decision.approve else "rejected",
            "decided_at": tx.now,
            "decided_by": decision.decided_by,
            "reason": decision.reason,
            "edited_arguments": decision.arguments,
        }
    )
    changed = conn.execute(
        "UPDATE tool_ledger SET approval = ?, decided_at = ?, decided_by = ?, reason = ?,"
        " edited_arguments = ? WHERE thread_id = ? AND tool_call_id = ? AND approval = 'pending'",
        (
            decided.state,
            decided.decided_at,
            decided.decided_by,
            decided.reason,
            None if decision.arguments is None else canonical_json(decision.arguments),
            thread_id,
            tool_call_id,
        ),
    ).rowcount
    if changed != 1:  # the row lock above makes this unreachable; never run on doubt
        raise ApprovalConflict(f"The approval of tool call {tool_call_id} changed", None)
    _event(tx, decided)
    pending = conn.execute(
        "SELECT COUNT(*) FROM tool_ledger WHERE thread_id = ? AND approval = 'pending'",
        (thread_id,),
    ).fetchone()[0]
    events = tx.flush()
    return Decided(decided, events, int(pending) == 0)


def consume_approval(
    conn: Conn, clock: Clock, thread_id: str, tool_call_id: str
) -> Approval | None:
    """Record the start of an approved call, consuming its approval: the approval as
    consumed, or ``None`` when it is not an approved call that has not started (then the
    tool must not run). At most one caller ever gets it."""
    tx = Tx(conn, thread_id, clock)
    changed = conn.execute(
        "UPDATE tool_ledger SET started_at = ? WHERE thread_id = ? AND tool_call_id = ?"
        " AND approval = 'approved' AND started_at IS NULL",
        (tx.now, thread_id, tool_call_id),
    ).rowcount
    if changed != 1:
        return None
    row = _row(conn, thread_id, tool_call_id)
    assert row is not None
    tx.flush()
    return approval_from_row(row)


def _call_arguments(call: ToolCall) -> Any:
    """A call's arguments as JSON (its text when that is not JSON: stored as a string)."""
    try:
        return json.loads(call.function.arguments or "{}")
    except ValueError:
        return call.function.arguments


def record_starts(
    conn: Conn, clock: Clock, thread_id: str, message_id: str, calls: Sequence[ToolCall]
) -> None:
    """The effect ledger (spec 16 §16.2): a row for each call of ``message_id`` that starts
    now — approval NULL, ``requested_at`` = ``started_at`` = now — in one statement; a
    call already in the ledger (an approval) keeps its row. The ``Tx`` checks the run's
    fence (a run that lost its lease records nothing and runs nothing); nothing of the
    thread row changes, so it is not written."""
    tx = Tx(conn, thread_id, clock)
    values: list[Any] = []
    for call in calls:
        arguments = _call_arguments(call)
        values += (
            thread_id,
            call.id,
            message_id,
            call.function.name,
            canonical_json(arguments),
            arguments_hash(arguments),
            tx.now,
            tx.now,
        )
    if not values:
        return
    rows = ", ".join(["(?, ?, ?, ?, ?, ?, NULL, ?, ?)"] * len(calls))
    conn.execute(
        "INSERT INTO tool_ledger(thread_id, tool_call_id, message_id, tool, arguments,"
        f" arguments_hash, approval, requested_at, started_at) VALUES {rows}"
        " ON CONFLICT (thread_id, tool_call_id) DO NOTHING",
        values,
    )


def tool_starts(conn: Conn, thread_id: str) -> dict[str, int]:
    """Tool call id → ``started_at`` of the thread's calls whose start is recorded."""
    rows = conn.execute(
        "SELECT tool_call_id, started_at FROM tool_ledger"
        " WHERE thread_id = ? AND started_at IS NOT NULL",
        (thread_id,),
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def cancel_in(tx: Tx, decided_by: str, reason: str) -> list[Approval]:
    """Inside ``tx``: cancel the thread's approvals that can no longer run (pending, or
    approved and not started), one event each; returns them as cancelled."""
    rows = tx.conn.execute(
        f"{_SELECT} WHERE thread_id = ? AND (approval = 'pending'"
        " OR (approval = 'approved' AND started_at IS NULL)) ORDER BY requested_at, tool_call_id",
        (tx.thread_id,),
    ).fetchall()
    out: list[Approval] = []
    for row in rows:
        cancelled = approval_from_row(row).model_copy(
            update={
                "state": "cancelled",
                "decided_at": tx.now,
                "decided_by": decided_by,
                "reason": reason,
            }
        )
        tx.conn.execute(
            "UPDATE tool_ledger SET approval = 'cancelled', decided_at = ?, decided_by = ?,"
            " reason = ? WHERE thread_id = ? AND tool_call_id = ?",
            (tx.now, decided_by, reason, tx.thread_id, cancelled.tool_call_id),
        )
        _event(tx, cancelled)
        out.append(cancelled)
    return out


def _answered(conn: Conn, thread_id: str, tool_call_id: str) -> bool:
    found = conn.execute(
        "SELECT 1 FROM messages WHERE thread_id = ? AND tool_call_id IS NOT NULL"
        " AND tool_call_id = ?",
        (thread_id, tool_call_id),
    ).fetchone()
    return found is not None


def _answer(tx: Tx, approval: Approval, text: str) -> None:
    """An error tool result for ``approval``'s call, placed as its issuing message's."""
    issuing = tx.conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (approval.message_id,)
    ).fetchone()
    source = message_from_row(issuing) if issuing is not None else None
    result = insert_in_tx(
        tx,
        Message(
            id=new_id(),
            role="tool",
            content=text,
            name=approval.tool,
            tool_call_id=approval.tool_call_id,
            tool_status="error",
            depth=source.depth if source is not None else 0,
            parent_id=source.parent_id if source is not None else None,
            prompt=source.prompt if source is not None else None,
        ),
    )
    tx.event("message", result.id)


def close_in(tx: Tx, *, cancel: bool, reason: str, lost_text: str) -> None:
    """Inside a settlement's ``tx`` (spec 14 §14.5): when the run really ends
    (``cancel``), the approvals that can no longer run are cancelled and their calls
    answered ``Not run: …``; an approved call that started and has no result is answered
    with ``lost_text`` (it may or may not have taken effect)."""
    if not tx.conn.execute(
        "SELECT 1 FROM tool_ledger WHERE thread_id = ? AND approval IS NOT NULL LIMIT 1",
        (tx.thread_id,),
    ).fetchone():
        return
    if cancel:
        cancel_and_answer_in(tx, reason)
    rows = tx.conn.execute(
        f"{_SELECT} WHERE thread_id = ? AND approval = 'approved' AND started_at IS NOT NULL",
        (tx.thread_id,),
    ).fetchall()
    for row in rows:
        approval = approval_from_row(row)
        if not _answered(tx.conn, tx.thread_id, approval.tool_call_id):
            _answer(tx, approval, lost_text)


def not_run_text(reason: str) -> str:
    """The tool result of a call whose approval was cancelled (spec 14 §14.5)."""
    return f"Not run: the call was not approved before the run ended ({reason})."


def cancel_and_answer_in(tx: Tx, reason: str) -> list[Approval]:
    """Inside ``tx``: cancel the approvals that can no longer run and answer their calls
    ``Not run: …`` (a stop or termination, spec 14 §14.5). A call that started is left
    to its run, which stores its result."""
    cancelled = cancel_in(tx, "runtime", reason)
    for approval in cancelled:
        if not _answered(tx.conn, tx.thread_id, approval.tool_call_id):
            _answer(tx, approval, not_run_text(reason))
    return cancelled


def decided_parked(conn: Conn, limit: int) -> list[str]:
    """Threads parked for approval none of whose approvals is pending: a decision
    committed, the run that goes on did not start (its process died in between)."""
    rows = conn.execute(
        "SELECT t.id FROM threads t WHERE t.status_reason = 'awaiting_approval'"
        " AND NOT EXISTS (SELECT 1 FROM tool_ledger l WHERE l.thread_id = t.id"
        " AND l.approval = 'pending') ORDER BY t.id LIMIT ?",
        (limit,),
    ).fetchall()
    return [r[0] for r in rows]
