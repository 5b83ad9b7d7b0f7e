"""Retention on both stores (spec 17 §17.2): which root threads a rule names, deleting one
with its tree when it still qualifies, and stripping old log rows of their bodies.

The rules apply to root threads only: a child thread goes with its root (the same cascade
as ``delete_thread``), never alone. A root is deleted in one transaction that first locks
its tree's rows (PostgreSQL; SQLite's write lock is the database's), then checks again
that the rule names it and that no thread of the tree is ``running`` or has queued
messages: a message sent between the page read and the deletion keeps the thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.store.core import bodies, threads
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import BodyStrip, Clock, ExpiryCandidate, ExpiryRule

_TREE = (
    "WITH RECURSIVE tree(id) AS ("
    " SELECT id FROM threads WHERE id = ?"
    " UNION ALL SELECT t.id FROM threads t JOIN tree ON t.parent_id = tree.id)"
)
_TREE_FACTS = (
    f"{_TREE} SELECT COUNT(*), COALESCE(SUM(CASE WHEN t.status_state = 'running'"
    " OR EXISTS (SELECT 1 FROM message_queue q WHERE q.thread_id = t.id)"
    " THEN 1 ELSE 0 END), 0) FROM tree JOIN threads t ON t.id = tree.id"
)
"""The tree's size and how many of its threads are active."""

_ROOT = "SELECT id, user_id, last_activity_us, created_at_us, terminated FROM threads"
_ROOTS = "COALESCE(parent_id, '') = ''"
"""Root threads (ids are never empty), written so that no planner takes ``threads_parent``
for it: most threads are roots, and the pages' orders are the activity indexes' (SQLite
without statistics would pick the parent index and sort every root for each page)."""


def _newer(alias: str = "") -> str:
    """Rows ranked before ``(activity, created, id)`` in the per-user order (newest
    first: last activity desc, creation desc, id asc)."""
    a, c, i = (f"{alias}last_activity_us", f"{alias}created_at_us", f"{alias}id")
    return f"({a} > ? OR ({a} = ? AND ({c} > ? OR ({c} = ? AND {i} < ?))))"


def _older(alias: str = "") -> str:
    """Rows ranked after ``(activity, created, id)`` in the per-user order."""
    a, c, i = (f"{alias}last_activity_us", f"{alias}created_at_us", f"{alias}id")
    return f"({a} < ? OR ({a} = ? AND ({c} < ? OR ({c} = ? AND {i} > ?))))"


def expiry_owners(conn: Conn, keep: int) -> list[str | None]:
    rows = conn.execute(
        "SELECT user_id FROM threads WHERE parent_id IS NULL GROUP BY user_id HAVING COUNT(*) > ?",
        (keep,),
    ).fetchall()
    return sorted((r[0] for r in rows), key=lambda u: (u is not None, u or ""))


def _owner(user_id: str | None) -> tuple[str, tuple[Any, ...]]:
    """The clause naming the roots' owner (one the owner indexes serve on both stores)."""
    return ("user_id IS NULL", ()) if user_id is None else ("user_id = ?", (user_id,))


def expiry_page(
    conn: Conn, rule: ExpiryRule, after: tuple[int, int, str] | None, limit: int
) -> list[ExpiryCandidate]:
    # each order is one an index holds (or the primary key's): a page seeks past the key
    clauses = [_ROOTS]
    params: list[Any] = []
    if rule.kind == "per_user":  # threads_user_activity, forwards
        owner, owner_params = _owner(rule.user_id)
        clauses.append(owner)
        params.extend(owner_params)
        if after is not None:
            clauses.append(_older())
            params.extend((after[0], after[0], after[1], after[1], after[2]))
        order = "last_activity_us DESC, created_at_us DESC, id"
        key_columns = "last_activity_us, created_at_us"
    elif rule.kind == "inactive":  # threads_activity_order, backwards: the oldest first
        clauses.append("last_activity_us < ?")
        params.append(rule.before_us)
        if after is not None:
            clauses.append(_newer())
            params.extend((after[0], after[0], after[1], after[1], after[2]))
        order = "last_activity_us, created_at_us, id DESC"
        key_columns = "last_activity_us, created_at_us"
    else:  # terminated: by id (the primary key), one walk over the threads a pass
        clauses.append("terminated IS NOT NULL AND terminated < ?")
        params.append(rule.before_us)
        if after is not None:
            clauses.append("id > ?")
            params.append(after[2])
        order = "id"
        key_columns = "terminated, 0"
    rows = conn.execute(
        f"SELECT id, user_id, {key_columns} FROM threads WHERE {' AND '.join(clauses)}"
        f" ORDER BY {order} LIMIT ?",
        (*params, limit),
    ).fetchall()
    out: list[ExpiryCandidate] = []
    for thread_id, user_id, first, second in rows:
        size, active = conn.execute(_TREE_FACTS, (thread_id,)).fetchone()
        out.append(
            ExpiryCandidate(
                id=thread_id,
                user_id=user_id,
                threads=int(size),
                active=int(active) > 0,
                key=(int(first or 0), int(second or 0), thread_id),
            )
        )
    return out


