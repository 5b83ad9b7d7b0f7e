"""Turn benchmark: a full tool-using turn against raw ``sqlite3``, and many threads at once.

Run with ``make bench-turn`` (or ``.venv/bin/python bench/turn_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0 even when a goal is missed.

The workload of one turn is "user message → one tool call → tool result → final text":
``Runtime.send_message`` then ``Runtime.wait_idle``, on a chat agent whose side a runs a
prompt on the scripted model (zero latency) answering a user message with one ``echo``
tool call and the tool result with the text ``done``. The Runtime is opened with its
defaults (SQLite file, WAL, ``synchronous=FULL``). A turn stores four messages.

The floor: plain ``sqlite3`` on its own file in the same directory, WAL,
``synchronous=FULL``, ``foreign_keys=ON``, committing the same four rows (user message,
assistant with its tool call as JSON, tool result, final assistant) into a messages table
of the same shape with a unique index on (thread_id, seq) — each row in its own
transaction (four commits per turn, the per-row durability the engine gives), and, for
information, all four in one transaction (a stricter floor). Threadloom and the floors
run in alternating blocks so machine noise hits all of them alike.

Section A — 300 turns on an empty thread. Section B — turns on a thread that already
holds 2,000 messages (seeded, not timed), the floor's table holding 2,000 rows too.
Goal for both: Threadloom's per-turn median and p90 within 2.5× of the four-commit floor,
i.e. a turn's cost is flat with history length.

Section C (information) — where a Threadloom turn's time goes: the store calls of a turn
counted and timed by wrapping the store's write and read entry points in this process.

Section D (information) — 1,000 threads running 3 turns each concurrently on a model with
100 ms latency per call: wall time, turns/s and peak RSS, in a subprocess of its own so
the RSS is the scenario's.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import threadloom
from _report import filesystem_of, percentile, progress, table, verdict
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Call, Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage
from threadloom.records import new_id
from threadloom.store.sqlite.store import SqliteStore
from threadloom.thread.state import ThreadState

WARMUP_TURNS = 10
HISTORY_WARMUP_TURNS = 3
BLOCKS = 10
BREAKDOWN_TURNS = 20
TURN_GOAL = 2.5
ROWS_PER_TURN = 4
_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
_ARGUMENTS = '{"v":1}'


# -- helpers ------------------------------------------------------------------------------
def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB: ``VmHWM`` where Linux has it,
    since ``ru_maxrss`` carries the parent's peak over a fork + exec; ``ru_maxrss``
    elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def peak_rss_source() -> str:
    """How :func:`peak_rss_mib` measures on this machine."""
    return (
        "VmHWM of /proc/self/status (ru_maxrss would include the parent's peak)"
        if os.path.exists("/proc/self/status")
        else "getrusage ru_maxrss"
    )


def ms(ns: float) -> str:
    """Nanoseconds as milliseconds for a table cell."""
    return f"{ns / 1e6:,.2f}"


def header(args: argparse.Namespace, workdir: str) -> str:
    """The machine, the date and the parameters of this run."""
    now = dt.datetime.now(dt.UTC).astimezone()
    lines = [
        "Threadloom turn benchmark (bench/turn_bench.py)",
        f"date        {now.isoformat(timespec='seconds')}",
        f"machine     {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs"
        f" ({platform.processor() or 'unknown processor'})",
        f"python      {platform.python_implementation()} {platform.python_version()}",
        f"sqlite      {sqlite3.sqlite_version} (library), threadloom {threadloom.__version__}",
        f"temp dir    {workdir}",
        f"filesystem  {filesystem_of(workdir)}",
        f"parameters  --turns {args.turns} (+{WARMUP_TURNS} warm-up on another thread each"
        f" side, {BLOCKS} alternating blocks)",
        f"            --history {args.history} --history-turns {args.history_turns}"
        f" (+{HISTORY_WARMUP_TURNS} warm-up each side)  --seed {args.seed}",
        f"            --threads {args.threads} --turns-per-thread {args.turns_per_thread}"
        f" --latency {args.latency:g} s",
    ]
    return "\n".join(lines)


# -- the Threadloom side ------------------------------------------------------------------
@tool
def echo(v: int) -> str:
    """Echo the value back."""
    return f"echo {v}"


def make_definitions(delay: float = 0.0) -> Definitions:
    """The chat agent: side a runs prompt P on the scripted model M, side b is human."""

    def answer(request: ProviderRequest) -> Reply:
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage):
            return Reply.text("done", delay=delay)
        return Reply.tool_calls(Call("echo", {"v": 1}), delay=delay)

    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(answer, record=False), model="bench"),
        Prompt(name="P", model="M", system="You are a support agent.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="Customer")),
        echo,
    )


def question(i: int) -> str:
    """The user message of turn ``i``."""
    return f"Turn {i}: could you look up order {1000 + i} and tell me when it ships?"


async def one_turn(runtime: Runtime, thread_id: str, i: int) -> None:
    """One turn: send the user message, wait until the run it starts is over."""
    await runtime.send_message(thread_id, question(i))
    await runtime.wait_idle(thread_id)


async def time_threadloom(
    runtime: Runtime, thread_id: str, start: int, count: int, out: list[int]
) -> None:
    """``count`` sequential turns, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        t0 = clock()
        await one_turn(runtime, thread_id, i)
        out.append(clock() - t0)


