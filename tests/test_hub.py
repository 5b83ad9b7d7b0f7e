"""The hub's write locks: FIFO per thread, and nothing kept for idle threads."""

from __future__ import annotations

import asyncio

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
