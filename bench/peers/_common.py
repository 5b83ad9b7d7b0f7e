"""What every runner of the peer benchmark shares: the workload's parameters, the timing
loop, the database measurements and the JSON result. Standard library only (psycopg, for
the PostgreSQL probe of _pg.py, only when a system runs on PostgreSQL), so it runs in the
project's ``.venv`` (Threadloom, the raw floors) and in ``.venv-bench`` (the peers)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import importlib.metadata
import json
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from _pg import PgProbe, cpu_between, describe, server_facts

SCENARIOS = ("empty", "history", "concurrent")
MESSAGES_PER_TURN = 4  # user, assistant (tool call), tool result, assistant (text)
SYSTEM_PROMPT = "You are a support agent."
TOOL_ARGS = {"v": 1}
FINAL_TEXT = "done"
# every fake model reports this usage, as a provider's API does, so that no client-side
# token estimate walks the history (pydantic-ai's FunctionModel and Threadloom's scripted
# model both estimate when a reply carries none)
USAGE = {"input_tokens": 10, "output_tokens": 5}
WARMUP_TURNS = 10
HISTORY_WARMUP_TURNS = 3


def question(i: int) -> str:
    """The user message of turn ``i`` (the same text as bench/_workload.py)."""
    return f"Turn {i}: could you look up order {1000 + i} and tell me when it ships?"


def tool_result(v: int) -> str:
    """What the ``echo`` tool returns."""
    return f"echo {v}"


@dataclass
class Params:
    """One scenario's parameters (the command line of ``run_one.py``)."""

    scenario: str
    turns: int = 300
    history: int = 2000
    history_turns: int = 50
    threads: int = 1000
    turns_per_thread: int = 3
    latency: float = 0.1
    timeout: float = 180.0
    workdir: str = ""
    database: str = ""  # PostgreSQL systems: the URL of the run's own schema (_pg.schema_url)