async def message_total(state: ThreadState) -> int:
    """Every stored message of the thread (silent ones too)."""
    page = await state.get_messages(limit=1, include_silent=True)
    return page.total


def check_thread(total: int, expected: int, what: str) -> None:
    """Fail loudly when the turns did not store what the workload says they store."""
    if total != expected:
        raise RuntimeError(f"{what}: expected {expected:,} stored messages, found {total:,}")


# -- the floor ----------------------------------------------------------------------------
RAW_SCHEMA = """
CREATE TABLE threads (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    id           TEXT PRIMARY KEY,
    thread_id    TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    content      TEXT,
    name         TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    tool_status  TEXT,
    status       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    depth        INTEGER NOT NULL DEFAULT 0,
    silent       INTEGER NOT NULL DEFAULT 0,
    metadata     TEXT
);
CREATE UNIQUE INDEX messages_thread_seq ON messages(thread_id, seq);
"""
RAW_INSERT = (
    "INSERT INTO messages(id, thread_id, seq, role, content, name, tool_calls, tool_call_id,"
    " tool_status, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'completed', ?)"
)


class RawTurns:
    """The floor: the four rows of a turn with plain ``sqlite3``, WAL, ``synchronous=FULL``;
    ``commits`` is 4 (one transaction per row) or 1 (one transaction per turn)."""

    def __init__(self, path: str, commits: int) -> None:
        self.commits = commits
        self.conn = sqlite3.connect(path, isolation_level=None)
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"raw sqlite3: could not switch to WAL (got {mode!r})")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(RAW_SCHEMA)
        self.seqs: dict[str, int] = {}

    def new_thread(self) -> str:
        thread_id = str(uuid.uuid4())
        self.conn.execute(
            "INSERT INTO threads(id, created_at) VALUES (?, ?)",
            (thread_id, time.time_ns() // 1000),
        )
        self.seqs[thread_id] = 0
        return thread_id

    def rows(self, thread_id: str, i: int) -> list[tuple[object, ...]]:
        """The four rows of turn ``i``, as Threadloom stores them (ids, seq, JSON calls)."""
        call_id = "call_" + uuid.uuid4().hex[:8]
        calls = json.dumps(
            [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "echo", "arguments": _ARGUMENTS},
                }
            ],
            separators=(",", ":"),
        )
        shapes: list[tuple[str, str | None, str | None, str | None, str | None, str | None]] = [
            ("user", question(i), None, None, None, None),
            ("assistant", None, "Agent", calls, None, None),
            ("tool", "echo 1", "echo", None, call_id, "success"),
            ("assistant", "done", "Agent", None, None, None),
        ]
        out: list[tuple[object, ...]] = []
        for role, content, name, tool_calls, tool_call_id, tool_status in shapes:
            self.seqs[thread_id] += 1
            out.append(
                (
                    str(uuid.uuid4()),
                    thread_id,
                    self.seqs[thread_id],
                    role,
                    content,
                    name,
                    tool_calls,
                    tool_call_id,
                    tool_status,
                    time.time_ns() // 1000,
                )
            )
        return out

    def turn(self, thread_id: str, i: int) -> None:
        """One turn's rows, durable: four transactions, or one."""
        execute = self.conn.execute
        if self.commits == 1:
            execute("BEGIN")
            for row in self.rows(thread_id, i):
                execute(RAW_INSERT, row)
            execute("COMMIT")
            return
        for row in self.rows(thread_id, i):
            execute("BEGIN")
            execute(RAW_INSERT, row)
            execute("COMMIT")

    def seed(self, thread_id: str, messages: int) -> None:
        """``messages`` rows of whole turns into ``thread_id``, one transaction, not timed."""
        rows: list[tuple[object, ...]] = []
        i = 0
        while len(rows) < messages:
            rows.extend(self.rows(thread_id, -1 - i))
            i += 1
        self.seqs[thread_id] -= len(rows) - messages
        self.conn.execute("BEGIN")
        self.conn.executemany(RAW_INSERT, rows[:messages])
        self.conn.execute("COMMIT")

    def count(self, thread_id: str) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM messages WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


