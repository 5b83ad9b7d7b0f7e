"""The durable message queue, on both stores (spec 01 §1.5)."""

from __future__ import annotations

from threadloom.errors import DuplicateMessage, ThreadTerminated
from threadloom.records import QueueEntry
from threadloom.store.base import Clock, StoredEvent
from threadloom.store.core.codec import (
    OF_THREAD,
    QUEUE_COLUMNS,
    copy_with,
    dump_attachments,
    dump_json,
    queue_entry_from_row,
)
from threadloom.store.core.conn import Conn
from threadloom.store.core.tx import Tx


def enqueue(
    conn: Conn, clock: Clock, thread_id: str, entry: QueueEntry, clear_stop: bool
) -> tuple[QueueEntry, StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    stored, qseq, event = enqueue_in(tx, entry, clear_stop)
    insert_entry(tx, stored, qseq)
    tx.flush()
    return stored, event


def enqueue_in(tx: Tx, entry: QueueEntry, clear_stop: bool) -> tuple[QueueEntry, int, StoredEvent]:
    """Everything of a send inside ``tx`` but the queue row: the checks, the entry's
    stamp and queue sequence number, the activity time, the event. The caller stores the
    entry (``insert_entry``) or delivers it at once."""
    if tx.terminated is not None:
        raise ThreadTerminated(tx.thread_id, tx.terminated)
    client_id = (entry.metadata or {}).get("client_message_id")
    if isinstance(client_id, str):
        _refuse_duplicate(tx.conn, tx.thread_id, client_id)
    stored = copy_with(entry, {"created_at": tx.stamp()})
    qseq = tx.next_queue_seq()
    if clear_stop:
        tx.stopped = False
    tx.touch(stored.created_at)
    tx.wake = True
    return stored, qseq, tx.event("message", stored.id)


def insert_entry(tx: Tx, stored: QueueEntry, qseq: int) -> None:
    tx.queue_empty = False
    tx.conn.execute(
        f"INSERT INTO message_queue(thread_id, qseq, {QUEUE_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tx.thread_id,
            qseq,
            stored.id,
            stored.role,
            stored.content,
            dump_attachments(stored.attachments),
            int(stored.silent),
            dump_json(stored.metadata),
            stored.source,
            stored.created_at,
        ),
    )


def _refuse_duplicate(conn: Conn, thread_id: str, client_id: str) -> None:
    """Spec 08 §8.4.2 step 3: one message per ``client_message_id`` in a thread."""
    for table, queued in (("message_queue", True), ("messages", False)):
        found = conn.execute(
            f"SELECT id FROM {table} WHERE thread_id = ?"
            f" AND {conn.sql.json_text('metadata', 'client_message_id')} = ? LIMIT 1",
            (thread_id, client_id),
        ).fetchone()
        if found is not None:
            raise DuplicateMessage(found[0], queued)


def get_entry(conn: Conn, thread_id: str, entry_id: str) -> QueueEntry | None:
    row = conn.execute(
        f"SELECT {QUEUE_COLUMNS} FROM message_queue WHERE id = ? AND {OF_THREAD}",
        (entry_id, thread_id),
    ).fetchone()
    return queue_entry_from_row(row) if row else None


def update_entry(
    conn: Conn, clock: Clock, thread_id: str, entry: QueueEntry
) -> tuple[QueueEntry, StoredEvent] | None:
    tx = Tx(conn, thread_id, clock)
    cur = conn.execute(
        "UPDATE message_queue SET content = ?, attachments = ?, silent = ?, metadata = ?"
        f" WHERE id = ? AND {OF_THREAD}",
        (
            entry.content,
            dump_attachments(entry.attachments),
            int(entry.silent),
            dump_json(entry.metadata),
            entry.id,
            thread_id,
        ),
    )
    if cur.rowcount == 0:
        return None
    event = tx.event("message", entry.id)
    tx.flush()
    fresh = get_entry(conn, thread_id, entry.id)
    assert fresh is not None
    return fresh, event


def list_entries(conn: Conn, thread_id: str) -> list[QueueEntry]:
    return [
        queue_entry_from_row(r)
        for r in conn.execute(
            f"SELECT {QUEUE_COLUMNS} FROM message_queue WHERE thread_id = ? ORDER BY qseq",
            (thread_id,),
        )
    ]
