"""The SQLite store's writer thread: commits write transactions off the event loop and
hands each result back to the loop that asked for it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")


class Writer:
    """One thread that commits write transactions and hands results back to the loop.

    Writes that queue up while a commit is in progress are committed together (group
    commit): each runs inside its own SAVEPOINT, so a failing one is rolled back alone,
    and all of them are acknowledged after the one COMMIT — persist, then acknowledge.
    Under concurrent load this turns N fsyncs into one.
    """

    MAX_BATCH = 256

    def __init__(
        self, run_batch: Callable[[list[tuple[Any, tuple[Any, ...], bool]]], list[Any]]
    ) -> None:
        self._run_batch = run_batch
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="threadloom-sqlite-w", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < self.MAX_BATCH:
                try:
                    more = self._queue.get_nowait()
                except Empty:
                    break
                if more is None:
                    stopping = True
                    break
                batch.append(more)
            outcomes = self._run_batch([(fn, args, durable) for _, _, fn, args, durable in batch])
            # one wake-up per loop, not per write: each call_soon_threadsafe writes to the
            # loop's self-pipe (a syscall) and hands the GIL over
            settled: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any, Any]]] = {}
            for (loop, future, _, _, _), (result, exc) in zip(batch, outcomes, strict=True):
                settled.setdefault(loop, []).append((future, result, exc))
            for loop, items in settled.items():
                loop.call_soon_threadsafe(_settle_all, items)

    def submit(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> asyncio.Future[T]:
        """Queue ``fn(*args)``; a batch's commit is durable if any of its jobs asks."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put((loop, future, fn, args, durable))
        return future

    def shutdown(self) -> None:
        self._queue.put(None)
        self._thread.join()


def loop_busy() -> bool:
    """True when other callbacks wait for the event loop: a commit made inline would hold
    them up, so the write goes to the writer thread (where it can share a group commit).
    Reads CPython's ready queue; a loop without one counts as idle."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    return bool(ready)


def plain_call(fn: Callable[[], T]) -> T:
    """Marks a job that is a plain call (opening the store), not a write transaction."""
    return fn()


def _settle_all(items: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """Settle a batch's futures of one loop, in commit order."""
    for future, result, exc in items:
        settle(future, result, exc)


def settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    """Give ``future`` its result or exception, unless its awaiter went away."""
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
