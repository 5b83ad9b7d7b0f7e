"""Database failover under load (spec 17 §17.5, issue 36 item 6): two real ``threadloom
serve`` nodes on the multi-host URL of a primary and a streaming standby of the test's own
(``replication.py``), senders, readers and a reconnecting stream socket per thread
(``failover_load.py``), then the fault (``failover_scenario.py``).

Short runs (3 s of load before the fault, 6 s after) that hold the promises; the table with
longer runs is ``bench/failover_bench.py``'s.
"""

from __future__ import annotations

from pathlib import Path

from failover_load import CLIENT_TIMEOUT_S, table
from failover_scenario import Outcome, run
from replication import require_replication

RECOVER_BOUND_S = CLIENT_TIMEOUT_S
"""The first send answered 2xx after the fault must end within this (15 s: a request not
answered within it is counted a hang)."""
RECONNECT_CODES = {1001, 1011, 1013, -1}
"""Close codes after which a stream client reconnects with ``since`` (spec 09 §9.10.1);
-1: a reconnect refused while the node answers 503."""


def _hold_common(out: Outcome) -> None:
    """What every scenario must hold (spec 17 §17.5 rules 1-4)."""
    print(table([out.row]))
    print(f"failed runs by reason: {out.endings}; replay lag before: {out.replay_lag_bytes} B")
    row = out.row
    assert out.nodes_alive and out.healthy_after, "a node exited or is not healthy again"
    assert row.recover_s is not None and row.recover_s < RECOVER_BOUND_S, row
    assert set(row.statuses) <= {"2xx", "503"}, f"clients saw {row.statuses}"  # no 500, no hang
    assert row.no_retry_after == 0, "a 503 without Retry-After"
    assert row.acked > 50, row
    assert not out.doubled, f"stored more than once: {out.doubled}"
    assert not out.unsettled, f"threads not settled or not answered: {out.unsettled}"
    assert set(out.endings) <= {"failed/step_error", "failed/execution_lost"}, out.endings
    assert not out.stream_behind, f"streams that did not catch up: {out.stream_behind}"
    assert set(row.closes) <= RECONNECT_CODES, row.closes
    assert all(c <= 6 for c in out.stream_connects), out.stream_connects  # no spinning


def test_c17_060_c17_063_c17_069_c17_011_sync_failover_loses_nothing_acked(
    tmp_path: Path,
) -> None:
    """C17-060: synchronous replication; two nodes on ``…host1,host2…
    ?target_session_attrs=read-write``; 8 threads (a tool call and an answer a turn) sent to
    by 4 clients and read by 2 through both nodes, a stream socket on each thread → the
    primary is killed (``pg_ctl stop -m immediate``), the standby promoted 1 s later → the
    nodes serve again without a restart (a send answered 2xx within 15 s of the fault, both
    healthy); meanwhile every answer was 2xx or 503 with ``Retry-After`` — no 500, no
    request without an answer within 15 s; every acknowledged send is stored exactly once
    on the new primary; no thread is left ``running`` and each one's last message is a
    completed answer; a run broken by the fault or dropped at it ended ``failed``
    (``step_error`` or ``execution_lost``) and its queue was answered; every stream socket
    either stayed open or closed with a code that makes a client reconnect, and
    reconnecting with ``since`` it told every stored message with its stored status
    (C17-063); each node logged once that the database is on a new timeline (C17-069) and
    counts it in ``threadloom_node_failovers_total`` (C17-011)."""
    require_replication()
    out = run(tmp_path, scenario="failover, synchronous", fault="failover", synchronous=True)
    _hold_common(out)
    assert out.row.lost == 0, f"acknowledged sends lost: {out.lost}"
    assert out.timeline_warned == 2  # each node said the database failed over (C17-069)
    assert out.failovers_counted == 2  # ... and counted it (C17-011)


def test_c17_061_async_failover_loses_at_most_the_last_moments(tmp_path: Path) -> None:
    """C17-061: the same with asynchronous replication → every answer 2xx or 503 with
    ``Retry-After``, the nodes serve again without a restart; acknowledged sends may be
    lost, only those acknowledged in the last 5 s before the primary died (what had not
    reached the standby; the count is printed); then, the recipe of §17.5.3 rule 3, the
    nodes are restarted → every thread settles and answers its last message, nothing
    acknowledged and kept is stored twice, and a stream socket on a new node that resumes
    with ``since=0`` tells every stored message with its stored status."""
    require_replication()
    out = run(
        tmp_path,
        scenario="failover, asynchronous (nodes restarted after)",
        fault="failover",
        synchronous=False,
        restart_nodes=True,
    )
    _hold_common(out)
    print(f"lost sends acknowledged at (s from the fault): {out.lost_at}")
    print(f"threads stuck before the nodes' restart: {len(out.stuck_before_restart)}")
    assert all(-5.0 <= at <= 0.0 for at in out.lost_at), out.lost_at
    assert out.timeline_warned == 2


def test_c17_062_c17_069_c17_011_a_primary_restart_under_load(tmp_path: Path) -> None:
    """C17-062: synchronous replication, the same load and nodes → the primary restarts
    (``pg_ctl restart -m fast``; the standby stays a standby, refused by
    ``target_session_attrs=read-write``) → the promises of C17-060: no restart of a node,
    2xx or 503 with ``Retry-After`` only, nothing acknowledged lost, every run settled and
    answered, the streams caught up; no node logged a new timeline (C17-069) nor counted
    a failover (C17-011)."""
    require_replication()
    out = run(tmp_path, scenario="restart, synchronous", fault="restart", synchronous=True)
    _hold_common(out)
    assert out.row.lost == 0, f"acknowledged sends lost: {out.lost}"
    assert out.timeline_warned == 0  # a restart is no failover (C17-069)
    assert out.failovers_counted == 0  # C17-011
