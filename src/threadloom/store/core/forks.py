"""Forks of a thread (spec 08 §8.3.8), on both stores: a fork is stored as an import of
one thread whose ``forked_from`` is its lineage (``portable.import_threads``: its row, its
copied messages and files, and the ``thread_forks`` row — migration 25 — naming the thread
and message it was made from, in one transaction); and the forks of a thread are read
back by that lineage."""

from __future__ import annotations

from threadloom.records.portable import PortableFork, ThreadExport
from threadloom.store.core.codec import (
    THREAD_COLUMNS,
    THREAD_LINEAGE,
    THREAD_SUMMARY,
    thread_from_row,
)
from threadloom.store.core.conn import Conn
from threadloom.store.core.portable import import_threads
from threadloom.store.shapes import Clock, ThreadRow


def fork_thread(
    conn: Conn, clock: Clock, doc: ThreadExport, from_thread: str, from_message: str
) -> str:
    """Store ``doc``'s one thread as the fork of ``from_thread`` at ``from_message``; its
    id. The ids of ``doc`` are new (``ThreadExists`` otherwise, nothing written)."""
    lineage = PortableFork(thread_id=from_thread, message_id=from_message)
    thread = doc.threads[0].model_copy(update={"forked_from": lineage})
    [thread_id] = import_threads(conn, clock, doc.model_copy(update={"threads": [thread]}))
    return thread_id


def list_forks(conn: Conn, thread_id: str) -> list[ThreadRow]:
    """The threads forked from ``thread_id``, oldest first (ties by id), with their list
    summaries (spec 08 §8.2.2)."""
    rows = conn.execute(
        f"SELECT {THREAD_COLUMNS}, {THREAD_SUMMARY}, {THREAD_LINEAGE} FROM threads"
        " WHERE id IN (SELECT thread_id FROM thread_forks WHERE from_thread_id = ?)"
        " ORDER BY created_at_us, id",
        (thread_id,),
    )
    return [thread_from_row(r, summary=True, lineage=True) for r in rows]
