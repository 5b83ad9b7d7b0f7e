"""A turn's skeleton for section E of the turn benchmark: the statements a Threadloom turn
executed, recorded, run again inside the least asyncio a turn of this shape needs.

The floor goal compares a whole Threadloom turn with four bare commits. Between the two lie
three things of different kinds: the SQL the store chose (the floor stores the four message
rows and nothing else), the asynchronous shape every agent runtime has (a run task, the
model's stream, the plain ``def`` tool's worker thread, spec 04 §4.5.1), and the Python of
the engine, the thread layer and the store. :class:`SkeletonTurns` keeps the first two and
drops the third: each turn executes one recorded turn's statements, transaction by
transaction, at the points of a turn where Threadloom commits them —

1. ``send``: the user message's transaction, then a run task started and a future to wait on
   (``send_message`` + ``wait_idle``);
2. the run: a zero-latency model stream (an async generator of two events), the tool call's
   transaction, the tool on Threadloom's own worker threads (``engine.step.threads.ToolThreads``,
   the hop the engine makes) or called inline, the tool result's transaction, the second
   model stream, the final transaction, the future settled.

So its time is what a turn costs with Threadloom's SQL and no Python of Threadloom's: what is
left of the goal's allowance after it is what all of that Python may take.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

from _workload import echo
from threadloom.engine.step.threads import ToolThreads
from threadloom.store.sqlite.store import connect, prefill_steady_wal

Statement = tuple[bool, str, Any]
"""``(executemany, sql, parameters)`` as the recorder noted it."""


def store_like_connection(path: str) -> sqlite3.Connection:
    """A plain ``sqlite3`` connection with the store's own settings (``connect``: foreign
    keys on, ``synchronous=FULL``, its checkpoint threshold and statement cache), on WAL,
    with the WAL prefilled to its steady size as the store does at open — so that replayed
    statements cost what they cost in Threadloom."""
    conn = connect(path, "FULL", busy_timeout_ms=5000)
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise RuntimeError(f"replay: could not switch {path} to WAL (got {mode!r})")
    prefill_steady_wal(conn, path)
    return conn


def transactions(turn: Sequence[Statement]) -> list[list[Statement]]:
    """A recorded turn cut after each ``COMMIT``; fails unless it holds the four
    transactions the workload's turn commits (user message, tool call, tool result,
    final answer), so that a changed workload cannot go unnoticed."""
    out: list[list[Statement]] = []
    current: list[Statement] = []
    for statement in turn:
        current.append(statement)
        if statement[1] == "COMMIT":
            out.append(current)
            current = []
    if current:  # statements after the last commit (a pragma reset) belong to it
        if not out:
            raise RuntimeError("skeleton: a recorded turn without a COMMIT")
        out[-1].extend(current)
    if len(out) != 4:
        raise RuntimeError(f"skeleton: a recorded turn with {len(out)} commits, not 4")
    return out


def execute_all(conn: sqlite3.Connection, statements: Sequence[Statement]) -> None:
    """The statements in order, as recorded."""
    execute, executemany = conn.execute, conn.executemany
    for many, sql, parameters in statements:
        if many:
            executemany(sql, parameters)
        else:
            execute(sql, parameters)


async def model_stream(final: bool) -> AsyncIterator[tuple[str, object]]:
    """A zero-latency model's stream: a delta and the finish."""
    yield ("delta", "done" if final else '{"v":1}')
    yield ("finish", "stop" if final else "tool_calls")


class SkeletonTurns:
    """Recorded turns executed inside a turn's asynchronous shape (module docstring);
    ``hop``: the tool on worker threads (True) or called on the loop (False)."""

    def __init__(self, path: str, turns: Sequence[Sequence[Statement]], hop: bool) -> None:
        self.conn = store_like_connection(path)
        self.turns = [transactions(turn) for turn in turns]
        self.next = 0
        self.hop = hop
        self.tools = ToolThreads()
        self._idle: asyncio.Future[None] | None = None
        self._run: asyncio.Task[None] | None = None
        """The run in flight, held so that the loop's weak reference is not its only one."""

    async def turn(self) -> None:
        """One turn: send, then wait until its run is over."""
        await self._send()
        assert self._idle is not None
        await self._idle

    async def _send(self) -> None:
        if self.next >= len(self.turns):
            raise RuntimeError(f"skeleton: only {len(self.turns)} turns were recorded")
        txs = self.turns[self.next]
        self.next += 1
        execute_all(self.conn, txs[0])
        self._idle = asyncio.get_running_loop().create_future()
        self._run = asyncio.create_task(self._execute(txs, self._idle))

    async def _execute(self, txs: list[list[Statement]], idle: asyncio.Future[None]) -> None:
        try:
            async for _ in model_stream(final=False):
                pass
            execute_all(self.conn, txs[1])
            if self.hop:
                await self.tools.run(echo, 1)
            else:
                echo(1)
            execute_all(self.conn, txs[2])
            async for _ in model_stream(final=True):
                pass
            execute_all(self.conn, txs[3])
        except Exception as exc:  # the waiting turn raises it
            idle.set_exception(exc)
        else:
            idle.set_result(None)

    def close(self) -> None:
        self.tools.shutdown()
        self.conn.close()
