"""Instructions per turn: the turn benchmark's workload under callgrind (make bench-instructions).

Wall time on a shared virtual machine moves by ±15% from one run to the next; an
instruction count far less. This counts what one turn of ``bench/_workload.py`` executes:
the same script runs twice under ``valgrind --tool=callgrind``, with the same warm-up, once
with no measured turns and once with ``--turns`` of them, and a turn is the difference over
the turns — start-up, imports and the warm-up cancel out. Both runs go at once (two cores),
at ``synchronous=OFF`` (a sync adds kernel time and no instructions of ours) and with
``PYTHONHASHSEED=0``. The event loop's paths depend a little on timing (the pending hold,
inline commits, group commit), so runs of one checkout still differ: on 3 December five
runs of the same turn gave 4.939–4.977 M instructions, within 1%; a loaded machine raises
the count by 2–3%. Compare changes smaller than that over several runs.

It prints the turn's instructions, split by the shared object that executed them (the
interpreter, SQLite, libc, pydantic-core …), and the C functions that grew most, and checks
that every turn stored its four messages (a run whose turns failed would count too little).
``--against REV`` counts the turn of another git revision too — its ``src`` in a temporary
worktree, the same workload and driver — and prints both with the change of the medians
(``--repeat K`` runs each side K times, alternating).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _report import cpu_model, progress, table

REPO = Path(__file__).resolve().parent.parent

_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)(?:\s+\[(.*)\])?$")
_LIBRARIES = (  # shared object name → the row it is counted under
    ("libpython", "the interpreter (libpython)"),
    ("libsqlite3", "SQLite (libsqlite3)"),
    ("libc.so", "libc"),
    ("_pydantic_core", "pydantic-core"),
    ("_sqlite3", "the sqlite3 module"),
    ("_json", "the json module"),
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", type=int, default=200, metavar="N", help="measured turns (default 200)"
    )
    parser.add_argument(
        "--warmup", type=int, default=30, metavar="N", help="warm-up turns (default 30)"
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        metavar="N",
        help="turns on a thread seeded with N messages first (inject_message, as make"
        " bench-turn's section B; default 0: a new thread)",
    )
    parser.add_argument(
        "--functions", type=int, default=12, metavar="N", help="C functions listed (default 12)"
    )
    parser.add_argument(
        "--against",
        default=None,
        metavar="REV",
        help="also count the turn of git revision REV (a worktree of it, same workload) and"
        " print the change",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="K",
        help="count each side K times, alternating, and compare medians (default 1)",
    )
    parser.add_argument("--tmpdir", default=None, help="where the databases and profiles go")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.turns < 1 or args.warmup < 1 or args.repeat < 1:
        parser.error("--turns, --warmup and --repeat must be ≥ 1")
    if args.functions < 0 or args.history < 0:
        parser.error("--functions and --history must not be negative")
    return args


async def child(turns: int, warmup: int, workdir: str, history: int) -> dict[str, object]:
    """The measured process: ``warmup`` then ``turns`` turns on one thread (seeded with
    ``history`` messages first, when given); what it stored. Both runs of a count seed
    alike, so the seeding cancels out with the warm-up."""
    import threadloom
    from _workload import ROWS_PER_TURN, make_definitions, message_total, one_turn
    from threadloom import Runtime

    path = os.path.join(workdir, "turns.db")
    seeded = None
    if history:
        from turn_bench import seed_threadloom

        seeded, _ = await seed_threadloom(path, history, "inject")
    runtime = await Runtime.open(
        f"sqlite:///{path}", definitions=make_definitions(fixed_usage=True), synchronous="OFF"
    )
    try:
        state = await (runtime.thread(seeded) if seeded else runtime.create_thread("chat"))
        for i in range(warmup + turns):
            await one_turn(runtime, state.thread_id, i)
        # the search index's backlog indexed (a revision without one has none), as the
        # store's background pass would have done every second
        catch_up = getattr(runtime.store, "catch_up_search", None)
        if catch_up is not None:
            await catch_up()
        status = await state.status()
        return {
            "messages": await message_total(state),
            "expected": history + (warmup + turns) * ROWS_PER_TURN,
            "state": status.state,
            "reason": status.reason,
            "package": os.path.dirname(os.path.abspath(threadloom.__file__)),
        }
    finally:
        await runtime.close()


def profile_lines(path: Path) -> list[str]:
    """``callgrind_annotate``'s listing of every function of the profile at ``path``."""
    done = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def program_total(path: Path) -> int:
    """The instructions a callgrind profile counted in all (its ``summary:`` line)."""
    with path.open(encoding="utf-8", errors="replace") as profile:
        for line in profile:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise ValueError(f"{path}: no summary line")


