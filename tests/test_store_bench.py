"""``make bench-store`` section D (the event-row pruner) end to end at a tiny size: each of
its three passes deletes what the window says and the table shows it. The timings are the
benchmark's business, not a test's."""

from __future__ import annotations

import re
from pathlib import Path

from benchrun import run_bench


def test_store_bench_prunes_every_old_row_then_skips_then_keeps_the_young(
    tmp_path: Path,
) -> None:
    report = run_bench(
        "store_bench.py", tmp_path, "--skip=a", "--skip=b", "--skip=c", "--list-sizes=30"
    )
    assert "D. a pass of the event-row pruner" in report
    passes = {
        m.group(1).strip(): int(m.group(2).replace(",", ""))
        for m in re.finditer(r"^30 +(\D+?) {2,}([\d,]+) ", report, re.MULTILINE)
    }
    assert passes == {"every row old": 30 * 40, "all pruned": 0, "one young row each": 0}
