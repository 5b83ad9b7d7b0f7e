"""What was spent, for budgets and quotas (spec 15 §15.5), on both stores: the model
requests of a thread and its descendants, or of a user's threads over a window, summed
from the LLM log rows; and the quotas an admin sets on users (§15.4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.records import Spend, UserQuota, json_compact
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

_SUMS = (
    "COALESCE(SUM(l.cost_total), 0), COALESCE(SUM(l.total_tokens), 0), COUNT(*),"
    " COALESCE(SUM(CASE WHEN l.cost_total IS NULL AND l.error IS NULL"
    " AND l.is_complete = 1 THEN 1 ELSE 0 END), 0)"
)
"""An LLM row is one model request (an attempt, spec 04 §4.25): ``kind`` null and an
``endpoint`` (the runtime rows of step errors have none). A successful request whose cost
is unknown (null) is counted apart, never as 0."""
_LLM = "l.kind IS NULL AND l.endpoint IS NOT NULL"
_TREE = (
    "WITH RECURSIVE tree(id) AS ("
    " SELECT id FROM threads WHERE id = ?"
    " UNION ALL SELECT t.id FROM threads t JOIN tree ON t.parent_id = tree.id)"
)


def _spend(row: Sequence[Any] | None) -> Spend:
    if row is None:
        return Spend()
    return Spend(
        usd=float(row[0] or 0),
        tokens=int(row[1] or 0),
        requests=int(row[2] or 0),
        unknown_cost=int(row[3] or 0),
    )


def thread_spend(conn: Conn, thread_id: str) -> Spend:
    """The spend of ``thread_id`` and every descendant thread (its lifetime, §15.3)."""
    row = conn.execute(
        f"{_TREE} SELECT {_SUMS} FROM logs l JOIN tree ON l.thread_id = tree.id WHERE {_LLM}",
        (thread_id,),
    ).fetchone()
    return _spend(row)


def user_spend(conn: Conn, user_id: str, since_us: int) -> Spend:
    """The spend of every thread of ``user_id`` since ``since_us`` (a quota's window)."""
    row = conn.execute(
        f"SELECT {_SUMS} FROM threads t JOIN logs l ON l.thread_id = t.id"
        f" WHERE t.user_id = ? AND l.created_at >= ? AND {_LLM}",
        (user_id, since_us),
    ).fetchone()
    return _spend(row)


def _quota(text: str) -> UserQuota:
    return UserQuota.model_validate_json(text)


def set_user_quota(conn: Conn, clock: Clock, user_id: str, quota: UserQuota | None) -> None:
    """Set (or, with ``None``, remove) the quota of ``user_id``."""
    if quota is None:
        conn.execute("DELETE FROM user_quotas WHERE user_id = ?", (user_id,))
        return
    conn.execute(
        "INSERT INTO user_quotas(user_id, quota, updated_at_us) VALUES (?, ?, ?)"
        " ON CONFLICT(user_id) DO UPDATE SET quota = excluded.quota,"
        " updated_at_us = excluded.updated_at_us",
        (user_id, json_compact(quota.model_dump(exclude_none=True)), clock()),
    )


def get_user_quota(conn: Conn, user_id: str) -> UserQuota | None:
    row = conn.execute("SELECT quota FROM user_quotas WHERE user_id = ?", (user_id,)).fetchone()
    return _quota(row[0]) if row is not None else None


def list_user_quotas(conn: Conn) -> list[UserQuota]:
    return [_quota(r[0]) for r in conn.execute("SELECT quota FROM user_quotas ORDER BY user_id")]