def turn_cost(args: argparse.Namespace, results: dict[int, tuple[Path, dict[str, Any]]]) -> float:
    """Instructions a turn: the two runs' difference over the measured turns."""
    measured = program_total(results[args.turns][0]) - program_total(results[0][0])
    return float(measured / args.turns)


def comparison(here: list[float], there: list[float], rev: str) -> str:
    """This checkout against ``--against``: each run's count and the medians' change."""
    mine, theirs = statistics.median(here), statistics.median(there)
    runs = ", ".join
    return table(
        ["per turn, M instructions", "runs", "median"],
        [
            [
                f"this checkout ({describe('HEAD', dirty=True)})",
                runs(f"{v / 1e6:.3f}" for v in here),
                f"{mine / 1e6:.3f}",
            ],
            [
                f"--against {rev} ({describe(rev)})",
                runs(f"{v / 1e6:.3f}" for v in there),
                f"{theirs / 1e6:.3f}",
            ],
            ["change", "", f"{(mine - theirs) / theirs:+.2%}"],
        ],
    )


def git(*command: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), *command], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"git {' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def describe(rev: str, dirty: bool = False) -> str:
    """A short commit name, ``+`` when the work tree has changes (``dirty``)."""
    name = git("rev-parse", "--short", f"{rev}^{{commit}}")
    return name + ("+" if dirty and git("status", "--porcelain", "--untracked-files=no") else "")


def costs(lines: Sequence[str]) -> tuple[Counter[str], Counter[str]]:
    """The self cost of each shared object and each function (the total:
    :func:`program_total`).

    A function's code inlined from a header is listed under that header's file and without
    its shared object; it counts under the object the function's own line names."""
    entries: list[tuple[int, str, str | None]] = []
    home: dict[str, str] = {}
    for line in lines:
        found = _LINE.match(line)
        if found is None:
            continue
        if found[2] == "PROGRAM TOTALS":
            continue
        count = int(found[1].replace(",", ""))
        name = found[2].rsplit(":", 1)[-1].split("'")[0]  # 'N: callgrind's recursion depth
        entries.append((count, name, found[3]))
        if found[3]:
            home.setdefault(name, found[3])
    objects: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for count, name, obj in entries:
        where = obj or home.get(name, "?")
        objects[where] += count
        functions[f"{name} ({Path(where).name})"] += count
    return objects, functions


def library_rows(
    base: Counter[str], measured: Counter[str], turns: int, total: float
) -> list[list[str]]:
    """Per-turn instructions by library, the named ones first, the rest as one row."""
    per_object = {obj: (measured[obj] - base[obj]) / turns for obj in measured | base}
    rows, named = [], 0.0
    for needle, label in _LIBRARIES:
        value = sum(v for obj, v in per_object.items() if needle in Path(obj).name)
        named += value
        rows.append([label, f"{value / 1e6:.3f}", f"{value / total:.0%}"])
    rows.append(
        ["everything else", f"{(total - named) / 1e6:.3f}", f"{(total - named) / total:.0%}"]
    )
    return rows


