"""PostgreSQL's instructions per Threadloom turn: the server's side of a turn under callgrind.

The peer bench reads the server's CPU a turn from /proc, and on a shared virtual machine that
moves by a quarter between runs (issue 40: the goal of ≤ 1.5 ms a turn). This counts what the
server executes instead: a private cluster of the installed PostgreSQL (``initdb`` into a
temporary directory, owned by the ``postgres`` user when run as root; autovacuum off; a Unix
socket only) runs every process under ``valgrind --tool=callgrind --trace-children=yes``, and
``bench/peers/run_one.py threadloom-pg empty`` drives it — once with ``--warmup`` turns and
once, on a fresh cluster, with ``--warmup`` + ``--turns``. A turn is the difference of the
two runs' instructions over ``--turns``: the cluster's start, the schema's migrations and the
warm-up cancel out. The figure compared is the connections' backends' (``PostgresMain``,
inclusive, every profile summed) without planning (``GetCachedPlan``: mostly each
connection's first plans of each statement, which the two runs do in different amounts);
every process's total is shown too, but the background processes (the checkpointer, the
WAL writer) work by the clock, not by the turn. The Python
process is not under valgrind; its own instructions are ``make bench-instructions``'s.

It prints the turn's instructions, and for a few of PostgreSQL's functions their inclusive
count a turn (the executor's set-up and end, planning, index insertion, scans, commit), and
the functions whose inclusive count a turn is largest. ``--against REV`` counts the turn
of another git revision too (its ``src`` in a temporary worktree; the same runner) and
prints both with the change (``--repeat K`` runs each side K times, alternating).

What moves the count between runs of one checkout: the plans each connection makes (its
first five executions of a statement are planned anew, on whichever of the store's
connections a call lands), so compare changes of a few per cent over several runs, and read
the functions' rows — which repeat within a few per cent — for where a change went.

    .venv/bin/python bench/pg_server_instructions.py --turns 200 --warmup 120 [--against REV]
"""

from __future__ import annotations

import argparse
import glob
import os
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

from _report import progress, table
from instructions_bench import git

REPO = Path(__file__).resolve().parent.parent
RUNNER = REPO / "bench" / "peers" / "run_one.py"

FUNCTIONS = (
    ("ExecutorStart", "the executor's set-up (ExecutorStart)"),
    ("ExecutorEnd", "the executor's end (ExecutorEnd)"),
    ("GetCachedPlan", "plans: made or checked (GetCachedPlan)"),
    ("ExecInsertIndexTuples", "index insertions (ExecInsertIndexTuples)"),
    ("ExecScan", "scans (ExecScan)"),
    ("CommitTransactionCommand", "commits (CommitTransactionCommand)"),
)
"""PostgreSQL functions shown a turn, inclusive: where a turn's server work goes."""

_ROOTS = frozenset({"main", "PostmasterMain", "PostgresMain", "BackendRun", "ServerLoop"})
"""Frames every backend's work sits under: not shown among the largest functions."""
_LINE = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)(?:\s+\[(.*)\])?$")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns (default 200)")
    parser.add_argument(
        "--warmup", type=int, default=120, help="turns of both runs before (default 120)"
    )
    parser.add_argument("--functions", type=int, default=12, help="largest functions shown")
    parser.add_argument("--against", metavar="REV", help="also count this git revision's turn")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side (alternating)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a run may take")
    return parser.parse_args(argv)


def postgres_bin() -> Path:
    """The installed PostgreSQL's programs (``pg_config --bindir``, else the newest of
    Debian's ``/usr/lib/postgresql/*/bin``)."""
    found = shutil.which("pg_config")
    if found:
        done = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(done.stdout.strip())
        if (bindir / "initdb").exists() and (bindir / "postgres").exists():
            return bindir
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parent.parent.name),
    )
    if not candidates:
        sys.exit("PostgreSQL's initdb and postgres were not found (pg_config, /usr/lib/postgresql)")
    return Path(candidates[-1]).parent


