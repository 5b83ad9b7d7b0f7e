"""One failover scenario from start to end (issue 36 item 6): a primary and a standby of the
test's own (``replication.py``), real ``threadloom serve`` nodes on the multi-host URL
(``cluster_harness.start_cluster``), load and stream watchers (``failover_load.py``), the
fault, and what held after it. The tests and ``bench/failover_bench.py`` both run it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from failover_load import (
    Load,
    Row,
    Watch,
    lost_sends,
    wait_settled,
    window,
)
from prometheus_client.parser import text_string_to_metric_families
from replication import Replicated, replicated

from multinode.cluster_harness import Cluster, Node, spawn_node, start_cluster, wait_healthy

FAULTS = ("failover", "restart")
"""``failover``: the primary killed (``pg_ctl stop -m immediate``), the standby promoted
``gap_s`` later; ``restart``: the primary restarted (``pg_ctl restart -m fast``)."""

TIMINGS = {
    "THREADLOOM_NODE_HEARTBEAT_SECONDS": "1",
    "THREADLOOM_NODE_TTL_SECONDS": "12",
    "THREADLOOM_SWEEP_SECONDS": "1",
}
"""A node fences itself after 7 s without a heartbeat: longer than the outage, as with the
default timings (10 s), so the nodes stay live through it and mend their own runs."""
NEW_TIMELINE = "is on a new timeline (1 → 2)"
"""What a node logs when it finds the database failed over."""
STUCK_WAIT_S = 20.0
"""How long the runs have to settle before the nodes are restarted (``restart_nodes``)."""


@dataclass
class Outcome:
    """A scenario's row and what the assertions read."""

    row: Row
    nodes_alive: bool
    healthy_after: bool
    unsettled: list[str]
    lost: dict[str, list[str]]
    stream_behind: list[str] = field(default_factory=list)
    """Watched threads whose stream did not catch up with the stored messages."""
    stream_connects: list[int] = field(default_factory=list)
    replay_lag_bytes: int = 0
    """How far the standby's replay was behind just before the fault."""
    endings: dict[str, int] = field(default_factory=dict)
    """The runs that ended ``failed``, by reason, as the threads' streams told it."""
    timeline_warned: int = 0
    """Nodes that logged the database's new timeline (a failover, spec 17 §17.5.1 rule 7)."""
    failovers_counted: int = 0
    """The nodes' ``threadloom_node_failovers_total`` summed, scraped before any restart."""
    doubled: list[str] = field(default_factory=list)
    """Messages stored more than once (a write run twice): must be none."""
    stuck_before_restart: list[str] = field(default_factory=list)
    """With ``restart_nodes``: the threads not settled and answered before the restart."""
    lost_at: list[float] = field(default_factory=list)
    """For each acknowledged send lost: when its acknowledgement came, in seconds relative
    to the fault (negative: before it)."""


def _failovers_counted(base: str) -> float:
    """A node's ``threadloom_node_failovers_total`` from its ``/metrics`` (spec 17 §17.1)."""
    text = httpx.get(f"{base}/metrics", timeout=10).raise_for_status().text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "threadloom_node_failovers_total"
    )


def _fault(pair: Replicated, fault: str, gap_s: float) -> float:
    """Apply the fault; when the primary was down (``time.monotonic()``), from which the
    time to recover is measured."""
    if fault == "failover":
        pair.kill_primary()
        down_at = time.monotonic()
        time.sleep(gap_s)  # what a failover manager takes to notice and decide
        pair.promote()
    elif fault == "restart":  # pg_ctl restart -m fast, in its two halves
        pair.stop_primary()
        down_at = time.monotonic()
        pair.start_primary()
    else:
        raise ValueError(f"unknown fault {fault!r}")
    return down_at