def _named(conn: Conn, rule: ExpiryRule, row: Sequence[Any]) -> bool:
    """Whether ``rule`` names the root ``row`` (``_ROOT``'s columns) now."""
    thread_id, user_id, activity, created, terminated = row
    if rule.kind == "inactive":
        return activity is not None and int(activity) < rule.before_us
    if rule.kind == "terminated":
        return terminated is not None and int(terminated) < rule.before_us
    if user_id != rule.user_id:
        return False
    owner, owner_params = _owner(user_id)
    newer = conn.execute(
        f"SELECT COUNT(*) FROM threads WHERE {_ROOTS} AND {owner} AND {_newer()}",
        (*owner_params, activity, activity, created, created, thread_id),
    ).fetchone()[0]
    return int(newer) >= rule.keep


def delete_expired(
    conn: Conn, clock: Clock, rule: ExpiryRule, thread_id: str
) -> dict[str, str | None]:
    # the tree's rows first, deepest first as a run's writes lock them (a thread, then its
    # ancestors): a send, a run's start or a child's creation waits for this transaction,
    # and then finds the thread gone (or this one finds it active)
    tree = conn.execute(
        "WITH RECURSIVE tree(id, level) AS ("
        " SELECT id, 0 FROM threads WHERE id = ?"
        " UNION ALL SELECT t.id, tree.level + 1 FROM threads t JOIN tree ON t.parent_id = tree.id)"
        " SELECT id, level FROM tree",
        (thread_id,),
    ).fetchall()
    for tid, _level in sorted(tree, key=lambda r: (-r[1], r[0])):
        conn.execute(f"SELECT id FROM threads WHERE id = ?{conn.sql.lock_thread}", (tid,))
    row = conn.execute(f"{_ROOT} WHERE id = ? AND parent_id IS NULL", (thread_id,)).fetchone()
    if row is None or not _named(conn, rule, row):
        return {}
    _size, active = conn.execute(_TREE_FACTS, (thread_id,)).fetchone()
    if int(active) > 0:
        return {}
    owners: dict[str, str | None] = {
        r[0]: r[1]
        for r in conn.execute(
            f"{_TREE} SELECT t.id, t.user_id FROM tree JOIN threads t ON t.id = tree.id",
            (thread_id,),
        )
    }
    deleted = threads.delete_thread(conn, clock, thread_id)
    return {tid: owners.get(tid) for tid in deleted}


_HAS_BODY = (
    "(l.response_body IS NOT NULL OR l.app_request IS NOT NULL OR l.app_response IS NOT NULL"
    " OR EXISTS (SELECT 1 FROM log_bodies b WHERE b.log_id = l.id)"
    " OR EXISTS (SELECT 1 FROM log_requests r WHERE r.log_id = l.id))"
)


def count_log_bodies(conn: Conn, before_us: int, within: Sequence[str] | None) -> int:
    params: list[Any] = [before_us]
    trees = ""
    if within is not None:
        if not within:
            return 0
        trees = (
            " AND l.thread_id IN (WITH RECURSIVE tree(id) AS ("
            f" SELECT id FROM threads WHERE id IN ({','.join('?' * len(within))})"
            " UNION ALL SELECT t.id FROM threads t JOIN tree ON t.parent_id = tree.id)"
            " SELECT id FROM tree)"
        )
        params.extend(within)
    return int(
        conn.execute(
            f"SELECT COUNT(*) FROM logs l WHERE l.created_at < ? AND {_HAS_BODY}{trees}", params
        ).fetchone()[0]
    )


def strip_log_bodies(
    conn: Conn, clock: Clock, before_us: int, after: str | None, limit: int
) -> BodyStrip:
    # one thread a step: the first row with a body past the cursor names it (the rows
    # before it were stripped by earlier steps), then up to ``limit`` of its rows go
    first = conn.execute(
        f"SELECT l.id, l.thread_id FROM logs l WHERE l.created_at < ? AND l.id > ?"
        f" AND {_HAS_BODY} ORDER BY l.id LIMIT 1",
        (before_us, after or ""),
    ).fetchone()
    if first is None:
        return BodyStrip(0, 0, None)
    found_id, thread_id = first
    # the thread's row first: a log insert of it (which may take one of these rows as the
    # base of its request's delta) waits, then finds no base and stores its body in full.
    # Written, not only locked: a run's next write then reads its base again instead of
    # the one kept with its state (``Tx.request_base``, spec 01 §1.11.2 rule 4)
    conn.execute("UPDATE threads SET resumes = resumes WHERE id = ?", (thread_id,))
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT l.id FROM logs l WHERE l.thread_id = ? AND l.created_at < ? AND {_HAS_BODY}"
            " ORDER BY l.created_at, l.lseq LIMIT ?",
            (thread_id, before_us, limit),
        )
    ]
    if not ids:  # stripped meanwhile
        return BodyStrip(0, 0, found_id)
    marks = ",".join("?" * len(ids))
    batch = set(ids)
    dependants = [
        r[0]
        for r in conn.execute(
            f"SELECT log_id FROM log_requests WHERE base_id IN ({marks}) ORDER BY log_id", ids
        )
        if r[0] not in batch
    ]
    rerooted = sum(1 for log_id in dependants if bodies.store_in_full(conn, log_id))
    conn.execute(f"DELETE FROM log_requests WHERE log_id IN ({marks})", ids)
    conn.execute(f"DELETE FROM log_bodies WHERE log_id IN ({marks})", ids)
    conn.execute(
        "UPDATE logs SET response_body = NULL, app_request = NULL, app_response = NULL"
        f" WHERE id IN ({marks})",
        ids,
    )
    # more of this thread's rows left: the next step starts where this one did
    more = len(ids) == limit
    return BodyStrip(len(ids), rerooted, (after or "") if more else found_id)
