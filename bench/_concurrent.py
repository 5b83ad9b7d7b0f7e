"""Section D of the turn benchmark: many threads at once, in a process of its own."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from _report import (
    ms,
    peak_rss_mib,
    peak_rss_source,
    percentile,
    progress,
    table,
)
from _workload import ROWS_PER_TURN, make_definitions, message_total, one_turn
from threadloom import Runtime
from threadloom.store.sqlite.store import SqliteStore


async def concurrent_scenario(args: argparse.Namespace) -> dict[str, Any]:
    """``threads`` threads × ``turns_per_thread`` turns, all threads at once; the numbers."""
    with tempfile.TemporaryDirectory(prefix="threadloom-bench-c-", dir=args.tmpdir) as workdir:
        runtime = await Runtime.open(
            f"sqlite:///{os.path.join(workdir, 'concurrent.db')}",
            definitions=make_definitions(args.latency, fixed_usage=True),
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
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "turn_bench.py"),
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
