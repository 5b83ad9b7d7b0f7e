"""Fault trials of several real nodes, counted, for this tree and another revision.

    .venv/bin/python tests/multinode/fault_trials.py --kills 10 --restarts 3 --against REV

Not a test (pytest does not collect it): the tests hold each behaviour once
(test_c12_takeover_streams.py, test_c12_database_restart.py); this repeats the faults and
counts what a user would have lost, as the probes of issue 31 did, so a change can be shown
before and after:

- **kill**: three nodes; a thread runs on n1 (its model waits); a WebSocket and an SSE
  subscriber on n2 and on n3; SIGKILL n1. Counted: the streams that got the settlement
  within 10 s of it being visible over HTTP, the ``resync`` frames they got, and the times a
  frame's ``seq`` was below an earlier one's on a stream.
- **restart**: two nodes whose timings do not fence them during the outage (as the defaults
  do not); 12 threads of ``slow`` (a tool call and an answer a turn) sent to by 6 clients
  through both nodes; the database server (a private cluster, tests/pg_cluster.py) restarts,
  down 2.5 s. Counted: the answers 500 and 503 during the load, and 30 s after the restart
  the threads still ``running`` and the acknowledged sends not answered.

``--against REV`` runs the same trials with the nodes importing REV's ``src`` (a temporary
git worktree on ``PYTHONPATH``); the test project is this tree's.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from cluster_harness import Cluster, start_cluster  # noqa: E402
from test_c12_database_restart import TIMINGS, Load  # noqa: E402
from test_c12_relay import Frames  # noqa: E402
from test_c12_takeover_streams import SseFrames, _settled  # noqa: E402

from pg_cluster import cluster_unavailable, private_cluster  # noqa: E402


def _seq_drops(stream: Frames | SseFrames) -> int:
    seqs = [int(f["seq"]) for f in list(stream.frames)[1:] if f.get("seq") is not None]
    return sum(1 for a, b in itertools.pairwise(seqs) if b < a)


def kill_trial(tmp: Path) -> dict[str, int]:
    with start_cluster(tmp, n=3) as cluster:
        n1, n2, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-kill")
        cluster.wait_running(n1, thread, owner="n1")
        streams: list[Frames | SseFrames] = []
        for node in (n2, n3):
            streams += [Frames(node, thread), SseFrames(node, thread)]
        try:
            cluster.wait_for(lambda: all(s.of_type("thread_status") for s in streams))
            time.sleep(1.5)  # the watches reached n1
            n1.kill()
            cluster.wait_settled(n2, thread, timeout=40)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(
                _settled(s, "execution_lost") for s in streams
            ):
                time.sleep(0.1)
            return {
                "streams": len(streams),
                "saw the settlement": sum(_settled(s, "execution_lost") for s in streams),
                "resync frames": sum(len(s.of_type("resync")) for s in streams),
                "seq decreases": sum(_seq_drops(s) for s in streams),
            }
        finally:
            for stream in streams:
                stream.close()


def _unanswered(cluster: Cluster, thread: str, acked: list[str]) -> int:
    """Acknowledged sends of ``thread`` not stored, or stored after its last answer."""
    messages = cluster.messages(cluster.nodes[0], thread)
    users = [m["content"] for m in messages if m["role"] == "user"]
    missing = len(set(acked) - set(users))
    last_answer = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    after = sum(1 for m in messages[last_answer + 1 :] if m["role"] == "user")
    return missing + after


def restart_trial(tmp: Path) -> dict[str, int]:
    with private_cluster() as pg, start_cluster(tmp, n=2, pg_url=pg.url, **TIMINGS) as cluster:
        threads = [cluster.create_thread(cluster.nodes[i % 2], "slow") for i in range(12)]
        load = Load(cluster, threads)
        load.start()
        try:
            time.sleep(2)
            pg.restart(down_s=2.5)
            time.sleep(3)
        finally:
            load.stop()
        time.sleep(30)
        running = sum(cluster.status(cluster.nodes[0], t)[0] == "running" for t in threads)
        return {
            "acknowledged sends": sum(len(a) for a in load.acked.values()),
            "500 answers": load.codes[500],
            "503 answers": load.codes[503],
            "threads left running": running,
            "sends never answered": sum(_unanswered(cluster, t, load.acked[t]) for t in threads),
        }


def _run(label: str, kills: int, restarts: int) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {"kill": {}, "restart": {}}
    for kind, trial, count in (("kill", kill_trial, kills), ("restart", restart_trial, restarts)):
        for i in range(count):
            with tempfile.TemporaryDirectory() as tmp:
                found = trial(Path(tmp))
            print(f"{label}: {kind} trial {i + 1}/{count}: {found}", flush=True)
            for key, value in found.items():
                totals[kind][key] = totals[kind].get(key, 0) + value
    return totals


def _table(sides: dict[str, dict[str, dict[str, int]]], kills: int, restarts: int) -> None:
    for kind, count in (("kill", kills), ("restart", restarts)):
        if not count:
            continue
        keys = list(next(iter(sides.values()))[kind])
        width = max(len(k) for k in keys)
        print(f"\n{kind} trials: {count} each, summed")
        print(" " * width + "".join(f"  {label:>14}" for label in sides))
        for key in keys:
            print(key.ljust(width) + "".join(f"  {s[kind][key]:>14}" for s in sides.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--against", default=None, help="a git revision to run as well")
    args = parser.parse_args()
    if args.restarts and (why := cluster_unavailable()):
        sys.exit(f"restart trials need a private PostgreSQL cluster: {why}")
    sides: dict[str, Any] = {"this tree": _run("this tree", args.kills, args.restarts)}
    if args.against:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", f"{args.against}^{{commit}}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        with tempfile.TemporaryDirectory() as work:
            tree = Path(work) / "against"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "--quiet", str(tree), rev],
                cwd=ROOT,
                check=True,
            )
            try:
                os.environ["PYTHONPATH"] = str(tree / "src")  # the nodes import REV's code
                sides[rev] = _run(rev, args.kills, args.restarts)
            finally:
                del os.environ["PYTHONPATH"]
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
    _table(sides, args.kills, args.restarts)


if __name__ == "__main__":
    main()
