"""Turn benchmark: a full tool-using turn against raw ``sqlite3``, and many threads at once.

Run with ``make bench-turn`` (or ``.venv/bin/python bench/turn_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0 even when a goal is missed.

The workload of one turn is "user message → one tool call → tool result → final text":
``Runtime.send_message`` then ``Runtime.wait_idle``, on a chat agent whose side a runs a
prompt on the scripted model (zero latency) answering a user message with one ``echo``
tool call and the tool result with the text ``done``, reporting a fixed usage (10 in, 5 out)
as a provider's API does — not the scripted model's own token estimate, test-double work
that walks the whole request (``bench/_workload.py``; the peer benchmark does the same).
The Runtime is opened with its
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

Section E (information) — the SQL a turn executes, recorded and replayed on plain
``sqlite3`` against the floor: how much of a turn is the store's SQL, how much the Python
around it (``bench/_replay.py``).

Section F (information) — the syncs apart from the work: Threadloom and the floor each at
``synchronous=FULL``, ``=OFF`` and ``=OFF`` with a sleep after each commit, alternating,
with wall time, CPU time in user space and in the kernel, and the time off the CPU per
turn (``bench/_sync_split.py``).

Section D (information) — 1,000 threads running 3 turns each concurrently on a model with
100 ms latency per call: wall time, turns/s and peak RSS, in a subprocess of its own so
the RSS is the scenario's.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import threadloom
from _breakdown import StoreCalls, breakdown, instrument
from _concurrent import concurrent_scenario, section_d
from _raw_floor import RawTurns, time_raw
from _report import (
    cpu_model,
    filesystem_of,
    ms,
    percentile,
    progress,
    rotating_blocks,
    table,
    verdict,
)
from _sync_split import section_f
from _workload import (
    ROWS_PER_TURN,
    make_definitions,
    message_total,
    one_turn,
    question,
    time_threadloom,
)
from threadloom import Runtime
from threadloom.records import new_id
from threadloom.store.sqlite.store import SqliteStore

WARMUP_TURNS = 10
HISTORY_WARMUP_TURNS = 3
BLOCKS = 10
BREAKDOWN_TURNS = 20
REPLAY_TURNS = 200
TURN_GOAL = 2.5
_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
_ARGUMENTS = '{"v":1}'


# -- helpers ------------------------------------------------------------------------------
def header(args: argparse.Namespace, workdir: str) -> str:
    """The machine, the date and the parameters of this run."""
    now = dt.datetime.now(dt.UTC).astimezone()
    lines = [
        "Threadloom turn benchmark (bench/turn_bench.py)",
        f"date        {now.isoformat(timespec='seconds')}",
        f"machine     {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs"
        f" ({cpu_model()})",
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
def check_thread(total: int, expected: int, what: str) -> None:
    """Fail loudly when the turns did not store what the workload says they store."""
    if total != expected:
        raise RuntimeError(f"{what}: expected {expected:,} stored messages, found {total:,}")


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

    await rotating_blocks([run_tl, run_raw4, run_raw1], turns, blocks, label)
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
    defs = make_definitions(fixed_usage=True)
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
            "   zero latency and a fixed usage; a turn = send_message + wait_idle, storing user,"
            " assistant (tool call), tool, assistant",
            "   floor: raw sqlite3 (WAL, synchronous=FULL) commits the same 4 rows, one"
            " transaction per row:",
            "   4 commits per turn, the engine's per-row durability; the 1-commit variant (all"
            " 4 rows in one",
            "   transaction) is a stricter floor, for information; every side's WAL file"
            " starts at its steady-state",
            "   size (Threadloom's prefilled at open, the floors' in RawTurns), as in a"
            " database in use for a while",
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
        f"sqlite:///{path}", definitions=make_definitions(fixed_usage=True), synchronous="OFF"
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
    runtime = await Runtime.open(
        f"sqlite:///{path}", definitions=make_definitions(fixed_usage=True)
    )
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
            "   every WAL starts at its steady-state size: Threadloom's is prefilled at open"
            " (docs/thread-core.md),",
            "   each floor's after its seeding (RawTurns, steady); else these few turns would"
            " find the floors' WAL",
            "   files still growing, every synced commit paying a file-system journal commit too",
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
SECTIONS = ("empty", "history", "replay", "sync", "concurrent")


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
        if "replay" not in args.skip:
            progress("section E: a turn's own SQL, bare and in a turn's skeleton …")
            # imported here: make bench-instructions --against REV imports this module's
            # seeding against an older src, which the replay's store helpers may postdate
            from _replay import section_e

            replay = await section_e(workdir, REPLAY_TURNS, BLOCKS, WARMUP_TURNS, TURN_GOAL)
            print("\n" + replay, flush=True)
        if "sync" not in args.skip:
            progress("section F: the syncs apart from the work …")
            split = await section_f(workdir, args.turns, BLOCKS, WARMUP_TURNS)
            print("\n" + split, flush=True)
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
