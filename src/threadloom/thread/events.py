"""The in-process event bus: every committed change of a thread, in commit order (spec 02 §2.17).

Publishing never waits for a subscriber. Each subscription has a bounded buffer; when a
slow subscriber's buffer is full, the subscription yields what it buffered and then raises
:class:`~threadloom.errors.EventOverflow`, and the consumer resumes from the durable
event log (``Store.read_events``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threadloom.errors import EventOverflow

DURABLE_KINDS = frozenset(
    ("message", "message_deleted", "status", "log", "subagent", "subagent_removed", "file")
)


@dataclass(frozen=True, slots=True)
class ThreadEvent:
    """One published change: ``seq`` is the durable event number, ``None`` if ephemeral."""

    thread_id: str
    kind: str
    seq: int | None
    data: Mapping[str, Any]
    at: int


class Subscription:
    """An async iterator over the events of one thread (or all threads)."""

    def __init__(
        self,
        bus: EventBus,
        thread_id: str | None,
        kinds: frozenset[str] | None,
        max_queue: int,
    ) -> None:
        self._bus = bus
        self.thread_id = thread_id
        self.kinds = kinds
        self.max_queue = max_queue
        self._buffer: deque[ThreadEvent] = deque()
        self._overflowed = False
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None

    def _offer(self, event: ThreadEvent) -> None:
        if self._closed or self._overflowed:
            return
        if self.thread_id is not None and event.thread_id != self.thread_id:
            return
        if self.kinds is not None and event.kind not in self.kinds:
            return
        if len(self._buffer) >= self.max_queue:
            self._overflowed = True
        else:
            self._buffer.append(event)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def pending(self) -> int:
        """Events buffered and not yet read."""
        return len(self._buffer)

    def __aiter__(self) -> AsyncIterator[ThreadEvent]:
        return self

    async def __anext__(self) -> ThreadEvent:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self._overflowed:
                self.close()
                raise EventOverflow(
                    f"subscriber fell more than {self.max_queue} events behind; "
                    "resume from the durable event log"
                )
            if self._closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def get(self, timeout: float | None = None) -> ThreadEvent:
        """The next event, waiting at most ``timeout`` seconds."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    def drain(self) -> list[ThreadEvent]:
        """Every buffered event, without waiting."""
        out = list(self._buffer)
        self._buffer.clear()
        return out

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._bus._remove(self)
            self._wake()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Fan-out of thread events to subscribers, in the order they are published."""

    def __init__(self) -> None:
        # by thread id; ``None`` holds the subscriptions to every thread
        self._subscriptions: dict[str | None, set[Subscription]] = {}
        self.listened: Mapping[str | None, set[Subscription]] = self._subscriptions
        """The subscriptions themselves (one table, never replaced): false while nobody
        listens to any thread. A publisher tests it before it builds an event, at the
        cost of an attribute, not a call; ``wants`` is the exact answer for a thread."""
        self.on_first_subscriber: Callable[[str], None] | None = None
        """Called when a thread gets its first subscription of its own (not counting
        the subscriptions to every thread)."""
        self.on_last_subscriber: Callable[[str], None] | None = None
        """Called when a thread's last subscription of its own closes."""

    def subscribe(
        self,
        thread_id: str | None = None,
        *,
        kinds: Iterable[str] | None = None,
        max_queue: int = 1000,
    ) -> Subscription:
        """Subscribe to one thread's events (or every thread's with ``thread_id=None``)."""
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        sub = Subscription(self, thread_id, frozenset(kinds) if kinds else None, max_queue)
        group = self._subscriptions.get(thread_id)
        if group is None:
            group = self._subscriptions[thread_id] = set()
            if thread_id is not None and self.on_first_subscriber is not None:
                self.on_first_subscriber(thread_id)
        group.add(sub)
        return sub

    def has_thread_subscribers(self, thread_id: str) -> bool:
        """True when some subscription is to ``thread_id`` itself."""
        return thread_id in self._subscriptions

    def wants(self, thread_id: str) -> bool:
        """True when some subscription would receive an event of ``thread_id``: publishers
        with costly event data build it only then."""
        subscriptions = self._subscriptions
        return bool(subscriptions) and (None in subscriptions or thread_id in subscriptions)

    def publish(self, event: ThreadEvent) -> None:
        subscriptions = self._subscriptions
        if not subscriptions:
            return
        everyone = subscriptions.get(None)
        own = subscriptions.get(event.thread_id)
        for group in (own, everyone):
            if group:
                for sub in tuple(group):
                    sub._offer(event)

    def _remove(self, sub: Subscription) -> None:
        group = self._subscriptions.get(sub.thread_id)
        if group is not None:
            group.discard(sub)
            if not group:
                del self._subscriptions[sub.thread_id]
                if sub.thread_id is not None and self.on_last_subscriber is not None:
                    self.on_last_subscriber(sub.thread_id)

    @property
    def subscriber_count(self) -> int:
        return sum(len(group) for group in self._subscriptions.values())
