"""The engine's side of the node (``node/host.py``): ``EngineHost`` answers what the node's
liveness loop and relay ask of the runs (``NodeHost``), so they never reach into the
``Runtime`` that owns them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from threadloom.engine.run import results
from threadloom.engine.run.loop import Run
from threadloom.engine.run.runs import RunManager
from threadloom.node.host import ChildResult

Recover = Callable[..., Awaitable[list[str]]]


class EngineHost:
    """``NodeHost`` over a runtime's run manager and its recovery (``Runtime.recover``)."""

    def __init__(
        self, runs: RunManager, recover: Recover, forgets: list[Callable[[], None]]
    ) -> None:
        self.runs = runs
        self._recover = recover
        self._forgets = forgets

    @property
    def closing(self) -> bool:
        return self.runs.closing

    def wake(self, thread_id: str) -> None:
        self.runs.wake(thread_id)

    def owns(self, thread_id: str) -> bool:
        return self.runs.owns(thread_id)

    def run_of(self, thread_id: str) -> Run | None:
        return self.runs.run_of(thread_id)

    async def abort(self, thread_id: str, reason: str) -> bool:
        return await self.runs.abort(thread_id, reason)

    async def recover(
        self, *, mine: bool = False, threads: Collection[str] | None = None
    ) -> list[str]:
        return await self._recover(mine=mine, threads=threads)

    async def settle_lost(self, thread_id: str, reason: str) -> bool:
        done = await self.runs.settle_lost(thread_id, reason)
        if done is None:
            return False
        await results.finish(self.runs, done.row, done.prepared)
        if done.resume:
            await self.runs.resume(thread_id)
        return True

    async def resume_parked(self) -> None:
        await self.runs.resume_parked()

    def drop_all(self) -> None:
        self.runs.drop_all()

    def resume(self) -> None:
        self.runs.fenced = False

    def forget_cached(self) -> None:
        self.runs.hub.forget_cached()
        for forget in self._forgets:
            forget()

    def waiting(self) -> list[str]:
        return [child for child, waiter in self.runs.waiters.items() if not waiter.done()]

    def answer(self, result: ChildResult) -> None:
        waiter = self.runs.waiters.get(result.child_id)
        if waiter is not None and not waiter.done():
            session = results.SessionResult(
                result.success, result.text, result.reason, message_id=result.message_id
            )
            waiter.set_result(results.waited_result(result.child_id, session, result.refs))

    def parse_result(self, child_id: str, content: str) -> tuple[bool, str] | None:
        return results.parse_result_text(child_id, content)
