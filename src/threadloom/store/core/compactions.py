"""Compaction records, once for both stores (spec 23 §23.1): added, listed by thread, and
undone (``undone_at`` set once; the record stays). Nothing here reads or writes messages:
a compaction never deletes or edits what it covers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadloom.records import Compaction
from threadloom.store.core.codec import OF_THREAD
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

COLUMNS = (
    "id, thread_id, first_message_id, last_message_id, message_count, summary, model,"
    " trigger, input_tokens, output_tokens, cost, provider_item, created_at_us, undone_at_us"
)


def _record(row: Sequence[Any]) -> Compaction:
    return Compaction(
        id=row[0],
        thread_id=row[1],
        first_message_id=row[2],
        last_message_id=row[3],
        message_count=int(row[4]),
        summary=row[5],
        model=row[6],
        trigger=row[7],
        input_tokens=int(row[8]),
        output_tokens=int(row[9]),
        cost=row[10],
        provider_item=json.loads(row[11]) if row[11] is not None else None,
        created_at=int(row[12]),
        undone_at=int(row[13]) if row[13] is not None else None,
    )


def add_compaction(conn: Conn, clock: Clock, record: Compaction) -> Compaction | None:
    """Store ``record`` stamped with the store's clock; None when its thread is gone."""
    if conn.execute("SELECT 1 FROM threads WHERE id = ?", (record.thread_id,)).fetchone() is None:
        return None
    stamped = record.model_copy(update={"created_at": clock(), "undone_at": None})
    return restore_compaction(conn, record.thread_id, stamped)


def restore_compaction(conn: Conn, thread_id: str, record: Compaction) -> Compaction:
    """Write ``record`` as it is, times included, for ``thread_id`` (an import, spec 21)."""
    item = (
        json.dumps(record.provider_item, separators=(",", ":"), ensure_ascii=False)
        if record.provider_item is not None
        else None
    )
    row = conn.execute(
        f"INSERT INTO compactions ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        f" RETURNING {COLUMNS}",
        (
            record.id,
            thread_id,
            record.first_message_id,
            record.last_message_id,
            record.message_count,
            record.summary,
            record.model,
            record.trigger,
            record.input_tokens,
            record.output_tokens,
            record.cost,
            item,
            record.created_at,
            record.undone_at,
        ),
    ).fetchone()
    return _record(row)


def list_compactions(conn: Conn, thread_id: str, active_only: bool) -> list[Compaction]:
    """The thread's compactions, oldest first (``active_only``: those not undone)."""
    where = "thread_id = ?" + (" AND undone_at_us IS NULL" if active_only else "")
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM compactions WHERE {where} ORDER BY created_at_us, id",
        (thread_id,),
    ).fetchall()
    return [_record(r) for r in rows]


def get_compaction(conn: Conn, thread_id: str, compaction_id: str) -> Compaction | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM compactions WHERE id = ? AND {OF_THREAD}",
        (compaction_id, thread_id),
    ).fetchone()
    return _record(row) if row is not None else None


def undo_compaction(
    conn: Conn, clock: Clock, thread_id: str, compaction_id: str
) -> Compaction | None:
    """Mark the compaction undone (once: undoing it again keeps the first time); None when
    the thread has no such compaction."""
    conn.execute(
        "UPDATE compactions SET undone_at_us = ?"
        f" WHERE id = ? AND {OF_THREAD} AND undone_at_us IS NULL",
        (clock(), compaction_id, thread_id),
    )
    return get_compaction(conn, thread_id, compaction_id)
