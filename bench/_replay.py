"""Section E of the turn benchmark: a turn's own SQL, bare and in a turn's skeleton.

The 4-commit floor stores four rows; a Threadloom turn stores them and its bookkeeping
too (the thread row's counters, the event rows, two LLM log rows and their request
bodies, the tool call), and runs them inside a turn's asynchronous shape. This section
separates the three parts of the distance to the floor: the SQL the store chose, the shape
of a turn (a run task, the model's stream, the tool's worker thread), and Threadloom's
Python around both.

It records every statement the store's write connection executes during some turns
(``write_mode="inline"``, so every write runs on that one connection; the statements that
relax ``synchronous`` for the non-durable commits are recorded too), then executes the
same statements with the same parameters, in the same transactions, on copies of the
database as it was before those turns, on connections set up as the store's (foreign keys
on; ``_skeleton.store_like_connection``): once bare, with no Python between the statements
but the loop that issues them, and twice in the skeleton of a turn (``_skeleton``), with
and without the tool's worker thread. Blocks of each alternate with blocks of Threadloom
itself and of the 4-commit floor, so machine noise hits all alike.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from _raw_floor import RawTurns, time_raw
from _report import ms, percentile, rotating_blocks, table
from _skeleton import SkeletonTurns, Statement, execute_all, store_like_connection
from _workload import make_definitions, one_turn, time_threadloom
from threadloom import Runtime
from threadloom.store.sqlite.dialect import SqliteConnection
from threadloom.store.sqlite.store import SqliteStore

SEARCH_PASS = "THREADLOOM_SEARCH_INDEX_SECONDS"
"""The interval of the SQLite store's search-backlog pass (``store/sqlite/search_index.ENV``)."""


class _Recorder:
    """Stands in for the store's write connection and notes what is executed on it."""

    def __init__(self, conn: sqlite3.Connection, into: list[Statement]) -> None:
        self._conn = conn
        self._into = into

    def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        self._into.append((False, sql, parameters))
        return self._conn.execute(sql, parameters)

    defer = execute

    def defer_checked(self, sql: str, parameters: Any, translate: Any) -> None:
        # the store's own, its statement run (and noted) through this execute
        SqliteConnection.defer_checked(self, sql, parameters, translate)  # type: ignore[arg-type]

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        self._into.append((True, sql, rows))
        return self._conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@dataclass
class Recorded:
    """The statements of each recorded turn."""

    turns: list[list[Statement]] = field(default_factory=list)

    def per_turn(self, sql: str) -> float:
        """How many statements of a turn are exactly ``sql``."""
        hits = sum(1 for turn in self.turns for _, text, _ in turn if text == sql)
        return hits / len(self.turns)


async def record(path: str, snapshot: str, warmup: int, turns: int) -> Recorded:
    """Run ``warmup`` turns, copy the database to ``snapshot``, then record ``turns``."""
    defs = make_definitions(fixed_usage=True)
    # the search backlog's background pass off: its own commit, landing inside a recorded
    # turn, is not the turn's (the turn's statements still note its messages in the backlog)
    before = os.environ.get(SEARCH_PASS)
    os.environ[SEARCH_PASS] = "off"
    try:
        runtime = await Runtime.open(f"sqlite:///{path}", definitions=defs, write_mode="inline")
    finally:
        if before is None:
            del os.environ[SEARCH_PASS]
        else:
            os.environ[SEARCH_PASS] = before
    recorded = Recorded()
    try:
        store = runtime.store
        assert isinstance(store, SqliteStore) and store._iconn is not None
        state = await runtime.create_thread("chat")
        for i in range(warmup):
            await one_turn(runtime, state.thread_id, i)
        store._iconn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copyfile(path, snapshot)
        statements: list[Statement] = []
        real = store._iconn
        store._iconn = _Recorder(real, statements)  # type: ignore[assignment]
        try:
            for i in range(warmup, warmup + turns):
                statements.clear()
                await one_turn(runtime, state.thread_id, i)
                recorded.turns.append(list(statements))
        finally:
            store._iconn = real
    finally:
        await runtime.close()
    return recorded


def _same_rows(replayed: sqlite3.Connection, path: str, what: str) -> None:
    """Fail loudly unless a replay left the rows the real turns left."""
    original = sqlite3.connect(path)
    try:
        for table_name in ("messages", "thread_events", "logs", "log_requests", "tool_calls"):
            query = f"SELECT count(*) FROM {table_name}"
            want = original.execute(query).fetchone()[0]
            got = replayed.execute(query).fetchone()[0]
            if want != got:
                raise RuntimeError(f"{what}: {table_name} holds {got:,} rows, not {want:,}")
    finally:
        original.close()