def run_pair(
    args: argparse.Namespace, workdir: Path, src: Path | None = None
) -> dict[int, tuple[Path, dict[str, Any]]]:
    """Both callgrind runs at once; each run's profile and what its turns stored.
    ``src``: the ``src`` folder whose ``threadloom`` the runs import (else this checkout's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONHASHSEED": "0",
        # no background pollers in the measured processes: the scheduler's tick and the
        # webhook worker's poll read the store by the wall clock, so the run with turns and
        # the run without did different amounts of it (a tiny run's SQLite row went
        # negative); a turn's own work is what is counted
        "THREADLOOM_SCHEDULE_TICK_SECONDS": "off",
        "THREADLOOM_WEBHOOK_POLL_S": "3600",
        # nor the search index's pass over its backlog (every second of the wall clock,
        # where a turn under callgrind takes about as long): the child indexes the backlog
        # once, after its turns, so a run counts the indexing of its messages in one go
        "THREADLOOM_SEARCH_INDEX_SECONDS": "off",
    }
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(src), env.get("PYTHONPATH"))))
    started: dict[int, tuple[subprocess.Popen[str], Path]] = {}
    for turns in (0, args.turns):
        out = workdir / f"callgrind.{turns}.out"
        db_dir = workdir / f"db-{turns}"
        db_dir.mkdir()
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            str(Path(__file__).resolve()),
            f"--child={turns}",
            f"--warmup={args.warmup}",
            f"--history={args.history}",
            f"--tmpdir={db_dir}",
        ]
        started[turns] = (
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            ),
            out,
        )
    t0 = time.monotonic()
    results: dict[int, tuple[Path, dict[str, Any]]] = {}
    try:
        for turns, (process, out) in started.items():
            stdout, stderr = process.communicate()
            if process.returncode != 0:
                sys.exit(
                    f"the run with {turns} turns failed (exit {process.returncode}):\n"
                    f"{stderr[-3000:]}"
                )
            stored = json.loads(stdout.strip().splitlines()[-1])
            if stored["messages"] != stored["expected"] or stored["state"] != "idle":
                sys.exit(f"the run with {turns} turns did not do its turns: {stored}")
            if src is not None and not stored["package"].startswith(str(src)):
                sys.exit(f"the run imported threadloom from {stored['package']}, not from {src}")
            results[turns] = (out, stored)
            progress(f"  run with {turns:,} measured turns done ({time.monotonic() - t0:.0f} s)")
    finally:
        for process, _ in started.values():  # the other run, when one failed
            if process.poll() is None:
                process.kill()
                process.wait()
    return results


def report(args: argparse.Namespace, results: dict[int, tuple[Path, dict[str, Any]]]) -> str:
    base_objects, base_functions = costs(profile_lines(results[0][0]))
    objects, functions = costs(profile_lines(results[args.turns][0]))
    per_turn = turn_cost(args, results)
    version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout
    lines = [
        "Instructions per turn (bench/instructions_bench.py)",
        f"machine     {platform.platform()}, {os.cpu_count()} CPUs ({cpu_model()})",
        f"python      {platform.python_implementation()} {platform.python_version()},"
        f" {version.strip()}, PYTHONHASHSEED=0",
        "workload    bench/_workload.py, synchronous=OFF, "
        + (f"a thread seeded with {args.history:,} messages, " if args.history else "")
        + f"{args.warmup} warm-up turns; runs of 0 and {args.turns:,} measured turns",
        "",
        table(
            ["run", "instructions", "messages stored"],
            [
                [
                    f"{turns:,} measured turns",
                    f"{program_total(profile):,}",
                    f"{stored['messages']:,}",
                ]
                for turns, (profile, stored) in sorted(results.items())
            ],
        ),
        "",
        table(
            ["per turn", "M instructions", "share"],
            [
                ["all", f"{per_turn / 1e6:.3f}", "100%"],
                *library_rows(base_objects, objects, args.turns, per_turn),
            ],
        ),
    ]
    if args.functions:
        grown = Counter(
            {name: (functions[name] - base_functions[name]) / args.turns for name in functions}
        )
        lines += [
            "",
            table(
                ["C functions that grew most (self)", "k instructions / turn", "share"],
                [
                    [name, f"{value / 1e3:,.1f}", f"{value / per_turn:.1%}"]
                    for name, value in grown.most_common(args.functions)
                ],
            ),
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        workdir = args.tmpdir or tempfile.gettempdir()
        stored = asyncio.run(child(args.child, args.warmup, workdir, args.history))
        print(json.dumps(stored))
        return 0
    missing = [tool for tool in ("valgrind", "callgrind_annotate") if shutil.which(tool) is None]
    if missing:
        progress(
            f"{' and '.join(missing)} not found: this benchmark counts instructions with"
            " valgrind's callgrind (Debian: apt install valgrind)"
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="threadloom-instr-", dir=args.tmpdir) as workdir:
        work = Path(workdir)
        sides = 2 if args.against else 1
        progress(
            f"instructions: {2 * sides * args.repeat} runs under callgrind, two at a time"
            f" ({args.warmup} warm-up turns; 0 and {args.turns:,} measured), about"
            f" {sides * args.repeat * 35} s …"
        )
        if not args.against:
            runs = [run_pair(args, work / f"here-{k}") for k in range(args.repeat)]
            counts = [turn_cost(args, r) for r in runs]
            print(report(args, runs[-1]))
            if args.repeat > 1:
                print(
                    f"\nper turn, {args.repeat} runs: "
                    + ", ".join(f"{c / 1e6:.3f}" for c in counts)
                )
            return 0
        tree = work / "against"
        git("worktree", "add", "--detach", "--quiet", str(tree), f"{args.against}^{{commit}}")
        try:
            here: list[float] = []
            there: list[float] = []
            last = None
            for k in range(args.repeat):
                last = run_pair(args, work / f"here-{k}")
                here.append(turn_cost(args, last))
                there.append(turn_cost(args, run_pair(args, work / f"there-{k}", tree / "src")))
            assert last is not None
            print(report(args, last))
            print()
            print(comparison(here, there, args.against))
        finally:
            git("worktree", "remove", "--force", str(tree))
    return 0


if __name__ == "__main__":
    sys.exit(main())
