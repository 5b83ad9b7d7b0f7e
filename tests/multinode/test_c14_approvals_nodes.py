"""Spec 14 with real nodes: approvals decided through two ``threadloom serve`` processes on
one PostgreSQL schema (``cluster_harness``)."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from cluster_harness import start_cluster


def test_c14_020_two_nodes_decide_at_once_one_wins(tmp_path: Path) -> None:
    """C14-020: a ``payer`` thread parks on n1; approve through n1 and n2 at the same time →
    one 200 and one 409 (``approval_conflict``); ``pay`` ran exactly once; the run ended."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "payer")
        cluster.send(n1, thread, "pay bo")
        assert cluster.wait_settled(n1, thread) == ("idle", "awaiting_approval")
        [pending] = n1.get(f"/api/threads/{thread}").json()["approvals"]
        path = f"/api/threads/{thread}/approvals/{pending['tool_call_id']}"
        body = {"approve": True, "arguments_hash": pending["arguments_hash"]}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda node: node.post(path, body), (n1, n2)))
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
        conflict = next(a for a in answers if a.status_code == 409)
        assert conflict.json()["code"] == "approval_conflict"

        def done() -> bool:
            return cluster.status(n2, thread) == ("idle", "stop_on_response")

        cluster.wait_for(done, what="the run after the approval")
        paid = (cluster.gate_dir / "paid.txt").read_text(encoding="utf-8").splitlines()
        assert paid == ["5 bo"]