async def section_e(workdir: str, turns: int, blocks: int, warmup: int, goal: float) -> str:
    """Record ``warmup + turns`` turns; then time, in rotating blocks, Threadloom, the
    recorded turns in the skeleton (with and without the tool's worker thread), their SQL
    bare, and the 4-commit floor; the report."""
    path = os.path.join(workdir, "replay.db")
    snapshot = os.path.join(workdir, "replay-snapshot.db")
    recorded = await record(path, snapshot, warmup, warmup + turns)
    copies = {}
    for name in ("bare", "hop", "inline"):
        copies[name] = os.path.join(workdir, f"replay-{name}.db")
        shutil.copyfile(snapshot, copies[name])
    bare = store_like_connection(copies["bare"])
    hop = SkeletonTurns(copies["hop"], recorded.turns, hop=True)
    inline = SkeletonTurns(copies["inline"], recorded.turns, hop=False)
    raw = RawTurns(os.path.join(workdir, "replay-floor.db"), 4)
    runtime = await Runtime.open(
        f"sqlite:///{os.path.join(workdir, 'replay-live.db')}",
        definitions=make_definitions(fixed_usage=True),
    )
    sides: dict[str, list[int]] = {key: [] for key in ("tl", "hop", "inline", "sql", "floor")}
    try:
        thread = (await runtime.create_thread("chat")).thread_id
        floor_thread = raw.new_thread()
        bare_turns = iter(recorded.turns)
        clock = time.perf_counter_ns

        async def live(start: int, count: int) -> None:
            await time_threadloom(runtime, thread, start, count, sides["tl"])

        def skeleton(turns_of: SkeletonTurns, key: str) -> Callable[[int, int], Awaitable[None]]:
            async def run(start: int, count: int) -> None:
                for _ in range(count):
                    t0 = clock()
                    await turns_of.turn()
                    sides[key].append(clock() - t0)

            return run

        async def sql(start: int, count: int) -> None:
            for _ in range(count):
                turn = next(bare_turns)
                t0 = clock()
                execute_all(bare, turn)
                sides["sql"].append(clock() - t0)

        async def floor(start: int, count: int) -> None:
            time_raw(raw, floor_thread, start, count, sides["floor"])

        runners = [live, skeleton(hop, "hop"), skeleton(inline, "inline"), sql, floor]
        for run in runners:  # the warm-up turns: recorded first, timed by no side
            await run(0, warmup)
        for samples in sides.values():
            samples.clear()
        await rotating_blocks(runners, turns, blocks, "E")
        for conn in (bare, hop.conn, inline.conn):
            _same_rows(conn, path, "SQL replayed" if conn is bare else "skeleton")
    finally:
        await runtime.close()
        for closing in (bare.close, hop.close, inline.close, raw.close):
            closing()
    return report(recorded, sides, turns, warmup, goal)


def report(
    recorded: Recorded, sides: dict[str, list[int]], turns: int, warmup: int, goal: float
) -> str:
    """Section E's tables: the five sides, then the goal's allowance spent."""
    statements = sum(len(turn) for turn in recorded.turns) / len(recorded.turns)
    commits = recorded.per_turn("COMMIT")
    median = {key: percentile(samples, 50) for key, samples in sides.items()}
    names = {
        "tl": "Threadloom",
        "hop": "skeleton: its SQL + run task + model streams + tool thread",
        "inline": "skeleton with the tool called on the loop",
        "sql": f"its SQL alone ({statements:.0f} statements, {commits:.0f} commits)",
        "floor": "raw sqlite3, 4 commits per turn (floor)",
    }
    rows = [
        [
            names[key],
            ms(median[key]),
            ms(percentile(samples, 90)),
            f"{median[key] / median['floor']:.2f}×",
        ]
        for key, samples in sides.items()
    ]
    allowed = goal * median["floor"]
    budget = [
        [f"the goal: {goal:g} × the floor", ms(allowed)],
        ["the skeleton: Threadloom's SQL in a turn's shape, none of its Python", ms(median["hop"])],
        ["left for Threadloom's Python (engine, thread layer, store)", ms(allowed - median["hop"])],
        ["Threadloom's Python now (Threadloom − skeleton)", ms(median["tl"] - median["hop"])],
    ]
    return "\n".join(
        [
            "E. a turn's own SQL, bare and in a turn's skeleton (for information)",
            f"   {turns + warmup} turns recorded on a new thread (every statement of the store's"
            " write connection, after",
            f"   {warmup} warm-up turns), then executed again on copies of the database as it"
            " was before them (foreign",
            "   keys on, WAL, synchronous=FULL, as the store's connections): bare, one"
            " statement after the other; and",
            "   in a turn's skeleton (bench/_skeleton.py: the same transactions in a run task"
            " between two zero-latency",
            "   model streams, the tool on Threadloom's worker threads), with Threadloom"
            " itself and the floor, in",
            f"   rotating blocks ({warmup} turns each first, untimed): how much of a turn is the"
            " SQL the store chose and",
            "   the shape of a turn, how much the Python around them",
            "",
            table(["per turn", "median (ms)", "p90 (ms)", "÷ floor"], rows),
            "",
            table(["the goal's allowance, medians", "ms"], budget),
        ]
    )
