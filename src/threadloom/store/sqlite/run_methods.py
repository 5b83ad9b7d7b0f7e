"""The engine's run writes of the SQLite store (spec 04): run start and end, queue
delivery, settlements, a model message with its LLM row. ``RunMethods`` is mixed into
:class:`~threadloom.store.sqlite.store.SqliteStore`; the functions it calls run inside one
write transaction each (``threadloom.store.sqlite.runs``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from threadloom.records import LogRow, Message, QueueEntry, ThreadStatus
from threadloom.store.base import (
    ParentDelivery,
    RunBegin,
    RunEnd,
    Settlement,
    StoredEvent,
    ThreadRow,
)
from threadloom.store.sqlite import runs, threads

T = TypeVar("T")


class RunMethods:
    """The run part of the Store protocol, mixed into ``SqliteStore``."""

    if TYPE_CHECKING:

        async def _write(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> T: ...

    async def set_status(self, thread_id: str, status: ThreadStatus) -> StoredEvent:
        return await self._write(threads.set_status, thread_id, status)

    async def settle_run(self, thread_id: str, settlement: Settlement) -> list[StoredEvent]:
        return await self._write(runs.settle_run, thread_id, settlement)

    async def end_run(
        self,
        thread_id: str,
        reason: str,
        session: tuple[int, int],
        allow_continue: bool,
        delivery: ParentDelivery | None = None,
    ) -> tuple[bool, list[StoredEvent]]:
        return await self._write(runs.end_run, thread_id, reason, session, allow_continue, delivery)

    async def begin_run(
        self,
        thread_id: str,
        *,
        status: ThreadStatus | None,
        force: bool,
        deliver: bool,
        runnable: Callable[[str], bool] | None = None,
    ) -> RunBegin | None:
        return await self._write(runs.begin_run, thread_id, status, force, deliver, runnable)

    async def enqueue_and_begin_run(
        self,
        thread_id: str,
        entry: QueueEntry,
        *,
        clear_stop: bool,
        status: ThreadStatus,
        runnable: Callable[[str], bool] | None = None,
    ) -> tuple[QueueEntry, StoredEvent, RunBegin | None]:
        return await self._write(
            runs.enqueue_and_begin_run, thread_id, entry, clear_stop, status, runnable
        )

    async def deliver_queue(self, thread_id: str) -> list[tuple[Message, StoredEvent]]:
        return await self._write(runs.deliver_queue, thread_id)

    async def finish_run(
        self, thread_id: str, message: Message, log: LogRow, end: RunEnd, *, new: bool = False
    ) -> tuple[Message, LogRow, bool, list[StoredEvent]]:
        return await self._write(runs.finish_run, thread_id, message, log, end, new)

    async def set_stopped(self, thread_id: str, stopped: bool) -> None:
        await self._write(runs.set_stopped, thread_id, stopped)

    async def set_session_turns(self, thread_id: str, side_a: int, side_b: int) -> None:
        await self._write(runs.set_session_turns, thread_id, side_a, side_b)

    async def set_agent(self, thread_id: str, agent_id: str) -> ThreadRow:
        return await self._write(runs.set_agent, thread_id, agent_id)

    async def deliver_queue_entry(
        self, thread_id: str, entry_id: str, message: Message
    ) -> tuple[Message, StoredEvent] | None:
        return await self._write(runs.deliver_queue_entry, thread_id, entry_id, message)

    async def update_log(
        self, thread_id: str, row: LogRow, *, bodies: Sequence[str] = ("request", "response")
    ) -> StoredEvent:
        return await self._write(runs.update_log, thread_id, row, tuple(bodies))

    async def insert_message_and_log(
        self,
        thread_id: str,
        message: Message,
        log: LogRow,
        *,
        require_live: bool = True,
        new_log: bool = False,
        durable: bool = True,
    ) -> tuple[Message, LogRow, list[StoredEvent]]:
        return await self._write(
            runs.insert_message_and_log,
            thread_id,
            message,
            log,
            require_live,
            new_log,
            durable=durable,
        )

    async def update_message_and_log(
        self, thread_id: str, message: Message, log: LogRow, *, bodies: Sequence[str] = ()
    ) -> tuple[Message, list[StoredEvent]]:
        return await self._write(
            runs.update_message_and_log, thread_id, message, log, tuple(bodies)
        )
