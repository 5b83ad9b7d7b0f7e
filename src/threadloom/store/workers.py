"""The store's worker threads: blocking store calls run off the event loop, each result
handed back to the loop that asked for it.

A store call on a worker thread used to go through ``loop.run_in_executor`` on a
``ThreadPoolExecutor``: a ``concurrent.futures.Future`` (with its condition variable and
lock), a work item, the executor's idle semaphore, and an asyncio future chained to the
first by callbacks on both sides. ``Workers`` keeps what a call needs and nothing else: one
queue of jobs, each an asyncio future and the call, and one ``call_soon_threadsafe`` that
settles the future when the call returns. A PostgreSQL turn (four commits, four such
calls) makes about 250 fewer Python function calls, 1,823 → 1,575 over all its threads
(docs/benchmarks.md, "The hand-off to the store's threads").

What ``run_in_executor`` did that callers rely on is kept: a call whose awaiting task was
cancelled before a thread took it is not run (a call already running completes, and its
result is dropped); the call's exception, whatever its class, is raised in the awaiting
task; threads are started as calls need them, up to ``size``, and each keeps its
thread-local state (the store's connection of that thread) for its life. The threads are
daemons: a store closed (``shutdown``) lets its queued calls finish, while a process that
exits without closing its store cuts a call still running — its transaction is rolled
back by the server or SQLite, and no task is left to be told.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # its task stopped waiting while the call ran
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class Workers:
    """Up to ``size`` threads named ``name``-N that run queued calls in order of arrival."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError("a store needs at least one worker thread")
        self.size = size
        self.name = name
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        """Threads waiting for a job (changed under ``_lock``): a call that finds more
        calls queued than threads waiting starts one more thread, up to ``size``."""
        self._lock = threading.Lock()
        self._closed = False

    def call(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` on a worker thread; the future the running loop awaits for it."""
        if self._closed:
            raise RuntimeError("the store's worker threads are shut down")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        jobs = self._jobs
        jobs.put((loop, future, fn, args))
        if jobs.qsize() > self._idle and len(self._threads) < self.size:
            self._start()  # more calls queued than threads waiting for them
        return future

    def _start(self) -> None:
        with self._lock:
            if self._jobs.qsize() <= self._idle or len(self._threads) >= self.size:
                return
            thread = threading.Thread(
                target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            self._idle += 1  # counted from now: the next call does not start another
        thread.start()

    def _run(self) -> None:
        jobs, lock = self._jobs, self._lock
        while True:
            job = jobs.get()
            with lock:
                self._idle -= 1
            if job is None:
                return
            loop, future, fn, args = job
            del job
            if not future.cancelled():  # not run once nobody waits for it (as an executor)
                try:
                    result, error = fn(*args), None
                except BaseException as exc:  # handed to the awaiting task, whatever it is
                    result, error = None, exc
                try:
                    loop.call_soon_threadsafe(_settle, future, result, error)
                except RuntimeError:  # the loop closed while the call ran: nobody waits
                    pass
                del result, error
            del loop, future, fn, args
            with lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Let the queued calls finish, then end every thread (blocking: call it off the
        loop). Calls made after it raise."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            thread.join()
