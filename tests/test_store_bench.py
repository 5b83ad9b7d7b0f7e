"""``make bench-store`` section D (the event-row pruner) end to end at a tiny size: each of
its three passes deletes what the window says and the table shows it. The timings are the
benchmark's business, not a test's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_store_bench_prunes_every_old_row_then_skips_then_keeps_the_young(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "store_bench.py"),
            "--skip=a",
            "--skip=b",
            "--skip=c",
            "--list-sizes=30",
            f"--tmpdir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "D. a pass of the event-row pruner" in done.stdout
    passes = {
        m.group(1).strip(): int(m.group(2).replace(",", ""))
        for m in re.finditer(r"^30 +(\D+?) {2,}([\d,]+) ", done.stdout, re.MULTILINE)
    }
    assert passes == {"every row old": 30 * 40, "all pruned": 0, "one young row each": 0}
