"""A thread's FIFO write lock (``ThreadHub.lock``) and the deferred write it runs first.

Writes to a thread commit and publish under its lock, so the event bus sees each thread's
durable events in commit order. A step may hold one write back (its pending message,
``engine/step/pending.py``); whoever takes the thread's lock next runs that write first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

DeferredWrite = Callable[[], Coroutine[Any, Any, None]]
"""A write held back from the store (``ThreadHub.defer_write``); it raises nothing but a
cancellation (the loop closing)."""


class ThreadLock:
    """``async with locks(thread_id)``: one asyncio.Lock per key while it is in use.

    The entry is dropped when its last holder or waiter leaves, so a long-running server
    keeps no lock for threads nobody is writing to. An uncontended holder's entry has no
    lock yet (``None``: held, nobody waits); the first waiter creates it, held on the
    holder's behalf, and queues on it. Once acquired, it first runs the thread's deferred
    write, if one is held (``deferred`` given): whatever the holder then writes commits
    after it, in the order of the calls.
    """

    __slots__ = ("_deferred", "_entry", "_table", "_thread_id")

    def __init__(
        self,
        table: dict[str, list[Any]],
        thread_id: str,
        deferred: dict[str, DeferredWrite] | None = None,
    ) -> None:
        self._table = table
        self._thread_id = thread_id
        self._deferred = deferred
        self._entry: list[Any] | None = None

    async def __aenter__(self) -> None:
        entry = self._table.get(self._thread_id)
        if entry is None:  # uncontended: held at once, no lock object
            entry = self._table[self._thread_id] = [None, 1]
            self._entry = entry
        else:
            lock = entry[0]
            if lock is None:  # held by the uncontended holder: a fresh lock, taken for it
                lock = asyncio.Lock()
                await lock.acquire()  # a fresh lock: never suspends
                entry[0] = lock
            entry[1] += 1
            self._entry = entry
            try:
                await lock.acquire()
            except BaseException:
                self._leave(entry, release=False)
                raise
        write = self._deferred.pop(self._thread_id, None) if self._deferred else None
        if write is not None:
            await self._run_deferred(write, entry)

    async def _run_deferred(self, write: DeferredWrite, entry: list[Any]) -> None:
        """Run the deferred write in a task of its own: it is another caller's write (a
        step's held pending message), which the cancellation of this holder — a client
        gone, a sender stopped — must not cut short. If this holder is cancelled, the
        write goes on and the lock is released when it ends, so whoever waits for the
        lock still writes after it."""
        task = asyncio.ensure_future(write())
        try:
            await asyncio.shield(task)
        except BaseException:
            self._entry = None
            if task.done():
                self._leave(entry, release=True)
            else:
                task.add_done_callback(lambda _: self._leave(entry, release=True))
            raise

    async def __aexit__(self, *exc: object) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            self._leave(entry, release=True)

    def _leave(self, entry: list[Any], *, release: bool) -> None:
        if release and entry[0] is not None:
            entry[0].release()
        entry[1] -= 1
        if entry[1] == 0 and self._table.get(self._thread_id) is entry:
            del self._table[self._thread_id]

    def locked(self) -> bool:
        entry = self._table.get(self._thread_id)
        return entry is not None and (entry[0] is None or bool(entry[0].locked()))
