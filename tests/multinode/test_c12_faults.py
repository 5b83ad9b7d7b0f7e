"""Spec 12 with real nodes, under faults and load: a node whose database stalls (C12-007),
a wake-up that never comes (C12-016), skewed clocks (C12-022), 200 concurrent sends over
two nodes, and terminate through a node that does not run the thread."""

from __future__ import annotations

import concurrent.futures
import itertools
import time
from pathlib import Path
from typing import Any

import httpx
from cluster_harness import SWEEP_S, TTL_S, start_cluster
from test_c12_relay import Frames

from threadloom.store import open_store


def _health(base: str) -> int | None:
    try:
        return httpx.get(f"{base}/api/health", timeout=3).status_code
    except httpx.TransportError:
        return None


def test_c12_007_a_node_cut_off_from_the_database_fences_itself(tmp_path: Path) -> None:
    """C12-007: n1 reaches PostgreSQL through a proxy; G runs on n1; the proxy is paused
    (every connection of n1 stalls, no error) → n1 aborts its run before the TTL ends
    (self-fencing: its heartbeat is late, though it never failed), its health answers 503
    meanwhile, n2 settles G ``execution_lost``; once the proxy resumes n1 is healthy again
    and writes nothing more to G."""
    with start_cluster(tmp_path, n=2, proxied=("n1",)) as cluster:
        n1, n2 = cluster.nodes
        proxy = cluster.proxies["n1"]
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-7")
        cluster.wait_running(n1, thread, owner="n1")
        before = cluster.messages(n2, thread)
        cancelled = cluster.gate_dir / "gate-7.cancelled"
        cut = time.time()
        proxy.pause()
        try:
            cluster.wait_for(cancelled.exists, timeout=TTL_S + 10, what="n1's run aborted")
            assert cancelled.stat().st_mtime - cut < TTL_S  # before anyone may take over
            assert _health(n1.base) == 503
            settled = cluster.wait_settled(n2, thread, timeout=TTL_S + 2 * SWEEP_S + 10)
            assert settled == ("failed", "execution_lost")
            assert cluster.lease(thread)[0] is None
            assert _health(n1.base) == 503  # still cut off
        finally:
            proxy.resume()
        cluster.wait_for(lambda: _health(n1.base) == 200, timeout=15, what="n1 healthy again")
        cluster.open_gate("gate-7")
        time.sleep(1.0)
        after = cluster.messages(n2, thread)
        assert not any("passed gate-7" in (m["content"] or "") for m in after)
        assert [m["id"] for m in after] == [m["id"] for m in before]
        assert cluster.status(n2, thread) == ("failed", "execution_lost")
        assert "self-fencing" in n1.output()


async def _queue_silently(url: str, thread: str, text: str) -> None:
    """Queue a message the way a node's transaction does, from a store that is no node:
    it notifies nobody (no other node is live to it), so no wake-up is sent."""
    from threadloom.records import QueueEntry, new_id

    store = await open_store(url)
    try:
        assert store.peers is False
        await store.enqueue(
            thread,
            QueueEntry(id=new_id(), role="user", content=text, source="subagent", created_at=0),
            clear_stop=False,
        )
    finally:
        await store.close()


def test_c12_016_queued_work_without_a_wake_is_run_within_a_sweep(tmp_path: Path) -> None:
    """C12-016: a message reaches an idle thread P with no owner and its wake-up
    notification never comes (queued by a store that notifies nobody, as a child's
    delivery to its parent would be) → some node's sweep acquires P and answers it within
    one sweep interval."""
    import asyncio

    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        parent = cluster.create_thread(n1)
        queued = time.monotonic()
        asyncio.run(_queue_silently(cluster.url, parent, "from a child"))
        cluster.wait_for(
            lambda: any(m["content"] == "echo: from a child" for m in cluster.messages(n2, parent)),
            timeout=3 * SWEEP_S + 10,
            what="the queued message answered",
        )
        assert time.monotonic() - queued <= 1.2 * SWEEP_S + 5  # a sweep, plus the turn
        assert cluster.lease(parent)[0] is None


def _clock_of(node: Any) -> float:
    """The node's clock as its messages show it: the ``created_at`` (µs) of the first
    message of a new thread, queued through that node."""
    thread = node.post("/api/threads", {"agent_id": "echo"}).json()["threadId"]
    queued = node.post(f"/api/threads/{thread}/messages", {"content": "clock"})
    assert queued.status_code == 202, queued.text
    page = node.get(f"/api/threads/{thread}/messages", order="asc", limit=1).json()
    return float(page["messages"][0]["created_at"]) / 1e6


