"""Threadloom side by side with LangGraph, the OpenAI Agents SDK, pydantic-ai and a raw
``sqlite3`` floor: the same workload, each system in its own process on a fresh database.

Run with ``make bench-peers`` (it builds ``.venv-bench`` from bench/peers/requirements.txt
for the peers; Threadloom and the floor run on the project's ``.venv``). It is a
benchmark, not a test: it prints its tables and exits 0 even when a goal is missed.

One turn = user message → one tool call → tool result → final text, on a zero-latency
fake model in every system (100 ms per model call in the concurrent scenario). Each
system persists with its own durable SQLite persistence on a file; see the docstring of
each ``sys_*.py``. Scenarios: ``empty`` (300 turns from an empty thread, after 10 warm-up
turns on another thread), ``history`` (a thread seeded with 2,000 messages through the
system's own API, untimed, 3 warm-up turns, then 50 timed turns), ``concurrent`` (1,000
threads × 3 turns at once, each thread's turns sequential). In ``empty`` and ``history``
all systems' processes are prepared first and their timed turns then run in blocks, one
system at a time, the order rotating (so load from elsewhere falls on all alike);
``concurrent`` runs one system at a time. Measured per system: per-turn median and p90,
CPU time per turn, rows and bytes the timed turns added per stored message (read from the
database on a separate connection), the database files' size after close and the
process's peak RSS. docs/benchmarks.md has a run and what it says.

One more row, for information, in the concurrent scenario only: ``threadloom-tuned-gc``,
the Threadloom system in a process that tunes CPython's garbage collector as ``threadloom
serve`` does (``tune_gc``, once the runtime is open and the threads exist; see
``sys_threadloom_tuned_gc.py``). The goals are judged on the default ``threadloom`` row,
since the library never touches the collector; the tuned row's ratio to the floor is
printed under them as information.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

from _common import SCENARIOS, Result, result_from  # noqa: E402
from _tables import (  # noqa: E402
    PEERS,
    SYSTEMS,
    TITLES,
    goals,
    goals_table,
    growth_table,
    information,
    persistence_table,
    scenario_table,
    versions_table,
)

from _report import cpu_model, filesystem_of, progress  # noqa: E402

BLOCKS = 10
DEFAULT_PEER_PYTHON = os.path.join(
    os.path.dirname(os.path.dirname(HERE)), ".venv-bench", "bin", "python"
)


def memory_gib() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB RAM"
    except (OSError, ValueError):
        pass
    return "RAM unknown"


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def header(args: argparse.Namespace, workdir: str) -> str:
    now = dt.datetime.now(dt.UTC).astimezone()
    return "\n".join(
        [
            "Threadloom vs peers (bench/peers/bench_peers.py)",
            f"date        {now.isoformat(timespec='seconds')}",
            f"machine     {platform.platform()}, {os.cpu_count()} CPUs ({cpu_model()}),"
            f" {memory_gib()}",
            f"python      {platform.python_implementation()} {platform.python_version()},"
            f" sqlite {sqlite3.sqlite_version}",
            f"temp dir    {workdir}",
            f"filesystem  {filesystem_of(workdir)}",
            f"parameters  empty: --turns {args.turns}; history: --history {args.history}"
            f" --history-turns {args.history_turns};",
            f"            concurrent: --threads {args.threads} --turns-per-thread"
            f" {args.turns_per_thread} --latency {args.latency:g} s (timeout {args.timeout:g} s)",
            f"            empty, history: the systems' timed turns interleaved in {BLOCKS}"
            " blocks; concurrent: one system at a time",
            f"load        {load()} (1, 5, 15 min) at the start",
        ]
    )


def failed(system: str, scenario: str, why: str, unsupported: bool = False) -> Result:
    r = Result(system=system, scenario=scenario, ok=False)
    if unsupported:
        r.unsupported = why
    else:
        r.error = why
    return r


def command(system: str, scenario: str, args: argparse.Namespace, workdir: str) -> list[str]:
    """The runner's command line for one system on one scenario, on a fresh directory."""
    python = args.peer_python if system in PEERS else sys.executable
    directory = tempfile.mkdtemp(prefix=f"{system}-{scenario}-", dir=workdir)
    return [
        python,
        os.path.join(HERE, "run_one.py"),
        system,
        scenario,
        "--workdir",
        directory,
        *("--turns", str(args.turns), "--history", str(args.history)),
        *("--history-turns", str(args.history_turns), "--threads", str(args.threads)),
        *("--turns-per-thread", str(args.turns_per_thread), "--latency", str(args.latency)),
        *("--timeout", str(args.timeout)),
    ]


def missing(system: str, args: argparse.Namespace) -> str | None:
    python = args.peer_python if system in PEERS else sys.executable
    return None if os.path.exists(python) else f"{python} missing (make bench-peers builds it)"


