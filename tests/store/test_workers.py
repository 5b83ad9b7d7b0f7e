"""The store's worker threads (``store/workers.py``, spec 01 §1.11.2 rule 5)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from threadloom.store.workers import Workers


class Boom(Exception):
    pass


async def test_c01_063_worker_threads_hand_results_back_and_honour_cancellation() -> None:
    workers = Workers(2, "test-workers")
    local = threading.local()
    ran: list[str] = []

    def remember(value: str) -> tuple[str, str]:
        """The value this thread saw before, then this one (thread-local state)."""
        before = getattr(local, "value", "")
        local.value = value
        return before, threading.current_thread().name

    def fail() -> None:
        raise Boom("from the worker")

    try:
        # results and exceptions reach the awaiting task
        assert (await workers.call(remember, "a"))[0] == ""
        with pytest.raises(Boom, match="from the worker"):
            await workers.call(fail)

        # two calls hold both threads; a third queued behind them is cancelled → never run
        release = threading.Event()
        started = threading.Semaphore(0)
        finished = threading.Semaphore(0)

        def hold(name: str) -> str:
            started.release()
            release.wait(10)
            ran.append(name)
            finished.release()
            return name

        first = asyncio.ensure_future(workers.call(hold, "first"))
        second = asyncio.ensure_future(workers.call(hold, "second"))
        queued = workers.call(hold, "queued")
        for _ in range(2):
            assert await asyncio.to_thread(started.acquire, True, 10)
        assert len(workers._threads) == 2  # not a third: the size bounds them
        queued.cancel()
        first.cancel()  # running: it completes, its result dropped
        release.set()
        assert await second == "second"
        with pytest.raises(asyncio.CancelledError):
            await first
        for _ in range(2):  # the cancelled running call finishes on its thread
            assert await asyncio.to_thread(finished.acquire, True, 10)
        # a call after them runs (on a thread that is free again), so the queue moved on
        assert (await workers.call(remember, "b"))[1].startswith("test-workers-")
        assert sorted(ran) == ["first", "second"]  # the cancelled queued call never ran
        assert queued.cancelled()

        # each thread keeps its own thread-local state across calls: what a call sees is
        # what the last call on the same thread left (calls in flight together spread)
        last: dict[str, str] = {}
        for value in "cdefghijkl":
            pair = await asyncio.gather(
                workers.call(remember, value + "1"), workers.call(remember, value + "2")
            )
            for (before, name), mine in zip(pair, (value + "1", value + "2"), strict=True):
                if name in last:
                    assert before == last[name]
                last[name] = mine
        assert set(last) <= {"test-workers-0", "test-workers-1"}
    finally:
        done = threading.Event()
        finishing = workers.call(lambda: done.set())
        await asyncio.get_running_loop().run_in_executor(None, workers.shutdown)
    assert done.is_set()  # queued before shutdown: finished
    await finishing
    assert all(not thread.is_alive() for thread in workers._threads)
    with pytest.raises(RuntimeError, match="shut down"):
        workers.call(remember, "late")