def _restarted(cluster: Cluster, node: Node, tmp_path: Path, timings: dict[str, str]) -> Node:
    """``node`` killed and a new node started on the same URL (a new node id: its dead
    predecessor's runs are settled by the sweeps once its heartbeat is older than the
    TTL)."""
    node.kill()
    new = spawn_node(cluster, f"{node.node_id}r", tmp_path / f"{node.node_id}r.log", **timings)
    wait_healthy(new)
    return new


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/api/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _caught_up(base: str, thread: str, watch: Watch, timeout_s: float = 15.0) -> bool:
    """Whether the stream told every stored message of the thread with its stored status."""
    deadline = time.monotonic() + timeout_s
    while True:
        page = httpx.get(
            f"{base}/api/threads/{thread}/messages",
            params={"order": "asc", "limit": 1000},
            timeout=10,
        ).json()["messages"]
        stored = {m["id"]: m["status"] for m in page}
        seen = watch.messages()
        if all(seen.get(mid) == status for mid, status in stored.items()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def run(
    tmp_path: Path,
    *,
    scenario: str,
    fault: str,
    synchronous: bool,
    nodes: int = 2,
    threads: int = 8,
    senders: int = 4,
    readers: int = 2,
    before_s: float = 3.0,
    after_s: float = 6.0,
    gap_s: float = 1.0,
    timings: dict[str, str] | None = None,
    standby_settings: str = "",
    restart_nodes: bool = False,
) -> Outcome:
    """Serve, load, fault, and measure; everything made is removed on the way out.
    ``restart_nodes``: once the load ended and the runs had ``stuck_wait_s`` to settle,
    the nodes are killed and started again (new node ids), the recipe after a failover to
    an asynchronous standby (spec 17 §17.5.3 rule 3); what settles and what the streams
    tell is then measured on the new nodes."""
    with (
        replicated(synchronous=synchronous, standby_settings=standby_settings) as pair,
        start_cluster(tmp_path, n=nodes, pg_url=pair.url, **(timings or TIMINGS)) as cluster,
    ):
        bases = [n.base for n in cluster.nodes]
        ids = [cluster.create_thread(cluster.nodes[i % nodes], "slow") for i in range(threads)]
        watches = [Watch(bases[i % nodes], thread) for i, thread in enumerate(ids)]
        load = Load(bases, ids, senders=senders, readers=readers)
        load.start()
        try:
            time.sleep(before_s)
            lag = pair.replay_lag_bytes()
            fault_at = _fault(pair, fault, gap_s)
            time.sleep(after_s)
        finally:
            load.stop()
        stopped_at = time.monotonic()
        warned = sum(NEW_TIMELINE in n.output() for n in cluster.nodes)
        counted = sum(_failovers_counted(base) for base in bases)
        stuck: list[str] = []
        before_restart: list[Watch] = []
        """The first nodes' sockets, when the nodes were restarted: the runs' endings."""
        if restart_nodes:
            before_restart = watches
            stuck = wait_settled(bases[0], ids, timeout_s=STUCK_WAIT_S)
            for watch in watches:
                watch.close()
            # in place: the harness stops the nodes of this list at the end
            cluster.nodes[:] = [
                _restarted(cluster, node, tmp_path, timings or TIMINGS) for node in cluster.nodes
            ]
            bases = [n.base for n in cluster.nodes]
            watches = [Watch(bases[i % nodes], t, since=0) for i, t in enumerate(ids)]
            stopped_at = time.monotonic()
        unsettled = wait_settled(bases[0], ids)
        for thread in unsettled:  # what the assertion will show
            status = httpx.get(f"{bases[0]}/api/threads/{thread}", timeout=10).json()["status"]
            last = httpx.get(
                f"{bases[0]}/api/threads/{thread}/messages",
                params={"order": "desc", "limit": 3},
                timeout=10,
            ).json()["messages"]
            shown = [(m["role"], m["status"], str(m["content"])[:40]) for m in last]
            print(f"not settled: {thread} {status} lease {cluster.lease(thread)} last {shown}")
            print(*(n.output()[-3000:] for n in cluster.nodes), sep="\n----\n")
        settled_s = None if unsettled else time.monotonic() - stopped_at
        recover, seen, missing = window(load, fault_at)
        acked, gone, doubled = lost_sends(bases[-1], load)
        lost = sum(len(texts) for texts in gone.values())
        behind = [ids[i] for i, w in enumerate(watches) if not _caught_up(bases[0], ids[i], w)]
        for watch in watches:
            watch.close()
        endings: dict[str, int] = {}
        for watch in [*before_restart, *watches]:
            for frame in watch.frames:
                status = frame.get("status") or {}
                if frame.get("type") == "thread_status" and status.get("state") == "failed":
                    key = f"failed/{status.get('reason')}"
                    endings[key] = endings.get(key, 0) + 1
        closes: dict[int, int] = {}
        for watch in watches:
            for code in watch.closes:
                closes[code] = closes.get(code, 0) + 1
        row = Row(
            scenario,
            recover,
            dict(seen),
            missing,
            acked,
            lost,
            settled_s,
            closes,
        )
        return Outcome(
            row,
            nodes_alive=all(n.alive for n in cluster.nodes),
            healthy_after=all(_healthy(b) for b in bases),
            unsettled=unsettled,
            lost=gone,
            stream_behind=behind,
            stream_connects=[w.connects for w in watches],
            replay_lag_bytes=lag,
            stuck_before_restart=stuck,
            timeline_warned=warned,
            failovers_counted=counted,
            doubled=doubled,
            endings=endings,
            lost_at=[load.acked_at[t] - fault_at for ts in gone.values() for t in ts],
        )
