"""Where a turn's time goes: store calls counted and timed per turn (for information)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from _report import ms, table
from threadloom.store.sqlite.store import SqliteStore


@dataclass
class StoreCalls:
    """Store calls seen through the wrapped ``_write`` / ``_read`` of a ``SqliteStore``."""

    writes: dict[str, list[int]] = field(default_factory=dict)  # name → [calls, ns]
    reads: dict[str, list[int]] = field(default_factory=dict)
    turn_ns: int = 0
    turns: int = 0


def instrument(store: SqliteStore, calls: StoreCalls) -> Callable[[], None]:
    """Wrap the store's write and read entry points with counters; returns the undo."""
    original_write = store._write
    original_read = store._read

    def name_of(fn: Callable[..., Any]) -> str:
        return f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"

    async def write(fn: Callable[..., Any], *args: Any, **options: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return await original_write(fn, *args, **options)
        finally:
            slot = calls.writes.setdefault(name_of(fn), [0, 0])
            slot[0] += 1
            slot[1] += time.perf_counter_ns() - t0

    async def read(fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return await original_read(fn, *args)
        finally:
            slot = calls.reads.setdefault(name_of(fn), [0, 0])
            slot[0] += 1
            slot[1] += time.perf_counter_ns() - t0

    store._write = write  # type: ignore[method-assign]
    store._read = read  # type: ignore[method-assign]

    def undo() -> None:
        del store._write
        del store._read

    return undo


def breakdown(cases: Sequence[tuple[str, StoreCalls]]) -> str:
    """Section C: store calls per turn and the time they take, per case."""
    names: list[tuple[str, str]] = []
    for _, calls in cases:
        for kind, bucket in (("write", calls.writes), ("read", calls.reads)):
            for name in bucket:
                if (kind, name) not in names:
                    names.append((kind, name))
    names.sort(key=lambda kn: (kn[0] != "write", kn[1]))
    headers = ["store call (kind)"]
    for label, _ in cases:
        headers += [f"{label}: calls/turn", "ms/turn"]
    rows = []
    for kind, name in names:
        row = [f"{name} ({kind})"]
        for _, calls in cases:
            bucket = calls.writes if kind == "write" else calls.reads
            count, ns = bucket.get(name, [0, 0])
            row += [f"{count / calls.turns:.1f}", ms(ns / calls.turns)]
        rows.append(row)
    totals: list[list[str]] = [
        ["all writes"],
        ["all reads"],
        ["turn (wall)"],
        ["outside the store (engine)"],
    ]
    for _, calls in cases:
        w_n = sum(c for c, _ in calls.writes.values())
        w_ns = sum(t for _, t in calls.writes.values())
        r_n = sum(c for c, _ in calls.reads.values())
        r_ns = sum(t for _, t in calls.reads.values())
        per = calls.turns
        totals[0] += [f"{w_n / per:.1f}", ms(w_ns / per)]
        totals[1] += [f"{r_n / per:.1f}", ms(r_ns / per)]
        totals[2] += ["", ms(calls.turn_ns / per)]
        totals[3] += ["", ms((calls.turn_ns - w_ns - r_ns) / per)]
    return table(headers, [*rows, *totals])
