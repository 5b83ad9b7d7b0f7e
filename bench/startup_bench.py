"""``make bench-startup``: how long the ``threadloom`` command takes to answer ``--version``
and ``--help`` (issue 40's goal: ≤ 0.3 s each), beside the floors measured in the same run —
the interpreter alone (``python -c pass``) and the command line's libraries alone (Typer and
Rich imported, nothing of Threadloom).

Each command runs ``--runs`` times in a fresh process, in rotating order so load from
elsewhere on the machine falls on all alike; the table gives the median and p90 of the wall
time and the median CPU time (user + system) of the child. A ``help`` that imports the
runtime (the engine, the server, the store's records) shows up here as ~1 s; the test
``tests/test_cli_startup.py`` names the modules it must not import.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _report import cpu_model, percentile, progress, table, verdict

GOAL_S = 0.3


def _command() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m``."""
    script = Path(sys.executable).with_name("threadloom")
    if script.exists():
        return [str(script)]
    found = shutil.which("threadloom")
    return [found] if found else [sys.executable, "-m", "threadloom.cli"]


# A user's interpreter keeps the bytecode it compiled (``__pycache__``); a test machine
# that sets PYTHONDONTWRITEBYTECODE would make every run compile every import again.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _once(argv: list[str]) -> tuple[float, float]:
    """Wall and child CPU seconds of one run of ``argv`` (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=_ENV
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command")
    parser.add_argument("--tmpdir", default=None, help="unused; the test harness passes it")
    args = parser.parse_args()

    cli = _command()
    cases: list[tuple[str, list[str], bool]] = [
        ("threadloom --version", [*cli, "--version"], True),
        ("threadloom --help", [*cli, "--help"], True),
        # a group's help: Typer itself imports pydantic for it (informational)
        ("threadloom users --help", [*cli, "users", "--help"], False),
        ("floor: python -c pass", [sys.executable, "-c", "pass"], False),
        (
            "floor: typer + rich imported",
            [sys.executable, "-c", "import typer, rich.console"],
            False,
        ),
    ]
    walls: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    cpus: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for _name, argv, _ in cases:  # warm the page cache and the bytecode once
        _once(argv)
    for run in range(args.runs):
        shift = run % len(cases)
        for name, argv, _ in [*cases[shift:], *cases[:shift]]:
            wall, cpu = _once(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
        if (run + 1) % 5 == 0 or run + 1 == args.runs:
            progress(f"  {run + 1}/{args.runs} runs of each command")

    print(f"threadloom start-up, {args.runs} runs each ({cpu_model()}, {os.cpu_count()} CPUs)")
    rows = []
    for name, _, goal in cases:
        median = percentile(walls[name], 50)
        rows.append(
            [
                name,
                f"{median * 1000:.0f}",
                f"{percentile(walls[name], 90) * 1000:.0f}",
                f"{percentile(cpus[name], 50) * 1000:.0f}",
                f"≤ {GOAL_S * 1000:.0f} ms {verdict(median <= GOAL_S)}" if goal else "",
            ]
        )
    print(table(["command", "wall median ms", "wall p90 ms", "CPU median ms", "goal"], rows))


if __name__ == "__main__":
    main()
