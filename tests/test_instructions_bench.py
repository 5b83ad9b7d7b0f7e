"""``make bench-instructions`` end to end at a tiny size: both callgrind runs do their turns
(the benchmark checks the messages they stored), and the per-turn figures it prints add up:
the libraries' rows sum to the turn's instructions, the turn costs something. The figures
themselves are the benchmark's business."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from benchrun import run_bench

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None,
    reason="valgrind not installed: bench/instructions_bench.py counts with callgrind",
)


def test_instructions_bench_counts_a_turn_and_splits_it_by_library(tmp_path: Path) -> None:
    report = run_bench(
        "instructions_bench.py", tmp_path, "--turns=3", "--warmup=2", "--functions=5"
    )
    runs = dict(re.findall(r"^(\d+) measured turns\s+[\d,]+\s+(\d+)$", report, re.M))
    assert runs == {"0": "8", "3": "20"}  # 4 messages a turn: 2 warm-up, then 0 or 3
    per_turn = {
        label.strip(): float(value)
        for label, value in re.findall(r"^(\S.*?)\s{2,}(\d+\.\d{3})\s+\d+%$", report, re.M)
    }
    total = per_turn.pop("all")
    assert total > 0.5  # a turn is millions of instructions, not a rounding error
    assert per_turn["the interpreter (libpython)"] > per_turn["SQLite (libsqlite3)"] > 0
    assert sum(per_turn.values()) == pytest.approx(total, rel=0.01)
    functions = (
        report.split("C functions that grew most (self)")[1].strip().splitlines()[2:]
    )  # after the rule
    assert len(functions) == 5
