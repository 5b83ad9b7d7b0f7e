"""``make bench-turn`` end to end at a tiny size: every section runs, the turns store what
the workload says they store (the benchmark fails loudly otherwise), and the report holds
each section's table. The figures themselves are the benchmark's business, not a test's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from benchrun import BENCH, run_bench


def test_turn_bench_runs_every_section_at_a_tiny_size(tmp_path: Path) -> None:
    report = run_bench(
        "turn_bench.py",
        tmp_path,
        "--turns=20",
        "--history=40",
        "--history-turns=4",
        "--threads=6",
        "--turns-per-thread=2",
        "--latency=0",
    )
    for heading in (
        "A. 20 turns from empty",
        "B. turns at 40 history",
        "C. where a Threadloom turn's time goes",
        "E. a turn's own SQL, bare and in a turn's skeleton",
        "F. the syncs apart from the work",
        "D. 6 threads × 2 turns concurrently",
    ):
        assert heading in report, heading
    assert "Threadloom, synchronous=OFF" in report and "the syncs: FULL − OFF" in report
    split = report.split("F. the syncs apart from the work")[1].split("D. 6 threads")[0]
    for column in ("CPU user", "CPU kernel", "off CPU", "off the CPU at FULL"):
        assert column in split, column
    # the paused sides: OFF with a sleep after each commit, for Threadloom and the floor
    assert "Threadloom, synchronous=OFF + 0.1 ms sleep a commit" in split
    assert "raw sqlite3 floor, synchronous=OFF + 0.1 ms sleep a commit" in split
    assert "OFF + 0.1 ms sleep a commit − OFF (no disk)" in split
    skeleton = report.split("E. a turn's own SQL")[1].split("F. the syncs")[0]
    for row in (
        "Threadloom",
        "skeleton: its SQL + run task + model streams + tool thread",
        "skeleton with the tool called on the loop",
        "left for Threadloom's Python",
    ):
        assert row in skeleton, row
    # the statement count is measured (the webhook outbox's look at settlement made it 33);
    # the commits a turn makes are the invariant of spec 01 §1.11
    assert re.search(r"its SQL alone \(\d+ statements, 4 commits\)", skeleton), skeleton
    concurrent = report.split("D. 6 threads")[1]
    assert "6 × 2" in concurrent and "store writes during the turns" in concurrent
    assert "Summary" in report and "wall time" in report
    assert list(tmp_path.iterdir()) == []  # the temporary databases are gone


def test_the_floor_starts_with_its_wal_at_steady_state_size(tmp_path: Path) -> None:
    # The floor is compared with a runtime whose WAL is prefilled at open: a floor whose
    # WAL still grew paid a file-system journal commit per synced commit and looked slower.
    sys.path.insert(0, str(BENCH))
    try:
        from _raw_floor import RawTurns
    finally:
        sys.path.remove(str(BENCH))
    from threadloom.store.sqlite.wal_prefill import wal_size

    path = tmp_path / "floor.db"
    raw = RawTurns(str(path), 4)
    wal = Path(str(path) + "-wal")
    try:
        assert raw.steady
        steady = wal_size(1000, 4096)  # SQLite's default checkpoint threshold and page
        assert wal.stat().st_size == steady
        thread = raw.new_thread()
        raw.seed(thread, 30_000)  # more frames than fit: the seeding grows the WAL
        assert wal.stat().st_size == steady  # emptied and prefilled again after it
        raw.turn(thread, 0)
        assert raw.count(thread) == 30_004
        assert wal.stat().st_size == steady  # the turn wrote into the zeros
    finally:
        raw.close()
    grown = RawTurns(str(tmp_path / "grows.db"), 4, steady=False)
    try:
        assert not grown.steady
        other = Path(str(tmp_path / "grows.db") + "-wal")
        assert other.stat().st_size < steady
        grown.seed(grown.new_thread(), 30_000)
        assert other.stat().st_size > steady  # what the steady floor's seeding undoes
    finally:
        grown.close()


def test_the_skeleton_replays_a_turn_as_its_four_transactions(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from _skeleton import SkeletonTurns, transactions
    finally:
        sys.path.remove(str(BENCH))
    import asyncio
    import sqlite3

    setup = sqlite3.connect(tmp_path / "s.db")
    setup.execute("CREATE TABLE t(turn INTEGER, step INTEGER)")
    setup.commit()
    setup.close()

    def turn(n: int) -> list[tuple[bool, str, object]]:
        out: list[tuple[bool, str, object]] = []
        for step in range(4):
            out.append((False, "BEGIN IMMEDIATE", ()))
            out.append((True, "INSERT INTO t VALUES (?, ?)", [(n, step), (n, step)]))
            out.append((False, "COMMIT", ()))
        return out

    assert [len(tx) for tx in transactions(turn(0))] == [3, 3, 3, 3]
    with pytest.raises(RuntimeError, match="3 commits, not 4"):
        transactions(turn(0)[3:])
    skeleton = SkeletonTurns(str(tmp_path / "s.db"), [turn(0), turn(1)], hop=True)
    try:
        asyncio.run(skeleton.turn())
        asyncio.run(skeleton.turn())
        rows = skeleton.conn.execute("SELECT turn, step, count(*) FROM t GROUP BY 1, 2").fetchall()
        assert rows == [(n, step, 2) for n in (0, 1) for step in range(4)]
        assert skeleton.conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        with pytest.raises(RuntimeError, match="only 2 turns were recorded"):
            asyncio.run(skeleton.turn())
    finally:
        skeleton.close()
