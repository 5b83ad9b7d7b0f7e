"""Storing an imported thread tree (spec 21 §21.4), on both stores: one transaction that
writes each thread as history — its row with the status it had, its messages, log rows,
registry, approvals, compactions, files and fork lineage with their own ids and times —
and starts no run. The
reading side needs nothing of its own: ``store/portable.py`` reads through the Store
protocol."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from threadloom.errors import PortableFormatError, ThreadExists
from threadloom.records import canonical_json, state_json
from threadloom.records.portable import PortableThread, ThreadExport
from threadloom.store.core import outbox
from threadloom.store.core.approvals import LEDGER_COLUMNS
from threadloom.store.core.codec import dump_budgets, dump_json, dump_status_error
from threadloom.store.core.compactions import restore_compaction
from threadloom.store.core.conn import Conn
from threadloom.store.core.files import insert_entry
from threadloom.store.core.logs import restore_log_in
from threadloom.store.core.messages import insert_in_tx
from threadloom.store.core.threads import write_registry_row
from threadloom.store.core.tx import Tx
from threadloom.store.shapes import Clock, NewFile

_CHUNK = 500


def _taken(conn: Conn, table: str, ids: Sequence[str]) -> str | None:
    """The first of ``ids`` (in the file's order) that ``table`` already holds."""
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        found = {
            str(row[0])
            for row in conn.execute(
                f"SELECT id FROM {table} WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
        }
        for value in chunk:
            if value in found:
                return value
    return None


def _refuse_existing(conn: Conn, doc: ThreadExport) -> None:
    """``ThreadExists`` naming the first id of the file the store already holds: a thread,
    then a message, then a log row, then a compaction (ids are unique store-wide)."""
    for what, table, ids in (
        ("thread", "threads", [t.id for t in doc.threads]),
        ("message", "messages", [m.id for t in doc.threads for m in t.messages]),
        ("log row", "logs", [r.id for t in doc.threads for r in t.logs]),
        ("compaction", "compactions", [c.id for t in doc.threads for c in t.compactions]),
    ):
        found = _taken(conn, table, ids)
        if found is not None:
            raise ThreadExists(what, found)


def import_threads(conn: Conn, clock: Clock, doc: ThreadExport) -> list[str]:
    """Store every thread of ``doc`` (parents first) in this one transaction; their ids,
    in the file's order. An id already stored → ``ThreadExists``, nothing written."""
    _refuse_existing(conn, doc)
    for thread in doc.threads:
        if thread.status.state == "running":
            raise PortableFormatError(
                "status.state",
                "must not be running",
                f"thread {thread.id} is running; a file carries history, not a run",
            )
        _insert_thread(conn, clock, thread)
    root = doc.threads[0]
    outbox.emit(
        conn,
        clock(),
        "thread.created",
        {
            "thread_id": root.id,
            "agent_id": root.agent_id,
            "user_id": root.user_id,
            "parent_id": None,
        },
    )
    return [t.id for t in doc.threads]


def _last(values: Iterable[int | None]) -> int:
    return max((v for v in values if v is not None), default=0)


def _insert_thread(conn: Conn, clock: Clock, t: PortableThread) -> None:
    state = t.shared_state
    stored_state = state_json(state.value)[1] if state.version > 0 else None
    status = t.status
    activity = _last(
        (t.created_at_us, status.since, t.terminated, *(m.created_at for m in t.messages))
    )
    conn.execute(
        "INSERT INTO threads(id, agent_id, origin_agent_id, user_id, tags, parent_id, arguments,"
        " created_at_us, terminated, status_state, status_since, status_reason, status_error,"
        " stopped, session_turns_a, session_turns_b, overlap, last_activity_us, budgets,"
        " shared_state, shared_state_version, shared_state_at, tnum)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
        f" {conn.sql.next_tnum})",
        (
            t.id,
            t.agent_id,
            t.origin_agent_id,
            t.user_id,
            dump_json(list(t.tags)),
            t.parent_id,
            dump_json(t.arguments) if t.arguments else None,
            t.created_at_us,
            t.terminated,
            status.state,
            status.since,
            status.reason,
            None if status.error is None else dump_status_error(status.error),
            int(t.stopped),
            t.session_turns[0],
            t.session_turns[1],
            t.overlap,
            activity,
            dump_budgets(t.budgets),
            stored_state,
            state.version,
            state.updated_at,
        ),
    )
    tx = Tx(conn, t.id, clock)
    for message in t.messages:
        insert_in_tx(tx, message, created_at=message.created_at)
    # the thread clock goes on after the newest stamp it carries (spec 01 §1.3.3)
    tx.clock_us = max(tx.clock_us, _last(m.created_at for m in t.messages))
    for row in t.logs:
        restore_log_in(tx, row)
    for entry in t.registry:
        write_registry_row(conn, t.id, entry, entry.created_at)
    for approval in t.approvals:
        conn.execute(
            f"INSERT INTO tool_ledger({LEDGER_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                t.id,
                approval.tool_call_id,
                approval.message_id,
                approval.tool,
                canonical_json(approval.arguments),
                approval.arguments_hash,
                approval.state,
                approval.requested_at,
                approval.decided_at,
                approval.decided_by,
                approval.reason,
                None
                if approval.edited_arguments is None
                else canonical_json(approval.edited_arguments),
                approval.started_at,
            ),
        )
    for compaction in t.compactions:
        restore_compaction(conn, t.id, compaction)
    if t.forked_from is not None:  # the lineage as given: its thread may be elsewhere
        conn.execute(
            "INSERT INTO thread_forks(thread_id, from_thread_id, from_message_id) VALUES (?, ?, ?)",
            (t.id, t.forked_from.thread_id, t.forked_from.message_id),
        )
    for f in t.files:
        content = f.content_bytes() if f.kind == "file" else None
        insert_entry(
            conn,
            t.id,
            NewFile(
                path=f.path,
                mime_type=f.mime_type,
                location=f.location,
                metadata=f.metadata,
                width=f.width,
                height=f.height,
            ),
            f.kind,
            len(content) if content is not None else f.size,
            f.created_at,
            content or b"",
            f.thumbnail_bytes(),
        )
    tx.flush()
