"""``threadloom --version`` and ``--help`` answer without importing the runtime (issue 40:
≤ 0.3 s; ``make bench-startup`` measures the time): the command modules import the store,
the records, the engine and the server inside the commands that use them. A module-level
import of any of them in ``cli/`` would put ~1 s back on every ``--help``; this test names
it. The time itself is the benchmark's business."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchrun import run_bench

# What a help must not load: each is hundreds of milliseconds with what it imports.
HEAVY = (
    "threadloom.engine",
    "threadloom.server",
    "threadloom.store.base",
    "threadloom.store.core",
    "threadloom.records",
    "threadloom.wire",
    "threadloom.define",
    "threadloom.providers",
    "threadloom.node",
    "threadloom.thread",
)

_PROBE = """
import json, sys
from threadloom.cli import entrypoint
sys.argv = ["threadloom", *json.loads(sys.argv[1])]
try:
    entrypoint()
except SystemExit:
    pass
sys.stdout.flush()
sys.stderr.write("\\nLOADED " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def _loaded(*argv: str) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    marker = done.stderr.rsplit("LOADED ", 1)
    assert len(marker) == 2, done.stderr[-2000:]
    return done.stdout, json.loads(marker[1])


@pytest.mark.parametrize(
    "argv",
    [
        ("--version",),
        ("--help",),
        ("users", "--help"),
        ("keys", "--help"),
        ("schedules", "--help"),
        ("retention", "--help"),
        ("migrate", "--help"),
        ("backup", "--help"),
        ("serve", "--help"),
        ("run", "--help"),
    ],
)
def test_help_and_version_import_no_runtime(argv: tuple[str, ...]) -> None:
    out, modules = _loaded(*argv)
    assert out.strip(), "the command printed nothing"
    heavy = [m for m in modules if m.startswith(HEAVY)]
    assert heavy == [], f"threadloom {' '.join(argv)} imported {heavy[:10]}"


def test_help_still_lists_every_command() -> None:
    out, _ = _loaded("--help")
    for command in (
        "init",
        "run",
        "serve",
        "retention",
        "backup",
        "restore",
        "migrate",
        "users",
        "keys",
        "schedules",
    ):
        assert f"  {command} " in out, command


def test_a_command_still_loads_what_it_uses(tmp_path: Path) -> None:
    # the lazy imports run: a store command does its work (and the store module is loaded)
    db = tmp_path / "t.db"
    done = subprocess.run(
        [sys.executable, "-m", "threadloom.cli", "users", "list", "--store", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["USERNAME", "ROLE", "PASSWORD", "ROLES", "CREATED", "ID"]


def test_startup_bench_prints_its_goal_table(tmp_path: Path) -> None:
    report = run_bench("startup_bench.py", tmp_path, "--runs=2")
    for row in ("threadloom --version", "threadloom --help", "floor: python -c pass"):
        assert row in report, row
    assert "≤ 300 ms" in report and ("PASS" in report or "MISS" in report)
