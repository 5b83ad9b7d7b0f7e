"""A failover to an asynchronous standby that lost what a running run wrote (spec 17
§17.5.3 rule 4): the node's run, ahead of the new primary, must not stay ``running``."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
from failover_scenario import TIMINGS
from replication import replicated, require_replication

from multinode.cluster_harness import start_cluster


def _cut_replication(standby_url: str, primary_url: str) -> None:
    """The standby stops receiving WAL (its primary_conninfo points nowhere)."""
    with psycopg.connect(standby_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1'")
        conn.execute("SELECT pg_reload_conf()")
    for _ in range(200):
        with psycopg.connect(primary_url, autocommit=True) as conn:
            if conn.execute("SELECT count(*) FROM pg_stat_replication").fetchone() == (0,):
                return
        time.sleep(0.05)
    raise AssertionError("the standby still streams")


def test_c17_070_a_run_whose_writes_the_failover_lost_is_settled(tmp_path: Path) -> None:
    """C17-070: asynchronous replication, one node; T runs (its model waits on gate a)
    while the standby has all of it; the standby then stops receiving; ``gate-b`` is sent
    (queued), gate a opens (the answer and ``gate-b``'s delivery are written on the primary
    only), the model waits on gate b; the primary is killed and gate b opened (the answer's
    writes fail: the run breaks, and its settlement names ``gate-b``, which the standby
    never got), the standby promoted → within 15 s T is ``failed`` / ``execution_lost`` on
    the new primary (the node dropped its run at the failover and settled it from the
    store), and a message sent to T then is answered."""
    require_replication()
    with (
        replicated(synchronous=False) as pair,
        start_cluster(tmp_path, n=1, pg_url=pair.url, **TIMINGS) as cluster,
    ):
        node = cluster.nodes[0]
        thread = cluster.create_thread(node, "gate")
        cluster.send(node, thread, "gate-a")
        cluster.wait_running(node, thread)
        while pair.replay_lag_bytes():
            time.sleep(0.05)
        _cut_replication(pair.standby_url, pair.primary_url)
        cluster.send(node, thread, "gate-b")
        cluster.open_gate("gate-a")
        cluster.wait_for(
            lambda: any(
                m["role"] == "user" and m["content"] == "gate-b" and m["status"] == "completed"
                for m in cluster.messages(node, thread)
            ),
            what="gate-b delivered",
        )
        time.sleep(0.5)
        pair.kill_primary()
        cluster.open_gate("gate-b")  # the answer's writes fail: the run breaks
        cluster.wait_for(
            lambda: "the run broke" in node.output(), what="the run broken by the outage"
        )
        pair.promote()

        def settled() -> tuple[str, str | None] | None:
            try:
                state, reason = cluster.status(node, thread)
            except Exception:
                return None
            return (state, reason) if state != "running" else None

        found = cluster.wait_for(settled, timeout=15, what="T settled on the new primary")
        assert found == ("failed", "execution_lost"), (found, node.output()[-3000:])
        sent = cluster.send(node, thread, "again")
        assert sent
        cluster.wait_for(
            lambda: any(
                m["role"] == "assistant" and m["content"] == "echo: again"
                for m in cluster.messages(node, thread)
            ),
            timeout=20,
            what="the answer to the message sent after the failover",
        )
