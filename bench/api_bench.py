"""HTTP API benchmark: ``GET /api/threads/{id}/messages`` served by ``threadloom serve``,
loaded from another process, this tree against a committed revision in the same run.

Run with ``make bench-api`` (or ``.venv/bin/python bench/api_bench.py --help``). It is a
benchmark, not a test: it prints its tables and exits 0.

Section 1 — reads. For each store (SQLite, and PostgreSQL when its server answers: a fresh
schema of ``--pg-url`` per server) and each side (this work tree, and ``--against``, by
default ``HEAD``, checked out in a temporary ``git worktree``), a ``threadloom serve``
process serves ``examples/`` with a static admin token (authentication on, as deployed);
unless ``--no-first-reads``, each side also has a server that keeps no page
(``THREADLOOM_PAGE_CACHE_BYTES=0``: every request a first read, issue 40). Each server gets
the same thread: ``--turns`` turns of four messages (a user message with
``metadata.client_message_id``, an assistant tool call, its tool result as JSON, the
assistant's answer; a few hundred bytes each, some non-ASCII), created with
``initial_messages``. The load is the default page (the newest 100 messages) at
``--clients`` keep-alive connections from ``wrk`` (a C load generator, ``--wrk-threads``
threads, its own process; ``make bench-api`` installs Debian's package when root and it is
missing); without wrk, the Python generator of ``bench/_load.py`` in a process of its own,
and the output says so.

Every server is warmed for a second, then measured ``--rounds`` times for ``--seconds``
each, the order of the servers rotating per round, so load from elsewhere on the machine
falls on both sides alike. The table shows the median round's requests/s and latency
percentiles, every round's requests/s, and the server process's CPU time (all its threads,
``/proc/PID/task/*/schedstat``) per request — on PostgreSQL also the database server's
processes serving it (found by ``application_name``). Below it: the ratios of this tree to
the other side, how busy the machine was with other work during the windows (the CPU time
of ``/proc/stat`` less the servers', the generator's and PostgreSQL's), the goal of issue
23 item 9 — at least 2,000 requests/s at 16 clients with p99 ≤ 50 ms on one node — judged
on this tree's row (pages kept), and the goals of issue 40 judged on its first reads (no
page kept): server CPU ≤ 1 ms a read, and at 16 clients on one node ≥ 1,000 requests/s on
SQLite, ≥ 700 on PostgreSQL. Both sides' answers are compared byte for byte (ids and timestamps
masked): the wire format must not change.

Section 2 — persist → WebSocket frame latency, on this tree's SQLite server: a client holds
the thread's stream socket open and sends ``--sends`` messages one after the other (each
after the previous run settled). For each, the latency is from the queue entry's
``created_at`` (stamped in the transaction that commits it, on this machine's clock) to the
arrival of its ``message_data`` frame; the send's round trip (POST → 202) is printed beside
it. Goal: frame latency p50 ≤ 5 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from _api_thread import HEADERS, TOKEN, frame_section, masked, turn_items
from _load import Load, python_load, wrk_load
from _report import cpu_model, filesystem_of, progress, table, verdict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "peers"))
import _pg  # noqa: E402  (bench/peers: PostgreSQL schemas and their server CPU)

GOAL_RPS = 2000.0
COLD_SIDE = "this tree, first reads"
GOAL_P99_MS = 50.0
COLD_GOAL_CPU_MS = 1.0
"""Issue 40: server CPU per first read (a page not kept), all the server's threads."""
COLD_GOAL_RPS = {"sqlite": 1000.0, "postgresql": 700.0}
"""Issue 40: first reads per second at ``GOAL_CLIENTS`` clients on one node, by store."""
GOAL_CLIENTS = 16
_TICK = os.sysconf("SC_CLK_TCK")


