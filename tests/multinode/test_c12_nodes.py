"""Spec 12 with real nodes: several ``threadloom serve`` processes on one PostgreSQL schema
(``cluster_harness``), short timings (heartbeat 0.5 s, TTL 3 s, sweep 1 s)."""

from __future__ import annotations

import concurrent.futures
import signal
import time
from pathlib import Path

import httpx
from cluster_harness import SWEEP_S, TTL_S, Cluster, start_cluster

from threadloom.store.postgres.schema import MIGRATIONS


def _texts(cluster: Cluster, node_index: int, thread: str, role: str) -> list[str]:
    node = cluster.nodes[node_index]
    return [m["content"] for m in cluster.messages(node, thread) if m["role"] == role]


def test_c12_018_nodes_started_at_once_migrate_once(tmp_path: Path) -> None:
    """C12-018: two nodes started at once against an empty schema → the migrations ran
    once (the advisory lock); both are healthy and each names itself."""
    with start_cluster(tmp_path, n=2) as cluster:
        versions = cluster.probe.rows("SELECT version FROM threadloom_migrations ORDER BY 1")
        assert versions == [(version,) for version, _, _ in MIGRATIONS]  # each applied once
        for node in cluster.nodes:
            health = node.get("/api/health")
            assert health.status_code == 200
            assert health.json()["node"] == node.node_id and health.json()["store"] == "postgres"
        assert sorted(r[0] for r in cluster.probe.rows("SELECT node_id FROM nodes")) == [
            "n1",
            "n2",
        ]


def test_every_response_names_its_node(tmp_path: Path) -> None:
    """§12.2 rule 5: ``X-Threadloom-Node`` on every response, errors included."""
    with start_cluster(tmp_path, n=2) as cluster:
        for node in cluster.nodes:
            for response in (
                node.get("/api/health"),
                node.get("/api/threads"),
                node.get("/api/threads/00000000-0000-4000-8000-000000000000"),
            ):
                assert response.headers["x-threadloom-node"] == node.node_id, response


def test_c12_005_twenty_threads_through_one_node_all_complete(tmp_path: Path) -> None:
    """C12-005: 20 threads started at once through n1 → every run completes, and no lease
    is left held."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1 = cluster.nodes[0]
        threads = [cluster.create_thread(n1) for _ in range(20)]
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            list(pool.map(lambda t: cluster.send(n1, t, f"hello {t}"), threads))
        for thread in threads:
            assert cluster.wait_settled(n1, thread) == ("idle", "stop_on_response")
            assert _texts(cluster, 1, thread, "assistant") == [f"echo: hello {thread}"]
            node, token = cluster.lease(thread)
            assert node is None and token >= 1


def test_c12_004_sends_round_robin_are_stored_once_in_order(tmp_path: Path) -> None:
    """C12-004: 50 sends to one thread, round-robin over n1–n3, each after the previous
    202 → every message stored exactly once, in send order, and answered; the lease is
    released at the end, its token raised once per acquisition (at least once, at most
    once a send)."""
    with start_cluster(tmp_path, n=3) as cluster:
        thread = cluster.create_thread(cluster.nodes[0])
        for i in range(50):
            cluster.send(cluster.nodes[i % 3], thread, f"m{i}")
        cluster.wait_for(
            lambda: (
                len(_texts(cluster, 2, thread, "user")) == 50
                and cluster.status(cluster.nodes[2], thread)[0] != "running"
            ),
            what="50 messages stored and the thread idle",
        )
        assert _texts(cluster, 1, thread, "user") == [f"m{i}" for i in range(50)]
        answers = _texts(cluster, 0, thread, "assistant")
        assert answers and answers[-1] == "echo: m49"
        node, token = cluster.lease(thread)
        assert node is None and 1 <= token <= 50


def test_c12_001_c12_002_a_killed_owner_is_settled_lost_within_the_bound(
    tmp_path: Path,
) -> None:
    """C12-001, C12-002: G of ``gate`` running on n1, SIGKILL n1 → within TTL + sweep + 3 s
    a surviving node shows ``failed``/``execution_lost``; the pending assistant message is
    ``failed`` and the incomplete log row has ``error_type`` ``execution_lost``."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2 = cluster.nodes[0], cluster.nodes[1]
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-lost")
        cluster.wait_running(n1, thread, owner="n1")
        cluster.wait_for(
            lambda: any(m["status"] == "pending" for m in cluster.messages(n2, thread)),
            what="the pending model message",
        )
        n1.kill()
        killed = time.monotonic()
        assert cluster.wait_settled(n2, thread, timeout=TTL_S + SWEEP_S + 3 + 5) == (
            "failed",
            "execution_lost",
        )
        assert time.monotonic() - killed <= TTL_S + SWEEP_S + 3 + 1  # the bound, and a poll
        assistant = [m for m in cluster.messages(n2, thread) if m["role"] == "assistant"]
        assert [m["status"] for m in assistant] == ["failed"]
        logs = n2.get(f"/api/threads/{thread}/logs").json()["logs"]
        assert logs and all(log["is_complete"] for log in logs)
        assert any(log.get("error_type") == "execution_lost" for log in logs)


