"""A node's liveness on a store several nodes share (spec 12 §12.2, §12.4 rule 4, §12.6).

Every ``heartbeat_s`` the node refreshes its row; a node whose heartbeat has not succeeded
for ``ttl_s − 5 s`` (at least half the TTL) fences itself: it aborts its executions without
writing and starts none until a heartbeat succeeds again, so a node cut off from the
database stops acting on the outside world before anyone may take its threads over. Every
``sweep_s`` (with up to a fifth of it as jitter, so the nodes' sweeps spread) it settles the
runs lost with dead nodes (``Runtime.recover``, the same code as start-up recovery) and
starts runs for queued threads that no live node runs — the safety net that bounds a
delivery's delay when a wake-up was missed.

On a store one process runs (SQLite) there is nothing to keep: start-up recovery alone
replaces all of this (§12.6.5).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from threadloom.errors import InvalidArgument

if TYPE_CHECKING:
    from threadloom.engine.runtime import Runtime

logger = logging.getLogger("threadloom.engine")


_ENV = {
    "heartbeat_s": "THREADLOOM_NODE_HEARTBEAT_SECONDS",
    "ttl_s": "THREADLOOM_NODE_TTL_SECONDS",
    "sweep_s": "THREADLOOM_SWEEP_SECONDS",
}


@dataclass(frozen=True)
class NodeTimings:
    """The timings of spec 12 §12.6.1 (``THREADLOOM_NODE_*`` and ``THREADLOOM_SWEEP_SECONDS``)."""

    heartbeat_s: float = 5.0
    ttl_s: float = 15.0
    sweep_s: float = 5.0

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
        """The timings ``THREADLOOM_NODE_HEARTBEAT_SECONDS``, ``THREADLOOM_NODE_TTL_SECONDS``
        and ``THREADLOOM_SWEEP_SECONDS`` give (spec 12 §12.8 rule 7), else the defaults."""
        values: dict[str, float] = {}
        for name, key in _ENV.items():
            raw = (env.get(key) or "").strip()
            if raw:
                try:
                    values[name] = float(raw)
                except ValueError:
                    raise InvalidArgument(
                        f"{key} must be a number of seconds, not {raw!r}"
                    ) from None
        return cls(**values)

    @property
    def fence_after_s(self) -> float:
        """How long without a successful heartbeat before the node fences itself."""
        return max(self.ttl_s - 5.0, self.ttl_s / 2)


class Liveness:
    """The heartbeat, self-fencing and sweeper of one node."""

    def __init__(self, runtime: Runtime, timings: NodeTimings) -> None:
        self.runtime = runtime
        self.timings = timings
        self.fenced = False
        """True while the node's heartbeat has failed for too long (it runs nothing)."""
        self.sweeps = 0
        self._last_ok = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.runtime.store.register_node()
        self._last_ok = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="liveness")

    async def stop(self) -> None:
        """End the loops (the node row stays until ``leave``)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        t = self.timings
        now = time.monotonic()
        next_beat = now + t.heartbeat_s
        next_sweep = now + t.sweep_s * random.uniform(0.8, 1.2)
        while True:
            await asyncio.sleep(max(0.0, min(next_beat, next_sweep) - time.monotonic()))
            now = time.monotonic()
            if now >= next_beat:
                next_beat = now + t.heartbeat_s
                await self.beat()
            if now >= next_sweep:
                next_sweep = now + t.sweep_s * random.uniform(0.8, 1.2)
                try:
                    await self.sweep()
                except Exception:  # a failed sweep is retried at the next
                    logger.exception("sweep failed")

    async def beat(self) -> None:
        """One heartbeat; fences the node, or lifts its fence, by the outcome."""
        if await self.runtime.store.heartbeat():
            self._last_ok = time.monotonic()
            if self.fenced:
                logger.warning("node %s: heartbeat restored, running again", self.node_id)
                self.fenced = False
                self.runtime.runs.fenced = False
            return
        if not self.fenced and time.monotonic() - self._last_ok >= self.timings.fence_after_s:
            logger.error(
                "node %s: no heartbeat for %.1f s, aborting its executions (self-fencing)",
                self.node_id,
                time.monotonic() - self._last_ok,
            )
            self.fenced = True
            self.runtime.runs.drop_all()

    async def sweep(self) -> None:
        """Settle the runs lost with dead nodes, then start the queues no live node runs."""
        if self.fenced or self.runtime.runs.closing:
            return
        self.sweeps += 1
        await self.runtime.recover()
        for thread_id in await self.runtime.store.claimable_queues():
            self.runtime.runs.wake(thread_id)

    @property
    def node_id(self) -> str | None:
        return self.runtime.store.node_id
