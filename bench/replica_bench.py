"""Read-replica benchmark: what a standby takes off the primary (spec 17 §17.5.4, issue 36
item 6; the table of ``docs/deploy.md`` "Read replicas").

Run with ``.venv/bin/python bench/replica_bench.py`` (as root or a user that can run
PostgreSQL's ``initdb``; the shared test server at 127.0.0.1:5432 must be reachable, for
the harness's checks). It is a benchmark, not a test: it prints the table and exits 0.

It makes a primary and an asynchronous streaming standby of its own
(``tests/failover/replication.py``), and, twice — without and with
``THREADLOOM_DATABASE_READ_URL`` naming the standby — starts one real ``threadloom serve``
node on the primary (the page cache off, so that every page is read), gives it
``--threads`` threads of ``--turns`` echo turns, and puts ``--clients`` clients on it that
read for ``--seconds``: a message page (100 messages) and a thread list (50 threads) in
turn. Measured on each server: the CPU seconds of its processes (the postmaster's children,
from ``/proc``), its transactions, and the rows its statements returned or fetched
(``pg_stat_database``), per 1,000 requests.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from _report import progress

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "failover")]
# The servers and the node are the tests' own harness (tests/failover, tests/multinode).
replication: Any = importlib.import_module("replication")
cluster_harness: Any = importlib.import_module("multinode.cluster_harness")

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(datadir: Path) -> float:
    """CPU seconds (user + system) of the postmaster of ``datadir`` and its children."""
    postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def _stats(url: str) -> tuple[int, int]:
    """Transactions and rows read (returned + fetched) of the server's databases."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sum(xact_commit + xact_rollback), sum(tup_returned + tup_fetched)"
            " FROM pg_stat_database"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _load(node: Any, threads: list[str], seconds: float, clients: int) -> int:
    """Requests answered by ``clients`` readers in ``seconds``: pages and lists in turn."""
    stop = time.monotonic() + seconds
    done = [0] * clients

    def reader(i: int) -> None:
        rng = random.Random(i)
        with httpx.Client(base_url=node.base, timeout=30) as http:
            while time.monotonic() < stop:
                if done[i] % 2:
                    answer = http.get("/api/threads", params={"limit": 50})
                else:
                    thread = rng.choice(threads)
                    answer = http.get(f"/api/threads/{thread}/messages", params={"limit": 100})
                answer.raise_for_status()
                done[i] += 1

    workers = [threading.Thread(target=reader, args=(i,)) for i in range(clients)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done)


def _measure(pair: Any, replica: bool, args: argparse.Namespace) -> dict[str, float]:
    env = {"THREADLOOM_PAGE_CACHE_BYTES": "0"}
    if replica:
        env["THREADLOOM_DATABASE_READ_URL"] = pair.standby_url
    with (
        tempfile.TemporaryDirectory() as tmp,
        cluster_harness.start_cluster(Path(tmp), n=1, pg_url=pair.primary_url, **env) as c,
    ):
        node = c.nodes[0]
        threads = [c.create_thread(node) for _ in range(args.threads)]
        for thread in threads:
            for turn in range(args.turns):
                c.send(node, thread, f"turn {turn}")
            c.wait_for(
                lambda t=thread: node.get(f"/api/threads/{t}").json()["status"]["state"] == "idle",
                what="the thread's turns answered",
                timeout=120,
            )
        _load(node, threads, 2.0, args.clients)  # warm: connections made, caches filled
        time.sleep(1.5)  # pg_stat_database is flushed within a second of a transaction
        cpu = (_cpu_s(pair.primary), _cpu_s(pair.standby))
        primary, standby = _stats(pair.primary_url), _stats(pair.standby_url)
        requests = _load(node, threads, args.seconds, args.clients)
        cpu_after = (_cpu_s(pair.primary), _cpu_s(pair.standby))
        time.sleep(1.5)
        primary_after, standby_after = _stats(pair.primary_url), _stats(pair.standby_url)
    per = 1000 / requests
    return {
        "requests/s": requests / args.seconds,
        "primary CPU s": (cpu_after[0] - cpu[0]) * per,
        "standby CPU s": (cpu_after[1] - cpu[1]) * per,
        "primary transactions": (primary_after[0] - primary[0]) * per,
        "primary rows read": (primary_after[1] - primary[1]) * per,
        "standby rows read": (standby_after[1] - standby[1]) * per,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=30)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    reason = replication.replication_unavailable()
    if reason is not None:
        sys.exit(f"replica_bench: a replicated PostgreSQL cannot be made here: {reason}")
    results: dict[str, dict[str, float]] = {}
    with replication.replicated(synchronous=False) as pair:
        for label, replica in (("primary only", False), ("read replica", True)):
            progress(f"{label}: {args.threads} threads × {args.turns} turns, then reading")
            results[label] = _measure(pair, replica, args)
    rows = list(results["primary only"])
    print(
        f"\nGET pages (100 messages) and thread lists (50) in turn, {args.clients} clients,"
        f" {args.seconds:.0f} s, page cache off; per 1,000 requests except requests/s\n"
    )
    print("| measure | primary only | read replica | replica / primary only |")
    print("|---|---:|---:|---:|")
    for row in rows:
        a, b = results["primary only"][row], results["read replica"][row]
        ratio = f"{b / a:.2f}×" if a else "—"
        print(f"| {row} | {a:,.2f} | {b:,.2f} | {ratio} |")


if __name__ == "__main__":
    main()
