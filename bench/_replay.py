"""Section E of the turn benchmark: a turn's own SQL, replayed on plain ``sqlite3``.

The 4-commit floor stores four rows; a Threadloom turn stores them and its bookkeeping
too (the thread row's counters, the event rows, two LLM log rows and their request
bodies, the tool call). This section separates the two questions behind the floor goal:
how much of a turn is the SQL the store chose, and how much is the Python around it.

It records every statement the store's write connection executes during some turns
(``write_mode="inline"``, so every write runs on that one connection; the statements that
relax ``synchronous`` for the non-durable commits are recorded too), then executes the
same statements with the same parameters, in the same transactions, on a copy of the
database as it was before those turns — plain ``sqlite3``, the same durability, no Python
between the statements but the loop that issues them. Blocks of the replay alternate
with blocks of the 4-commit floor so machine noise hits both alike.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from _raw_floor import RawTurns, time_raw
from _report import ms, percentile, table
from _workload import make_definitions, one_turn
from threadloom import Runtime
from threadloom.store.sqlite.store import SqliteStore

Statement = tuple[str, Any]
"""``(sql, parameters)``; parameters a list of rows for an ``executemany``."""


class _Recorder:
    """Stands in for the store's write connection and notes what is executed on it."""

    def __init__(self, conn: sqlite3.Connection, into: list[tuple[bool, str, Any]]) -> None:
        self._conn = conn
        self._into = into

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        self._into.append((False, sql, parameters))
        return self._conn.execute(sql, parameters)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        self._into.append((True, sql, rows))
        return self._conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@dataclass
class Recorded:
    """The statements of each recorded turn, and the turns' own latencies (ns)."""

    turns: list[list[tuple[bool, str, Any]]] = field(default_factory=list)
    latencies: list[int] = field(default_factory=list)

    def per_turn(self, sql: str) -> float:
        """How many statements of a turn are exactly ``sql``."""
        hits = sum(1 for turn in self.turns for _, text, _ in turn if text == sql)
        return hits / len(self.turns)


async def record(path: str, snapshot: str, warmup: int, turns: int) -> Recorded:
    """Run ``warmup`` turns, copy the database to ``snapshot``, then record ``turns``."""
    defs = make_definitions(fixed_usage=True)
    runtime = await Runtime.open(f"sqlite:///{path}", definitions=defs, write_mode="inline")
    recorded = Recorded()
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore) and store._iconn is not None
        state = await runtime.create_thread("chat")
        for i in range(warmup):
            await one_turn(runtime, state.thread_id, i)
        store._iconn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(path, snapshot)
        statements: list[tuple[bool, str, Any]] = []
        real = store._iconn
        store._iconn = _Recorder(real, statements)  # type: ignore[assignment]
        try:
            clock = time.perf_counter_ns
            for i in range(warmup, warmup + turns):
                statements.clear()
                t0 = clock()
                await one_turn(runtime, state.thread_id, i)
                recorded.latencies.append(clock() - t0)
                recorded.turns.append(list(statements))
        finally:
            store._iconn = real
    finally:
        await runtime.close()
    return recorded


def replay_block(
    conn: sqlite3.Connection, turns: Sequence[list[tuple[bool, str, Any]]], out: list[int]
) -> None:
    """Execute the recorded turns in order, each timed on its own."""
    clock = time.perf_counter_ns
    execute, executemany = conn.execute, conn.executemany
    for turn in turns:
        t0 = clock()
        for many, sql, parameters in turn:
            if many:
                executemany(sql, parameters)
            else:
                execute(sql, parameters)
        out.append(clock() - t0)


def _same_rows(replayed: sqlite3.Connection, path: str) -> None:
    """Fail loudly unless the replay left the rows the real turns left."""
    original = sqlite3.connect(path)
    try:
        for table_name in ("messages", "thread_events", "logs", "log_requests", "tool_calls"):
            query = f"SELECT count(*) FROM {table_name}"
            want = original.execute(query).fetchone()[0]
            got = replayed.execute(query).fetchone()[0]
            if want != got:
                raise RuntimeError(f"replay: {table_name} holds {got:,} rows, not {want:,}")
    finally:
        original.close()


async def section_e(workdir: str, turns: int, blocks: int, warmup: int) -> str:
    """Record ``turns`` turns, replay them against the 4-commit floor; the report."""
    path = os.path.join(workdir, "replay.db")
    snapshot = os.path.join(workdir, "replay-snapshot.db")
    recorded = await record(path, snapshot, warmup, turns)
    conn = sqlite3.connect(snapshot, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    raw = RawTurns(os.path.join(workdir, "replay-floor.db"), 4)
    replayed: list[int] = []
    floor: list[int] = []
    try:
        floor_thread = raw.new_thread()
        time_raw(raw, floor_thread, 0, warmup, [])
        size = -(-turns // blocks)
        for start in range(0, turns, size):
            replay_block(conn, recorded.turns[start : start + size], replayed)
            time_raw(raw, floor_thread, warmup + start, min(size, turns - start), floor)
        _same_rows(conn, path)
    finally:
        conn.close()
        raw.close()
    statements = sum(len(turn) for turn in recorded.turns) / turns
    commits = recorded.per_turn("COMMIT")
    rows = []
    for name, samples in (
        ("Threadloom (timed while recording)", recorded.latencies),
        (f"its SQL replayed ({statements:.0f} statements, {commits:.0f} commits)", replayed),
        ("raw sqlite3, 4 commits per turn (floor)", floor),
    ):
        rows.append([name, ms(percentile(samples, 50)), ms(percentile(samples, 90))])
    median = {
        "tl": percentile(recorded.latencies, 50),
        "sql": percentile(replayed, 50),
        "floor": percentile(floor, 50),
    }
    ratios = table(
        ["median ratio", "value"],
        [
            ["SQL replayed / floor", f"{median['sql'] / median['floor']:.2f}×"],
            ["Threadloom / SQL replayed", f"{median['tl'] / median['sql']:.2f}×"],
            ["Threadloom / floor", f"{median['tl'] / median['floor']:.2f}×"],
            [
                "Python around the SQL, share of the turn",
                f"{(median['tl'] - median['sql']) / median['tl']:.0%}",
            ],
        ],
    )
    return "\n".join(
        [
            "E. a turn's own SQL replayed on raw sqlite3 (for information)",
            f"   {turns} turns on a new thread (after {warmup} warm-up turns) with every"
            " statement of the store's write",
            "   connection recorded, then the same statements and parameters executed on a"
            " copy of the database",
            "   as it was before them (WAL, synchronous=FULL, NORMAL where the store relaxes"
            " it), in blocks",
            "   alternating with the 4-commit floor: how much of a turn is the SQL the store"
            " chose, how much",
            "   the Python around it",
            "",
            table(["per turn", "median (ms)", "p90 (ms)"], rows),
            "",
            ratios,
        ]
    )