# -- servers ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    """One ``threadloom serve`` process of one side on one store, with its thread."""

    side: str
    store: str  # "sqlite" or "postgresql"
    tree: Path
    url: str  # the store URL
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    base: str = ""
    thread: str = ""
    body: bytes = b""
    pg: _pg.PgProbe | None = None
    rounds: list[Measure] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    """Settings of this server alone (the side that keeps no page)."""

    @property
    def label(self) -> str:
        return f"{self.store} {self.side}"

    def start(self) -> None:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["THREADLOOM_ADMIN_TOKEN"] = TOKEN
        env.update(self.env)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, (str(self.tree / "src"), env.get("PYTHONPATH")))
        )
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "threadloom.cli",
                    "serve",
                    str(self.tree / "examples"),
                    "--port",
                    str(port),
                    "--store",
                    self.url,
                    "--log-level",
                    "warning",
                ],
                env=env,
                cwd=self.tree,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.base = f"http://127.0.0.1:{port}"
        if self.store == "postgresql":
            self.pg = _pg.PgProbe(self.url)

    def wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"{self.label}: the server exited with {self.proc.returncode}:\n"
                    + self.log.read_text(errors="replace")[-3000:]
                )
            try:
                if httpx.get(f"{self.base}/api/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"{self.label}: the server did not become ready")

    def cpu_s(self) -> float:
        """CPU time of the server process, all its threads (ns-precise where Linux has
        ``schedstat``, else ``/proc/PID/stat``'s ticks)."""
        assert self.proc is not None
        pid = self.proc.pid
        total = 0
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
                    total += int(stat.read().split()[0])
            return total / 1e9
        except (OSError, ValueError, IndexError):
            pass
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def pg_cpu(self) -> dict[int, float] | None:
        return self.pg.server_cpu() if self.pg is not None else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- load ---------------------------------------------------------------------------------


@dataclass
class Measure:
    load: Load
    server_cpu_s: float
    pg_cpu_s: float | None
    generator_cpu_s: float
    machine_busy_s: float
    wall_s: float

    @property
    def rate(self) -> float:
        return self.load.requests / self.load.seconds


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (``/proc/stat``)."""
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK


def measure(server: Server, args: argparse.Namespace, use_wrk: bool, seconds: float) -> Measure:
    url = f"{server.base}/api/threads/{server.thread}/messages"
    cpu0, pg0, busy0 = server.cpu_s(), server.pg_cpu(), machine_busy_s()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.monotonic()
    if use_wrk:
        load = wrk_load(url, TOKEN, args.clients, args.wrk_threads, seconds)
    else:
        load = python_load(url, TOKEN, args.clients, seconds)
    wall = time.monotonic() - wall0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu1, pg1, busy1 = server.cpu_s(), server.pg_cpu(), machine_busy_s()
    generator = (children1.ru_utime + children1.ru_stime) - (
        children0.ru_utime + children0.ru_stime
    )
    return Measure(
        load=load,
        server_cpu_s=cpu1 - cpu0,
        pg_cpu_s=_pg.cpu_between(pg0, pg1),
        generator_cpu_s=generator,
        machine_busy_s=busy1 - busy0,
        wall_s=wall,
    )


# -- the run ------------------------------------------------------------------------------


def git(*command: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *command], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def median_round(rounds: list[Measure]) -> Measure:
    """The round of the median requests/s (the lower middle one of an even count)."""
    ordered = sorted(rounds, key=lambda m: m.rate)
    return ordered[(len(ordered) - 1) // 2]


def fmt_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.3f}"


def results(servers: list[Server], args: argparse.Namespace, here: str, there: str) -> str:
    lines: list[str] = []
    rows = []
    for s in servers:
        mid = median_round(s.rounds)
        requests = sum(m.load.served for m in s.rounds)
        cpu = sum(m.server_cpu_s for m in s.rounds) / requests * 1e3
        pg_parts = [m.pg_cpu_s for m in s.rounds]
        pg = (
            sum(p for p in pg_parts if p is not None) / requests * 1e3
            if s.store == "postgresql" and all(p is not None for p in pg_parts)
            else None
        )
        rows.append(
            [
                s.store,
                s.side,
                f"{mid.rate:,.0f}",
                " / ".join(f"{m.rate:,.0f}" for m in s.rounds),
                f"{mid.load.p50_ms:,.2f}",
                f"{mid.load.p99_ms:,.2f}",
                fmt_ms(cpu),
                fmt_ms(pg),
            ]
        )
    lines.append(
        table(
            [
                "store",
                "side",
                "req/s",
                "rounds (req/s)",
                "p50 (ms)",
                "p99 (ms)",
                "server CPU ms/req",
                "PostgreSQL CPU ms/req",
            ],
            rows,
        )
    )
    by = {(s.store, s.side): s for s in servers}
    stores = list(dict.fromkeys(s.store for s in servers))
    if there:
        lines.append("")
        for store in stores:
            for side, other in ((here, there), (COLD_SIDE, f"{there}, first reads")):
                a, b = by.get((store, side)), by.get((store, other))
                if a is None or b is None:
                    continue
                ma, mb = median_round(a.rounds), median_round(b.rounds)
                cpu_a = sum(m.server_cpu_s for m in a.rounds) / sum(m.load.served for m in a.rounds)
                cpu_b = sum(m.server_cpu_s for m in b.rounds) / sum(m.load.served for m in b.rounds)
                lines.append(
                    f"{store}: {side} ÷ {other}: req/s {ma.rate / mb.rate:.2f}×, p99"
                    f" {ma.load.p99_ms / mb.load.p99_ms:.2f}×, server CPU per request"
                    f" {cpu_a / cpu_b:.2f}×"
                )
    windows = [m for s in servers for m in s.rounds]
    wall = sum(m.wall_s for m in windows)
    ours = sum(m.server_cpu_s + (m.pg_cpu_s or 0.0) + m.generator_cpu_s for m in windows)
    busy = sum(m.machine_busy_s for m in windows)
    cores = os.cpu_count() or 1
    lines.append(
        f"\nmachine during the measured windows ({wall:,.0f} s): {busy / wall:.2f} of {cores}"
        f" cores busy, {ours / wall:.2f} with this benchmark (servers, generator,"
        f" PostgreSQL) and {max(busy - ours, 0.0) / wall:.2f} with other work"
    )
    goal_rows = []
    cold_rows = []
    for s in servers:
        if s.side not in (here, COLD_SIDE):
            continue
        mid = median_round(s.rounds)
        at_goal_clients = args.clients == GOAL_CLIENTS
        if s.side == COLD_SIDE:
            cpu = sum(m.server_cpu_s for m in s.rounds) / sum(m.load.served for m in s.rounds)
            rate_goal = COLD_GOAL_RPS[s.store]
            cold_rows.append(
                [
                    s.store,
                    f"{mid.rate:,.0f}",
                    f"≥ {rate_goal:,.0f}",
                    verdict(mid.rate >= rate_goal) if at_goal_clients else "(n/a)",
                    fmt_ms(cpu * 1e3),
                    f"≤ {COLD_GOAL_CPU_MS:g}",
                    verdict(cpu * 1e3 <= COLD_GOAL_CPU_MS),
                ]
            )
            continue
        ok = mid.rate >= GOAL_RPS and mid.load.p99_ms <= GOAL_P99_MS
        goal_rows.append(
            [
                s.store,
                s.side,
                f"{mid.rate:,.0f}",
                f"{mid.load.p99_ms:,.2f}",
                verdict(ok) if at_goal_clients else f"(n/a at {args.clients})",
            ]
        )
    lines.append(
        f"\ngoal (a thread's page): ≥ {GOAL_RPS:,.0f} req/s and p99 ≤ {GOAL_P99_MS:g} ms at"
        f" {GOAL_CLIENTS} clients, one node — {here}, the same page read again, kept by the"
        " page cache while the thread is unchanged"
    )
    lines.append(table(["store", "side", "req/s", "p99 (ms)", "result"], goal_rows))
    if cold_rows:
        lines.append(
            f"\ngoal (issue 40, first reads — {COLD_SIDE}: THREADLOOM_PAGE_CACHE_BYTES=0, every"
            f" read builds the page): server CPU ≤ {COLD_GOAL_CPU_MS:g} ms a read, and at"
            f" {GOAL_CLIENTS} clients on one node the req/s of the store"
        )
        lines.append(
            table(
                ["store", "req/s", "goal", "result", "CPU ms/req", "goal", "result"],
                cold_rows,
            )
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of a round")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per server")
    parser.add_argument("--clients", type=int, default=GOAL_CLIENTS, help="connections")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk's threads")
    parser.add_argument("--turns", type=int, default=100, help="turns (4 messages) seeded")
    parser.add_argument(
        "--against",
        default="HEAD",
        help="the revision measured beside this tree, from a git worktree ('none': only this tree)",
    )
    parser.add_argument(
        "--stores",
        nargs="+",
        default=["sqlite", "postgresql"],
        choices=["sqlite", "postgresql"],
    )
    parser.add_argument("--pg-url", default=_pg.DEFAULT_URL, help="PostgreSQL server/database")
    parser.add_argument("--python-load", action="store_true", help="never use wrk")
    parser.add_argument("--sends", type=int, default=200, help="sends for the frame latency")
    parser.add_argument(
        "--no-first-reads",
        dest="first_reads",
        action="store_false",
        help="no server without its page cache (this tree's, and the other side's)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    use_wrk = shutil.which("wrk") is not None and not args.python_load
    here_rev = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=all", "--", "src")
    changed = len(dirty.splitlines())
    here = "this tree"
    cold = COLD_SIDE
    there = ""
    if args.against.lower() != "none":
        there = git("rev-parse", "--short", f"{args.against}^{{commit}}")
    stores = list(args.stores)
    pg_note = ""
    if "postgresql" in stores:
        why = _pg.unreachable(args.pg_url)
        if why is not None:
            stores.remove("postgresql")
            pg_note = f"not run: {why}"
        else:
            pg_note = f"{_pg.describe(args.pg_url)} at {args.pg_url}, a schema per server"
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="threadloom-api-bench-") as tmp:
        work = Path(tmp)
        trees: list[tuple[str, Path, dict[str, str]]] = [(here, ROOT, {})]
        if args.first_reads:  # every request a first read: what a page costs to build
            trees.append((cold, ROOT, {"THREADLOOM_PAGE_CACHE_BYTES": "0"}))
        if there:
            tree = work / "against"
            git("worktree", "add", "--detach", "--quiet", str(tree), f"{there}^{{commit}}")
            trees.append((there, tree, {}))
            if args.first_reads:  # the same first reads on the other side: before / after
                trees.append((f"{there}, first reads", tree, {"THREADLOOM_PAGE_CACHE_BYTES": "0"}))
        servers: list[Server] = []
        schemas: list[str] = []
        try:
            for store in stores:
                for side, tree, side_env in trees:
                    slug = re.sub(r"\W+", "_", side)
                    name = f"{store}-{slug}"
                    if store == "sqlite":
                        url = f"sqlite:///{work / (name + '.db')}"
                    else:
                        schema = _pg.new_schema_name("api", slug)
                        _pg.create_schema(schema, args.pg_url)
                        schemas.append(schema)
                        url = _pg.schema_url(schema, args.pg_url)
                    log = work / f"{name}.log"
                    servers.append(Server(side, store, tree, url, log, env=side_env))
            progress(f"starting {len(servers)} servers …")
            for s in servers:
                s.start()
            items = turn_items(args.turns)
            for s in servers:
                s.wait_ready()
                with httpx.Client(base_url=s.base, headers=HEADERS, timeout=60) as client:
                    response = client.post(
                        "/api/threads", json={"agent_id": "support", "initial_messages": items}
                    )
                    response.raise_for_status()
                    s.thread = response.json()["threadId"]
                    page = client.get(f"/api/threads/{s.thread}/messages")
                    page.raise_for_status()
                    s.body = page.content
            reference = masked(servers[0].body)
            same = all(masked(s.body) == reference for s in servers)
            for s in servers:
                progress(f"warming {s.label} …")
                measure(s, args, use_wrk, 1.0)
            for r in range(args.rounds):
                shift = r % len(servers)
                for s in [*servers[shift:], *servers[:shift]]:
                    progress(f"round {r + 1}/{args.rounds}: {s.label} for {args.seconds:g} s …")
                    s.rounds.append(measure(s, args, use_wrk, args.seconds))
            frames = frame_section(servers[0].base, args.sends) if args.sends else ""
        finally:
            for s in servers:
                s.stop()
            for schema in schemas:
                _pg.drop_schema(schema, args.pg_url)
            if there:
                git("worktree", "remove", "--force", str(work / "against"))
        load_after = os.getloadavg()
        if use_wrk:
            version = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
            wrk = (version.split(" [")[0].strip() or "wrk") + f", {args.wrk_threads} threads"
        else:
            why = "--python-load" if args.python_load else "wrk is missing: apt-get install wrk"
            wrk = (
                f"a Python generator (NOTE: {why}; one Python process saturates its own core"
                " early, so these rates may be the generator's limit, not the server's)"
            )
        print(
            f"GET /api/threads/{{id}}/messages — the default page (newest 100) of a thread of"
            f" {len(items)} messages ({args.turns} turns: user, tool call, tool result,"
            f" answer), {len(servers[0].body):,} bytes an answer"
        )
        print(
            f"machine   {os.cpu_count()} CPUs ({cpu_model()}), {sys.platform}, CPython"
            f" {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}"
        )
        print(f"files     {filesystem_of(tmp)}")
        print(
            "load avg  {:.2f} {:.2f} {:.2f} at the start, {:.2f} {:.2f} {:.2f} at the end".format(
                *load_before, *load_after
            )
        )
        print(
            f"load      {wrk}, {args.clients} connections, its own process; {args.rounds}"
            f" round{'s' if args.rounds != 1 else ''} of {args.seconds:g} s per server after"
            " 1 s of warm-up, order rotating"
        )
        sides = f"{here} (HEAD {here_rev}, {changed} uncommitted paths under src/)"
        if there:
            sides += f" and {there} (a git worktree of {args.against})"
        print(f"sides     {sides}; one `threadloom serve` per side and store, admin token")
        if pg_note:
            print(f"postgres  {pg_note}")
        print(
            "wire      "
            + (
                "every server's answer has the same bytes (ids and timestamps masked)"
                if same
                else "ANSWERS DIFFER between servers (ids and timestamps masked)"
            )
        )
        print()
        print(results(servers, args, here, there))
        if frames:
            print(frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
