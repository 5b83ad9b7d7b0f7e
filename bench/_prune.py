"""Section D of the store benchmark: a pass of the event-row pruner (spec 09 §9.6.1).

The runtime that owns a store prunes its ``thread_events`` rows once a minute
(``thread/retention.py``). One database per size: that many threads created through the
store, each given 40 event rows stamped two hours ago by one bulk statement (the rows are
what a few turns write; how they were written does not matter to the pass). Then, on the
store with its defaults, three passes with the default window: the first deletes every
row; the second finds every thread pruned and skips it; after one new row per thread (one
``inject_message`` each, now) the third finds only young rows. Each pass runs while a
ticker task measures how long the event loop was held at most. For information: the
issue sets no goal.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import Sequence

from _report import progress, table
from threadloom.records import Message
from threadloom.store.core.codec import KEY_SPAN
from threadloom.store.shapes import NewThread
from threadloom.store.sqlite.store import SqliteStore
from threadloom.thread.retention import EventRetention, PruneReport, prune_events

ROWS_PER_THREAD = 40


async def _seed(path: str, count: int) -> None:
    """``count`` threads with ``ROWS_PER_THREAD`` event rows each, two hours old."""
    store = await SqliteStore.open(path, synchronous="OFF")
    try:
        for _ in range(count):
            await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="chat"))
    finally:
        await store.close()
    old = time.time_ns() // 1000 - 2 * 3_600_000_000
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        threads = conn.execute("SELECT id, tnum FROM threads").fetchall()
        conn.executemany(
            "INSERT INTO thread_events(key, thread_id, seq, kind, entity_id, payload, created_at)"
            " VALUES (?, ?, ?, 'status', NULL, NULL, ?)",
            (
                (tnum * KEY_SPAN + seq, tid, seq, old)
                for tid, tnum in threads
                for seq in range(1, ROWS_PER_THREAD + 1)
            ),
        )
        conn.execute("UPDATE threads SET event_seq = ?", (ROWS_PER_THREAD,))
        conn.execute("COMMIT")
    finally:
        conn.close()


async def _timed_pass(store: SqliteStore) -> tuple[PruneReport, float]:
    """One pass with the default window; the longest the event loop was held (s)."""
    loop = asyncio.get_running_loop()
    worst = 0.0

    async def ticker() -> None:
        nonlocal worst
        while True:
            t0 = loop.time()
            await asyncio.sleep(0.001)
            worst = max(worst, loop.time() - t0 - 0.001)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.005)
    try:
        report = await prune_events(store, EventRetention(), store.clock)
    finally:
        tick.cancel()
    return report, worst


async def section_d(workdir: str, sizes: Sequence[int]) -> str:
    """Three pruning passes per size; the report."""
    rows: list[list[str]] = []
    for size in sizes:
        path = os.path.join(workdir, f"prune-{size}.db")
        progress(f"  D: seeding {size:,} threads × {ROWS_PER_THREAD} event rows …")
        await _seed(path, size)
        store = await SqliteStore.open(path)
        try:
            for name in ("every row old", "all pruned", "one young row each"):
                if name == "one young row each":
                    for tid in _thread_ids(path):
                        note = Message(id=str(uuid.uuid4()), role="user", content="new")
                        await store.insert_message(tid, note)
                report, worst = await _timed_pass(store)
                rate = report.rows / report.seconds if report.seconds and report.rows else 0
                rows.append(
                    [
                        f"{size:,}",
                        name,
                        f"{report.rows:,}",
                        f"{report.chunks:,}",
                        f"{report.seconds * 1000:.1f}",
                        f"{rate:,.0f}" if rate else "—",
                        f"{worst * 1000:.1f}",
                    ]
                )
        finally:
            await store.close()
    headers = ["threads", "pass", "rows deleted", "chunks", "ms", "rows/s", "worst loop stall ms"]
    return "\n".join(
        [
            "D. a pass of the event-row pruner vs the number of threads (for information)",
            f"   each thread seeded with {ROWS_PER_THREAD} event rows two hours old; passes with"
            " the default window (1 h, 10,000 rows),",
            "   a chunk ≤ 200 threads and ≤ 5,000 rows a transaction; a 1 ms ticker measures the"
            " longest hold of the event loop",
            "",
            table(headers, rows),
        ]
    )


def _thread_ids(path: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM threads")]
    finally:
        conn.close()