def as_owner(command: list[str]) -> list[str]:
    """``command`` as the ``postgres`` user when this runs as root (the server refuses
    root), else as it is."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def profile_total(path: Path) -> int:
    """The instructions one callgrind profile counted (its ``summary:`` or ``totals:``)."""
    with path.open(encoding="utf-8", errors="replace") as profile:
        for line in profile:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0  # a process that ended before callgrind wrote its summary counted nothing


def inclusive(paths: Sequence[Path]) -> Counter[str]:
    """Every function's inclusive instructions, summed over the profiles at ``paths``, by
    its name (the object's file name left out: a stripped server names none)."""
    out: Counter[str] = Counter()
    for path in paths:
        done = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        for line in done.stdout.splitlines():
            match = _LINE.match(line)
            if match is None or match.group(2) in ("PROGRAM TOTALS",):
                continue
            name = match.group(2).rsplit(":", 1)[-1]
            out[name] += int(match.group(1).replace(",", ""))
    return out


def one_run(turns: int, src: Path, workdir: Path, timeout: float) -> list[Path]:
    """A fresh cluster under callgrind serving ``turns`` turns of the runner; the profiles
    of its processes."""
    bindir = postgres_bin()
    workdir.mkdir(parents=True)
    data, profiles, runner_dir = workdir / "data", workdir / "profiles", workdir / "runner"
    profiles.mkdir()
    runner_dir.mkdir()
    if os.geteuid() == 0:
        shutil.chown(workdir, "postgres")
        shutil.chown(profiles, "postgres")
    subprocess.run(
        as_owner([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        capture_output=True,
        check=True,
    )
    log = (workdir / "server.log").open("w")
    server = subprocess.Popen(
        as_owner(
            [
                "valgrind",
                "--tool=callgrind",
                "--trace-children=yes",
                f"--callgrind-out-file={profiles}/cg.%p",
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-k",
                str(workdir),
                "-c",
                "listen_addresses=",
                "-c",
                "autovacuum=off",
            ]
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"postgresql://postgres@/postgres?host={workdir}"
    try:
        deadline = time.monotonic() + 300
        while not (workdir / ".s.PGSQL.5432").exists():
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the cluster did not start: see {workdir / 'server.log'}")
            time.sleep(0.5)
        psql = shutil.which("psql") or str(bindir / "psql")
        for _ in range(120):  # the socket exists before the server accepts
            ready = subprocess.run(
                [psql, url, "-c", "CREATE SCHEMA IF NOT EXISTS bench"],
                capture_output=True,
                check=False,
            )
            if ready.returncode == 0:
                break
            time.sleep(1)
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            [
                sys.executable,
                str(RUNNER),
                "threadloom-pg",
                "empty",
                f"--turns={turns}",
                f"--workdir={runner_dir}",
                f"--database={url}&options=-csearch_path%3Dbench",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or '"ok": true' not in done.stdout:
            sys.exit(
                f"the runner failed with {turns} turns:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
    finally:
        subprocess.run(
            as_owner([str(bindir / "pg_ctl"), "-D", str(data), "stop", "-m", "fast"]),
            capture_output=True,
            check=False,
        )
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    return sorted(profiles.glob("cg.*"))


def measure(args: argparse.Namespace, src: Path, workdir: Path) -> tuple[float, Counter[str]]:
    """A turn's server instructions for ``src`` (every process: the background ones, the
    checkpointer and the WAL writer, work by the clock, so this moves with the runs'
    lengths), and its functions' (inclusive) a turn — ``PostgresMain`` the backends'."""
    short = one_run(args.warmup, src, workdir / "short", args.timeout)
    progress(f"  {args.warmup} turns counted")
    long = one_run(args.warmup + args.turns, src, workdir / "long", args.timeout)
    progress(f"  {args.warmup + args.turns} turns counted")
    total = sum(profile_total(p) for p in long) - sum(profile_total(p) for p in short)
    functions = inclusive(long)
    functions.subtract(inclusive(short))
    per_turn = Counter({name: count / args.turns for name, count in functions.items()})
    return total / args.turns, per_turn


_NAME = re.compile(r"^[A-Za-z_]\w*$")


def steady(functions: Counter[str]) -> float:
    """The backends' instructions a turn without planning (``GetCachedPlan``): each
    connection plans a statement anew at its first five executions, on whichever
    connections the calls land, so planning is mostly the connections' warm-up, and the
    two runs of a side do different amounts of it (±0.3 M a turn)."""
    return functions["PostgresMain"] - functions["GetCachedPlan"]


def report(args: argparse.Namespace, turn: float, functions: Counter[str]) -> str:
    rows = [
        ["the connections' backends (PostgresMain)", f"{functions['PostgresMain'] / 1e6:.3f}"],
        ["  without planning (compared)", f"{steady(functions) / 1e6:.3f}"],
        ["all processes (background ones by the clock)", f"{turn / 1e6:.3f}"],
    ]
    rows += [[label, f"{functions[name] / 1e6:.3f}"] for name, label in FUNCTIONS]
    named = Counter(
        {
            name: count
            for name, count in functions.items()
            if _NAME.match(name) and name not in _ROOTS and count > 0
        }
    )
    largest = [[name, f"{count / 1e6:.3f}"] for name, count in named.most_common(args.functions)]
    return (
        table(["per turn, M instructions", "this checkout"], rows)
        + "\n\nthe largest functions a turn, inclusive (M instructions)\n\n"
        + table(["function", "a turn"], largest)
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian: apt-get install valgrind)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        sys.exit("runuser is needed to start the cluster as the postgres user")
    bindir = postgres_bin()
    print(f"PostgreSQL at {bindir}; {args.warmup} turns of warm-up, {args.turns} measured")
    here: list[float] = []
    there: list[float] = []
    functions: Counter[str] = Counter()
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="tl-pg-instr-") as tmp:
        base = Path(tmp)
        if os.geteuid() == 0:
            os.chmod(base, 0o755)
        tree = base / "against"
        if args.against:
            git("worktree", "add", "--detach", "--quiet", str(tree), f"{args.against}^{{commit}}")
        try:
            for k in range(args.repeat):
                progress(f"this checkout, run {k + 1} of {args.repeat}")
                turn, per_turn = measure(args, REPO / "src", base / f"here-{k}")
                here.append(steady(per_turn))
                if k == 0:
                    total, functions = turn, per_turn
                if args.against:
                    progress(f"{args.against}, run {k + 1} of {args.repeat}")
                    there.append(
                        measure(args, tree / "src", base / f"there-{k}")[1]["PostgresMain"]
                    )
        finally:
            if args.against:
                git("worktree", "remove", "--force", str(tree))
    print(report(args, total, functions))
    if args.against:
        mine, theirs = statistics.median(here), statistics.median(there)
        print()
        print(
            table(
                ["a turn, M instructions of the backends without planning", "runs", "median"],
                [
                    [
                        "this checkout",
                        ", ".join(f"{v / 1e6:.3f}" for v in here),
                        f"{mine / 1e6:.3f}",
                    ],
                    [
                        f"--against {args.against}",
                        ", ".join(f"{v / 1e6:.3f}" for v in there),
                        f"{theirs / 1e6:.3f}",
                    ],
                    ["change", "", f"{(mine - theirs) / theirs:+.2%}"],
                ],
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
