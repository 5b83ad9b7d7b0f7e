"""Running a benchmark script of ``bench/`` from a test, at a size the test chooses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(script: str, tmp_path: Path, *args: str) -> str:
    """``bench/<script> <args> --tmpdir=<tmp_path>``; its report, or a failed assertion
    with the end of its error output."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args, f"--tmpdir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
