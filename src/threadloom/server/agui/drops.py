"""AG-UI responses their client dropped, and the runs that stop for it (spec 13 §13.2.8).

AG-UI clients stop a run by dropping its response: ``@ag-ui/client``'s ``abortRun`` aborts
the request, and CopilotKit's Stop button makes its runtime do exactly that — the server
sees a connection that ended before the run's terminal event, as it sees a network drop.
A dropped response therefore stops the run it followed after a grace period
(``THREADLOOM_AGUI_STOP_GRACE_S``, 10 s by default; ``off``: never), unless within it a
request resumes that run from a cursor (§13.3): a client that means to go on says so by
resuming. At the end of the grace the run is not stopped while another AG-UI response of
this server still follows the thread. A new request on the thread (not a resume) while a
drop is pending stops the dropped run at once, before its own messages are sent: the
client left that run and starts another.

The pending stops live in this process: a resume that reaches another node does not
cancel one (a deployment of several nodes behind a balancer without sticky sessions that
wants resumes across nodes sets the grace ``off``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("threadloom.server.agui")


@dataclass
class _Pending:
    thread_id: str
    task: asyncio.Task[None]


class Drops:
    """The dropped AG-UI responses of one server whose runs may still stop."""

    def __init__(self, grace_s: float | None, stop: Callable[[str], Awaitable[object]]) -> None:
        self.grace_s = grace_s
        self._stop = stop
        self._pending: dict[str, _Pending] = {}  # run key (cursor.run_key) → its stop
        self._following: Counter[str] = Counter()  # thread id → AG-UI responses open

    def follow(self, thread_id: str) -> None:
        """An AG-UI response follows the thread's run (until ``unfollow``)."""
        self._following[thread_id] += 1

    def unfollow(self, thread_id: str) -> None:
        self._following[thread_id] -= 1
        if self._following[thread_id] <= 0:
            del self._following[thread_id]

    def dropped(self, thread_id: str, key: str) -> None:
        """The response of run ``key`` ended before its terminal event: stop the thread's
        run after the grace period unless ``resumed(key)`` comes first."""
        if self.grace_s is None:
            return
        old = self._pending.pop(key, None)
        if old is not None:
            old.task.cancel()
        task = asyncio.get_running_loop().create_task(self._later(thread_id, key))
        self._pending[key] = _Pending(thread_id, task)

    def resumed(self, key: str) -> bool:
        """A request resumes run ``key``: its pending stop (if any) is cancelled."""
        pending = self._pending.pop(key, None)
        if pending is None:
            return False
        pending.task.cancel()
        return True

    async def claim(self, thread_id: str) -> bool:
        """A new request on the thread: the runs dropped on it are stopped now (whether
        there was one)."""
        keys = [k for k, p in self._pending.items() if p.thread_id == thread_id]
        for key in keys:
            pending = self._pending.pop(key)
            pending.task.cancel()
        if keys:
            await self._stop_now(thread_id)
        return bool(keys)

    def waiting(self, thread_id: str) -> bool:
        """Whether a dropped run of the thread waits out its grace period."""
        return any(p.thread_id == thread_id for p in self._pending.values())

    def close(self) -> None:
        """The server shuts down: nothing more is stopped (its clients resume elsewhere)."""
        for pending in self._pending.values():
            pending.task.cancel()
        self._pending.clear()

    async def _later(self, thread_id: str, key: str) -> None:
        assert self.grace_s is not None
        await asyncio.sleep(self.grace_s)
        pending = self._pending.get(key)
        if pending is None or pending.task is not asyncio.current_task():
            return
        del self._pending[key]
        if self._following[thread_id] > 0:
            return  # another AG-UI client still follows the thread
        await self._stop_now(thread_id)

    async def _stop_now(self, thread_id: str) -> None:
        try:
            await self._stop(thread_id)
        except Exception:  # the thread may be gone meanwhile: nothing to stop
            log.warning("stopping the dropped AG-UI run of %s failed", thread_id, exc_info=True)
