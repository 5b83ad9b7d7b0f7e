"""Where the SQLite store's transactions run (``write_mode``; docs/thread-core.md, "Where
writes run"). ``Transactions`` is mixed into :class:`~threadloom.store.sqlite.store.SqliteStore`,
which sets up the state it uses.

- ``"inline"``: every write at once on the event loop's thread, on a connection that never
  waits for SQLite's write lock: when another process holds it, the write goes to the
  writer thread and waits there. Lowest latency; the loop is blocked for the commit.
- ``"auto"`` (default): at once while the loop has nothing else ready to run and no write
  waits; under load a write joins a batch committed on the loop's thread right after the
  callbacks ready now (group commit, ``MAX_BATCH`` at most).
- ``"thread"``: on the writer thread, which commits what queued up while it committed;
  the loop never waits for an fsync.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from threadloom.errors import StoreError
from threadloom.store.base import Clock
from threadloom.store.sqlite.writer import Writer, loop_busy, plain_call, settle

T = TypeVar("T")
Queued = tuple["asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...], bool]
"""A write waiting for the next batch: its future, function, arguments and durability."""
Outcome = tuple[Any, BaseException | None]
Job = tuple[Callable[..., Any], tuple[Any, ...], bool]

MAX_BATCH = Writer.MAX_BATCH
"""The most writes committed together: on the loop, as on the writer thread."""


class Transactions:
    """The write paths of ``SqliteStore``."""

    write_mode: str
    synchronous: str
    clock: Clock
    commits: int
    writes: int
    _relaxable: bool
    _closed: bool
    _writer: Writer
    _wconn: sqlite3.Connection | None
    _iconn: sqlite3.Connection | None
    _queued: int
    _batch: list[Queued]
    _flush_scheduled: bool

    def _run_batch(self, jobs: list[Job]) -> list[Outcome]:
        """Run queued writes in one transaction, each in its own SAVEPOINT (group commit);
        the commit waits for the disk unless no job of the batch asked for durability."""
        conn = self._wconn
        if jobs and jobs[0][0] is plain_call:  # opening the store: not a transaction
            outcomes: list[Outcome] = []
            for fn, args, _ in jobs:
                try:
                    outcomes.append((fn(*args), None))
                except BaseException as exc:
                    outcomes.append((None, exc))
            return outcomes
        if conn is None:
            closed = StoreError("store is closed")
            return [(None, closed)] * len(jobs)
        self.writes += len(jobs)
        relax = self._relaxable and not any(durable for _, _, durable in jobs)
        if relax:
            conn.execute("PRAGMA synchronous = NORMAL")
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")  # waits for another process's lock
            except BaseException as exc:
                return [(None, exc)] * len(jobs)
            return self._jobs_in_tx(conn, jobs)
        finally:
            if relax:
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")

    def _jobs_in_tx(self, conn: sqlite3.Connection, jobs: list[Job]) -> list[Outcome]:
        """The jobs in the transaction begun on ``conn``, then its COMMIT; one job runs
        without a SAVEPOINT (its failure rolls the transaction back)."""
        if len(jobs) == 1:
            fn, args, _ = jobs[0]
            try:
                return [(self._run_tx(conn, fn, args), None)]
            except BaseException as exc:
                return [(None, exc)]
        results: list[Outcome] = []
        try:
            for fn, args, _ in jobs:
                conn.execute("SAVEPOINT job")
                try:
                    value = fn(conn, self.clock, *args)
                except BaseException as exc:
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    results.append((None, exc))
                else:
                    conn.execute("RELEASE job")
                    results.append((value, None))
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            return [(None, exc)] * len(jobs)
        return results

    def _run_tx(self, conn: sqlite3.Connection, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            result = fn(conn, self.clock, *args)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self.commits += 1
        return result

    async def _write(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> T:
        """Run ``fn(conn, clock, *args)`` in a write transaction. ``durable=False``: state
        crash recovery repairs (see docs/engine.md "Durability"): with FULL (or EXTRA)
        synchronous, its commit does not wait for the disk (``synchronous=NORMAL`` for that
        transaction); WAL keeps commit order, so the next durable commit syncs it too, and
        only an OS crash or power loss can lose such a tail."""
        if self._closed:
            raise StoreError("store is closed")
        conn = self._iconn
        if conn is not None and (
            self.write_mode == "inline" or (self._queued == 0 and not loop_busy())
        ):
            relax = self._relaxable and not durable
            if relax:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                pass  # another process holds the write lock: wait for it on the writer thread
            else:
                self.writes += 1
                return self._run_tx(conn, fn, args)
            finally:
                if relax:
                    conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        self._queued += 1
        try:
            if conn is None:  # write_mode "thread"
                return await self._writer.submit(fn, *args, durable=durable)
            return await self._join_batch(fn, args, durable)
        finally:
            self._queued -= 1

    def _join_batch(
        self, fn: Callable[..., T], args: tuple[Any, ...], durable: bool
    ) -> asyncio.Future[T]:
        """Queue a write for the next batch, committed on this thread once the callbacks
        ready now have run (so that the writes they make join it)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._batch.append((future, fn, args, durable))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush_batch)
        return future

    def _flush_batch(self) -> None:
        """Commit the queued writes in one transaction on the loop's connection, each in
        its own SAVEPOINT; a write lock held by another process sends them to the writer
        thread, which waits for it. Every write's future is settled, whatever fails."""
        batch, self._batch = self._batch[:MAX_BATCH], self._batch[MAX_BATCH:]
        if self._batch:  # the rest in the next batch: one holds the loop ~25 ms at most
            asyncio.get_running_loop().call_soon(self._flush_batch)
        else:
            self._flush_scheduled = False
        try:
            outcomes = self._commit_batch(batch)
        except Exception as failure:  # the connection failed outside every write
            outcomes = [(None, failure)] * len(batch)
        if outcomes is None:
            return
        for (future, *_), (result, error) in zip(batch, outcomes, strict=True):
            settle(future, result, error)

    def _commit_batch(self, batch: list[Queued]) -> list[Outcome] | None:
        """The batch's outcomes, or None when it went to the writer thread."""
        conn = self._iconn
        if self._closed or conn is None:
            return [(None, StoreError("store is closed"))] * len(batch)
        jobs = [(fn, args, durable) for _, fn, args, durable in batch]
        relax = self._relaxable and not any(durable for _, _, durable in jobs)
        if relax:
            conn.execute("PRAGMA synchronous = NORMAL")
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                for future, fn, args, durable in batch:
                    _chain(self._writer.submit(fn, *args, durable=durable), future)
                return None
            self.writes += len(jobs)
            return self._jobs_in_tx(conn, jobs)
        finally:
            if relax:
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")


def _chain(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    """Settle ``target`` as ``source`` settles."""

    def copy(done: asyncio.Future[Any]) -> None:
        if done.cancelled():
            target.cancel()
        else:
            settle(target, None if done.exception() else done.result(), done.exception())

    source.add_done_callback(copy)
