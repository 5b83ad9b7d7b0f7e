"""The replay window of the event rows (spec 09 §9.6.1): pruning ``thread_events``.

A thread's event rows are one key range (``tnum * KEY_SPAN + seq``, migration 6), written
in ``seq`` order, so pruning a thread is one range delete from its lowest key. A row goes
when it is older than the window's age **or** more than ``keep`` newer rows follow it; the
thread then records ``events_pruned_through`` (the highest pruned ``seq``), which is what
the stream's resume rules read (§9.7.1).

Rows carry the committing transaction's clock reading, which rises with ``seq`` as far as
the system clock does; the age cut takes the rows before the first one young enough to
keep, so a clock step backwards can only keep a few old rows a little longer.

A pass visits the threads in ``tnum`` order, a bounded chunk per transaction, and only
those with rows left (``event_seq > events_pruned_through``): once a quiet thread's rows
have all aged out, passes skip it until it changes again.
"""

from __future__ import annotations

from threadloom.store.core.codec import KEY_SPAN
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock, PruneChunk

MAX_ROWS = 5_000
"""Event rows one transaction deletes at most: a chunk holds the write lock a few ms."""
_CANDIDATES = (
    "SELECT id, tnum, event_seq, events_pruned_through FROM threads"
    " WHERE tnum > ? AND event_seq > events_pruned_through ORDER BY tnum LIMIT ?"
)
_FIRST_YOUNG = (
    "SELECT key FROM thread_events WHERE key > ? AND key <= ? AND created_at >= ?"
    " ORDER BY key LIMIT 1"
)


def prune_chunk(
    conn: Conn,
    clock: Clock,
    older_than_us: int,
    keep: int,
    after: int,
    max_threads: int,
    max_rows: int = MAX_ROWS,
) -> PruneChunk:
    """Prune up to ``max_threads`` threads with rows left past cursor ``after``, deleting
    ``max_rows`` rows at most (a thread with more to go is where the next chunk starts)."""
    threads = conn.execute(_CANDIDATES, (after, max_threads)).fetchall()
    rows = moved = 0
    cursor: int | None = threads[-1][1] if len(threads) == max_threads else None
    for thread_id, tnum, head, through in threads:
        if rows >= max_rows:  # the budget is spent: this thread starts the next chunk
            cursor = tnum - 1
            break
        base = tnum * KEY_SPAN
        young = conn.execute(_FIRST_YOUNG, (base + through, base + head, older_than_us)).fetchone()
        aged = head if young is None else young[0] - base - 1  # the rows before it are old
        cut = max(aged, head - keep - 1)  # or have more than ``keep`` newer rows
        if cut <= through:
            continue
        partial = cut - through > max_rows - rows  # the budget ends inside this thread
        if partial:
            cut = through + (max_rows - rows)
        rows += conn.execute(
            "DELETE FROM thread_events WHERE key > ? AND key <= ?", (base + through, base + cut)
        ).rowcount
        conn.execute("UPDATE threads SET events_pruned_through = ? WHERE id = ?", (cut, thread_id))
        if partial:  # the rest of this thread's old rows in the next chunk (counted there)
            cursor = tnum - 1
            break
        moved += 1
    return PruneChunk(rows=rows, threads=moved, cursor=cursor)
