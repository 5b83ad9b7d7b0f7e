"""``make bench-pg-instructions`` end to end at a tiny size, against the checkout's own HEAD:
a private cluster of the installed PostgreSQL under callgrind serves the peer bench's
runner, twice a side; the report names a turn's instructions of the backends and the
functions it shows, both sides are compared, and the revision's worktree is gone after.
The figures themselves are the benchmark's business."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys

import pytest

from benchrun import BENCH

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None
    or shutil.which("callgrind_annotate") is None
    or not (shutil.which("pg_config") or glob.glob("/usr/lib/postgresql/*/bin/initdb")),
    reason="valgrind or PostgreSQL's programs not installed: the bench runs a private cluster"
    " under callgrind",
)


def _row(report: str, label: str) -> float:
    found = re.search(rf"^\s*{re.escape(label)}\s+(-?[\d.]+)$", report, re.M)
    assert found, report
    return float(found.group(1))


def test_pg_server_instructions_counts_a_turn_and_compares_a_revision() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "pg_server_instructions.py"),
            "--turns=12",
            "--warmup=3",
            "--functions=4",
            "--against=HEAD",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout
    backends = _row(report, "the connections' backends (PostgresMain)")
    assert 0.5 < backends < 100  # a turn is millions of the server's instructions
    assert _row(report, "the executor's set-up (ExecutorStart)") > 0
    assert _row(report, "index insertions (ExecInsertIndexTuples)") > 0
    largest = report.split("the largest functions a turn, inclusive")[1].split("\n\n")[1]
    assert len(largest.splitlines()[2:]) == 4  # after the header and its rule
    here = re.search(r"^this checkout\s+([\d.]+)\s+([\d.]+)$", report, re.M)
    there = re.search(r"^--against HEAD\s+([\d.]+)\s+([\d.]+)$", report, re.M)
    change = re.search(r"^change\s+([+-][\d.]+)%$", report, re.M)
    assert here and there and change, report
    steady = _row(report, "without planning (compared)")
    assert float(here[1]) == pytest.approx(steady, abs=0.001)  # the report's own run
    assert float(there[1]) > 0.5
    worktrees = subprocess.run(
        ["git", "-C", str(BENCH.parent), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert "tl-pg-instr-" not in worktrees  # the revision's worktree is gone