def time_raw(raw: RawTurns, thread_id: str, start: int, count: int, out: list[int]) -> None:
    """``count`` sequential floor turns, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        t0 = clock()
        raw.turn(thread_id, i)
        out.append(clock() - t0)


# -- the comparison -----------------------------------------------------------------------
@dataclass
class Sides:
    """Per-turn latencies (ns) of Threadloom and the two floors, in timing order."""

    threadloom: list[int] = field(default_factory=list)
    raw4: list[int] = field(default_factory=list)
    raw1: list[int] = field(default_factory=list)


async def interleaved(
    runtime: Runtime,
    thread_id: str,
    raws: tuple[tuple[RawTurns, str], tuple[RawTurns, str]],
    turns: int,
    blocks: int,
    label: str,
) -> Sides:
    """``turns`` timed turns per side in ``blocks`` blocks, the order rotating per block."""
    sides = Sides()
    (raw4, raw4_thread), (raw1, raw1_thread) = raws

    async def run_tl(start: int, count: int) -> None:
        await time_threadloom(runtime, thread_id, start, count, sides.threadloom)

    async def run_raw4(start: int, count: int) -> None:
        time_raw(raw4, raw4_thread, start, count, sides.raw4)

    async def run_raw1(start: int, count: int) -> None:
        time_raw(raw1, raw1_thread, start, count, sides.raw1)

    runners: list[Callable[[int, int], Awaitable[None]]] = [run_tl, run_raw4, run_raw1]
    per_block = max(1, turns // blocks)
    done = 0
    block = 0
    gc.collect()
    while done < turns:
        count = per_block if block < blocks - 1 else turns - done
        shift = block % len(runners)
        for runner in [*runners[shift:], *runners[:shift]]:
            await runner(done, count)
        done += count
        block += 1
        progress(f"  {label}: {done:,}/{turns:,} turns per side")
    return sides


def comparison(sides: Sides) -> tuple[str, bool]:
    """The two tables of a case (latencies; ratios with the goal) and whether it passed."""
    rows = []
    for name, samples in (
        ("Threadloom", sides.threadloom),
        ("raw sqlite3, 4 commits per turn (floor)", sides.raw4),
        ("raw sqlite3, 1 commit per turn (stricter)", sides.raw1),
    ):
        rows.append(
            [
                name,
                ms(percentile(samples, 50)),
                ms(percentile(samples, 90)),
                ms(sum(samples) / len(samples)),
                ms(max(samples)),
            ]
        )
    latency = table(["per turn", "median (ms)", "p90 (ms)", "mean (ms)", "max (ms)"], rows)
    goal = f"≤ {TURN_GOAL:g}×"
    ratio_rows = []
    ok = True
    for name, pct in (("median", 50.0), ("p90", 90.0)):
        tl = percentile(sides.threadloom, pct)
        r4 = tl / percentile(sides.raw4, pct)
        r1 = tl / percentile(sides.raw1, pct)
        ok = ok and r4 <= TURN_GOAL
        ratio_rows.append([name, f"{r4:.2f}×", goal, verdict(r4 <= TURN_GOAL), f"{r1:.2f}×"])
    ratios = table(
        ["ratio", "Threadloom / 4-commit floor", "goal", "result", "Threadloom / 1-commit"],
        ratio_rows,
    )
    return latency + "\n\n" + ratios, ok


def growth(sides: Sides, blocks: int, first_turn: int, history: int) -> str:
    """Median per block of consecutive turns: does a turn get slower as the thread grows?"""
    n = len(sides.threadloom)
    per_block = max(1, n // blocks)
    rows = []
    start = 0
    while start < n:
        end = n if start + per_block * 2 > n else start + per_block
        tl = percentile(sides.threadloom[start:end], 50)
        r4 = percentile(sides.raw4[start:end], 50)
        rows.append(
            [
                f"{first_turn + start:,}–{first_turn + end - 1:,}"
                if end - start > 1
                else f"{first_turn + start:,}",
                f"{history + ROWS_PER_TURN * start:,}",
                ms(tl),
                ms(r4),
                f"{tl / r4:.2f}×",
            ]
        )
        start = end
    return table(
        [
            "timed turns",
            "history at start",
            "Threadloom median (ms)",
            "4-commit floor median (ms)",
            "ratio",
        ],
        rows,
    )


# -- section C instrumentation ------------------------------------------------------------
@dataclass
class StoreCalls:
    """Store calls seen through the wrapped ``_write`` / ``_read`` of a ``SqliteStore``."""

    writes: dict[str, list[int]] = field(default_factory=dict)  # name → [calls, ns]
    reads: dict[str, list[int]] = field(default_factory=dict)
    turn_ns: int = 0
    turns: int = 0


def instrument(store: SqliteStore, calls: StoreCalls) -> Callable[[], None]:
    """Wrap the store's write and read entry points with counters; returns the undo."""
    original_write = store._write
    original_read = store._read

    def name_of(fn: Callable[..., Any]) -> str:
        return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"

    async def write(fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return await original_write(fn, *args)
        finally:
            slot = calls.writes.setdefault(name_of(fn), [0, 0])
            slot[0] += 1
            slot[1] += time.perf_counter_ns() - t0

    async def read(fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return await original_read(fn, *args)
        finally:
            slot = calls.reads.setdefault(name_of(fn), [0, 0])
            slot[0] += 1
            slot[1] += time.perf_counter_ns() - t0

    store._write = write  # type: ignore[method-assign]
    store._read = read  # type: ignore[method-assign]

    def undo() -> None:
        del store._write
        del store._read

    return undo


async def instrumented_turns(
    runtime: Runtime, thread_id: str, start: int, count: int
) -> StoreCalls:
    """``count`` turns with the store calls counted and timed (not part of the goals)."""
    store = runtime.store
    assert isinstance(store, SqliteStore)
    calls = StoreCalls()
    undo = instrument(store, calls)
    samples: list[int] = []
    try:
        await time_threadloom(runtime, thread_id, start, count, samples)
    finally:
        undo()
    calls.turn_ns = sum(samples)
    calls.turns = count
    return calls


def breakdown(cases: Sequence[tuple[str, StoreCalls]]) -> str:
    """Section C: store calls per turn and the time they take, per case."""
    names: list[tuple[str, str]] = []
    for _, calls in cases:
        for kind, bucket in (("write", calls.writes), ("read", calls.reads)):
            for name in bucket:
                if (kind, name) not in names:
                    names.append((kind, name))
    names.sort(key=lambda kn: (kn[0] != "write", kn[1]))
    headers = ["store call (kind)"]
    for label, _ in cases:
        headers += [f"{label}: calls/turn", "ms/turn"]
    rows = []
    for kind, name in names:
        row = [f"{name} ({kind})"]
        for _, calls in cases:
            bucket = calls.writes if kind == "write" else calls.reads
            count, ns = bucket.get(name, [0, 0])
            row += [f"{count / calls.turns:.1f}", ms(ns / calls.turns)]
        rows.append(row)
    totals: list[list[str]] = [
        ["all writes"],
        ["all reads"],
        ["turn (wall)"],
        ["outside the store (engine)"],
    ]
    for _, calls in cases:
        w_n = sum(c for c, _ in calls.writes.values())
        w_ns = sum(t for _, t in calls.writes.values())
        r_n = sum(c for c, _ in calls.reads.values())
        r_ns = sum(t for _, t in calls.reads.values())
        per = calls.turns
        totals[0] += [f"{w_n / per:.1f}", ms(w_ns / per)]
        totals[1] += [f"{r_n / per:.1f}", ms(r_ns / per)]
        totals[2] += ["", ms(calls.turn_ns / per)]
        totals[3] += ["", ms((calls.turn_ns - w_ns - r_ns) / per)]
    return table(headers, [*rows, *totals])


# -- sections A and B ---------------------------------------------------------------------
@dataclass
class CaseResult:
    text: str
    ok: bool
    calls: StoreCalls | None = None


def open_floors(workdir: str, tag: str) -> tuple[RawTurns, RawTurns]:
    return (
        RawTurns(os.path.join(workdir, f"raw4-{tag}.db"), 4),
        RawTurns(os.path.join(workdir, f"raw1-{tag}.db"), 1),
    )


async def section_a(workdir: str, turns: int) -> CaseResult:
    """Turns on an empty thread; warm-up on another thread of the same database."""
    defs = make_definitions()
    runtime = await Runtime.open(f"sqlite:///{os.path.join(workdir, 'empty.db')}", definitions=defs)
    raw4, raw1 = open_floors(workdir, "empty")
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore)
        sync, journal = store.pragma("synchronous"), store.pragma("journal_mode")
        warm = await runtime.create_thread("chat")
        await time_threadloom(runtime, warm.thread_id, 0, WARMUP_TURNS, [])
        for raw in (raw4, raw1):
            time_raw(raw, raw.new_thread(), 0, WARMUP_TURNS, [])
        state = await runtime.create_thread("chat")
        r4, r1 = raw4.new_thread(), raw1.new_thread()
        sides = await interleaved(
            runtime, state.thread_id, ((raw4, r4), (raw1, r1)), turns, BLOCKS, "A"
        )
        check_thread(await message_total(state), ROWS_PER_TURN * turns, "Threadloom thread")
        check_thread(raw4.count(r4), ROWS_PER_TURN * turns, "4-commit floor")
        check_thread(raw1.count(r1), ROWS_PER_TURN * turns, "1-commit floor")
        progress("  A: store calls of a turn (instrumented, not timed for the goal) …")
        probe = await runtime.create_thread("chat")
        calls = await instrumented_turns(runtime, probe.thread_id, 0, BREAKDOWN_TURNS)
    finally:
        raw4.close()
        raw1.close()
        await runtime.close()

    body, ok = comparison(sides)
    text = "\n".join(
        [
            f"A. {turns:,} turns from empty — one thread, turns sequential, per-turn latency",
            f"   Threadloom: Runtime.open defaults (journal_mode={journal},"
            f" synchronous={_SYNC_NAMES.get(sync, sync)}), scripted model with",
            "   zero latency; a turn = send_message + wait_idle, storing user, assistant"
            " (tool call), tool, assistant",
            "   floor: raw sqlite3 (WAL, synchronous=FULL) commits the same 4 rows, one"
            " transaction per row:",
            "   4 commits per turn, the engine's per-row durability; the 1-commit variant (all"
            " 4 rows in one",
            "   transaction) is a stricter floor, for information",
            f"   {WARMUP_TURNS} warm-up turns per side on another thread; {BLOCKS} blocks,"
            " Threadloom and both floors alternating;",
            f"   each timed thread ends with {ROWS_PER_TURN * turns:,} messages",
            "",
            body,
            "",
            "   per block (the history grows by 4 messages a turn):",
            "",
            growth(sides, BLOCKS, 1, 0),
            "",
            f"   Section A goal (median and p90 ≤ {TURN_GOAL:g}× the 4-commit floor):"
            f" {verdict(ok)}",
        ]
    )
    return CaseResult(text, ok, calls)


async def seed_threadloom(path: str, messages: int, mode: str) -> tuple[str, float]:
    """A thread holding ``messages`` messages of whole turns, on ``synchronous=OFF``;
    ``inject``: four ``inject_message`` calls per turn with the rows a turn stores,
    ``turns``: real turns on the scripted model. Returns the thread id and the seconds."""
    started = time.perf_counter()
    runtime = await Runtime.open(
        f"sqlite:///{path}", definitions=make_definitions(), synchronous="OFF"
    )
    try:
        state = await runtime.create_thread("chat")
        turns = -(-messages // ROWS_PER_TURN)
        next_report = 0.1
        for i in range(turns):
            if mode == "turns":
                await one_turn(runtime, state.thread_id, -1 - i)
            else:
                call_id = "call_" + new_id()[:8]
                rows: list[dict[str, Any]] = [
                    {"role": "user", "content": question(-1 - i)},
                    {
                        "role": "assistant",
                        "name": "Agent",
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": "echo", "arguments": _ARGUMENTS},
                            }
                        ],
                    },
                    {
                        "role": "tool",
                        "name": "echo",
                        "tool_call_id": call_id,
                        "tool_status": "success",
                        "content": "echo 1",
                    },
                    {"role": "assistant", "name": "Agent", "content": "done"},
                ]
                left = messages - ROWS_PER_TURN * i
                for row in rows[: min(ROWS_PER_TURN, left)]:
                    await state.inject_message(row)
            if (i + 1) / turns >= next_report:
                progress(
                    f"  seeding: {min(messages, ROWS_PER_TURN * (i + 1)):,}/{messages:,}"
                    f" messages via {'turns' if mode == 'turns' else 'inject_message'},"
                    f" {time.perf_counter() - started:.1f} s"
                )
                next_report += 0.1
        total = await message_total(state)
        if mode != "turns":
            check_thread(total, messages, "seeded thread")
    finally:
        await runtime.close()
    return state.thread_id, time.perf_counter() - started


