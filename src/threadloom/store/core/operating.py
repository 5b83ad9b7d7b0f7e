"""Aggregates for an operator (spec 17 §17.1): what a metrics scrape reads of the store —
threads by run state and reason, the queue's depth and age, leases by node — and the last
heartbeat of a lost run's node, for the settle time of lost runs. Reads only, the same SQL
on both backends."""

from __future__ import annotations

from datetime import datetime

from threadloom.store.core.conn import Conn
from threadloom.store.shapes import OperatingStats


def operating_stats(conn: Conn) -> OperatingStats:
    threads: dict[tuple[str, str], int] = {}
    for state, reason, count in conn.execute(
        "SELECT status_state, status_reason, COUNT(*) FROM threads"
        " GROUP BY status_state, status_reason"
    ):
        key = (str(state), str(reason or ""))
        threads[key] = threads.get(key, 0) + int(count)
    messages, queued, oldest = conn.execute(
        "SELECT COUNT(*), COUNT(DISTINCT thread_id), MIN(created_at) FROM message_queue"
    ).fetchone()
    leases: dict[str, int] = {}
    if conn.sql.leases:
        rows = conn.execute(
            "SELECT lease_node, COUNT(*) FROM threads WHERE status_state = 'running'"
            " GROUP BY lease_node"
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT NULL, COUNT(*) FROM threads WHERE status_state = 'running'"
        ).fetchall()
    for node, count in rows:
        if count:
            leases[str(node or "")] = leases.get(str(node or ""), 0) + int(count)
    return OperatingStats(
        threads=threads,
        queued_messages=int(messages or 0),
        queued_threads=int(queued or 0),
        oldest_queued_us=int(oldest) if oldest is not None else None,
        leases=leases,
    )


def lease_heartbeat(conn: Conn, thread_id: str) -> float | None:
    if not conn.sql.leases:
        return None
    found = conn.execute(
        "SELECT n.heartbeat_at FROM threads t JOIN nodes n ON n.node_id = t.lease_node"
        " WHERE t.id = ?",
        (thread_id,),
    ).fetchone()
    if found is None or found[0] is None:
        return None
    value = found[0]
    return value.timestamp() if isinstance(value, datetime) else float(value)