def run_alone(system: str, scenario: str, args: argparse.Namespace, workdir: str) -> Result:
    """One system on one scenario, the only process running (the concurrent scenario)."""
    if why := missing(system, args):
        return failed(system, scenario, why, unsupported=True)
    started = time.perf_counter()
    limit = args.timeout + 300
    try:
        done = subprocess.run(
            command(system, scenario, args, workdir),
            stdout=subprocess.PIPE,
            text=True,
            check=False,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return failed(system, scenario, f"process killed after {limit:g} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return failed(system, scenario, f"runner exited {done.returncode} without a result")
    result = result_from(json.loads(lines[-1]))
    width = max(map(len, SYSTEMS))
    progress(
        f"  {scenario:<10} {system:<{width}} {time.perf_counter() - started:6.1f} s"
        + ("" if result.ok else f"  ({result.unsupported or result.error})")
    )
    return result


class Runner:
    """A runner process in ``--serve`` mode: prepared once, then driven block by block."""

    def __init__(self, system: str, scenario: str, args: argparse.Namespace, workdir: str):
        self.system, self.scenario = system, scenario
        self.result: Result | None = None
        if why := missing(system, args):
            self.result = failed(system, scenario, why, unsupported=True)
            return
        self.proc = subprocess.Popen(
            [*command(system, scenario, args, workdir), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _read(self) -> dict[str, object] | None:
        """The runner's next JSON line; a final result ends the runner."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.result = failed(
                self.system, self.scenario, f"runner exited {self.proc.wait()} without a result"
            )
            return None
        data: dict[str, object] = json.loads(line)
        if "system" in data:  # the runner failed and printed its result
            self.result = result_from(data)
            self.proc.wait()
            return None
        return data

    def ready(self) -> None:
        if self.result is None:
            data = self._read()
            if data is not None and not data.get("ready"):
                self._read()  # the result follows: unsupported

    def block(self, start: int, count: int) -> None:
        if self.result is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"block {start} {count}\n")
        self.proc.stdin.flush()
        self._read()

    def finish(self) -> Result:
        if self.result is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("finish\n")
            self.proc.stdin.flush()
            self._read()
        assert self.result is not None
        return self.result


def run_interleaved(
    systems: Sequence[str], scenario: str, turns: int, args: argparse.Namespace, workdir: str
) -> list[Result]:
    """Every system in its own process, all prepared first (untimed), then their timed turns
    in ``BLOCKS`` blocks, one system at a time, the order rotating per block, so that other
    load on the machine falls on all of them alike."""
    runners = [Runner(s, scenario, args, workdir) for s in systems]
    for r in runners:
        r.ready()
    per_block = max(1, turns // BLOCKS)
    done = block = 0
    started = time.perf_counter()
    while done < turns:
        count = per_block if block < BLOCKS - 1 else turns - done
        shift = block % len(runners)
        for r in [*runners[shift:], *runners[:shift]]:
            r.block(done, count)
        done += count
        block += 1
        progress(
            f"  {scenario:<10} {done:,}/{turns:,} turns per system,"
            f" {time.perf_counter() - started:.1f} s"
        )
    results = [r.finish() for r in runners]
    for result in results:
        if not result.ok:
            progress(f"  {scenario:<10} {result.system}: {result.unsupported or result.error}")
    return results


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=300, help="empty: timed turns (300)")
    p.add_argument("--history", type=int, default=2000, help="history: seeded messages (2000)")
    p.add_argument("--history-turns", type=int, default=50, help="history: timed turns (50)")
    p.add_argument("--threads", type=int, default=1000, help="concurrent: threads (1000)")
    p.add_argument("--turns-per-thread", type=int, default=3, help="concurrent: turns each (3)")
    p.add_argument("--latency", type=float, default=0.1, help="concurrent: s per model call")
    p.add_argument("--timeout", type=float, default=180.0, help="concurrent: s per system")
    p.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON, help="the peers' interpreter")
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    p.add_argument("--tmpdir", default=None, help="where the databases go (system temp dir)")
    p.add_argument("--json", default=None, help="also write every result to this file")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Threadloom first (CPython's GC, then serve's tuning), then the floor, then the peers
    systems = [s for s in SYSTEMS if s in args.systems]
    with tempfile.TemporaryDirectory(prefix="threadloom-peers-", dir=args.tmpdir) as workdir:
        print(header(args, workdir), flush=True)
        started = time.perf_counter()
        by_scenario: dict[str, list[Result]] = {}
        for scenario in SCENARIOS:
            if scenario not in args.scenarios:
                continue
            progress(f"scenario {scenario} …")
            if scenario == "concurrent":
                results = [run_alone(s, scenario, args, workdir) for s in systems]
            else:
                turns = args.turns if scenario == "empty" else args.history_turns
                results = run_interleaved(systems, scenario, turns, args, workdir)
            by_scenario[scenario] = results
        everything = [r for rs in by_scenario.values() for r in rs]
        print("\nversions (each system's own process)\n")
        print(versions_table(everything))
        print("\npersistence (as each runner opened it)\n")
        print(persistence_table(everything))
        for scenario, results in by_scenario.items():
            size = {
                "empty": f"{args.turns:,}",
                "history": f"{args.history_turns:,} at {args.history:,} messages —",
                "concurrent": f"{args.threads:,} × {args.turns_per_thread} at"
                f" {args.latency * 1000:g} ms —",
            }[scenario]
            print(f"\n{scenario}: {size} {TITLES[scenario]}\n")
            print(scenario_table(results), flush=True)
            if scenario == "empty":
                print("\n  median ms per block of turns (the thread holds 4 × turn messages):\n")
                print(growth_table(results, args.turns), flush=True)
        print(
            "\n÷ TL: the system's per-turn time divided by Threadloom's (above 1: slower than"
            " Threadloom).\nCPU ms/turn: the process's CPU time (all its threads) over the"
            " timed turns, per turn; less\nsensitive than wall time to other load on the"
            " machine.\nrows/msg, KiB/msg: rows and bytes the timed turns added to the"
            " database per stored message.\nDB MiB: the database files after the run."
            " peak RSS: VmHWM of the system's process.\n"
        )
        print(goals_table(goals(by_scenario, args.history), information(by_scenario)))
        print(
            f"\nwall time {time.perf_counter() - started:.0f} s; load {load()} at the end",
            flush=True,
        )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump([r.__dict__ for r in everything], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