async def section_b(workdir: str, history: int, turns: int, mode: str) -> CaseResult:
    """Turns on a thread that already holds ``history`` messages."""
    path = os.path.join(workdir, "history.db")
    progress(f"  B: seeding a thread with {history:,} messages …")
    thread_id, seeded_s = await seed_threadloom(path, history, mode)
    runtime = await Runtime.open(f"sqlite:///{path}", definitions=make_definitions())
    raw4, raw1 = open_floors(workdir, "history")
    try:
        state = await runtime.thread(thread_id)
        start_total = await message_total(state)
        floors = []
        for raw in (raw4, raw1):
            tid = raw.new_thread()
            raw.seed(tid, start_total)
            floors.append((raw, tid))
        await time_threadloom(runtime, thread_id, 0, HISTORY_WARMUP_TURNS, [])
        for raw, tid in floors:
            time_raw(raw, tid, 0, HISTORY_WARMUP_TURNS, [])
        timed_from = await message_total(state)
        blocks = min(BLOCKS, turns)
        sides = await interleaved(runtime, thread_id, (floors[0], floors[1]), turns, blocks, "B")
        end_total = await message_total(state)
        check_thread(end_total, timed_from + ROWS_PER_TURN * turns, "Threadloom thread")
        for raw, tid in floors:
            check_thread(raw.count(tid), end_total, "floor thread")
        progress("  B: store calls of a turn at this history (instrumented) …")
        calls = await instrumented_turns(runtime, thread_id, turns, min(10, BREAKDOWN_TURNS))
    finally:
        raw4.close()
        raw1.close()
        await runtime.close()

    body, ok = comparison(sides)
    how = (
        "inject_message of each turn's 4 rows (no model-call log rows)"
        if mode != "turns"
        else "real turns on the scripted model"
    )
    text = "\n".join(
        [
            f"B. turns at {history:,} history — {turns:,} timed turns on a thread that holds"
            f" {start_total:,} messages",
            f"   seeding ({seeded_s:.1f} s, not timed): {how},",
            "   on a Runtime opened synchronous=OFF, then closed; timed on a new Runtime with"
            " the defaults",
            f"   both floors' tables seeded with {start_total:,} rows of the same shape;"
            f" {HISTORY_WARMUP_TURNS} warm-up turns per side;",
            f"   history during the timed turns {timed_from:,} → {end_total:,}; {blocks} blocks,"
            " alternating; floors as in A",
            "",
            body,
            "",
            "   per block:",
            "",
            growth(sides, blocks, HISTORY_WARMUP_TURNS + 1, timed_from),
            "",
            f"   Section B goal (median and p90 ≤ {TURN_GOAL:g}× the 4-commit floor):"
            f" {verdict(ok)}",
        ]
    )
    return CaseResult(text, ok, calls)


