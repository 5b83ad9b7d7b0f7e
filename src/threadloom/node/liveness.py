"""A node's liveness on a store several nodes share (spec 12 §12.2, §12.4 rule 4, §12.6).

Every ``heartbeat_s`` the node refreshes its row; a node whose heartbeat has not succeeded
for ``ttl_s − 5 s`` (at least half the TTL) fences itself: it aborts its executions without
writing and starts none until a heartbeat succeeds again, so a node cut off from the
database stops acting on the outside world before anyone may take its threads over. Every
``sweep_s`` (with up to a fifth of it as jitter, so the nodes' sweeps spread) it settles the
runs lost with dead nodes (``NodeHost.recover``, the same code as start-up recovery) and
starts runs for queued threads that no live node runs — the safety net that bounds a
delivery's delay when a wake-up was missed.

On a store one process runs (SQLite) there is nothing to keep: start-up recovery alone
replaces all of this (§12.6.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from threadloom.errors import InvalidArgument, StoreUnavailable
from threadloom.node.cluster import Cluster
from threadloom.node.host import NodeHost

logger = logging.getLogger("threadloom.engine")


_ENV = {
    "heartbeat_s": "THREADLOOM_NODE_HEARTBEAT_SECONDS",
    "ttl_s": "THREADLOOM_NODE_TTL_SECONDS",
    "sweep_s": "THREADLOOM_SWEEP_SECONDS",
    "chunk_coalesce_ms": "THREADLOOM_CHUNK_COALESCE_MS",
}


@dataclass(frozen=True)
class NodeTimings:
    """The timings of spec 12 §12.6.1 (``THREADLOOM_NODE_*`` and ``THREADLOOM_SWEEP_SECONDS``)."""

    heartbeat_s: float = 5.0
    ttl_s: float = 15.0
    sweep_s: float = 5.0
    chunk_coalesce_ms: float = 50.0
    """How long a run's owner gathers the deltas of one message before it sends them to
    the other nodes as one notification (spec 12 §12.7.2 rule 2; 0: each at once)."""

    def check(
        self,
        heartbeat: str = "the node heartbeat",
        ttl: str = "the node TTL",
        sweep: str = "the sweep interval",
    ) -> None:
        """Refuse timings that break the 30 s bound or make a live node look dead (the
        names are those the message gives the three settings)."""
        if min(self.heartbeat_s, self.ttl_s, self.sweep_s) <= 0:
            raise InvalidArgument(f"{heartbeat}, {ttl} and {sweep} must be positive")
        if not 0 <= self.chunk_coalesce_ms <= 60_000:
            raise InvalidArgument(
                "THREADLOOM_CHUNK_COALESCE_MS must be a number of milliseconds from 0 to"
                f" 60000, not {self.chunk_coalesce_ms:g}"
            )
        if self.ttl_s + self.sweep_s + 3 >= 30:
            raise InvalidArgument(
                f"{ttl} + {sweep} + 3 s must stay under 30 s (now {self.ttl_s:g} +"
                f" {self.sweep_s:g} + 3): a lost run must be settled within 30 s of its"
                " node's death"
            )
        if self.heartbeat_s > self.ttl_s / 3:
            raise InvalidArgument(
                f"{heartbeat} must be at most a third of {ttl} (now {self.heartbeat_s:g} and"
                f" {self.ttl_s:g}): one late heartbeat must not make a live node look dead"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> NodeTimings:
        """The timings ``THREADLOOM_NODE_HEARTBEAT_SECONDS``, ``THREADLOOM_NODE_TTL_SECONDS``,
        ``THREADLOOM_SWEEP_SECONDS`` and ``THREADLOOM_CHUNK_COALESCE_MS`` give (spec 12
        §12.8 rule 7), else the defaults."""
        values: dict[str, float] = {}
        for name, key in _ENV.items():
            raw = (env.get(key) or "").strip()
            if raw:
                try:
                    values[name] = float(raw)
                except ValueError:
                    unit = "milliseconds" if key.endswith("_MS") else "seconds"
                    raise InvalidArgument(
                        f"{key} must be a number of {unit}, not {raw!r}"
                    ) from None
        return cls(**values)

    @property
    def fence_after_s(self) -> float:
        """How long without a successful heartbeat before the node fences itself."""
        return max(self.ttl_s - 5.0, self.ttl_s / 2)


class Liveness:
    """The heartbeat, self-fencing and sweeper of one node."""

    def __init__(self, host: NodeHost, cluster: Cluster, timings: NodeTimings) -> None:
        self.host = host
        self.cluster = cluster
        self.timings = timings
        self.fenced = False
        """True while the node's heartbeat has failed for too long (it runs nothing)."""
        self.sweeps = 0
        self.swept_at: float | None = None
        """``time.time()`` when this node's last sweep ended (metrics: the sweeper's lag)."""
        self._last_ok = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._beating: asyncio.Task[None] | None = None
        """The heartbeat in flight (it may hang on a stalled connection)."""
        self._sweeping: asyncio.Task[None] | None = None
        self._suspects: set[str] = set()
        """Threads the last sweep found running under this node's lease with no run here."""
        self._failovers = 0
        """The store's failovers already acted on."""

    async def start(self) -> None:
        await self.cluster.register_node()
        await self.cluster.heartbeat()  # learns whether other nodes are live
        self._last_ok = time.monotonic()
        self._failovers = self.cluster.failovers
        loop = asyncio.get_running_loop()

        def found() -> None:  # on the store's worker thread
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._failover_found)

        self.cluster.watch_failovers(found)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="liveness")

    async def stop(self) -> None:
        """End the loops (the node row stays until ``leave``)."""
        for task in (self._task, self._beating, self._sweeping):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._beating = self._sweeping = None

    async def _loop(self) -> None:
        """Heartbeats and sweeps run as tasks of their own, never awaited here: a write on
        a connection that stalls (packets dropped, the database paused) blocks without an
        error, and the loop must still see the heartbeat is late and fence the node
        (spec 12 §12.2 rule 4). A heartbeat or sweep still in flight is not started twice."""
        t = self.timings
        now = time.monotonic()
        next_beat = now + t.heartbeat_s
        next_sweep = now + t.sweep_s * random.uniform(0.8, 1.2)
        while True:
            await asyncio.sleep(max(0.0, min(next_beat, next_sweep) - time.monotonic()))
            now = time.monotonic()
            if now >= next_beat:
                next_beat = now + t.heartbeat_s
                if self._beating is None or self._beating.done():
                    self._beating = self._spawn(self.beat(), "heartbeat")
                self._fence_if_late()
            if now >= next_sweep:
                next_sweep = now + t.sweep_s * random.uniform(0.8, 1.2)
                if self._sweeping is None or self._sweeping.done():
                    self._sweeping = self._spawn(self.sweep(), "sweep")

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        task.add_done_callback(functools.partial(_report, what))
        return task

    def fenced_now(self) -> bool:
        """Whether the node must act as fenced at this moment: fenced already, or its last
        successful heartbeat started longer ago than the fencing delay (it was paused, or
        the database is out of reach), so another node may have taken its runs over —
        fenced now if so, without waiting for the loop's next turn (which a paused
        process's other tasks may precede when it wakes)."""
        self._fence_if_late()
        return self.fenced

    def _fence_if_late(self) -> None:
        if not self.fenced and time.monotonic() - self._last_ok >= self.timings.fence_after_s:
            logger.error(
                "node %s: no heartbeat for %.1f s, aborting its executions (self-fencing)",
                self.node_id,
                time.monotonic() - self._last_ok,
            )
            self.fenced = True
            self.host.drop_all()

    async def beat(self) -> None:
        """One heartbeat; fences the node, or lifts its fence, by the outcome."""
        started = time.monotonic()  # the row says when the write began, not when it ended
        if await self.cluster.heartbeat():
            self._last_ok = started
            if self.cluster.failovers != self._failovers and not self.fenced:
                self._failover()
            if self.fenced:
                logger.warning("node %s: heartbeat restored, running again", self.node_id)
                try:  # the runs it dropped still name it: nobody else would settle them
                    await self.host.recover(mine=True)
                except Exception:
                    logger.exception("settling the runs dropped while fenced failed")
                    return  # still fenced: tried again at the next heartbeat
                self.fenced = False
                self.host.resume()
            return
        self._fence_if_late()

    def _failover_found(self) -> None:
        """The store's first new connection on the new primary found the failover: act
        now, before runs start there, not at the next heartbeat (which then lifts the
        fence; one is started at once when none is in flight)."""
        if self.fenced or self.cluster.failovers == self._failovers or self.host.closing:
            return
        self._failover()
        if self._beating is None or self._beating.done():
            self._beating = self._spawn(self.beat(), "heartbeat")

    def _failover(self) -> None:
        """The database failed over to a standby (spec 17 §17.5.3 rule 4): what this node's
        executions hold in memory may be ahead of it (an asynchronous standby lacks the last
        commits), so they are dropped as a fenced node's are, and settled from the store
        at once by the fence's lifting (``beat``)."""
        self._failovers = self.cluster.failovers
        logger.warning(
            "node %s: the database failed over; dropping its executions and settling them"
            " from the store",
            self.node_id,
        )
        self.fenced = True
        self.host.drop_all()
        self.host.forget_cached()

    async def sweep(self) -> None:
        """Settle the runs lost with dead nodes, then start the queues no live node runs."""
        if self.fenced or self.host.closing:
            return
        self.sweeps += 1
        await self.host.recover()
        await self._orphans()
        for thread_id in await self.cluster.claimable_queues():
            self.host.wake(thread_id)
        await self.host.resume_parked()
        self.swept_at = time.time()

    async def _orphans(self) -> None:
        """Settle the runs the store says this node runs while no execution here does
        (spec 12 §12.6.6): a run whose task ended without its settlement. A thread is
        settled when two sweeps in a row found it so — never one between its start's
        commit and its registration."""
        held = await self.cluster.lost_runs(limit=1_000, mine=True)
        found = {t for t in held if not self.host.owns(t)}
        confirmed, self._suspects = found & self._suspects, found - self._suspects
        if confirmed:
            logger.error(
                "node %s: %d run(s) it holds have no execution here; settling them: %s",
                self.node_id,
                len(confirmed),
                ", ".join(sorted(confirmed)),
            )
            await self.host.recover(threads=sorted(confirmed))

    @property
    def node_id(self) -> str | None:
        return self.cluster.node_id


def _report(what: str, task: asyncio.Task[None]) -> None:
    """A failed heartbeat or sweep is logged; the next one tries again. The store out of
    reach (a database restart) is one line each time, not a traceback a second."""
    if task.cancelled() or (exc := task.exception()) is None:
        return
    if isinstance(exc, StoreUnavailable):
        logger.warning("%s failed: %s", what, exc)
    else:
        logger.error("%s failed", what, exc_info=exc)
