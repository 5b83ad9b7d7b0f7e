"""``make bench-instructions`` end to end at a tiny size, on a seeded thread, against the
checkout's own HEAD: every callgrind run does its turns (the benchmark checks the messages
they stored, and that the other side's runs imported ``threadloom`` from its worktree), and
the per-turn figures it prints add up: the libraries' rows sum to the turn's instructions,
the turn costs something, and both sides are compared. The figures themselves are the
benchmark's business."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchrun import BENCH, run_bench

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None,
    reason="valgrind not installed: bench/instructions_bench.py counts with callgrind",
)


def test_instructions_bench_counts_a_turn_splits_it_and_compares_a_revision(
    tmp_path: Path,
) -> None:
    report = run_bench(
        "instructions_bench.py",
        tmp_path,
        "--turns=3",
        "--warmup=2",
        "--functions=5",
        "--history=6",
        "--against=HEAD",
    )
    runs = dict(re.findall(r"^(\d+) measured turns\s+[\d,]+\s+(\d+)$", report, re.M))
    assert runs == {"0": "14", "3": "26"}  # 6 seeded, 4 a turn: 2 warm-up, then 0 or 3
    assert "a thread seeded with 6 messages" in report
    per_turn = {
        label.strip(): float(value)
        for label, value in re.findall(r"^(\S.*?)\s{2,}(\d+\.\d{3})\s+\d+%$", report, re.M)
    }
    total = per_turn.pop("all")
    assert total > 0.5  # a turn is millions of instructions, not a rounding error
    assert per_turn["the interpreter (libpython)"] > per_turn["SQLite (libsqlite3)"] > 0
    assert sum(per_turn.values()) == pytest.approx(total, rel=0.01)
    functions = report.split("C functions that grew most (self)")[1].split("\n\n")[0]
    assert len(functions.strip().splitlines()[2:]) == 5  # after the header's rest and rule
    here = re.search(r"^this checkout \((\w+)\+?\)\s+([\d.]+)\s+([\d.]+)$", report, re.M)
    there = re.search(r"^--against HEAD \((\w+)\)\s+([\d.]+)\s+([\d.]+)$", report, re.M)
    assert here and there, report
    head = subprocess.run(
        ["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert here[1] == there[1] == head
    assert float(here[3]) == pytest.approx(total, abs=0.001)  # the report's own run
    assert float(there[3]) > 0.5
    change = re.search(r"^change\s+([+-]\d+\.\d\d)%$", report, re.M)
    assert change is not None
    expected = (float(here[3]) - float(there[3])) / float(there[3]) * 100
    assert float(change[1]) == pytest.approx(expected, abs=0.1)  # rounded medians
    worktrees = subprocess.run(
        ["git", "-C", str(BENCH), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert str(tmp_path) not in worktrees  # the revision's worktree is gone
