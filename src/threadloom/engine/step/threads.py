"""The worker threads of plain ``def`` tools (spec 04 §4.5.1: "Plain ``def`` tools run in a
worker thread").

``asyncio.to_thread`` goes through the loop's default ``ThreadPoolExecutor``: a
``concurrent.futures`` future wrapped in an asyncio one, a partial, a work item and a
chain of callbacks (~45 µs of CPU per call on the dev VM, ~32 µs here). :class:`ToolThreads`
keeps what ``to_thread`` promises and drops the layers: a call is put on a queue with a
copy of the caller's context; a worker runs it in that context and hands the result (or
the exception) back with ``loop.call_soon_threadsafe``.

- A worker thread per call running at once, started on demand up to ``max_workers``
  (``ThreadPoolExecutor``'s default bound); calls beyond it wait in the queue.
- A cancelled await leaves a running call running and discards its result (spec 04
  §4.20); a call cancelled before a worker took it is not run (as ``to_thread``).
- Workers idle for ``idle_timeout`` seconds end; :meth:`shutdown` (the runtime's close)
  ends the idle ones at once and the busy ones after their call. After shutdown, calls
  fall back to ``asyncio.to_thread``. At interpreter exit idle workers are woken, so an
  unclosed runtime does not hold the process; running calls are waited for, as the
  default executor's are.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

_Item = tuple[
    asyncio.AbstractEventLoop,
    "asyncio.Future[Any]",
    contextvars.Context,
    Callable[..., Any],
    tuple[Any, ...],
    dict[str, Any],
]

IDLE_TIMEOUT = 30.0
_numbers = itertools.count(1)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():  # cancelled: the caller went away, the result is discarded
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, StopIteration):  # a future refuses StopIteration
        error = RuntimeError("the tool raised StopIteration")
        error.__cause__ = exc
        future.set_exception(error)
        return
    future.set_exception(exc)


class ToolThreads:
    """Worker threads that run plain functions for coroutines of any running loop."""

    def __init__(self, max_workers: int | None = None, idle_timeout: float = IDLE_TIMEOUT):
        if max_workers is not None and max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
        self.idle_timeout = idle_timeout
        self._queue: SimpleQueue[_Item | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._busy: set[threading.Thread] = set()
        # Every queued item is claimed once: by a free worker (``_idle`` counts the free
        # ones no item has claimed), by a worker started for it, or — at the bound — by
        # the next worker to finish (``_waiting``). A worker thus takes the lock once per
        # call, when it finishes, and never waits for an item when one is unclaimed.
        self._idle = 0
        self._waiting = 0
        self._closed = False
        self._atexit = False

    @property
    def threads(self) -> int:
        """The number of live worker threads."""
        return len(self._threads)

    def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Run ``fn(*args, **kwargs)`` in a worker thread in a copy of the current context;
        a future of the running loop that receives its result or exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        item = (loop, future, contextvars.copy_context(), fn, args, kwargs)
        with self._lock:
            if self._closed:
                fallback = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
                fallback.add_done_callback(lambda done: _copy(done, future))
                return future
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self.max_workers:
                self._start()
            else:
                self._waiting += 1
            self._queue.put(item)
        return future

    def _start(self) -> None:
        if not self._atexit:
            self._atexit = True
            register = getattr(threading, "_register_atexit", None)
            if register is not None:
                ref = weakref.ref(self)

                def wake() -> None:
                    pool = ref()
                    if pool is not None:
                        pool.shutdown(wait=False)

                try:
                    register(wake)
                except RuntimeError:  # the interpreter is already shutting down
                    pass
        thread = threading.Thread(
            target=self._work, name=f"threadloom-tool-{next(_numbers)}", daemon=False
        )
        self._threads.add(thread)  # claimed by the item it is started for
        thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        queue, lock, busy = self._queue, self._lock, self._busy
        while True:
            try:
                item = queue.get(timeout=self.idle_timeout)
            except Empty:
                with lock:
                    if self._idle:  # a free worker no item has claimed: this one may go
                        self._idle -= 1
                        self._threads.discard(me)
                        return
                continue  # an item claimed this worker as it timed out: take it
            if item is None:
                with lock:
                    self._threads.discard(me)
                return
            busy.add(me)
            loop, future, context, fn, args, kwargs = item
            del item
            setter: Callable[[asyncio.Future[Any], Any], None] | None = None
            outcome: Any = None
            if not future.cancelled():  # cancelled while queued: not run
                try:
                    outcome = context.run(fn, *args, **kwargs)
                    setter = _set_result
                except BaseException as exc:
                    outcome, setter = exc, _set_exception
            busy.discard(me)
            # Free before the caller hears of the result: a caller that calls again at
            # once finds this worker idle instead of starting another one.
            with lock:
                if self._waiting:
                    self._waiting -= 1  # an item queued at the bound: take it next
                else:
                    self._idle += 1
            if setter is not None:
                _deliver(loop, setter, future, outcome)
            del loop, future, context, fn, args, kwargs, outcome, setter

    def shutdown(self, wait: bool = True) -> None:
        """End the workers: idle ones now (joined when ``wait``), busy ones after their
        call. Later calls run through ``asyncio.to_thread``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = [t for t in self._threads if t not in self._busy]
            for _ in range(len(self._threads)):
                self._queue.put(None)
        if wait:
            current = threading.current_thread()
            for thread in idle:
                if thread is not current:
                    thread.join(timeout=1.0)


def _deliver(
    loop: asyncio.AbstractEventLoop,
    setter: Callable[[asyncio.Future[Any], Any], None],
    future: asyncio.Future[Any],
    value: Any,
) -> None:
    try:
        loop.call_soon_threadsafe(setter, future, value)
    except RuntimeError:  # the loop is closed: nobody can receive the result
        pass


def _copy(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        _set_exception(target, exc)
    else:
        target.set_result(source.result())


__all__ = ["ToolThreads"]
