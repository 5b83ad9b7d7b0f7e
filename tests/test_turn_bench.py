"""``make bench-turn`` end to end at a tiny size: every section runs, the turns store what
the workload says they store (the benchmark fails loudly otherwise), and the report holds
each section's table. The figures themselves are the benchmark's business, not a test's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_turn_bench_runs_every_section_at_a_tiny_size(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "turn_bench.py"),
            "--turns=20",
            "--history=40",
            "--history-turns=4",
            "--threads=6",
            "--turns-per-thread=2",
            "--latency=0",
            f"--tmpdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout
    for heading in (
        "A. 20 turns from empty",
        "B. turns at 40 history",
        "C. where a Threadloom turn's time goes",
        "E. a turn's own SQL replayed on raw sqlite3",
        "F. the syncs apart from the work",
        "D. 6 threads × 2 turns concurrently",
    ):
        assert heading in report, heading
    assert "Threadloom, synchronous=OFF" in report and "the syncs: FULL − OFF" in report
    concurrent = report.split("D. 6 threads")[1]
    assert "6 × 2" in concurrent and "store writes during the turns" in concurrent
    assert "Summary" in report and "wall time" in report
    assert list(tmp_path.iterdir()) == []  # the temporary databases are gone
