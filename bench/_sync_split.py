"""Section F of the turn benchmark: a turn with and without its syncs, beside the floor's.

The floor goal compares two things that each have two parts: the work of a turn (Python
and SQLite on the CPU) and the syncs that make its commits durable (mostly waiting for the
disk). This section measures the parts apart. It runs the section A workload on four
sides, interleaved in blocks so machine noise hits all of them alike: Threadloom and the
4-commit floor, each at ``synchronous=FULL`` (both defaults) and at ``synchronous=OFF``
(nothing synced: not durable, for measurement only). Per side it prints the wall time and
the process CPU time per turn, in user space and in the kernel, and what is left of the
wall time (off the CPU: waiting for the disk or another thread); FULL − OFF is what the
syncs cost a turn. Threadloom syncs four commits a turn like the floor (docs/engine.md,
"Durability"), so a difference between the two sync costs comes from what each commit
writes and what the CPU does between them; the OFF figures are the work that no disk can
explain.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from _raw_floor import RawTurns
from _report import ms, percentile, rotating_blocks, table
from _workload import make_definitions, one_turn
from threadloom import Runtime

SYNCS = ("FULL", "OFF")


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


async def section_f(workdir: str, turns: int, blocks: int, warmup: int) -> str:
    """``turns`` timed turns per side in ``blocks`` rotating blocks; the report."""
    defs = make_definitions(fixed_usage=True)
    runtimes: dict[str, Runtime] = {}
    floors: dict[str, RawTurns] = {}
    try:
        for sync in SYNCS:
            path = os.path.join(workdir, f"split-{sync.lower()}.db")
            runtimes[sync] = await Runtime.open(path, definitions=defs, synchronous=sync)
            floor = RawTurns(os.path.join(workdir, f"split-raw4-{sync.lower()}.db"), 4)
            floor.conn.execute(f"PRAGMA synchronous = {sync}")
            floors[sync] = floor
        sides: list[Side] = []
        runners: list[Callable[[int, int], Awaitable[None]]] = []
        for sync in SYNCS:
            runtime = runtimes[sync]
            state = await runtime.create_thread("chat")

            async def tl_turn(
                i: int, runtime: Runtime = runtime, tid: str = state.thread_id
            ) -> None:
                await one_turn(runtime, tid, i)

            sides.append(Side(f"Threadloom, synchronous={sync}"))
            runners.append(await _runner(tl_turn, warmup, sides[-1]))
        for sync in SYNCS:
            floor = floors[sync]
            thread_id = floor.new_thread()

            async def raw_turn(i: int, floor: RawTurns = floor, tid: str = thread_id) -> None:
                floor.turn(tid, i)

            sides.append(Side(f"raw sqlite3 floor, synchronous={sync}"))
            runners.append(await _runner(raw_turn, warmup, sides[-1]))
        await rotating_blocks(runners, turns, blocks, "F")
    finally:
        for floor in floors.values():
            floor.close()
        for runtime in runtimes.values():
            await runtime.close()
    return _report(sides, turns, blocks)


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


def _report(sides: list[Side], turns: int, blocks: int) -> str:
    tl_full, tl_off, raw_full, raw_off = sides
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
    return "\n".join(
        [
            "F. the syncs apart from the work — each side at synchronous=FULL and =OFF"
            " (for information)",
            "   the section A workload on a new file per side; OFF syncs nothing (not durable,"
            " measurement only);",
            f"   {turns:,} timed turns per side in {blocks} blocks, the four sides alternating;"
            " CPU = process time per turn (ms, every thread),",
            "   off CPU = mean wall time per turn less its CPU time (waiting: the disk, the tool"
            " thread; below 0 when threads overlap)",
            "",
            latency,
            "",
            derived,
        ]
    )
