"""Section F of the turn benchmark: a turn with and without its syncs, beside the floor's.

The floor goal compares two things that each have two parts: the work of a turn (Python
and SQLite on the CPU) and the syncs that make its commits durable (mostly waiting for
the disk). This section measures the parts apart. It runs the section A workload on six
sides, interleaved in blocks so machine noise hits all of them alike: Threadloom and the
4-commit floor, each at ``synchronous=FULL`` (both defaults), at ``synchronous=OFF``
(nothing synced: not durable, for measurement only), and at ``OFF`` with a sleep as long
as a sync after each commit (``PAUSE_S``, in the committing thread): the syncs' waiting
without the disk, which shows what a thread's sleeping alone costs the CPU. Per side it
prints the wall time and the process CPU time per turn, in user space and in the kernel,
and what is left of the wall time (off the CPU: waiting for the disk or another thread);
FULL − OFF is what the syncs cost a turn. Threadloom syncs four commits a turn like the
floor (docs/engine.md, "Durability"), so a difference between the two sync costs comes
from what each commit writes and what the CPU does between them; the OFF figures are the
work that no disk can explain.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from _raw_floor import RawTurns
from _report import ms, percentile, rotating_blocks, table
from _workload import make_definitions, one_turn
from threadloom import Runtime
from threadloom.store.sqlite.store import SqliteStore

SYNCS = ("FULL", "OFF")
PAUSED = "OFF, paused"
"""The third setting of each side: ``synchronous=OFF`` and a sleep of ``PAUSE_S`` after
each commit, in the thread that commits — the syncs' waiting without the disk."""
SETTINGS = (*SYNCS, PAUSED)
PAUSE_S = 0.0001
"""About one ``fdatasync`` of this disk (0.10–0.12 ms, docs/benchmarks.md)."""


@dataclass
class Side:
    """One side's per-turn wall times (ns) and its total CPU times (s) over them: in user
    space and in the kernel (``getrusage``: every thread of the process)."""

    name: str
    wall: list[int] = field(default_factory=list)
    user: float = 0.0
    system: float = 0.0

    def per_turn_ms(self, seconds: float) -> float:
        return seconds / len(self.wall) * 1e3

    def cpu_ms(self) -> float:
        return self.per_turn_ms(self.user + self.system)

    def off_cpu_ms(self) -> float:
        """Mean wall time a turn less its CPU time: what it waited for."""
        return sum(self.wall) / len(self.wall) / 1e6 - self.cpu_ms()


def pause_commits(runtime: Runtime, seconds: float) -> None:
    """Make ``runtime``'s store sleep ``seconds`` after each inline commit (the path of a
    sequential turn), in the thread that committed, as a synced commit waits there."""
    store = runtime.store
    assert isinstance(store, SqliteStore)
    commit = store._run_tx

    def paused(conn: Any, fn: Any, args: tuple[Any, ...]) -> Any:
        result = commit(conn, fn, args)
        time.sleep(seconds)
        return result

    store._run_tx = paused  # type: ignore[method-assign]


async def section_f(workdir: str, turns: int, blocks: int, warmup: int) -> str:
    """``turns`` timed turns per side in ``blocks`` rotating blocks; the report."""
    defs = make_definitions(fixed_usage=True)
    runtimes: dict[str, Runtime] = {}
    floors: dict[str, RawTurns] = {}
    try:
        for setting in SETTINGS:
            sync = "OFF" if setting == PAUSED else setting
            tag = setting.lower().replace(", ", "-")
            path = os.path.join(workdir, f"split-{tag}.db")
            runtimes[setting] = await Runtime.open(path, definitions=defs, synchronous=sync)
            floor = RawTurns(os.path.join(workdir, f"split-raw4-{tag}.db"), 4)
            floor.conn.execute(f"PRAGMA synchronous = {sync}")
            floors[setting] = floor
        pause_commits(runtimes[PAUSED], PAUSE_S)
        floors[PAUSED].pause_s = PAUSE_S
        sides: list[Side] = []
        runners: list[Callable[[int, int], Awaitable[None]]] = []
        for setting in SETTINGS:
            runtime = runtimes[setting]
            state = await runtime.create_thread("chat")

            async def tl_turn(
                i: int, runtime: Runtime = runtime, tid: str = state.thread_id
            ) -> None:
                await one_turn(runtime, tid, i)

            sides.append(Side(f"Threadloom, {_label(setting)}"))
            runners.append(await _runner(tl_turn, warmup, sides[-1]))
        for setting in SETTINGS:
            floor = floors[setting]
            thread_id = floor.new_thread()

            async def raw_turn(i: int, floor: RawTurns = floor, tid: str = thread_id) -> None:
                floor.turn(tid, i)

            sides.append(Side(f"raw sqlite3 floor, {_label(setting)}"))
            runners.append(await _runner(raw_turn, warmup, sides[-1]))
        await rotating_blocks(runners, turns, blocks, "F")
    finally:
        for floor in floors.values():
            floor.close()
        for runtime in runtimes.values():
            await runtime.close()
    return _report(sides, turns, blocks)


