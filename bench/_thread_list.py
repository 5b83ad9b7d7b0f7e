"""Section C of the store benchmark: a page of the thread list vs the number of threads.

``GET /api/threads`` lists a caller's threads newest activity first (spec 08 §8.3.1, the
default ``sort=activity``); an admin's list holds every thread of the store. One database
per size, its threads created through the store (owned by 20 users in turn, so one user
holds a twentieth of them), then on the store with its defaults: the first page of 50 of
the whole list, the page at the middle of it, and the first page of one user's list —
interleaved across sizes. Goal: the whole list's first page at the largest size within
1.5× of the smallest (a page costs its rows, not the table).
"""

from __future__ import annotations

import gc
import os
import time
import uuid
from collections.abc import Sequence

from _report import percentile, progress, table, verdict
from threadloom.store.shapes import NewThread, ThreadQuery
from threadloom.store.sqlite.store import SqliteStore

USERS = 20
PAGE = 50
BLOCKS = 10
LIST_GOAL = 1.5


async def _seed(path: str, count: int) -> float:
    """``count`` threads, created through the store on ``synchronous=OFF``; seconds taken."""
    started = time.perf_counter()
    store = await SqliteStore.open(path, synchronous="OFF")
    try:
        for i in range(count):
            new = NewThread(id=str(uuid.uuid4()), agent_id="chat", user_id=f"user-{i % USERS}")
            await store.create_thread(new)
            if (i + 1) % 10_000 == 0:
                progress(f"  C: {i + 1:,}/{count:,} threads")
    finally:
        await store.close()
    return time.perf_counter() - started


def _queries(size: int) -> dict[str, ThreadQuery]:
    return {
        "first": ThreadQuery(limit=PAGE),
        "middle": ThreadQuery(limit=PAGE, offset=max(0, size // 2 - PAGE)),
        "user": ThreadQuery(user_id="user-3", limit=PAGE),
    }


async def _time(store: SqliteStore, query: ThreadQuery, count: int, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for _ in range(count):
        t0 = clock()
        rows, _total = await store.query_threads(query)
        out.append(clock() - t0)
        if not rows:
            raise RuntimeError(f"thread list: an empty page for {query}")


async def section_c(workdir: str, sizes: Sequence[int], reads: int) -> tuple[str, bool]:
    """Run section C; returns its printed text and whether the goal was met."""
    seeded = 0.0
    stores: dict[int, SqliteStore] = {}
    timings: dict[tuple[int, str], list[int]] = {}
    try:
        for size in sizes:
            path = os.path.join(workdir, f"list-{size}.db")
            seeded += await _seed(path, size)
            stores[size] = await SqliteStore.open(path)  # defaults: WAL, FULL
        for size in sizes:
            for name, query in _queries(size).items():
                timings[size, name] = []
                await _time(stores[size], query, 5, [])  # warm-up
        gc.collect()
        per_block = max(1, reads // BLOCKS)
        for block in range(BLOCKS):
            count = per_block if block < BLOCKS - 1 else reads - per_block * (BLOCKS - 1)
            shift = block % len(sizes)
            for size in [*sizes[shift:], *sizes[:shift]]:
                for name, query in _queries(size).items():
                    await _time(stores[size], query, count, timings[size, name])
            progress(f"  C: block {block + 1}/{BLOCKS}")
    finally:
        for store in stores.values():
            await store.close()

    smallest, largest = sizes[0], sizes[-1]
    base = percentile(timings[smallest, "first"], 50)
    rows = []
    for size in sizes:
        first = percentile(timings[size, "first"], 50)
        rows.append(
            [
                f"{size:,}",
                f"{first / 1000:,.0f}",
                f"{percentile(timings[size, 'first'], 99) / 1000:,.0f}",
                f"{first / base:.2f}×",
                f"{percentile(timings[size, 'middle'], 50) / 1000:,.0f}",
                f"{size // USERS:,}",
                f"{percentile(timings[size, 'user'], 50) / 1000:,.0f}",
            ]
        )
    ratio = percentile(timings[largest, "first"], 50) / base
    ok = ratio <= LIST_GOAL
    text = "\n".join(
        [
            f"C. a page of the thread list vs the number of threads — {reads:,} timed calls per"
            f" size and page, interleaved in {BLOCKS} blocks",
            f"   seeding ({seeded:.1f} s, not timed): create_thread on synchronous=OFF, one"
            f" database per size, {USERS} owners in turn;",
            f"   reads: store.query_threads (what GET /api/threads runs), sort=activity,"
            f" {PAGE} per page, with the total count",
            "",
            table(
                [
                    "threads",
                    "first page p50 (µs)",
                    "p99 (µs)",
                    f"p50 / {smallest:,}",
                    "middle page p50 (µs)",
                    "one user's threads",
                    "their first page p50 (µs)",
                ],
                rows,
            ),
            "",
            f"   Section C goal (first page p50 at {largest:,} ≤ {LIST_GOAL:g}× at"
            f" {smallest:,}): {ratio:.2f}× {verdict(ok)}",
        ]
    )
    return text, ok