# -- section D: many threads at once (runs in a subprocess) --------------------------------
async def concurrent_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """``threads`` threads × ``turns_per_thread`` turns, all threads at once; the numbers."""
    with tempfile.TemporaryDirectory(prefix="threadloom-bench-c-", dir=args.tmpdir) as workdir:
        runtime = await Runtime.open(
            f"sqlite:///{os.path.join(workdir, 'concurrent.db')}",
            definitions=make_definitions(args.latency),
        )
        store = runtime.store
        assert isinstance(store, SqliteStore)
        try:
            rss_open = peak_rss_mib()
            t0 = time.perf_counter()
            states = [await runtime.create_thread("chat") for _ in range(args.threads)]
            setup_s = time.perf_counter() - t0
            rss_setup = peak_rss_mib()
            progress(f"  D: {args.threads:,} threads created in {setup_s:.1f} s")
            commits0, writes0 = store.commits, store.writes
            total = args.threads * args.turns_per_thread
            latencies: list[int] = []
            step = max(1, total // 10)
            clock = time.perf_counter_ns

            async def worker(thread_id: str) -> None:
                for i in range(args.turns_per_thread):
                    started = clock()
                    await one_turn(runtime, thread_id, i)
                    latencies.append(clock() - started)
                    if len(latencies) % step == 0:
                        progress(
                            f"  D: {len(latencies):,}/{total:,} turns,"
                            f" {time.perf_counter() - t1:.1f} s"
                        )

            gc.collect()
            t1 = time.perf_counter()
            await asyncio.gather(*(worker(s.thread_id) for s in states))
            wall_s = time.perf_counter() - t1
            commits, writes = store.commits - commits0, store.writes - writes0
            stored = 0
            for s in states[:: max(1, len(states) // 20)]:
                stored += await message_total(s)
            sampled = len(states[:: max(1, len(states) // 20)])
        finally:
            await runtime.close()
        return {
            "threads": args.threads,
            "turns_per_thread": args.turns_per_thread,
            "latency": args.latency,
            "setup_s": setup_s,
            "wall_s": wall_s,
            "turns": len(latencies),
            "median_ns": percentile(latencies, 50),
            "p90_ns": percentile(latencies, 90),
            "max_ns": max(latencies),
            "commits": commits,
            "writes": writes,
            "rss_open": rss_open,
            "rss_setup": rss_setup,
            "rss_peak": peak_rss_mib(),
            "stored_sampled": stored,
            "sampled_threads": sampled,
        }


def section_d(args: argparse.Namespace, workdir: str) -> str:
    """Run the concurrent scenario in a subprocess of this script and print its numbers."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--scenario",
        "concurrent",
        "--threads",
        str(args.threads),
        "--turns-per-thread",
        str(args.turns_per_thread),
        "--latency",
        str(args.latency),
        "--tmpdir",
        workdir,
    ]
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        return f"D. concurrent scenario failed (exit {done.returncode}); see stderr"
    r = json.loads(done.stdout.strip().splitlines()[-1])
    turns = r["turns"]
    ideal = 2 * r["latency"] * r["turns_per_thread"]
    expected = ROWS_PER_TURN * r["turns_per_thread"] * r["sampled_threads"]
    if r["stored_sampled"] != expected:
        raise RuntimeError(
            f"concurrent: sampled threads hold {r['stored_sampled']:,} messages,"
            f" expected {expected:,}"
        )
    rows = [
        ["threads × turns each", f"{r['threads']:,} × {r['turns_per_thread']}"],
        ["wall time, all turns (s)", f"{r['wall_s']:.1f}"],
        ["  latency-only lower bound (s)", f"{ideal:.1f}"],
        ["turns/s", f"{turns / r['wall_s']:,.1f}"],
        ["per-turn latency median (ms)", ms(r["median_ns"])],
        ["per-turn latency p90 (ms)", ms(r["p90_ns"])],
        ["per-turn latency max (ms)", ms(r["max_ns"])],
        ["store writes during the turns", f"{r['writes']:,} ({r['writes'] / turns:.1f}/turn)"],
        ["  commits (group commit shares them)", f"{r['commits']:,}"],
        ["  writes/s", f"{r['writes'] / r['wall_s']:,.0f}"],
        ["creating the threads first (s, not in wall)", f"{r['setup_s']:.1f}"],
        ["peak RSS after Runtime.open (MiB)", f"{r['rss_open']:,.1f}"],
        ["peak RSS after creating the threads (MiB)", f"{r['rss_setup']:,.1f}"],
        ["peak RSS, whole scenario (MiB)", f"{r['rss_peak']:,.1f}"],
        ["scenario subprocess, start to exit (s)", f"{elapsed:.1f}"],
    ]
    return "\n".join(
        [
            f"D. {r['threads']:,} threads × {r['turns_per_thread']} turns concurrently —"
            f" scripted model with {r['latency'] * 1000:g} ms latency per call (2 calls a turn)",
            "   one Runtime with the defaults (WAL, synchronous=FULL) in a subprocess of its"
            " own; asyncio.gather",
            "   over the threads, each thread's turns sequential; for information (the issue"
            " sets no goal);",
            f"   peak RSS of that subprocess = {peak_rss_source()}",
            "",
            table(["metric", "value"], rows),
        ]
    )


# -- main ---------------------------------------------------------------------------------
SECTIONS = ("empty", "history", "concurrent")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; ``--scenario concurrent`` is the subprocess of section D."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", type=int, default=300, metavar="N", help="section A turns (default 300)"
    )
    parser.add_argument(
        "--history",
        type=int,
        default=2000,
        metavar="N",
        help="messages in the section B thread before its turns (default 2000)",
    )
    parser.add_argument(
        "--history-turns",
        type=int,
        default=50,
        metavar="N",
        help="timed turns per side in section B (default 50)",
    )
    parser.add_argument(
        "--seed",
        choices=("inject", "turns"),
        default="inject",
        help="how the section B thread is filled: inject_message (default, well under a"
        " second) or real turns (minutes: a turn's cost grows with the history)",
    )
    parser.add_argument(
        "--threads", type=int, default=1000, metavar="N", help="section D threads (default 1000)"
    )
    parser.add_argument(
        "--turns-per-thread",
        type=int,
        default=3,
        metavar="N",
        help="section D turns per thread (default 3)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.1,
        metavar="S",
        help="section D model latency per call in seconds (default 0.1)",
    )
    parser.add_argument(
        "--tmpdir",
        default=None,
        help="where the temporary databases go (default: the system temp dir)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        choices=SECTIONS,
        default=[],
        help="skip a section (repeatable)",
    )
    parser.add_argument("--scenario", choices=("concurrent",), default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.turns, args.history_turns, args.threads, args.turns_per_thread) < 1:
        parser.error("--turns, --history-turns, --threads and --turns-per-thread must be ≥ 1")
    if args.history < 0 or args.latency < 0:
        parser.error("--history and --latency must not be negative")
    return args


async def main(argv: Sequence[str] | None = None) -> int:
    """Run the sections in one temporary directory and print the report."""
    args = parse_args(argv)
    if args.scenario == "concurrent":
        print(json.dumps(await concurrent_scenario(args)), flush=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="threadloom-bench-", dir=args.tmpdir) as workdir:
        print(header(args, workdir), flush=True)
        started = time.perf_counter()
        results: list[tuple[str, bool]] = []
        cases: list[tuple[str, StoreCalls]] = []
        if "empty" not in args.skip:
            progress(f"section A: {args.turns:,} turns from empty …")
            a = await section_a(workdir, args.turns)
            print("\n" + a.text, flush=True)
            results.append((f"A  {args.turns:,} turns from empty ≤ {TURN_GOAL:g}× floor", a.ok))
            if a.calls is not None:
                cases.append(("new thread", a.calls))
        if "history" not in args.skip:
            progress(f"section B: turns at {args.history:,} history …")
            b = await section_b(workdir, args.history, args.history_turns, args.seed)
            print("\n" + b.text, flush=True)
            results.append((f"B  turns at {args.history:,} history ≤ {TURN_GOAL:g}× floor", b.ok))
            if b.calls is not None:
                cases.append((f"at {args.history:,}", b.calls))
        if cases:
            print(
                "\n".join(
                    [
                        "",
                        "C. where a Threadloom turn's time goes — store calls per turn"
                        " (for information)",
                        "   counted and timed by wrapping SqliteStore._write / _read in this"
                        f" process, over {BREAKDOWN_TURNS} extra turns",
                        "   on a new thread after A and 10 extra turns on the B thread. A"
                        " sequential turn commits each write",
                        "   on its own (the floor makes 4 commits); a read is one"
                        " snapshot on a reader thread;",
                        "   'outside the store' is the engine's own work and the event loop",
                        "",
                        breakdown(cases),
                    ]
                ),
                flush=True,
            )
        if "concurrent" not in args.skip:
            progress(
                f"section D: {args.threads:,} threads × {args.turns_per_thread} turns"
                " concurrently (subprocess) …"
            )
            print("\n" + section_d(args, workdir), flush=True)
        print("\nSummary")
        for name, ok in results:
            print(f"   {name}: {verdict(ok)}")
        print(f"   wall time {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
