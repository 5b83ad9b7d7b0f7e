"""The hub: its write locks (FIFO per thread, nothing kept for idle threads) and its publishing."""

from __future__ import annotations

import asyncio

import pytest

from threadloom import Runtime


async def test_write_locks_are_released_and_forgotten(runtime: Runtime) -> None:
    """Concurrent writes to many threads leave no lock entries behind."""
    states = [await runtime.create_thread("a") for _ in range(20)]
    await asyncio.gather(
        *(s.queue_message(role="user", content=str(i)) for s in states for i in range(10))
    )
    assert runtime.hub.active_locks == 0
    for state in states:
        page = await state.get_messages(order="asc", limit=None)
        assert [m.content for m in page.messages] == [str(i) for i in range(10)]


async def test_lock_entry_survives_while_writers_wait(runtime: Runtime) -> None:
    """While one write holds a thread's lock, later writers queue on the same lock (FIFO)."""
    state = await runtime.create_thread("a")
    order: list[int] = []
    lock = runtime.hub.lock(state.thread_id)
    async with lock:
        tasks = [
            asyncio.create_task(state.inject_message(role="user", content=str(i))) for i in range(5)
        ]
        await asyncio.sleep(0.01)
        assert runtime.hub.active_locks == 1
        assert [t.done() for t in tasks] == [False] * 5
    for task in tasks:
        order.append(int((await task).content or "-1"))
    assert order == [0, 1, 2, 3, 4]
    page = await state.get_messages(order="asc")
    assert [m.content for m in page.messages] == ["0", "1", "2", "3", "4"]
    assert runtime.hub.active_locks == 0


async def test_published_events_reach_exactly_their_subscribers(runtime: Runtime) -> None:
    """A thread's subscription gets that thread's events only, an all-threads subscription
    every thread's; the bus says whom a thread's events would reach, and forgets closed
    subscriptions."""
    first = await runtime.create_thread("a")
    second = await runtime.create_thread("a")
    bus = runtime.events
    assert not bus.wants(first.thread_id) and bus.subscriber_count == 0
    own = bus.subscribe(first.thread_id)
    assert bus.wants(first.thread_id) and not bus.wants(second.thread_id)
    everyone = bus.subscribe()
    assert bus.wants(second.thread_id) and bus.subscriber_count == 2
    await first.inject_message(role="user", content="one")
    await second.inject_message(role="user", content="two")
    seen_own = [(e.kind, e.data["message"]["content"]) for e in own.drain()]
    seen_all = [(e.thread_id, e.data["message"]["content"]) for e in everyone.drain()]
    assert seen_own == [("message", "one")]
    assert seen_all == [(first.thread_id, "one"), (second.thread_id, "two")]
    everyone.close()
    assert not bus.wants(second.thread_id) and bus.wants(first.thread_id)
    own.close()
    assert bus.subscriber_count == 0 and not bus.wants(first.thread_id)


async def test_unwatched_threads_still_track_event_numbers(runtime: Runtime) -> None:
    """With nobody subscribed, publishing still notes each event number: a gap (another
    writer) is noticed, so the thread's warm history is reloaded before its next run."""
    state = await runtime.create_thread("a")
    await state.inject_message(role="user", content="one")
    hub = runtime.hub
    assert state.thread_id not in hub._stale_warm
    last = hub._seq[state.thread_id]
    hub.publish(state.thread_id, "status", last + 2, {})
    assert state.thread_id in hub._stale_warm


async def test_a_deferred_write_runs_before_the_next_holder_of_the_lock(runtime: Runtime) -> None:
    """The hub's deferred write (a held pending message, engine/step/pending.py): the next
    holder of the thread's lock runs it first, once; its owner can claim it back while it
    waits; a lock taken with ``run_deferred=False`` leaves it alone; one per thread."""
    hub = runtime.hub
    state = await runtime.create_thread("a")
    tid = state.thread_id
    ran: list[str] = []

    async def write() -> None:
        ran.append("deferred")

    hub.defer_write(tid, write)
    assert hub.holds_deferred(tid)
    with pytest.raises(RuntimeError, match=tid):
        hub.defer_write(tid, write)
    async with hub.lock(tid, run_deferred=False):
        ran.append("owner")
    assert ran == ["owner"] and hub.holds_deferred(tid)
    async with hub.lock(tid):
        ran.append("writer")
    assert ran == ["owner", "deferred", "writer"] and not hub.holds_deferred(tid)
    assert hub.take_deferred(tid, write) is False  # it ran: nothing to claim back
    hub.defer_write(tid, write)
    assert hub.take_deferred(tid, write) is True
    await hub.commit_deferred(tid)  # claimed back: nothing runs
    assert ran == ["owner", "deferred", "writer"]
    assert hub.active_locks == 0


async def test_a_cancelled_holder_does_not_cut_the_deferred_write_short(runtime: Runtime) -> None:
    """The deferred write is another caller's (a step's held pending message): when the
    task that took the lock is cancelled while running it — a client gone, a sender
    stopped — the write still completes, and the next holder gets the lock only after it."""
    hub = runtime.hub
    state = await runtime.create_thread("a")
    tid = state.thread_id
    ran: list[str] = []
    started, gate = asyncio.Event(), asyncio.Event()

    async def write() -> None:
        ran.append("deferred started")
        started.set()
        await gate.wait()  # a commit that takes its time (the writer thread, a batch)
        ran.append("deferred done")

    async def holder() -> None:
        async with hub.lock(tid):
            ran.append("holder")  # never: it is cancelled while the write runs

    async def next_holder() -> None:
        async with hub.lock(tid):
            ran.append("next holder")

    hub.defer_write(tid, write)
    first = asyncio.create_task(holder())
    await started.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(next_holder())
    await asyncio.sleep(0.01)
    assert ran == ["deferred started"]  # the lock is still the write's
    gate.set()
    await second
    assert ran == ["deferred started", "deferred done", "next holder"]
    assert hub.active_locks == 0


async def test_a_waiter_cancelled_behind_an_uncontended_holder(runtime: Runtime) -> None:
    """The first waiter creates the lock on the holder's behalf: a waiter cancelled while
    it waits leaves the holder's hold intact, the next waiter gets the lock only once the
    holder leaves, and the entry is forgotten after."""
    hub = runtime.hub
    tid = (await runtime.create_thread("a")).thread_id
    lock = hub.lock(tid)
    ran: list[str] = []

    async def waiter(name: str) -> None:
        async with hub.lock(tid):
            ran.append(name)

    async with lock:
        assert lock.locked()
        gone = asyncio.create_task(waiter("gone"))
        await asyncio.sleep(0)
        kept = asyncio.create_task(waiter("kept"))
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        await asyncio.sleep(0.01)
        assert ran == [] and lock.locked() and hub.active_locks == 1
    await kept
    assert ran == ["kept"] and hub.active_locks == 0 and not lock.locked()
    async with hub.lock(tid):
        assert hub.active_locks == 1
    assert hub.active_locks == 0
