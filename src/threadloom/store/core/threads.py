"""Threads, run status, termination, the subagent registry and the event log, on both stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from threadloom.errors import InvalidField, StoreError, ThreadNotFound
from threadloom.records import (
    SubagentRegistryEntry,
    ThreadStatus,
)
from threadloom.store.base import (
    Clock,
    NewThread,
    Order,
    OwnerCount,
    StoredEvent,
    ThreadPatch,
    ThreadQuery,
    ThreadRow,
    ThreadStats,
)
from threadloom.store.core import approvals, messages, outbox
from threadloom.store.core.codec import (
    KEY_SPAN,
    REGISTRY_COLUMNS,
    THREAD_COLUMNS,
    THREAD_LINEAGE,
    THREAD_SUMMARY,
    dump_budgets,
    dump_json,
    registry_from_row,
    thread_from_row,
)
from threadloom.store.core.conn import Conn
from threadloom.store.core.tx import Tx


def create_thread(conn: Conn, clock: Clock, new: NewThread) -> ThreadRow:
    budgets = list(new.budgets)
    if new.parent_id is not None:
        parent = get_thread(conn, new.parent_id)
        if parent is None:
            raise ThreadNotFound(new.parent_id)
        # an ancestor's lifetime budgets count this thread's spend too (spec 15 §15.3)
        budgets.extend(b for b in parent.budgets if b.scope == "thread" and b not in budgets)
    now = clock()
    conn.execute(
        "INSERT INTO threads(id, agent_id, origin_agent_id, user_id, tags, parent_id, arguments,"
        " created_at_us, status_state, status_since, overlap, last_activity_us, budgets, tnum)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'idle', ?, ?, ?, ?,"
        f" {conn.sql.next_tnum})",
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
            now,  # the activity starts at the creation (spec 08 §8.2.2)
            dump_budgets(budgets),
        ),
    )
    row = get_thread(conn, new.id)
    assert row is not None
    outbox.emit(conn, now, "thread.created", _thread_data(row))
    return row


def _thread_data(row: ThreadRow) -> dict[str, Any]:
    """What a webhook says of a thread (spec 19 §19.2)."""
    return {
        "thread_id": row.id,
        "agent_id": row.agent_id,
        "user_id": row.user_id,
        "parent_id": row.parent_id,
    }


def create_child(
    conn: Conn, clock: Clock, new: NewThread, entry: SubagentRegistryEntry
) -> tuple[ThreadRow, StoredEvent]:
    if new.parent_id is None:
        raise StoreError("create_child needs a parent thread")
    if entry.reference != new.id:
        raise StoreError("the registry entry must reference the new child thread")
    row = create_thread(conn, clock, new)
    event = upsert_registry_entry(conn, clock, new.parent_id, entry)
    return row, event


_THREAD_ROW = (
    f"SELECT {THREAD_COLUMNS}, EXISTS(SELECT 1 FROM subagent_registry"
    f" WHERE parent_thread_id = threads.id), {THREAD_LINEAGE}"
)
"""The select list of ``get_thread``: the row, whether it has children, its lineage."""


def get_thread(conn: Conn, thread_id: str) -> ThreadRow | None:
    row = conn.execute(f"{_THREAD_ROW} FROM threads WHERE id = ?", (thread_id,)).fetchone()
    return thread_from_row(row, has_children=True, lineage=True) if row else None


def get_thread_page_wire(
    conn: Conn,
    thread_id: str,
    limit: int | None,
    offset: int,
    order: Order,
    include_silent: bool,
    max_depth: int | None,
    wanted: Callable[[ThreadRow], bool],
) -> tuple[ThreadRow | None, tuple[list[dict[str, Any]], int] | None]:
    """``get_thread`` and, when ``wanted(row)``, ``messages.read_page_wire``'s page in the
    same snapshot (issue 40: a first read's access check and its page, one read).
    The page is ``None`` when there is no row, when ``wanted`` refused it, or when a
    message of the page names a subagent. The row and the page's counts are one statement.

    Where the dialect names a version of the thread's row (``Dialect.row_version``), the
    page's statements read only while the row has the version the first one read, and
    ``ThreadChanged`` is raised when it had another (a write of the thread committed
    between): so the backend may run this without a transaction around it
    (``TxStore._checked_read``), and again in one when it raised."""
    stored, queued, params = messages.count_terms(thread_id, include_silent, max_depth)
    version = conn.sql.row_version
    found = conn.execute(
        f"{_THREAD_ROW}, {stored}, {queued}{', ' + version if version else ''}"
        " FROM threads WHERE id = ?",
        (*params, thread_id),
    ).fetchone()
    if found is None:
        return None, None
    row = thread_from_row(found, has_children=True, lineage=True)
    if not wanted(row):
        return row, None
    seen = found[-1] if version else None
    counts = (int(found[-3]), int(found[-2])) if version else (int(found[-2]), int(found[-1]))
    page = messages.read_page_wire(
        conn, thread_id, limit, offset, order, include_silent, max_depth, counts, seen
    )
    return row, page


def get_threads(conn: Conn, thread_ids: Sequence[str]) -> dict[str, ThreadRow]:
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
    conn: Conn,
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


_TNUM = "(SELECT tnum FROM threads WHERE id = ?)"
_TREE = (
    "WITH RECURSIVE tree(id, level) AS ("
    " SELECT id, 0 FROM threads WHERE id = ?"
    " UNION ALL SELECT t.id, tree.level + 1 FROM threads t JOIN tree ON t.parent_id = tree.id)"
)


_SORTS = {
    # threads_activity_order (migration 10) holds this whole order
    "activity": "last_activity_us DESC, created_at_us DESC, id",
    "created": "created_at_us DESC, id",
    "oldest": "created_at_us ASC, id",
}


def _like_escape(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def query_threads(conn: Conn, q: ThreadQuery) -> tuple[list[ThreadRow], int]:
    where, params = thread_filters(conn, q)
    total = int(conn.execute(f"SELECT COUNT(*) FROM threads{where}", params).fetchone()[0])
    rows = conn.execute(
        f"SELECT {THREAD_COLUMNS}, {THREAD_SUMMARY}, {THREAD_LINEAGE} FROM threads{where}"
        f" ORDER BY {_SORTS[q.sort]} LIMIT ? OFFSET ?",
        (*params, q.limit, q.offset),
    )
    return [thread_from_row(r, summary=True, lineage=True) for r in rows], total


def thread_filters(conn: Conn, q: ThreadQuery) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (empty, or with its leading space) of ``q``'s filters over
    ``threads`` and its parameters: the thread list's, and the search's (core/search.py)."""
    clauses: list[str] = []
    params: list[Any] = []
    if q.user_id is not None:
        clauses.append("user_id = ?")
        params.append(q.user_id)
    if q.agent_id is not None:
        match = "(agent_id = ? OR origin_agent_id = ?)"
        if q.include_children:
            clauses.append(
                "id IN (WITH RECURSIVE sub(id) AS ("
                f" SELECT id FROM threads WHERE {match}"
                " UNION SELECT t.id FROM threads t JOIN sub ON t.parent_id = sub.id)"
                " SELECT id FROM sub)"
            )
        else:
            clauses.append(match)
        params.extend((q.agent_id, q.agent_id))
    if q.parent_id is not None:
        clauses.append("parent_id = ?")
        params.append(q.parent_id)
    if q.roots_only:
        clauses.append("parent_id IS NULL")
    tags_from, tag = conn.sql.tag_values("threads.tags")
    if q.search:
        needle = "%" + _like_escape(q.search.lower()) + "%"
        any_tag = f"EXISTS (SELECT 1 FROM {tags_from} WHERE lower({tag}) LIKE ? ESCAPE '!')"
        clauses.append(f"(lower(id) LIKE ? ESCAPE '!' OR {any_tag})")
        params.extend((needle, needle))
    for wanted in q.tags:
        # exact: the tag itself, case and all (a filter `a` does not match `a-b` or `A`)
        clauses.append(f"EXISTS (SELECT 1 FROM {tags_from} WHERE {tag} = ?)")
        params.append(wanted)
    if q.created_from_us is not None:
        clauses.append("created_at_us >= ?")
        params.append(q.created_from_us)
    if q.created_to_us is not None:
        clauses.append("created_at_us <= ?")
        params.append(q.created_to_us)
    if q.executing is not None:
        clauses.append("status_state = 'running'" if q.executing else "status_state != 'running'")
    if q.terminated is not None:
        clauses.append("terminated IS NOT NULL" if q.terminated else "terminated IS NULL")
    if q.states:
        clauses.append(f"status_state IN ({','.join('?' * len(q.states))})")
        params.extend(q.states)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return where, params


def thread_owners(conn: Conn, user_id: str | None) -> list[OwnerCount]:
    where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
    rows = conn.execute(
        f"SELECT user_id, COUNT(*) AS n FROM threads {where} GROUP BY user_id"
        " ORDER BY n DESC, user_id IS NULL, user_id",
        params,
    )
    return [OwnerCount(user_id=r[0], thread_count=int(r[1])) for r in rows]


def update_thread(conn: Conn, clock: Clock, thread_id: str, patch: ThreadPatch) -> ThreadRow:
    found = conn.execute("SELECT env, env_types FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if found is None:
        raise ThreadNotFound(thread_id)
    env: dict[str, str] = json.loads(found[0]) if found[0] else {}
    types: dict[str, str] = json.loads(found[1]) if found[1] else {}
    if patch.replace_env:
        env = dict(patch.env or {})
        types = {k: v for k, v in (patch.env_types or {}).items() if v == "text" and k in env}
    env.update(patch.env_set)
    for key, kind in patch.env_type_set.items():
        if key not in env:
            raise InvalidField(f"env_type_patch.{key}", "has no matching env value")
        if kind == "text":
            types[key] = "text"
        else:
            types.pop(key, None)
    for key in patch.env_delete:
        env.pop(key, None)
        types.pop(key, None)
    sets = ["env = ?", "env_types = ?"]
    params: list[Any] = [dump_json(env) if env else None, dump_json(types) if types else None]
    if patch.tags is not None:
        sets.append("tags = ?")
        params.append(dump_json(list(patch.tags)))
    if patch.set_overlap:
        sets.append("overlap = ?")
        params.append(patch.overlap)
    if patch.set_properties:
        sets.append("properties = ?")
        params.append(dump_json(patch.properties) if patch.properties else None)
    if patch.agent_id is not None:
        sets.append("agent_id = ?")
        params.append(patch.agent_id)
    conn.execute(f"UPDATE threads SET {', '.join(sets)} WHERE id = ?", (*params, thread_id))
    row = get_thread(conn, thread_id)
    assert row is not None
    return row


def descendants(conn: Conn, thread_id: str, limit: int | None) -> list[ThreadRow]:
    rows = conn.execute(
        f"{_TREE} SELECT {', '.join('t.' + c.strip() for c in THREAD_COLUMNS.split(','))}"
        " FROM tree JOIN threads t ON t.id = tree.id WHERE tree.level > 0"
        " ORDER BY t.created_at_us, t.tnum LIMIT ?",
        (thread_id, conn.sql.no_limit if limit is None else limit),
    )
    return [thread_from_row(r) for r in rows]


def delete_thread(conn: Conn, clock: Clock, thread_id: str) -> list[str]:
    rows = conn.execute(
        f"{_TREE} SELECT tree.id, tree.level, t.tnum FROM tree JOIN threads t ON t.id = tree.id",
        (thread_id,),
    ).fetchall()
    if not rows:
        return []
    rows.sort(key=lambda r: -r[1])
    for tid, _level, tnum in rows:  # deepest first keeps every cascade small
        # the thread's row first: its lock waits for a write of the thread under way, whose
        # rows the statements below then see (PostgreSQL: each its own snapshot)
        conn.execute("DELETE FROM threads WHERE id = ?", (tid,))
        # spec 01 §1.11.3: the rows PostgreSQL keeps no foreign key for (migration 20: the
        # keys' checks at every insert cost a turn ~5 % of the server's instructions),
        # deleted here for both stores (SQLite's foreign keys have cascaded them already)
        logs = "SELECT id FROM logs WHERE thread_id = ?"
        conn.execute(f"DELETE FROM log_bodies WHERE log_id IN ({logs})", (tid,))
        conn.execute(f"DELETE FROM log_requests WHERE log_id IN ({logs})", (tid,))
        conn.execute("DELETE FROM logs WHERE thread_id = ?", (tid,))
        conn.execute("DELETE FROM tool_calls WHERE thread_id = ?", (tid,))
        conn.execute("DELETE FROM message_counts WHERE thread_id = ?", (tid,))
        # messages and event rows have no foreign key (migrations 6 and 8): their key range
        low, high = tnum * KEY_SPAN, (tnum + 1) * KEY_SPAN
        conn.execute("DELETE FROM messages WHERE rid > ? AND rid < ?", (low, high))
        conn.execute("DELETE FROM thread_events WHERE key > ? AND key < ?", (low, high))
    return [r[0] for r in rows]


def thread_stats(conn: Conn, thread_id: str) -> ThreadStats:
    messages = conn.execute(
        "SELECT COALESCE(SUM(count), 0)"
        " + COALESCE((SELECT top_visible_count FROM threads WHERE id = ?), 0)"
        " FROM message_counts WHERE thread_id = ?",
        (thread_id, thread_id),
    ).fetchone()[0]
    logs = conn.execute("SELECT COUNT(*) FROM logs WHERE thread_id = ?", (thread_id,)).fetchone()[0]
    queued = conn.execute(
        "SELECT COUNT(*) FROM message_queue WHERE thread_id = ?", (thread_id,)
    ).fetchone()[0]
    return ThreadStats(int(messages), int(logs), int(queued))


def threads_with_status(conn: Conn, state: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT id FROM threads WHERE status_state = ?", (state,))]


def lost_runs(conn: Conn, limit: int, mine: bool = False) -> list[str]:
    """Threads whose status is ``running`` with no live node holding their lease: runs
    lost with their process (spec 12 §12.6.1; on a store one process runs, every one);
    ``mine``: also those whose lease is this node's (it runs none of them: it is starting
    with the id of a process that died, or it dropped its runs when it fenced itself)."""
    owner = conn.sql.unowned("t")
    params: list[Any] = []
    if mine and conn.sql.leases:
        owner = f"({owner} OR t.lease_node = ?)"
        params.append(conn.node_id)
    return [
        r[0]
        for r in conn.execute(
            f"SELECT id FROM threads t WHERE t.status_state = 'running' AND {owner}"
            " ORDER BY t.tnum LIMIT ?",
            (*params, limit),
        )
    ]


def live_owner(conn: Conn, thread_id: str) -> str | None:
    """The live node that holds the thread's lease, if any (none where threads carry no
    leases: one process runs them all)."""
    if not conn.sql.leases:
        return None
    found = conn.execute(
        f"SELECT t.lease_node FROM threads t WHERE t.id = ? AND NOT {conn.sql.unowned('t')}",
        (thread_id,),
    ).fetchone()
    return str(found[0]) if found else None


def claimable_queues(conn: Conn, limit: int) -> list[str]:
    """Threads with queued entries, neither stopped nor terminated, that no live node runs
    (spec 12 §12.4 rule 4: the queue's safety net)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT t.id FROM threads t WHERE t.stopped = 0 AND t.terminated IS NULL"
            f" AND {conn.sql.unowned('t')}"
            " AND EXISTS (SELECT 1 FROM message_queue q WHERE q.thread_id = t.id)"
            " ORDER BY t.tnum LIMIT ?",
            (limit,),
        )
    ]


def threads_with_queue(conn: Conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM message_queue")]


def write_status(tx: Tx, status: ThreadStatus) -> StoredEvent:
    if status.state == "running" or tx.status_state == "running":
        tx.touch(status.since)
    settled = tx.status_state == "running" and status.state != "running"
    tx.set_status(status)
    # the committed state, for publishing without a read (never stored)
    data = {"status": status.to_wire(), "terminated": tx.terminated}
    event = tx.event("status", tx.thread_id, data=data)
    if settled:  # a run ended: its webhooks in this transaction (spec 19 §19.2)
        hook = {"thread_id": tx.thread_id, "status": data["status"], "reason": status.reason}
        outbox.emit(tx.conn, tx.now, "run.settled", hook, tx.from_kept)
        if status.reason == "budget_exceeded":
            outbox.emit(tx.conn, tx.now, "budget.exceeded", hook)
    return event


def set_status(conn: Conn, clock: Clock, thread_id: str, status: ThreadStatus) -> StoredEvent:
    tx = Tx(conn, thread_id, clock)
    event = write_status(tx, status)
    tx.flush()
    return event


def terminate(conn: Conn, clock: Clock, thread_id: str) -> tuple[int, list[StoredEvent]]:
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
    approvals.cancel_and_answer_in(tx, "terminated")
    tx.event("status", thread_id)
    outbox.emit(conn, tx.now, "thread.terminated", {"thread_id": thread_id, "terminated": tx.now})
    return int(tx.now), tx.flush()


# -- registry -------------------------------------------------------------------------


def get_registry(conn: Conn, thread_id: str) -> list[SubagentRegistryEntry]:
    return [
        registry_from_row(r)
        for r in conn.execute(
            f"SELECT {REGISTRY_COLUMNS} FROM subagent_registry WHERE parent_thread_id = ?"
            " ORDER BY created_at, reference",
            (thread_id,),
        )
    ]


_REGISTRY_REPLACE = "ON CONFLICT(parent_thread_id, reference) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}"
    for c in (c.strip() for c in REGISTRY_COLUMNS.split(","))
    if c != "reference"
)
"""An entry written again replaces every column of the stored one."""


def upsert_registry_entry(
    conn: Conn, clock: Clock, parent_id: str, entry: SubagentRegistryEntry
) -> StoredEvent:
    tx = Tx(conn, parent_id, clock)
    write_registry_row(conn, parent_id, entry, entry.created_at or tx.now)
    event = tx.event("subagent", entry.reference)
    tx.flush()
    return event


def write_registry_row(
    conn: Conn, parent_id: str, entry: SubagentRegistryEntry, created: int
) -> None:
    """Insert (or replace) the registry entry's row, created at ``created`` µs."""
    conn.execute(
        f"INSERT INTO subagent_registry(parent_thread_id, {REGISTRY_COLUMNS})"
        f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {_REGISTRY_REPLACE}",
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


def set_registry_status(
    conn: Conn, clock: Clock, parent_id: str, reference: str, status: str
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


def threads_with_open_children(conn: Conn) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT parent_thread_id FROM subagent_registry"
            " WHERE status NOT IN ('idle', 'failed', 'terminated')"
        )
    ]


def read_events(conn: Conn, thread_id: str, after_seq: int, limit: int) -> list[StoredEvent]:
    after = max(after_seq, 0)  # seq starts at 1
    if after >= KEY_SPAN - 1:
        return []
    return [
        StoredEvent(thread_id, r[0], r[1], r[2], json.loads(r[3]) if r[3] else None, r[4])
        for r in conn.execute(
            "SELECT seq, kind, entity_id, payload, created_at FROM thread_events"
            f" WHERE key > {_TNUM} * ? + ? AND key < ({_TNUM} + 1) * ? ORDER BY key LIMIT ?",
            (thread_id, KEY_SPAN, after, thread_id, KEY_SPAN, limit),
        )
    ]
