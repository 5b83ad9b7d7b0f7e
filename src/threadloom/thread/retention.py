"""The replay window of a thread's event rows (spec 09 §9.6.1).

Every durable change writes an event row (``thread_events``) so that a stream client can
resume from the ``seq`` it last saw. Kept forever, they would grow with every turn of
every thread; the window bounds them: a row goes once it is older than
:attr:`EventRetention.seconds` (default one hour) or once its thread has more than
:attr:`EventRetention.events` newer rows (default 10,000). A client resuming from a pruned
position gets ``resync`` (``"expired"``) and rebuilds from a snapshot (spec 09 §9.7).

The runtime that owns a store runs a pass every :attr:`EventRetention.interval` seconds
(:class:`EventPruner`); a pass works in chunks of one short transaction each
(``Store.prune_events``), yielding to the event loop between them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass

from threadloom.errors import InvalidArgument
from threadloom.store.base import Clock, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EventRetention:
    """How long event rows are kept for stream resumption, and how often they are pruned."""

    seconds: float = 3600.0
    """Rows older than this go (``THREADLOOM_STREAM_REPLAY_SECONDS``)."""
    events: int = 10_000
    """Rows with more newer rows than this in their thread go
    (``THREADLOOM_STREAM_REPLAY_EVENTS``)."""
    interval: float | None = 60.0
    """Seconds between two passes of the runtime's pruner; ``None``: no pruner (a pass
    runs only when ``Runtime.prune_events`` is called)."""

    def __post_init__(self) -> None:
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise InvalidArgument(f"retention seconds must be positive, not {self.seconds!r}")
        if isinstance(self.events, bool) or not isinstance(self.events, int) or self.events < 1:
            raise InvalidArgument(f"retention events must be 1 or more, not {self.events!r}")
        if self.interval is not None and not (self.interval > 0 and math.isfinite(self.interval)):
            raise InvalidArgument(f"retention interval must be positive, not {self.interval!r}")


@dataclass(frozen=True)
class PruneReport:
    """What one pass did."""

    rows: int
    """Event rows deleted."""
    threads: int
    """Threads whose rows were pruned (``events_pruned_through`` moved)."""
    chunks: int
    """Transactions the pass took."""
    seconds: float
    """Wall time of the pass."""


async def prune_events(store: Store, retention: EventRetention, clock: Clock) -> PruneReport:
    """One pass over every thread with event rows left: delete what the window no longer
    holds, one chunk (one transaction) at a time."""
    started = time.perf_counter()
    older_than = clock() - int(retention.seconds * 1_000_000)
    rows = threads = chunks = 0
    cursor = 0
    while True:
        chunk = await store.prune_events(older_than, retention.events, cursor)
        rows, threads, chunks = rows + chunk.rows, threads + chunk.threads, chunks + 1
        if chunk.cursor is None:
            break
        cursor = chunk.cursor
        await asyncio.sleep(0)  # what else waits for the loop runs between two chunks
    return PruneReport(rows, threads, chunks, time.perf_counter() - started)


class EventPruner:
    """The runtime's background pass: one every ``retention.interval`` seconds."""

    def __init__(self, store: Store, retention: EventRetention, clock: Clock) -> None:
        self.store = store
        self.retention = retention
        self.clock = clock
        self.passes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.retention.interval is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(self.retention.interval), name="threadloom-event-pruner"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                report = await prune_events(self.store, self.retention, self.clock)
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed pass is retried at the next interval
                log.exception("pruning the event rows failed")
                continue
            self.passes += 1
            if report.rows:
                log.info(
                    "pruned %d event rows of %d threads in %.3f s",
                    report.rows,
                    report.threads,
                    report.seconds,
                )


__all__ = ["EventPruner", "EventRetention", "PruneReport", "prune_events"]