def _label(setting: str) -> str:
    if setting == PAUSED:
        return f"synchronous=OFF + {PAUSE_S * 1e3:g} ms sleep a commit"
    return f"synchronous={setting}"


async def _runner(
    turn: Callable[[int], Awaitable[None]], warmup: int, side: Side
) -> Callable[[int, int], Awaitable[None]]:
    """Run ``warmup`` untimed turns now; the runner of the timed ones, which follow them."""
    for i in range(warmup):
        await turn(i)

    async def run(start: int, count: int) -> None:
        clock = time.perf_counter_ns
        before = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(warmup + start, warmup + start + count):
            t0 = clock()
            await turn(i)
            side.wall.append(clock() - t0)
        after = resource.getrusage(resource.RUSAGE_SELF)
        side.user += after.ru_utime - before.ru_utime
        side.system += after.ru_stime - before.ru_stime

    return run


def _times(ours: float, floor: float) -> str:
    """``ours / floor`` as a ratio column (``—`` when the floor's figure is not positive)."""
    return f"{ours / floor:.2f}×" if floor > 0 else "—"


def _more_user(side: Side, base: Side) -> str:
    """How much more CPU time in user space a turn of ``side`` took than one of ``base``."""
    return f"{side.per_turn_ms(side.user) - base.per_turn_ms(base.user):.2f}"


def _report(sides: list[Side], turns: int, blocks: int) -> str:
    tl_full, tl_off, tl_paused, raw_full, raw_off, raw_paused = sides
    rows = [
        [
            s.name,
            ms(percentile(s.wall, 50)),
            ms(percentile(s.wall, 90)),
            f"{s.per_turn_ms(s.user):.2f}",
            f"{s.per_turn_ms(s.system):.2f}",
            f"{s.off_cpu_ms():.2f}",
        ]
        for s in sides
    ]
    latency = table(
        ["per turn", "median (ms)", "p90 (ms)", "CPU user", "CPU kernel", "off CPU"], rows
    )

    def median(side: Side) -> float:
        return percentile(side.wall, 50)

    tl_sync = median(tl_full) - median(tl_off)
    raw_sync = median(raw_full) - median(raw_off)
    derived = table(
        ["", "Threadloom", "floor", "Threadloom / floor"],
        [
            [
                "the syncs: FULL − OFF median (ms)",
                ms(tl_sync),
                ms(raw_sync),
                _times(tl_sync, raw_sync),
            ],
            [
                "the work: OFF median (ms)",
                ms(median(tl_off)),
                ms(median(raw_off)),
                _times(median(tl_off), median(raw_off)),
            ],
            [
                "CPU at FULL, user + kernel (ms)",
                f"{tl_full.cpu_ms():.2f}",
                f"{raw_full.cpu_ms():.2f}",
                _times(tl_full.cpu_ms(), raw_full.cpu_ms()),
            ],
            [
                "off the CPU at FULL: mean wall − CPU (ms)",
                f"{tl_full.off_cpu_ms():.2f}",
                f"{raw_full.off_cpu_ms():.2f}",
                _times(tl_full.off_cpu_ms(), raw_full.off_cpu_ms()),
            ],
            [
                "the turn: FULL median (ms)",
                ms(median(tl_full)),
                ms(median(raw_full)),
                _times(median(tl_full), median(raw_full)),
            ],
        ],
    )
    # the same work, its thread asleep between commits: what sleeping alone costs the CPU
    penalty = table(
        ["CPU user per turn (ms)", "Threadloom", "floor"],
        [
            ["FULL − OFF (the syncs)", _more_user(tl_full, tl_off), _more_user(raw_full, raw_off)],
            [
                f"OFF + {PAUSE_S * 1e3:g} ms sleep a commit − OFF (no disk)",
                _more_user(tl_paused, tl_off),
                _more_user(raw_paused, raw_off),
            ],
            [
                "wall: OFF + sleeps − OFF, median",
                ms(median(tl_paused) - median(tl_off)),
                ms(median(raw_paused) - median(raw_off)),
            ],
        ],
    )
    return "\n".join(
        [
            "F. the syncs apart from the work — each side at synchronous=FULL and =OFF"
            " (for information)",
            "   the section A workload on a new file per side; OFF syncs nothing (not durable,"
            " measurement only);",
            f"   'OFF + sleep': OFF with a {PAUSE_S * 1e3:g} ms sleep after each commit in the"
            " committing thread (a sync's wait, no disk);",
            f"   {turns:,} timed turns per side in {blocks} blocks, the six sides alternating;"
            " CPU = process time per turn (ms, every thread),",
            "   off CPU = mean wall time per turn less its CPU time (waiting: the disk, the tool"
            " thread; below 0 when threads overlap)",
            "",
            latency,
            "",
            derived,
            "",
            "   the user CPU the syncs add, against what sleeping alone adds (the same sleeps,"
            " no disk): on a VM",
            "   each wake-up of a thread that slept costs CPU, to Threadloom and the floor alike",
            "",
            penalty,
        ]
    )