def test_c12_022_skewed_clocks_never_reorder_a_thread(tmp_path: Path) -> None:
    """C12-022: n1's clock runs 5 s ahead (its Python process sees a shifted
    ``time.time_ns``); sends alternate between n1 and n2 → the stored ``created_at`` are
    strictly increasing in history order, and the history is in send order."""
    skew = tmp_path / "skew"
    skew.mkdir()
    (skew / "sitecustomize.py").write_text(
        "import time\n"
        "_real = time.time_ns\n"
        "time.time_ns = lambda: _real() + 5_000_000_000\n"
        "time.time = lambda: time.time_ns() / 1e9\n"
    )
    with start_cluster(tmp_path, n=2, node_env={"n1": {"PYTHONPATH": str(skew)}}) as cluster:
        n1, n2 = cluster.nodes
        ahead = _clock_of(n1) - time.time()
        assert 4 < ahead < 7  # n1's process clock is 5 s ahead, n2's is not
        assert abs(_clock_of(n2) - time.time()) < 2
        thread = cluster.create_thread(n1)
        for i in range(10):
            node = n1 if i % 2 == 0 else n2
            cluster.send(node, thread, f"m{i}")
            cluster.wait_settled(node, thread)
        messages = cluster.messages(n2, thread)
        stamps = [m["created_at"] for m in messages]
        assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert users == [f"m{i}" for i in range(10)]


def test_c12_025_200_concurrent_sends_over_two_nodes_are_stored_once_in_one_order(
    tmp_path: Path,
) -> None:
    """C12-025: 200 concurrent sends to one thread, half through each of two nodes →
    each stored exactly once, and both nodes' streams show the messages in the one order
    the history has."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1)
        streams = [Frames(n1, thread), Frames(n2, thread)]
        try:
            for s in streams:
                cluster.wait_for(lambda s=s: s.frames, what="the snapshot")
            texts = [f"c{i:03d}" for i in range(200)]

            def send(i: int) -> int:
                node = cluster.nodes[i % 2]
                response = httpx.post(
                    f"{node.base}/api/threads/{thread}/messages",
                    json={"content": texts[i]},
                    timeout=60,
                )
                return response.status_code

            with concurrent.futures.ThreadPoolExecutor(max_workers=40) as pool:
                codes = list(pool.map(send, range(200)))
            assert codes == [202] * 200

            def answered() -> list[dict[str, Any]] | None:
                messages = cluster.messages(n1, thread)
                replies = [m for m in messages if m["role"] == "assistant"]
                if cluster.status(n1, thread)[0] == "running" or not replies:
                    return None
                last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
                after = messages[last_user:]
                return messages if any(m["role"] == "assistant" for m in after) else None

            messages = cluster.wait_for(answered, timeout=120, what="every send answered")
            users = [m["content"] for m in messages if m["role"] == "user"]
            assert sorted(users) == texts  # each exactly once
            final = cluster.event_seq(thread)
            orders = []
            for s in streams:
                cluster.wait_for(
                    lambda s=s: s.durable_seqs() and s.durable_seqs()[-1] >= final,
                    timeout=30,
                    what="every frame on both nodes",
                )
                seqs = s.durable_seqs()
                assert seqs == sorted(set(seqs))
                first_seen: list[str] = []
                for frame in s.of_type("message_data"):
                    content = frame["data"].get("content")
                    if frame["data"].get("role") == "user" and content not in first_seen:
                        first_seen.append(content)
                orders.append(first_seen)
            assert orders[0] == orders[1]
            assert sorted(orders[0]) == texts
            stored = [m["content"] for m in cluster.messages(n2, thread) if m["role"] == "user"]
            assert stored == users
        finally:
            for s in streams:
                s.close()


def test_terminate_through_another_node_is_carried_out_by_the_owner(tmp_path: Path) -> None:
    """§12.5: G running on n1 → POST terminate through n2 → 200; the run ends (its model
    wait is cancelled), the thread is terminated everywhere and nothing of the old run is
    stored after it."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-term")
        cluster.wait_running(n1, thread, owner="n1")
        terminated = n2.post(f"/api/threads/{thread}/terminate")
        assert terminated.status_code == 200, terminated.text
        cluster.wait_for(
            (cluster.gate_dir / "gate-term.cancelled").exists, timeout=10, what="n1's run ended"
        )
        assert cluster.wait_settled(n2, thread) == ("idle", "terminated")
        assert n1.get(f"/api/threads/{thread}").json()["thread"]["terminated"]
        stored = n2.get(
            f"/api/threads/{thread}/messages", order="asc", includeSilent="true"
        ).json()["messages"]
        note = [m for m in stored if m["role"] == "system"][-1]
        assert note["content"] == "Thread terminated"  # n1's abort procedure wrote it
        cluster.open_gate("gate-term")
        time.sleep(1.0)
        assert not any(
            "passed gate-term" in (m["content"] or "") for m in cluster.messages(n2, thread)
        )
        assert cluster.lease(thread)[0] is None
        sent = n2.post(f"/api/threads/{thread}/messages", {"content": "after"})
        assert sent.status_code == 423, sent.text