def test_c12_003_messages_queued_on_other_nodes_are_delivered_after_the_owner_dies(
    tmp_path: Path,
) -> None:
    """C12-003: G running on n1, two messages sent through n2 and n3 (queued: n1 holds the
    lease) → SIGKILL n1 → a surviving node settles the run and starts a turn that delivers
    both in send order; a reply is stored; the thread ends idle."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-held")
        cluster.wait_running(n1, thread, owner="n1")
        cluster.send(n2, thread, "second")
        cluster.send(n3, thread, "third")
        assert cluster.lease(thread)[0] == "n1"  # the sends queued; n1 still runs it
        n1.kill()
        cluster.wait_for(
            lambda: cluster.status(n2, thread) == ("idle", "stop_on_response"),
            timeout=TTL_S + SWEEP_S + 3 + 10,
            what="the queued messages answered",
        )
        users = _texts(cluster, 1, thread, "user")
        assert users == ["gate-held", "second", "third"]
        assistant = [m for m in cluster.messages(n2, thread) if m["role"] == "assistant"]
        assert assistant[0]["status"] == "failed"  # the lost run's pending message
        assert assistant[-1]["content"] == "echo: third" and assistant[-1]["status"] == "completed"
        assert cluster.lease(thread)[0] is None


def test_c12_006_a_paused_node_is_fenced_out_when_it_wakes(tmp_path: Path) -> None:
    """C12-006: G running on n1 → SIGSTOP n1 past its TTL → a surviving node settles G
    (``execution_lost``) and runs the queued message; SIGCONT n1 and open the gate → n1's
    old run writes nothing more to G (its next write is fenced)."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2, _ = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-paused")
        cluster.wait_running(n1, thread, owner="n1")
        _, token = cluster.lease(thread)
        cluster.send(n2, thread, "after")
        n1.signal(signal.SIGSTOP)
        try:
            cluster.wait_for(
                lambda: cluster.status(n2, thread) == ("idle", "stop_on_response"),
                timeout=TTL_S + 2 * SWEEP_S + 10,
                what="the run settled and the queued message answered by another node",
            )
        finally:
            n1.signal(signal.SIGCONT)
        taken_over = cluster.lease(thread)[1]
        assert taken_over > token
        before = cluster.messages(n2, thread)
        assert [m["content"] for m in before if m["role"] == "user"] == ["gate-paused", "after"]
        cluster.open_gate("gate-paused")
        time.sleep(1.5)  # n1's model answers now; its write must be refused
        after = cluster.messages(n2, thread)
        assert [(m["id"], m["status"], m["content"]) for m in after] == [
            (m["id"], m["status"], m["content"]) for m in before
        ]
        assert not any("passed gate-paused" in (m["content"] or "") for m in after)
        assert cluster.status(n2, thread) == ("idle", "stop_on_response")
        assert n1.alive and n1.get("/api/health").status_code == 200  # live again


def test_c12_017_a_draining_node_settles_its_run_and_others_deliver_its_queue(
    tmp_path: Path,
) -> None:
    """C12-017: SIGTERM n1 while G runs on it (THREADLOOM_DRAIN_SECONDS=2) → n1's health
    answers 503 at once; G is settled ``failed``/``aborted`` by n1; the message queued
    behind G is delivered by another node."""
    with start_cluster(tmp_path, n=3, THREADLOOM_DRAIN_SECONDS="2") as cluster:
        n1, n2, _ = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-drain")
        cluster.wait_running(n1, thread, owner="n1")
        cluster.send(n2, thread, "queued")
        n1.signal(signal.SIGTERM)
        health = cluster.wait_for(
            lambda: _health_status(n1) in (503, None) and _health_status(n1),
            timeout=5,
            what="n1's health 503",
        )
        assert health == 503
        n1.proc.wait(timeout=15)
        cluster.wait_for(
            lambda: cluster.status(n2, thread) == ("idle", "stop_on_response"),
            timeout=SWEEP_S + 10,
            what="the queued message delivered by another node",
        )
        users = _texts(cluster, 1, thread, "user")
        assert users == ["gate-drain", "queued"]
        # n1 settled its run as aborted (spec 04 §4.20.5), not lost: its log row says so
        logs = n2.get(f"/api/threads/{thread}/logs").json()["logs"]
        assert logs[0].get("error_type") == "interrupted_incomplete"
        assert not any(log.get("error_type") == "execution_lost" for log in logs)
        assistant = [m for m in cluster.messages(n2, thread) if m["role"] == "assistant"]
        assert assistant[-1]["content"] == "echo: queued"


def _health_status(node: object) -> int | None:
    base = getattr(node, "base")  # noqa: B009 - the Node of the harness
    try:
        return httpx.get(f"{base}/api/health", timeout=1).status_code
    except httpx.TransportError:
        return None


def test_a_node_restarted_with_its_id_settles_the_runs_it_left(tmp_path: Path) -> None:
    """§12.6.5 with a reused node id: n1 dies running G and a new process starts as n1
    before the TTL ends (its heartbeat makes the old lease look live to the others) → the
    new process settles G ``failed``/``execution_lost`` before serving."""
    from cluster_harness import spawn_node, wait_healthy

    with start_cluster(tmp_path, n=2, THREADLOOM_SWEEP_SECONDS="20") as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-reused")
        cluster.wait_running(n1, thread, owner="n1")
        n1.kill()
        again = spawn_node(cluster, "n1", tmp_path / "n1-again.log")
        cluster.nodes[0] = again  # stopped with the others
        wait_healthy(again)
        assert cluster.status(n2, thread) == ("failed", "execution_lost")
        assert cluster.lease(thread)[0] is None