@dataclass
class Result:
    """What a runner prints as one JSON line."""

    system: str
    scenario: str
    backend: str = "sqlite"  # or "postgresql"
    ok: bool = True
    unsupported: str | None = None
    error: str | None = None
    latencies_ns: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0  # process CPU time (all threads) over the timed turns
    turns: int = 0
    messages_timed: int = 0  # messages the timed turns stored
    rows_timed: int = 0  # rows (all tables) the timed turns added
    bytes_timed: int = 0  # database bytes the timed turns added
    rows_total: int = 0
    db_bytes: int = 0  # files on disk after close (db + wal + shm); PostgreSQL: the schema
    server_cpu_s: float | None = None  # PostgreSQL: its server processes' CPU, timed turns
    peak_rss_mib: float = 0.0
    base_rss_mib: float = 0.0
    """RSS (VmRSS) once the system is open, before the scenario's threads exist: what
    memory per active thread is measured from (``_tables.memory_per_thread_kib``)."""
    threads: int = 0  # concurrent: the scenario's thread count
    persistence: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def versions(*packages: str) -> dict[str, str]:
    """Python, the SQLite library and the installed version of each package."""
    out = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM on Linux, else ru_maxrss)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10
    except (OSError, ValueError, IndexError):
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def rss_mib() -> float:
    """This process's resident set size now (VmRSS on Linux; 0 where unknown)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**10
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


INDEX_BACKLOG = "messages_fts_backlog"
"""Threadloom's search-index backlog table (``store/sqlite/search_index.BACKLOG``; this
module is also loaded where threadloom is not installed)."""


class DbProbe:
    """Reads a database from the outside, on a connection of its own: how many rows its
    tables hold and how large it is (page_count × page_size, WAL content included)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def measure(self) -> tuple[int, int]:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            # the tables that hold rows: not a virtual table nor its shadow tables (a
            # full-text index's storage, as an index's pages: counted in the bytes, not as
            # rows — PRAGMA table_list tells them apart, SQLite 3.37 and later), nor
            # Threadloom's index backlog (the messages of the last second or so, waiting to
            # be indexed: the index's state, not records, and emptied by its next pass)
            names = [
                r[1]
                for r in conn.execute("PRAGMA table_list")
                if r[0] == "main"
                and r[2] == "table"
                and not r[1].startswith("sqlite_")
                and r[1] != INDEX_BACKLOG
            ]
            rows = 0
            for name in names:
                rows += int(conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            return rows, pages * size
        finally:
            conn.close()

    def pragmas(self) -> str:
        """journal_mode as stored in the file (WAL persists; synchronous is per connection)."""
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        try:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            conn.close()


def files_bytes(workdir: str) -> int:
    """Bytes of every file in ``workdir`` (the database and its -wal / -shm)."""
    return sum(
        os.path.getsize(p) for p in glob.glob(os.path.join(workdir, "*")) if os.path.isfile(p)
    )


async def timed(
    turn: Callable[[int], Awaitable[None]], start: int, count: int, out: list[int]
) -> None:
    """``count`` sequential turns, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        t0 = clock()
        await turn(i)
        out.append(clock() - t0)


async def gather_threads(
    turn: Callable[[int, int], Awaitable[None]], params: Params, out: list[int]
) -> float:
    """``threads`` threads × ``turns_per_thread`` turns, all threads at once (asyncio.gather,
    each thread's turns sequential); ``turn(thread_index, i)``. Returns the wall time;
    raises ``TimeoutError`` past ``params.timeout``."""
    clock = time.perf_counter_ns

    async def worker(t: int) -> None:
        for i in range(params.turns_per_thread):
            t0 = clock()
            await turn(t, i)
            out.append(clock() - t0)

    started = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(*(worker(t) for t in range(params.threads))), params.timeout
    )
    return time.perf_counter() - started


def parse(argv: Sequence[str] | None = None) -> tuple[str, Params]:
    """``SYSTEM SCENARIO [options]``."""
    p = argparse.ArgumentParser(description="Run one system on one scenario; print JSON.")
    p.add_argument("system")
    p.add_argument("scenario", choices=SCENARIOS)
    p.add_argument("--turns", type=int, default=300)
    p.add_argument("--history", type=int, default=2000)
    p.add_argument("--history-turns", type=int, default=50)
    p.add_argument("--threads", type=int, default=1000)
    p.add_argument("--turns-per-thread", type=int, default=3)
    p.add_argument("--latency", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--workdir", required=True, help="an empty directory for the database")
    p.add_argument("--database", default="", help="PostgreSQL systems: the schema's URL")
    a = p.parse_args(argv)
    return a.system, Params(
        scenario=a.scenario,
        turns=a.turns,
        history=a.history,
        history_turns=a.history_turns,
        threads=a.threads,
        turns_per_thread=a.turns_per_thread,
        latency=a.latency,
        timeout=a.timeout,
        workdir=a.workdir,
        database=a.database,
    )


def emit(result: Result) -> None:
    """The result as the last line of stdout."""
    result.peak_rss_mib = peak_rss_mib()
    print(json.dumps(asdict(result)), flush=True)


def check(total: int, expected: int, what: str) -> None:
    """Fail loudly when the turns did not store what the workload says they store."""
    if total != expected:
        raise RuntimeError(f"{what}: expected {expected:,} stored messages, found {total:,}")


def result_from(data: dict[str, Any]) -> Result:
    """A :class:`Result` back from its JSON."""
    return Result(**data)


class System:
    """One system under test. A runner module subclasses it; :func:`run` drives it through
    a scenario the same way for every system."""

    name = "?"
    backend = "sqlite"
    """``"postgresql"``: :meth:`open` gets the URL of the run's schema instead of a file path."""
    packages: tuple[str, ...] = ()
    persistence = ""
    concurrent_unsupported: str | None = None  # why the concurrent scenario cannot run
    concurrent_only: str | None = None  # why only the concurrent scenario runs

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        raise NotImplementedError

    async def new_thread(self) -> Any:
        raise NotImplementedError

    async def turn(self, thread: Any, i: int) -> None:
        raise NotImplementedError

    async def seed(self, thread: Any, messages: int) -> None:
        """Store ``messages`` messages of whole turns (the rows real turns store), untimed."""
        raise NotImplementedError

    async def count(self, thread: Any) -> int:
        """The messages the thread holds, read back through the system's own API."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    def started(self) -> str | None:
        """Called once the system is open and the scenario's threads exist, before any
        timed turn: where a server would have finished starting. Nothing by default; a
        returned text goes into the result's notes."""
        return None


class Scenario:
    """One system through one scenario on a fresh database in ``params.workdir`` (on
    PostgreSQL: in the fresh schema of ``params.database``, made by the driver), in three
    stages so that a driver can interleave the timed turns of several systems, each in its
    own process: :meth:`prepare` (open, warm up or seed, then :meth:`System.started`;
    untimed), :meth:`block` (timed turns, any number of times), :meth:`finish` (measure,
    close)."""

    def __init__(self, system: System, params: Params) -> None:
        self.system = system
        self.params = params
        self.result = Result(system=system.name, scenario=params.scenario, backend=system.backend)
        self.result.versions = versions(*system.packages)
        self.probe: DbProbe | PgProbe
        if system.backend == "postgresql":
            if not params.database:
                raise RuntimeError(f"{system.name} runs on PostgreSQL: give it --database URL")
            self.path = params.database
            self.probe = PgProbe(params.database)
        else:
            self.path = os.path.join(params.workdir, f"{system.name}.db")
            self.probe = DbProbe(self.path)
        self.cpu0: dict[int, float] | None = None
        self.thread: Any = None
        self.first = 0  # the index of the first timed turn
        self.before = 0  # messages the timed thread held before the timed turns
        self.rows0 = self.bytes0 = 0
        self.opened = False

    @property
    def total(self) -> int:
        """Timed turns in this scenario."""
        p = self.params
        return {"empty": p.turns, "history": p.history_turns}.get(
            p.scenario, p.threads * p.turns_per_thread
        )

    async def prepare(self) -> bool:
        """Open and get to the first timed turn; ``False`` when the scenario cannot run."""
        system, params = self.system, self.params
        if params.scenario == "concurrent" and system.concurrent_unsupported:
            self.result.ok = False
            self.result.unsupported = system.concurrent_unsupported
            return False
        if params.scenario != "concurrent" and system.concurrent_only:
            self.result.ok = False
            self.result.unsupported = system.concurrent_only
            return False
        concurrent = params.scenario == "concurrent"
        await system.open(self.path, params.latency if concurrent else 0.0, concurrent)
        self.opened = True
        gc.collect()
        self.result.base_rss_mib = rss_mib()  # open, no thread yet: the per-thread base
        if concurrent:
            self.result.threads = params.threads
        if params.scenario == "empty":
            warm = await system.new_thread()
            await timed(lambda i: system.turn(warm, i), 0, WARMUP_TURNS, [])
            self.thread = await system.new_thread()
        elif params.scenario == "history":
            self.thread = await system.new_thread()
            await system.seed(self.thread, params.history)
            check(await system.count(self.thread), params.history, f"{system.name} seeding")
            await timed(lambda i: system.turn(self.thread, i), 0, HISTORY_WARMUP_TURNS, [])
            self.first = HISTORY_WARMUP_TURNS
            self.before = await system.count(self.thread)
        else:
            self.thread = [await system.new_thread() for _ in range(params.threads)]
        if note := system.started():
            self.result.notes.append(note)
        self.rows0, self.bytes0 = self.probe.measure()
        if isinstance(self.probe, PgProbe):
            self.cpu0 = self.probe.server_cpu()
        return True

    async def block(self, start: int, count: int) -> list[int]:
        """Timed turns ``start`` … ``start + count - 1`` of this scenario (all of them at once
        in the concurrent scenario); their latencies, also kept in the result."""
        r = self.result
        lat: list[int] = []
        gc.collect()  # before the clocks: a block starts with no garbage of the last one
        started, cpu = time.perf_counter(), time.process_time()
        if self.params.scenario == "concurrent":
            threads = self.thread
            try:
                await gather_threads(lambda t, i: self.system.turn(threads[t], i), self.params, lat)
            except TimeoutError:
                r.ok = False
                r.error = (
                    f"did not finish in {self.params.timeout:g} s ({len(lat):,} of"
                    f" {self.total:,} turns done)"
                )
        else:
            await timed(lambda i: self.system.turn(self.thread, i), self.first + start, count, lat)
        r.wall_s += time.perf_counter() - started
        r.cpu_s += time.process_time() - cpu
        r.latencies_ns += lat
        r.turns += len(lat)
        return lat

    async def finish(self) -> Result:
        """Measure the database, read the stored messages back, close."""
        system, params, r = self.system, self.params, self.result
        try:
            if not self.opened or not r.ok:
                return r
            if isinstance(self.probe, PgProbe):
                r.server_cpu_s = cpu_between(self.cpu0, self.probe.server_cpu())
            rows1, bytes1 = self.probe.measure()
            if params.scenario == "concurrent":
                sample = self.thread[:: max(1, len(self.thread) // 20)]
                stored = 0
                for thread in sample:
                    stored += await system.count(thread)
                check(
                    stored, MESSAGES_PER_TURN * params.turns_per_thread * len(sample), system.name
                )
                r.messages_timed = MESSAGES_PER_TURN * r.turns
                r.notes.append(f"{len(sample)} threads read back, all complete")
            else:
                r.messages_timed = await system.count(self.thread) - self.before
                check(r.messages_timed, MESSAGES_PER_TURN * r.turns, system.name)
                if params.scenario == "history":
                    r.notes.append(
                        f"history {self.before:,} → {self.before + r.messages_timed:,} messages"
                    )
            r.rows_timed, r.bytes_timed = rows1 - self.rows0, bytes1 - self.bytes0
        finally:
            if self.opened:
                await system.close()
                self.opened = False
        if isinstance(self.probe, PgProbe):
            r.rows_total, r.db_bytes = self.probe.measure()
            r.persistence = f"{system.persistence}; {describe(self.probe.url)}"
            r.versions["postgresql"] = server_facts(self.probe.url).get("server_version", "?")
            return r
        r.rows_total, _ = self.probe.measure()
        r.db_bytes = files_bytes(params.workdir)
        r.persistence = f"{system.persistence}; journal_mode={self.probe.pragmas()}"
        return r


async def run(system: System, params: Params) -> Result:
    """The whole scenario in one go: prepare, every timed turn, finish."""
    scenario = Scenario(system, params)
    if await scenario.prepare():
        await scenario.block(0, scenario.total)
    return await scenario.finish()


async def serve(system: System, params: Params) -> Result:
    """The scenario driven over stdin: prints ``{"ready": true}`` once prepared, then answers
    each ``block START COUNT`` line with the block's latencies, and ``finish`` with the
    result (which :func:`main` prints)."""
    scenario = Scenario(system, params)
    ready = await scenario.prepare()
    print(json.dumps({"ready": ready}), flush=True)
    loop = asyncio.get_running_loop()
    while ready:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not line or line[0] == "finish":
            break
        lat = await scenario.block(int(line[1]), int(line[2]))
        print(json.dumps({"latencies_ns": lat}), flush=True)
    return await scenario.finish()


def main(system: System, argv: Sequence[str] | None = None) -> int:
    """The command line of one runner: run the scenario, print the JSON result last."""
    args = list(sys.argv[1:] if argv is None else argv)
    serving = "--serve" in args
    _, params = parse([a for a in args if a != "--serve"])
    try:
        result = asyncio.run(serve(system, params) if serving else run(system, params))
    except Exception as exc:  # a failed system is reported, not a crashed benchmark
        result = Result(
            system=system.name, scenario=params.scenario, backend=system.backend, ok=False
        )
        result.error = f"{type(exc).__name__}: {exc}"
        result.versions = versions(*system.packages)
    emit(result)
    return 0
