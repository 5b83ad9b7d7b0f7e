"""Failover benchmark: the table of ``docs/deploy.md`` "Database failover" (issue 36 item 6).

Run with ``.venv/bin/python bench/failover_bench.py`` (as root or as a user that can run
PostgreSQL's ``initdb``; the shared test server at 127.0.0.1:5432 must be reachable, for
the harness's checks). It is a benchmark, not a test: it prints the table and exits 0.

Each scenario makes a primary and a streaming standby of its own from nothing
(``tests/failover/replication.py``), starts ``--nodes`` real ``threadloom serve`` nodes on
the multi-host URL ``postgresql://…@127.0.0.1:P1,127.0.0.1:P2/…?target_session_attrs=
read-write``, puts ``--senders`` sending and ``--readers`` reading clients and a stream
socket per thread on them (``tests/failover/failover_load.py``), applies the fault after
``--before`` seconds, keeps the load ``--after`` seconds more, and measures: the time to
recover (the fault → the end of the first send answered 2xx that started after it), what
the clients saw meanwhile, the acknowledged sends lost, how long after the load every run
had settled and answered, and the stream close codes. The tests
(``tests/failover/test_c17_failover.py``) run the same scenarios shorter and assert.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from _report import progress

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "failover")]
# The scenario is the tests' own (tests/failover), which mypy does not check: loaded by
# name, so this script runs exactly what the tests assert on.
failover_load: Any = importlib.import_module("failover_load")
failover_scenario: Any = importlib.import_module("failover_scenario")
replication: Any = importlib.import_module("replication")

DEFAULT_TIMINGS = {
    "THREADLOOM_NODE_HEARTBEAT_SECONDS": "5",
    "THREADLOOM_NODE_TTL_SECONDS": "15",
    "THREADLOOM_SWEEP_SECONDS": "5",
}
FAST_RECONNECT = "wal_retrieve_retry_interval = '500ms'\n"

SCENARIOS: list[tuple[str, dict[str, object]]] = [
    ("failover, synchronous", {"fault": "failover", "synchronous": True}),
    (
        "failover, asynchronous (nodes restarted after)",
        {"fault": "failover", "synchronous": False, "restart_nodes": True},
    ),
    (
        "failover, asynchronous, nodes not restarted",
        {"fault": "failover", "synchronous": False},
    ),
    (
        "failover, synchronous, default node timings",
        {"fault": "failover", "synchronous": True, "timings": DEFAULT_TIMINGS},
    ),
    ("restart, synchronous", {"fault": "restart", "synchronous": True}),
    (
        "restart, synchronous, standby retry 500 ms",
        {"fault": "restart", "synchronous": True, "standby_settings": FAST_RECONNECT},
    ),
    ("restart, asynchronous", {"fault": "restart", "synchronous": False}),
]


def main() -> None:
    # A background job may inherit SIGINT ignored: let SIGTERM end it cleanly too (the
    # nodes stopped and the servers removed, by the context managers on the way out).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument("--senders", type=int, default=6)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--before", type=float, default=5.0, help="seconds of load before")
    parser.add_argument("--after", type=float, default=12.0, help="seconds of load after")
    parser.add_argument("--gap", type=float, default=1.0, help="kill → promote, seconds")
    parser.add_argument("--only", help="run the scenarios whose name contains this")
    args = parser.parse_args()
    reason = replication.replication_unavailable()
    if reason is not None:
        print(f"cannot run: {reason}")
        return
    outcomes: list[Any] = []
    restarts: list[bool] = []
    for name, options in SCENARIOS:
        if args.only and args.only not in name:
            continue
        progress(f"{name} …")
        with tempfile.TemporaryDirectory(prefix="tl_failover_bench_") as tmp:
            outcome = failover_scenario.run(
                Path(tmp),
                scenario=name,
                nodes=args.nodes,
                threads=args.threads,
                senders=args.senders,
                readers=args.readers,
                before_s=args.before,
                after_s=args.after,
                gap_s=args.gap,
                **options,
            )
        outcomes.append(outcome)
        restarts.append(bool(options.get("restart_nodes")))
        progress(
            f"  recovered in {outcome.row.recover_s}, lost {outcome.row.lost}, failed runs"
            f" {outcome.endings}, unsettled {outcome.unsettled}, streams behind"
            f" {outcome.stream_behind}"
        )
    print(
        f"{args.nodes} nodes, {args.threads} threads, {args.senders} senders,"
        f" {args.readers} readers; load {args.before:g} s before the fault and"
        f" {args.after:g} s after; promote {args.gap:g} s after the kill"
    )
    print(failover_load.table([o.row for o in outcomes]))
    print()
    for o, restarted in zip(outcomes, restarts, strict=True):
        print(
            f"- {o.row.scenario}: failed runs {o.endings or 'none'}; nodes restarted:"
            f" {'after the load, by the bench' if restarted else 'none'}"
            f" ({'all alive' if o.nodes_alive else 'A NODE EXITED'}, healthy after:"
            f" {o.healthy_after}); threads unsettled: {len(o.unsettled)}; streams behind:"
            f" {len(o.stream_behind)}; standby replay lag at the fault: {o.replay_lag_bytes} B;"
            f" lost sends acknowledged at {[round(t, 3) for t in o.lost_at]} s;"
            f" stored twice: {len(o.doubled)}; threads stuck until the nodes' restart:"
            f" {len(o.stuck_before_restart)}; nodes that logged the new timeline:"
            f" {o.timeline_warned}"
        )


if __name__ == "__main__":
    main()
