"""Threadloom side by side with LangGraph, the OpenAI Agents SDK, pydantic-ai and a raw
``sqlite3`` floor, and on PostgreSQL with LangGraph, the Agents SDK and a raw psycopg
floor: the same workload, each system in its own process on a fresh database.

Run with ``make bench-peers`` (it builds ``.venv-bench`` from bench/peers/requirements.txt
for the peers; Threadloom and the floors run on the project's ``.venv``). It is a
benchmark, not a test: it prints its tables and exits 0 even when a goal is missed.

One turn = user message → one tool call → tool result → final text, on a zero-latency
fake model in every system (100 ms per model call in the concurrent scenario). Each
SQLite system persists with its own durable SQLite persistence on a file; each
PostgreSQL system (``-pg``, ``raw-psycopg``) with its own PostgreSQL persistence in a
fresh schema of the database of ``--pg-url``, dropped after the run (printed as not run
when the server cannot be reached); see the docstring of each ``sys_*.py``. Scenarios:
``empty`` (300 turns from an empty thread, after 10 warm-up turns on another thread),
``history`` (a thread seeded with 2,000 messages through the system's own API, untimed,
3 warm-up turns, then 50 timed turns), ``concurrent`` (1,000 threads × 3 turns at once,
each thread's turns sequential). In ``empty`` and ``history`` all systems' processes of
one store are prepared first and their timed turns then run in blocks, one system at a
time, the order rotating (so load from elsewhere falls on all alike), the SQLite systems
first, then the PostgreSQL ones; ``concurrent`` runs one system at a time, and once more
on two Threadloom nodes (``threadloom-pg-2-nodes``: two processes on one schema, each
creating half of the threads and sending to them, started at once). Measured per system:
per-turn median and p90, CPU time per turn, rows and bytes the timed turns added per
stored message (read from the database on a separate connection), the database's size
after close and the process's peak RSS; on PostgreSQL also the CPU time of the server
processes serving the system's connections. docs/benchmarks.md has a run and what it
says.

Memory per active thread and turns/s as threads grow (issue 40): the concurrent table's
``KiB/thread`` is (peak RSS − RSS of the process once the system is open, before any
thread) / threads. ``--threads 1000,10000`` runs the concurrent scenario at the first count
with every system, then at each further count with ``threadloom`` and
``threadloom-tuned-gc`` only (a table each); the goals ask, of the default ``threadloom``
row, ≤ 25 KiB per active thread at each count and turns/s at the largest count at least
those at the smallest. The default run (one count, 1,000) judges the memory goal there;
the 10,000-thread pass adds 4–6 minutes on the development machine (give it
``--timeout`` above 180 s on a loaded one).

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

import _pg  # noqa: E402
from _common import SCENARIOS, Result, result_from  # noqa: E402
from _tables import (  # noqa: E402
    BACKENDS,
    BENCH_VENV,
    PG_THREADLOOM,
    POSTGRES,
    SCALED,
    SYSTEMS,
    TITLES,
    TWO_NODES,
    backend_of,
    goals,
    goals_table,
    growth_table,
    information,
    persistence_table,
    scenario_table,
    server_table,
    versions_table,
    why_not,
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


def source() -> str:
    """Which Threadloom the runners import (a PYTHONPATH can point them at another tree)
    and the checkout's revision, with the count of uncommitted changes under src/."""
    done = subprocess.run(
        [sys.executable, "-c", "import threadloom; print(threadloom.__file__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    where = os.path.dirname(done.stdout.strip()) if done.returncode == 0 else "not importable"
    root = os.path.dirname(os.path.dirname(HERE))
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return where
    return f"{where}; checkout at {rev}, {len(dirty)} uncommitted paths under src/"


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def postgres_line(args: argparse.Namespace) -> str:
    """The PostgreSQL server the PostgreSQL systems run on, or why they cannot."""
    if args.pg_unreachable:
        return f"{args.pg_url} unreachable: {args.pg_unreachable}"
    facts = _pg.server_facts(args.pg_url)
    with _pg._connect(args.pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
    others = int(row[0]) if row else 0
    return (
        f"{facts.get('server_version', '?')} at {args.pg_url}, a schema per system run;\n"
        f"            synchronous_commit={facts.get('synchronous_commit', '?')},"
        f" fsync={facts.get('fsync', '?')}, wal_sync_method={facts.get('wal_sync_method', '?')},"
        f" commit_delay={facts.get('commit_delay', '?')}; {others} other client connections"
        " at the start"
    )


def header(args: argparse.Namespace, workdir: str) -> str:
    now = dt.datetime.now(dt.UTC).astimezone()
    pg = any(backend_of(s) is POSTGRES for s in args.systems)
    return "\n".join(
        [
            "Threadloom vs peers (bench/peers/bench_peers.py)",
            f"date        {now.isoformat(timespec='seconds')}",
            f"machine     {platform.platform()}, {os.cpu_count()} CPUs ({cpu_model()}),"
            f" {memory_gib()}",
            f"python      {platform.python_implementation()} {platform.python_version()},"
            f" sqlite {sqlite3.sqlite_version}",
            *([f"postgresql {postgres_line(args)}"] if pg else []),
            f"threadloom  {source()}",
            f"temp dir    {workdir}",
            f"filesystem  {filesystem_of(workdir)}",
            f"parameters  empty: --turns {args.turns}; history: --history {args.history}"
            f" --history-turns {args.history_turns};",
            f"            concurrent: --threads {','.join(map(str, args.thread_counts))}"
            " --turns-per-thread"
            f" {args.turns_per_thread} --latency {args.latency:g} s (timeout {args.timeout:g} s)"
            + ("; two nodes: half of the threads each" if TWO_NODES in args.systems else "")
            + (
                f"; at {', '.join(f'{n:,}' for n in args.thread_counts[1:])} threads:"
                f" {', '.join(SCALED)} only"
                if len(args.thread_counts) > 1
                else ""
            ),
            f"            empty, history: the systems' timed turns interleaved in {BLOCKS}"
            " blocks (SQLite's, then PostgreSQL's); concurrent: one system at a time",
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


def command(
    system: str,
    scenario: str,
    args: argparse.Namespace,
    workdir: str,
    database: str = "",
    threads: int | None = None,
) -> list[str]:
    """The runner's command line for one system on one scenario, on a fresh directory (and
    on PostgreSQL the schema of ``database``); ``threads`` instead of ``--threads``."""
    python = args.peer_python if system in BENCH_VENV else sys.executable
    directory = tempfile.mkdtemp(prefix=f"{system}-{scenario}-", dir=workdir)
    threads = args.threads if threads is None else threads
    return [
        python,
        os.path.join(HERE, "run_one.py"),
        system,
        scenario,
        "--workdir",
        directory,
        *("--turns", str(args.turns), "--history", str(args.history)),
        *("--history-turns", str(args.history_turns), "--threads", str(threads)),
        *("--turns-per-thread", str(args.turns_per_thread), "--latency", str(args.latency)),
        *("--timeout", str(args.timeout)),
        *(("--database", database) if database else ()),
    ]


def missing(system: str, args: argparse.Namespace) -> str | None:
    """Why ``system`` cannot run at all here (its interpreter, or PostgreSQL, missing)."""
    if backend_of(system) is POSTGRES and args.pg_unreachable:
        return f"PostgreSQL at {args.pg_url} unreachable: {args.pg_unreachable}"
    python = args.peer_python if system in BENCH_VENV else sys.executable
    return None if os.path.exists(python) else f"{python} missing (make bench-peers builds it)"


class Schema:
    """A fresh PostgreSQL schema for one system run (``None`` for a SQLite system): made
    on entry, dropped on exit with any connection left on it."""

    def __init__(self, system: str, scenario: str, args: argparse.Namespace) -> None:
        self.base = args.pg_url
        self.name = ""
        if backend_of(system) is POSTGRES:
            self.name = _pg.new_schema_name(system, scenario)
            _pg.create_schema(self.name, self.base)

    @property
    def url(self) -> str:
        return _pg.schema_url(self.name, self.base) if self.name else ""

    def drop(self) -> None:
        if self.name:
            _pg.drop_schema(self.name, self.base)
            self.name = ""


def run_alone(
    system: str, scenario: str, args: argparse.Namespace, workdir: str, threads: int | None = None
) -> Result:
    """One system on one scenario, the only process running (the concurrent scenario);
    ``threads`` instead of ``--threads``'s first count."""
    if why := missing(system, args):
        return failed(system, scenario, why, unsupported=True)
    if system == TWO_NODES:
        return run_two_nodes(args, workdir)
    started = time.perf_counter()
    limit = args.timeout + 300
    schema = Schema(system, scenario, args)
    try:
        done = subprocess.run(
            command(system, scenario, args, workdir, schema.url, threads),
            stdout=subprocess.PIPE,
            text=True,
            check=False,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return failed(system, scenario, f"process killed after {limit:g} s")
    finally:
        schema.drop()
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return failed(system, scenario, f"runner exited {done.returncode} without a result")
    result = result_from(json.loads(lines[-1]))
    width = max(map(len, SYSTEMS))
    at = "" if threads is None else f" at {threads:,} threads"
    progress(
        f"  {scenario:<10} {system:<{width}} {time.perf_counter() - started:6.1f} s{at}"
        + ("" if result.ok else f"  ({result.unsupported or result.error})")
    )
    return result


class Runner:
    """A runner process in ``--serve`` mode: prepared once, then driven block by block. A
    system on PostgreSQL runs on a fresh schema of its own, dropped when it finishes, or on
    ``database`` (a schema the caller owns)."""

    def __init__(
        self,
        system: str,
        scenario: str,
        args: argparse.Namespace,
        workdir: str,
        database: str = "",
        threads: int | None = None,
    ):
        self.system, self.scenario = system, scenario
        self.result: Result | None = None
        self.schema: Schema | None = None
        if system == TWO_NODES:
            only = "runs the concurrent scenario only (two processes, half of the threads each)"
            self.result = failed(system, scenario, only, unsupported=True)
            return
        if why := missing(system, args):
            self.result = failed(system, scenario, why, unsupported=True)
            return
        if not database:
            self.schema = Schema(system, scenario, args)
            database = self.schema.url
        self.proc = subprocess.Popen(
            [*command(system, scenario, args, workdir, database, threads), "--serve"],
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
        self.send_block(start, count)
        self.receive()

    def send_block(self, start: int, count: int) -> None:
        """Start a block of timed turns; :meth:`receive` waits for it."""
        if self.result is not None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"block {start} {count}\n")
        self.proc.stdin.flush()

    def receive(self) -> None:
        if self.result is None:
            self._read()

    def finish(self) -> Result:
        try:
            if self.result is None:
                assert self.proc.stdin is not None
                self.proc.stdin.write("finish\n")
                self.proc.stdin.flush()
                self._read()
        finally:
            if self.schema is not None:
                self.schema.drop()
        assert self.result is not None
        return self.result


def run_two_nodes(args: argparse.Namespace, workdir: str) -> Result:
    """The concurrent scenario on two Threadloom nodes: two processes of ``threadloom-pg``,
    each its own Runtime on one schema, each creating half of the threads and sending to
    them itself; both prepared, then started at once. One result: both nodes' turns, the
    longer wall time, both processes' CPU; rows, bytes and the server's CPU read by the
    driver on a connection of its own around the timed turns."""
    scenario = "concurrent"
    started = time.perf_counter()
    schema = Schema(TWO_NODES, scenario, args)
    combined = Result(system=TWO_NODES, scenario=scenario, backend="postgresql")
    try:
        half = args.threads // 2
        nodes = [
            Runner(PG_THREADLOOM, scenario, args, workdir, schema.url, threads=n)
            for n in (half, args.threads - half)
        ]
        for node in nodes:
            node.ready()
        probe = _pg.PgProbe(schema.url)
        rows0, bytes0 = probe.measure()
        cpu0 = probe.server_cpu()
        for node in nodes:
            node.send_block(0, 0)
        for node in nodes:
            node.receive()
        cpu1 = probe.server_cpu()
        rows1, bytes1 = probe.measure()
        results = [node.finish() for node in nodes]
        combined.rows_total, combined.db_bytes = probe.measure()
    finally:
        schema.drop()
    bad = [r for r in results if not r.ok]
    if bad:
        combined.ok = False
        combined.error = "; ".join(f"node {results.index(r) + 1}: {why_not(r)}" for r in bad)
    for r in results:
        combined.latencies_ns += r.latencies_ns
        combined.turns += r.turns
        combined.cpu_s += r.cpu_s
        combined.messages_timed += r.messages_timed
        combined.wall_s = max(combined.wall_s, r.wall_s)
        combined.peak_rss_mib = max(combined.peak_rss_mib, r.peak_rss_mib)
        combined.versions = combined.versions or r.versions
        combined.persistence = combined.persistence or r.persistence
    combined.rows_timed, combined.bytes_timed = rows1 - rows0, bytes1 - bytes0
    combined.server_cpu_s = _pg.cpu_between(cpu0, cpu1)
    combined.persistence = f"two processes of threadloom-pg on one schema: {combined.persistence}"
    combined.notes = [
        f"node {i + 1}: {r.turns:,} turns in {r.wall_s:.1f} s, CPU {r.cpu_s:.1f} s,"
        f" peak RSS {r.peak_rss_mib:.0f} MiB"
        for i, r in enumerate(results)
    ]
    progress(
        f"  {scenario:<10} {TWO_NODES:<{max(map(len, SYSTEMS))}}"
        f" {time.perf_counter() - started:6.1f} s"
        + ("" if combined.ok else f"  ({combined.error})")
    )
    return combined


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
    p.add_argument(
        "--threads",
        default="1000",
        help="concurrent: threads (1000); a list such as 1000,10000 runs the scenario at the"
        " first count with every system, then at each other count with"
        f" {' and '.join(SCALED)} only (memory per thread and turns/s as threads grow)",
    )
    p.add_argument("--turns-per-thread", type=int, default=3, help="concurrent: turns each (3)")
    p.add_argument("--latency", type=float, default=0.1, help="concurrent: s per model call")
    p.add_argument("--timeout", type=float, default=180.0, help="concurrent: s per system")
    p.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON, help="the peers' interpreter")
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    p.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    p.add_argument("--tmpdir", default=None, help="where the databases go (system temp dir)")
    p.add_argument("--json", default=None, help="also write every result to this file")
    p.add_argument(
        "--pg-url",
        default=_pg.DEFAULT_URL,
        help="the PostgreSQL database of the PostgreSQL systems, a schema per system run"
        " (THREADLOOM_BENCH_PG_URL, else postgresql://postgres@127.0.0.1:5432/test)",
    )
    args = p.parse_args(argv)
    try:
        args.thread_counts = [int(n) for n in str(args.threads).split(",") if n.strip()]
    except ValueError:
        p.error(f"--threads: a count or counts separated by commas, not {args.threads!r}")
    if not args.thread_counts or min(args.thread_counts) <= 0:
        p.error("--threads: counts above 0")
    args.threads = args.thread_counts[0]
    pg = any(backend_of(s) is POSTGRES for s in args.systems)
    args.pg_unreachable = _pg.unreachable(args.pg_url) if pg else None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Threadloom first (CPython's GC, then serve's tuning), then the floor, then the peers
    systems = [s for s in SYSTEMS if s in args.systems]
    with tempfile.TemporaryDirectory(prefix="threadloom-peers-", dir=args.tmpdir) as workdir:
        print(header(args, workdir), flush=True)
        started = time.perf_counter()
        by_scenario: dict[str, list[Result]] = {}
        scaled: dict[int, list[Result]] = {}
        for scenario in SCENARIOS:
            if scenario not in args.scenarios:
                continue
            progress(f"scenario {scenario} …")
            if scenario == "concurrent":
                results = [run_alone(s, scenario, args, workdir) for s in systems]
                scaled[args.threads] = results
                for count in args.thread_counts[1:]:
                    scaled[count] = [
                        run_alone(s, scenario, args, workdir, threads=count)
                        for s in systems
                        if s in SCALED
                    ]
            else:
                # the SQLite systems interleaved among themselves, then the PostgreSQL
                # ones: no server process's preparation or background work (its seeding,
                # its checkpoints) falls on the SQLite systems' timed turns
                turns = args.turns if scenario == "empty" else args.history_turns
                results = []
                for backend in BACKENDS:
                    group = [s for s in systems if backend_of(s) is backend]
                    if group:
                        results += run_interleaved(group, scenario, turns, args, workdir)
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
            if scenario == "concurrent":
                for count in args.thread_counts[1:]:
                    print(
                        f"\nconcurrent: {count:,} × {args.turns_per_thread} at"
                        f" {args.latency * 1000:g} ms — {TITLES[scenario]}; {', '.join(SCALED)}"
                        " only\n"
                    )
                    print(scenario_table(scaled[count]), flush=True)
            if scenario == "empty":
                print("\n  median ms per block of turns (the thread holds 4 × turn messages):\n")
                print(growth_table(results, args.turns), flush=True)
        if server := server_table(by_scenario):
            print(
                "\nPostgreSQL: CPU per turn of each system's own process and of the server"
                " processes serving\nits connections (read from /proc; a connection closed"
                " during the turns is not counted)\n"
            )
            print(server, flush=True)
        print(
            "\n÷ TL: the system's per-turn time divided by Threadloom's on the same store"
            " (threadloom-pg\nfor the PostgreSQL rows; above 1: slower than"
            " Threadloom).\nCPU ms/turn: the process's CPU time (all its threads) over the"
            " timed turns, per turn; less\nsensitive than wall time to other load on the"
            " machine.\nrows/msg, KiB/msg: rows and bytes the timed turns added to the"
            " database per stored message.\nDB MiB: the database files after the run."
            " peak RSS: VmHWM of the system's process.\nKiB/thread (concurrent): memory per"
            " active thread, (peak RSS − RSS of the process with the\nsystem open and no"
            " thread) / threads.\n"
        )
        print(
            goals_table(
                goals(by_scenario, args.history, scaled or None),
                information(by_scenario, scaled),
            )
        )
        print(
            f"\nwall time {time.perf_counter() - started:.0f} s; load {load()} at the end",
            flush=True,
        )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                extra = [r for count in args.thread_counts[1:] for r in scaled.get(count, [])]
                json.dump([r.__dict__ for r in [*everything, *extra]], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
