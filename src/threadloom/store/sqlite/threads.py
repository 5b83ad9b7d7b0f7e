"""Threads, run status, termination, the subagent registry and the event log (SQLite)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from threadloom.errors import StoreError, ThreadNotFound
from threadloom.records import (
    SubagentRegistryEntry,
    ThreadStatus,
)
from threadloom.store.base import Clock, NewThread, StoredEvent, ThreadRow, ThreadStats
from threadloom.store.sqlite.rows import (
    REGISTRY_COLUMNS,
    THREAD_COLUMNS,
    Tx,
    dump_json,
    registry_from_row,
    thread_from_row,
)


def create_thread(conn: sqlite3.Connection, clock: Clock, new: NewThread) -> ThreadRow:
    if new.parent_id is not None and get_thread(conn, new.parent_id) is None:
        raise ThreadNotFound(new.parent_id)
    now = clock()
    conn.execute(
        "INSERT INTO threads(id, agent_id, origin_agent_id, user_id, tags, parent_id, arguments,"
        " created_at_us, status_state, status_since, overlap)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'idle', ?, ?)",
        (
            new.id,
            new.agent_id,
            new.agent_id,
            new.user_id,
            dump_json(list(new.tags)),
            new.parent_id,
            dump_json(new.arguments) if new.arguments else None,
            now,
            now,
            new.overlap,
        ),
    )
    row = get_thread(conn, new.id)
    assert row is not None
    return row


def create_child(
    conn: sqlite3.Connection, clock: Clock, new: NewThread, entry: SubagentRegistryEntry
) -> tuple[ThreadRow, StoredEvent]:
    if new.parent_id is None:
        raise StoreError("create_child needs a parent thread")
    if entry.reference != new.id:
        raise StoreError("the registry entry must reference the new child thread")
    row = create_thread(conn, clock, new)
    event = upsert_registry_entry(conn, clock, new.parent_id, entry)
    return row, event


def get_thread(conn: sqlite3.Connection, thread_id: str) -> ThreadRow | None:
    row = conn.execute(
        f"SELECT {THREAD_COLUMNS}, EXISTS(SELECT 1 FROM subagent_registry"
        " WHERE parent_thread_id = threads.id) FROM threads WHERE id = ?",
        (thread_id,),
    ).fetchone()
    return thread_from_row(row) if row else None


def get_threads(conn: sqlite3.Connection, thread_ids: Sequence[str]) -> dict[str, ThreadRow]:
    out: dict[str, ThreadRow] = {}
    ids = list(dict.fromkeys(thread_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for row in conn.execute(
            f"SELECT {THREAD_COLUMNS} FROM threads WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            thread = thread_from_row(row)
            out[thread.id] = thread
    return out


def list_threads(
    conn: sqlite3.Connection,
    user_id: str | None,
    agent_id: str | None,
    parent_id: str | None,
    roots_only: bool,
    limit: int,
    offset: int,
) -> tuple[list[ThreadRow], int]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("user_id", user_id), ("agent_id", agent_id), ("parent_id", parent_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if roots_only:
        clauses.append("parent_id IS NULL")
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    total = int(conn.execute(f"SELECT COUNT(*) FROM threads{where}", params).fetchone()[0])
    rows = conn.execute(
        f"SELECT {THREAD_COLUMNS} FROM threads{where}"
        " ORDER BY created_at_us DESC, id LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )
    return [thread_from_row(r) for r in rows], total


_TREE = (
    "WITH RECURSIVE tree(id, level) AS ("
    " SELECT id, 0 FROM threads WHERE id = ?"
    " UNION ALL SELECT t.id, tree.level + 1 FROM threads t JOIN tree ON t.parent_id = tree.id)"
)


def descendants(conn: sqlite3.Connection, thread_id: str, limit: int | None) -> list[ThreadRow]:
    rows = conn.execute(
        f"{_TREE} SELECT {', '.join('t.' + c.strip() for c in THREAD_COLUMNS.split(','))}"
        " FROM tree JOIN threads t ON t.id = tree.id WHERE tree.level > 0"
        " ORDER BY t.created_at_us, t.rowid LIMIT ?",
        (thread_id, -1 if limit is None else limit),
    )
    return [thread_from_row(r) for r in rows]


def delete_thread(conn: sqlite3.Connection, clock: Clock, thread_id: str) -> list[str]:
    rows = conn.execute(f"{_TREE} SELECT id, level FROM tree", (thread_id,)).fetchall()
    if not rows:
        return []
    ordered = [r[0] for r in sorted(rows, key=lambda r: -r[1])]
    for tid in ordered:  # deepest first keeps every cascade small
        conn.execute("DELETE FROM threads WHERE id = ?", (tid,))
    return ordered


def thread_stats(conn: sqlite3.Connection, thread_id: str) -> ThreadStats:
    messages = conn.execute(
        "SELECT COALESCE(SUM(count), 0) FROM message_counts WHERE thread_id = ?", (thread_id,)
    ).fetchone()[0]
    logs = conn.execute("SELECT COUNT(*) FROM logs WHERE thread_id = ?", (thread_id,)).fetchone()[0]
    queued = conn.execute(
        "SELECT COUNT(*) FROM message_queue WHERE thread_id = ?", (thread_id,)
    ).fetchone()[0]
    return ThreadStats(int(messages), int(logs), int(queued))


def threads_with_status(conn: sqlite3.Connection, state: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM threads WHERE status_state = ?", (state,))]


def threads_with_queue(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM message_queue")]


def write_status(tx: Tx, status: ThreadStatus) -> StoredEvent:
    tx.conn.execute(
        "UPDATE threads SET status_state = ?, status_since = ?, status_reason = ? WHERE id = ?",
        (status.state, status.since, status.reason, tx.thread_id),
    )
    tx.status_state = status.state
    return tx.event("status", tx.thread_id)


def set_status(
    conn: sqlite3.Connection, clock: Clock, thread_id: str, status: ThreadStatus
) -> StoredEvent:
    tx = Tx(conn, thread_id, clock)
    event = write_status(tx, status)
    tx.flush()
    return event


def terminate(
    conn: sqlite3.Connection, clock: Clock, thread_id: str
) -> tuple[int, list[StoredEvent]]:
    tx = Tx(conn, thread_id, clock)
    if tx.terminated is not None:
        return int(tx.terminated), []
    tx.terminated = tx.now
    tx.stopped = True
    conn.execute("UPDATE threads SET terminated = ? WHERE id = ?", (tx.now, thread_id))
    for (entry_id,) in conn.execute(
        "SELECT id FROM message_queue WHERE thread_id = ? ORDER BY qseq", (thread_id,)
    ).fetchall():
        tx.event("message", entry_id)
    tx.event("status", thread_id)
    return int(tx.now), tx.flush()


# -- registry -------------------------------------------------------------------------


def get_registry(conn: sqlite3.Connection, thread_id: str) -> list[SubagentRegistryEntry]:
    return [
        registry_from_row(r)
        for r in conn.execute(
            f"SELECT {REGISTRY_COLUMNS} FROM subagent_registry WHERE parent_thread_id = ?"
            " ORDER BY created_at, reference",
            (thread_id,),
        )
    ]


def upsert_registry_entry(
    conn: sqlite3.Connection, clock: Clock, parent_id: str, entry: SubagentRegistryEntry
) -> StoredEvent:
    tx = Tx(conn, parent_id, clock)
    created = entry.created_at or tx.now
    conn.execute(
        f"INSERT OR REPLACE INTO subagent_registry(parent_thread_id, {REGISTRY_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            parent_id,
            entry.reference,
            entry.relationship,
            entry.owner,
            entry.name,
            entry.title,
            entry.description,
            int(entry.blocking),
            int(entry.resumable),
            entry.parent_communication,
            entry.status,
            dump_json(entry.initial_arguments) if entry.initial_arguments else None,
            entry.thread_name,
            entry.spawn_group_id,
            created,
        ),
    )
    event = tx.event("subagent", entry.reference)
    tx.flush()
    return event


def set_registry_status(
    conn: sqlite3.Connection, clock: Clock, parent_id: str, reference: str, status: str
) -> StoredEvent | None:
    tx = Tx(conn, parent_id, clock)
    cur = conn.execute(
        "UPDATE subagent_registry SET status = ? WHERE parent_thread_id = ? AND reference = ?",
        (status, parent_id, reference),
    )
    if cur.rowcount == 0:
        return None
    event = tx.event("subagent", reference)
    tx.flush()
    return event


def threads_with_open_children(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT parent_thread_id FROM subagent_registry"
            " WHERE status NOT IN ('idle', 'failed', 'terminated')"
        )
    ]


def read_events(
    conn: sqlite3.Connection, thread_id: str, after_seq: int, limit: int
) -> list[StoredEvent]:
    return [
        StoredEvent(thread_id, r[0], r[1], r[2], json.loads(r[3]) if r[3] else None, r[4])
        for r in conn.execute(
            "SELECT seq, kind, entity_id, payload, created_at FROM thread_events"
            " WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (thread_id, after_seq, limit),
        )
    ]
