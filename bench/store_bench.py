"""Store benchmark: ``inject_message`` against raw ``sqlite3``, and page reads vs thread size.

Run with ``make bench-store`` (or ``.venv/bin/python bench/store_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0 even when a goal is missed.

Section A — write latency. ``ThreadState.inject_message`` on a Runtime opened with its
defaults (WAL, ``synchronous=FULL``) against the floor: plain ``sqlite3`` on its own file in
the same directory, WAL, ``synchronous=FULL``, ``foreign_keys=ON``, one ``INSERT`` + ``COMMIT``
per row into a comparable messages table. The two run in alternating blocks so machine noise
hits both alike. Goal: Threadloom within 2× of raw (p50, p99 and throughput).

Section B — page read cost vs thread size. Threads of 100, 10,000 and 100,000 top-level
messages in one database; ``get_messages(limit=50)`` (newest first) and ``order="asc"``
timed on each, interleaved across sizes. Goal: the largest thread's p50 within 1.5× of the
smallest's.

Section C — a page of the thread list vs the number of threads (``bench/_thread_list.py``).
Goal: the first page at the largest size within 1.5× of the smallest. Section D — a pass of
the event-row pruner at the same thread counts (``bench/_prune.py``; for information).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import threadloom
from _prune import section_d
from _report import cpu_model, filesystem_of, percentile, progress, table, verdict
from _thread_list import section_c
from threadloom import Runtime
from threadloom.store.sqlite.store import SqliteStore
from threadloom.thread.state import ThreadState

WARMUP = 50
BLOCKS = 10
SEED_BUDGET_S = 90.0
LATENCY_GOAL = 2.0
READ_GOAL = 1.5
_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
_LOREM = (
    "The quick brown fox jumps over the lazy dog while the support agent looks up order "
    "1234, checks the refund policy, and drafts a reply to the customer about shipping. "
)


# -- helpers ------------------------------------------------------------------------------
def content_for(i: int) -> str:
    """A ~200-character message body that differs per message."""
    head = f"Message {i}: "
    return (head + _LOREM)[:200]


def header(args: argparse.Namespace, workdir: str) -> str:
    """The machine, the date and the parameters of this run."""
    now = dt.datetime.now(dt.UTC).astimezone()
    lines = [
        "Threadloom store benchmark (bench/store_bench.py)",
        f"date        {now.isoformat(timespec='seconds')}",
        f"machine     {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs"
        f" ({cpu_model()})",
        f"python      {platform.python_implementation()} {platform.python_version()}",
        f"sqlite      {sqlite3.sqlite_version} (library), threadloom {threadloom.__version__}",
        f"temp dir    {workdir}",
        f"filesystem  {filesystem_of(workdir)}",
        f"parameters  --inject {args.inject} (+{WARMUP} warm-up each side, {BLOCKS} alternating"
        " blocks)",
        f"            --sizes {','.join(str(s) for s in args.sizes)}  --reads {args.reads}"
        f" (+{WARMUP} warm-up per size and order)  --seed {args.seed}",
    ]
    return "\n".join(lines)


# -- section A: write latency -------------------------------------------------------------
RAW_SCHEMA = """
CREATE TABLE threads (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    id         TEXT PRIMARY KEY,
    thread_id  TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    content    TEXT,
    status     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    parent_id  TEXT,
    depth      INTEGER NOT NULL DEFAULT 0,
    silent     INTEGER NOT NULL DEFAULT 0,
    metadata   TEXT
);
CREATE UNIQUE INDEX messages_thread_seq ON messages(thread_id, seq);
"""


class RawWriter:
    """The floor: one ``INSERT`` + ``COMMIT`` per row with plain ``sqlite3``, same durability."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"raw sqlite3: could not switch to WAL (got {mode!r})")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(RAW_SCHEMA)
        self.thread_id = str(uuid.uuid4())
        self.conn.execute(
            "INSERT INTO threads(id, created_at) VALUES (?, ?)",
            (self.thread_id, time.time_ns() // 1000),
        )
        self.seq = 0

    def insert(self, content: str) -> None:
        """One durable row: its own transaction, committed with the fsync WAL mode does."""
        self.seq += 1
        self.conn.execute("BEGIN")
        self.conn.execute(
            "INSERT INTO messages(id, thread_id, seq, role, content, status, created_at)"
            " VALUES (?, ?, ?, 'user', ?, 'completed', ?)",
            (str(uuid.uuid4()), self.thread_id, self.seq, content, time.time_ns() // 1000),
        )
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


@dataclass
class WriteResult:
    """Per-operation latencies (ns) of one side of section A."""

    samples: list[int] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return sum(self.samples) / 1e9

    def p(self, pct: float) -> float:
        """The ``pct`` percentile in µs."""
        return percentile(self.samples, pct) / 1000.0

    @property
    def throughput(self) -> float:
        return len(self.samples) / self.total_s if self.samples else float("nan")


async def time_threadloom(state: ThreadState, start: int, count: int, out: list[int]) -> None:
    """``count`` sequential ``inject_message`` calls, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        body = content_for(i)
        t0 = clock()
        await state.inject_message(role="user", content=body)
        out.append(clock() - t0)


def time_raw(raw: RawWriter, start: int, count: int, out: list[int]) -> None:
    """``count`` sequential raw insert + commit transactions, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        body = content_for(i)
        t0 = clock()
        raw.insert(body)
        out.append(clock() - t0)


async def section_a(workdir: str, n: int) -> tuple[str, bool]:
    """Run section A; returns its printed text and whether every ratio met the goal."""
    runtime = await Runtime.open(f"sqlite:///{os.path.join(workdir, 'tl.db')}")
    raw = RawWriter(os.path.join(workdir, "raw.db"))
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore)
        sync, journal = store.pragma("synchronous"), store.pragma("journal_mode")
        state = await runtime.create_thread("bench")
        await time_threadloom(state, 0, WARMUP, [])
        time_raw(raw, 0, WARMUP, [])
        tl, rw = WriteResult(), WriteResult()
        per_block = max(1, n // BLOCKS)
        done = 0
        block = 0
        gc.collect()
        while done < n:
            count = min(per_block, n - done)
            start = WARMUP + done
            if block % 2 == 0:
                await time_threadloom(state, start, count, tl.samples)
                time_raw(raw, start, count, rw.samples)
            else:
                time_raw(raw, start, count, rw.samples)
                await time_threadloom(state, start, count, tl.samples)
            done += count
            block += 1
        page = await state.get_messages(limit=1)
    finally:
        raw.close()
        await runtime.close()

    r50, r99 = tl.p(50) / rw.p(50), tl.p(99) / rw.p(99)
    rtp = rw.throughput / tl.throughput
    ok = max(r50, r99, rtp) <= LATENCY_GOAL
    goal = f"≤ {LATENCY_GOAL:g}×"
    rows = [
        [
            "p50 latency (µs)",
            f"{tl.p(50):,.0f}",
            f"{rw.p(50):,.0f}",
            f"{r50:.2f}×",
            goal,
            verdict(r50 <= LATENCY_GOAL),
        ],
        [
            "p99 latency (µs)",
            f"{tl.p(99):,.0f}",
            f"{rw.p(99):,.0f}",
            f"{r99:.2f}×",
            goal,
            verdict(r99 <= LATENCY_GOAL),
        ],
        [
            "mean latency (µs)",
            f"{tl.total_s / n * 1e6:,.0f}",
            f"{rw.total_s / n * 1e6:,.0f}",
            f"{tl.total_s / rw.total_s:.2f}×",
            "",
            "",
        ],
        [
            "throughput (ops/s)",
            f"{tl.throughput:,.0f}",
            f"{rw.throughput:,.0f}",
            f"{rtp:.2f}×",
            goal,
            verdict(rtp <= LATENCY_GOAL),
        ],
    ]
    text = "\n".join(
        [
            f"A. inject_message vs raw sqlite3 — {n:,} sequential writes each, one thread,"
            " one transaction per message",
            f"   Threadloom: Runtime.open defaults (journal_mode={journal},"
            f" synchronous={_SYNC_NAMES.get(sync, sync)}); thread holds"
            f" {page.total:,} messages at the end",
            "   raw sqlite3: WAL, synchronous=FULL, foreign_keys=ON, BEGIN; INSERT; COMMIT per"
            " row, uuid4 id, index on (thread_id, seq)",
            "   ratio = Threadloom / raw for latency, raw / Threadloom for throughput"
            " (both: how many times slower)",
            "",
            table(["metric", "Threadloom", "raw sqlite3", "ratio", "goal", "result"], rows),
            "",
            f"   Section A goal (all ratios ≤ {LATENCY_GOAL:g}×): {verdict(ok)}",
        ]
    )
    return text, ok


# -- section B: page reads vs thread size ---------------------------------------------------
@dataclass
class SeedReport:
    """How the section B threads were filled."""

    injected: int = 0
    bulk: int = 0
    seconds: float = 0.0


def bulk_insert(path: str, thread_id: str, count: int, start_index: int) -> None:
    """Append ``count`` top-level user messages to ``thread_id`` with plain SQL, writing what
    ``insert_message`` writes: the message row (next ``seq``, strictly increasing
    ``created_at`` from the thread clock), the ``message_counts`` row, one ``message`` event
    each, and the thread's ``msg_seq`` / ``clock_us`` / ``event_seq`` counters."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        msg_seq, clock_us, event_seq = conn.execute(
            "SELECT msg_seq, clock_us, event_seq FROM threads WHERE id = ?", (thread_id,)
        ).fetchone()
        now = time.time_ns() // 1000
        messages: list[tuple[object, ...]] = []
        events: list[tuple[object, ...]] = []
        for i in range(count):
            msg_seq += 1
            event_seq += 1
            clock_us = max(now, clock_us + 1)
            mid = str(uuid.uuid4())
            messages.append(
                (
                    thread_id,
                    msg_seq,
                    mid,
                    "user",
                    content_for(start_index + i),
                    "completed",
                    clock_us,
                )
            )
            events.append((thread_id, event_seq, "message", mid, None, now))
        conn.executemany(
            "INSERT INTO messages(thread_id, seq, id, role, content, status, created_at,"
            " depth, silent) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0)",
            messages,
        )
        conn.executemany(
            "INSERT INTO thread_events(thread_id, seq, kind, entity_id, payload, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            events,
        )
        conn.execute(
            "INSERT INTO message_counts(thread_id, depth, silent, count) VALUES (?, 0, 0, ?)"
            " ON CONFLICT(thread_id, depth, silent) DO UPDATE SET count = count + excluded.count",
            (thread_id, count),
        )
        conn.execute(
            "UPDATE threads SET msg_seq = ?, clock_us = ?, event_seq = ? WHERE id = ?",
            (msg_seq, clock_us, event_seq, thread_id),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


async def seed(path: str, sizes: Sequence[int], mode: str) -> tuple[list[str], SeedReport]:
    """Create one thread per size and fill it. ``inject``: every message through
    ``inject_message`` on a Runtime opened with ``synchronous=OFF``; ``sql``: plain SQL in
    one transaction per thread; ``auto``: inject, switching to SQL for the rest if the
    projected seeding time exceeds the budget."""
    report = SeedReport()
    started = time.perf_counter()
    total = sum(sizes)
    runtime = await Runtime.open(f"sqlite:///{path}", synchronous="OFF")
    thread_ids: list[str] = []
    leftover: list[tuple[str, int, int]] = []  # (thread id, count, first index)
    use_inject = mode != "sql"
    next_report = 0.1
    try:
        for size in sizes:
            state = await runtime.create_thread("bench", tags=[f"size:{size}"])
            thread_ids.append(state.thread_id)
            i = 0
            while use_inject and i < size:
                await state.inject_message(role="user", content=content_for(i))
                i += 1
                report.injected += 1
                if report.injected / total >= next_report:
                    progress(
                        f"  seeding: {report.injected:,}/{total:,} messages"
                        f" ({report.injected / total:.0%}) via inject_message,"
                        f" {time.perf_counter() - started:.1f} s"
                    )
                    next_report += 0.1
                if mode == "auto" and report.injected % 2000 == 0:
                    elapsed = time.perf_counter() - started
                    projected = elapsed / report.injected * total
                    if projected > SEED_BUDGET_S:
                        progress(
                            f"  seeding: projected {projected:.0f} s > {SEED_BUDGET_S:.0f} s"
                            " budget; the rest goes in by bulk SQL"
                        )
                        use_inject = False
            if i < size:
                leftover.append((state.thread_id, size - i, i))
    finally:
        await runtime.close()
    for thread_id, count, first in leftover:
        progress(f"  seeding: {count:,} messages by bulk SQL into thread {thread_id[:8]}…")
        bulk_insert(path, thread_id, count, first)
        report.bulk += count
    report.seconds = time.perf_counter() - started
    progress(f"  seeding: done, {total:,} messages in {report.seconds:.1f} s")
    return thread_ids, report


async def time_reads(state: ThreadState, order: str, count: int, out: list[int]) -> int:
    """``count`` calls of ``get_messages(limit=50, order=order)``; returns the last total."""
    clock = time.perf_counter_ns
    total = 0
    for _ in range(count):
        t0 = clock()
        page = await state.get_messages(limit=50, order=order)  # type: ignore[arg-type]
        out.append(clock() - t0)
        total = page.total
        if len(page.messages) != min(50, page.total):
            raise RuntimeError(f"short page: {len(page.messages)} of {page.total}")
    return total


async def section_b(workdir: str, sizes: Sequence[int], reads: int, mode: str) -> tuple[str, bool]:
    """Run section B; returns its printed text and whether the read goal was met."""
    path = os.path.join(workdir, "reads.db")
    thread_ids, report = await seed(path, sizes, mode)
    db_mib = (
        sum(
            os.path.getsize(path + suffix)
            for suffix in ("", "-wal")
            if os.path.exists(path + suffix)
        )
        / 2**20
    )

    runtime = await Runtime.open(f"sqlite:///{path}")  # defaults again: WAL, FULL
    desc: dict[int, list[int]] = {s: [] for s in sizes}
    asc: dict[int, list[int]] = {s: [] for s in sizes}
    totals: dict[int, int] = {}
    try:
        states = {s: await runtime.thread(tid) for s, tid in zip(sizes, thread_ids, strict=True)}
        for size in sizes:
            await time_reads(states[size], "desc", WARMUP, [])
            await time_reads(states[size], "asc", WARMUP, [])
        gc.collect()
        per_block = max(1, reads // BLOCKS)
        for block in range(BLOCKS):
            shift = block % len(sizes)
            for size in [*sizes[shift:], *sizes[:shift]]:
                count = per_block if block < BLOCKS - 1 else reads - per_block * (BLOCKS - 1)
                totals[size] = await time_reads(states[size], "desc", count, desc[size])
                await time_reads(states[size], "asc", count, asc[size])
    finally:
        await runtime.close()

    smallest, largest = sizes[0], sizes[-1]
    base_desc = percentile(desc[smallest], 50)
    base_asc = percentile(asc[smallest], 50)
    rows = []
    for size in sizes:
        d50, d99 = percentile(desc[size], 50), percentile(desc[size], 99)
        a50 = percentile(asc[size], 50)
        rows.append(
            [
                f"{size:,}",
                f"{totals[size]:,}",
                f"{d50 / 1000:,.0f}",
                f"{d99 / 1000:,.0f}",
                f"{d50 / base_desc:.2f}×",
                f"{a50 / 1000:,.0f}",
                f"{a50 / base_asc:.2f}×",
            ]
        )
    ratio = percentile(desc[largest], 50) / base_desc
    ok = ratio <= READ_GOAL
    how = []
    if report.injected:
        how.append(f"{report.injected:,} via inject_message on a Runtime opened synchronous=OFF")
    if report.bulk:
        how.append(
            f"{report.bulk:,} via bulk SQL (same columns, counters, counts and events as"
            " insert_message; one transaction per thread)"
        )
    text = "\n".join(
        [
            f"B. get_messages(limit=50) vs thread size — {reads:,} timed calls per size and"
            f" order, interleaved in {BLOCKS} blocks",
            f"   seeding ({report.seconds:.1f} s, not timed): " + "; ".join(how),
            f"   database {db_mib:,.1f} MiB; reads on a fresh Runtime with defaults (WAL,"
            " synchronous=FULL); top-level, silent hidden",
            "",
            table(
                [
                    "thread size",
                    "total",
                    "desc p50 (µs)",
                    "desc p99 (µs)",
                    f"p50 / {smallest:,}",
                    "asc p50 (µs)",
                    f"asc p50 / {smallest:,}",
                ],
                rows,
            ),
            "",
            f"   Section B goal (desc p50 at {largest:,} ≤ {READ_GOAL:g}× desc p50 at"
            f" {smallest:,}): {ratio:.2f}× {verdict(ok)}",
        ]
    )
    return text, ok


# -- main ---------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: ``--inject N``, ``--sizes a,b,c``, ``--reads N``, ``--seed``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--inject",
        type=int,
        default=2000,
        metavar="N",
        help="timed writes per side in section A (default 2000)",
    )
    parser.add_argument(
        "--sizes",
        default="100,10000,100000",
        help="thread sizes for section B, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--reads",
        type=int,
        default=500,
        metavar="N",
        help="timed get_messages calls per size and order (default 500)",
    )
    parser.add_argument(
        "--seed",
        choices=("auto", "inject", "sql"),
        default="auto",
        help="how section B threads are filled (default auto: inject_message"
        f" with synchronous=OFF, bulk SQL if projected > {SEED_BUDGET_S:.0f} s)",
    )
    parser.add_argument(
        "--tmpdir",
        default=None,
        help="where the temporary databases go (default: the system temp dir)",
    )
    parser.add_argument(
        "--list-sizes",
        default="1000,10000,50000",
        help="thread counts for section C, comma-separated (default %(default)s)",
    )
    parser.add_argument(
        "--list-reads",
        type=int,
        default=200,
        metavar="N",
        help="timed thread-list calls per size and page in section C (default 200)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        choices=("a", "b", "c", "d"),
        default=[],
        help="skip a section (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        args.sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        parser.error("--sizes must be comma-separated integers")
    if not args.sizes or min(args.sizes) < 1:
        parser.error("--sizes needs at least one positive size")
    try:
        args.list_sizes = sorted({int(s) for s in args.list_sizes.split(",") if s.strip()})
    except ValueError:
        parser.error("--list-sizes must be comma-separated integers")
    if not args.list_sizes or min(args.list_sizes) < 1 or args.list_reads < 1:
        parser.error("--list-sizes needs positive sizes and --list-reads must be ≥ 1")
    if args.inject < 1 or args.reads < 1:
        parser.error("--inject and --reads must be ≥ 1")
    return args


async def main(argv: Sequence[str] | None = None) -> int:
    """Run both sections in one temporary directory and print the report."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="threadloom-bench-", dir=args.tmpdir) as workdir:
        print(header(args, workdir), flush=True)
        started = time.perf_counter()
        results: list[tuple[str, bool]] = []
        if "a" not in args.skip:
            progress("section A: inject_message vs raw sqlite3 …")
            text, ok = await section_a(workdir, args.inject)
            print("\n" + text, flush=True)
            results.append(("A  inject_message ≤ 2× raw sqlite3", ok))
        if "b" not in args.skip:
            progress("section B: seeding threads …")
            text, ok = await section_b(workdir, args.sizes, args.reads, args.seed)
            print("\n" + text, flush=True)
            results.append(("B  get_messages largest ≤ 1.5× smallest", ok))
        if "c" not in args.skip:
            progress("section C: seeding thread lists …")
            text, ok = await section_c(workdir, args.list_sizes, args.list_reads)
            print("\n" + text, flush=True)
            results.append(("C  thread list page, largest ≤ 1.5× smallest", ok))
        if "d" not in args.skip:
            progress("section D: event-row pruning …")
            print("\n" + await section_d(workdir, args.list_sizes), flush=True)
        print("\nSummary")
        for name, ok in results:
            print(f"   {name}: {verdict(ok)}")
        print(f"   wall time {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
