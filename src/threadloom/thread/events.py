"""The in-process event bus: every committed change of a thread, in commit order (spec 02 §2.17).

Publishing never waits for a subscriber. Each subscription has a buffer bounded in events
and in bytes (``event_size``, an estimate of the event's JSON size); when a slow
subscriber's buffer would exceed either bound, the subscription leaves the bus at once —
it receives nothing more and no longer counts as a subscriber — yields what it buffered
and then raises :class:`~threadloom.errors.EventOverflow`, and the consumer resumes from
the durable event log (``Store.read_events``). A consumer that turns each event into
something of its own as it comes (a stream socket's frames) takes them with
:meth:`Subscription.forward` instead, and holds nothing here.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threadloom.errors import EventOverflow

logger = logging.getLogger("threadloom.thread")

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The byte bound of a subscription that names none (``EventBus.subscribe``)."""
EVENT_OVERHEAD = 64
"""What ``event_size`` adds for the event's own fields."""

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


def event_size(event: ThreadEvent) -> int:
    """About the size of ``event`` as JSON, in bytes: its data's strings (one byte a
    character) plus a few bytes a key, item and number. Walks the data without recursion,
    so no nesting can exhaust the stack."""
    size = EVENT_OVERHEAD + len(event.kind)
    stack: list[Any] = [event.data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            size += len(value) + 2
        elif kind is dict or isinstance(value, Mapping):
            size += 2
            for key, item in value.items():
                size += (len(key) if type(key) is str else 8) + 4
                stack.append(item)
        elif kind is list or kind is tuple:
            size += 2 + len(value)
            stack.extend(value)
        elif kind is bytes:
            size += len(value)
        else:  # numbers, booleans, None
            size += 8
    return size


class Subscription:
    """An async iterator over the events of one thread (or all threads), bounded in
    events (``max_queue``) and in bytes (``max_bytes``, by :func:`event_size`)."""

    def __init__(
        self,
        bus: EventBus,
        thread_id: str | None,
        kinds: frozenset[str] | None,
        max_queue: int,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> None:
        self._bus = bus
        self.thread_id = thread_id
        self.kinds = kinds
        self.max_queue = max_queue
        self.max_bytes = max_bytes
        self._buffer: deque[ThreadEvent] = deque()
        self._sizes: deque[int] = deque()  # of each buffered event, when bytes are bounded
        self._bytes = 0
        self._overflowed = False
        self._closed = False
        self._attached = True  # in the bus's table
        self._waiter: asyncio.Future[None] | None = None
        self._sink: Callable[[ThreadEvent], None] | None = None
        self.on_overflow: Callable[[], None] | None = None
        """Called once, at the moment the buffer overflows (the subscription has left the
        bus then): a consumer that is not reading learns it without reading."""

    def _offer(self, event: ThreadEvent) -> None:
        if self._closed or self._overflowed:
            return
        if self.thread_id is not None and event.thread_id != self.thread_id:
            return
        if self.kinds is not None and event.kind not in self.kinds:
            return
        sink = self._sink
        if sink is not None:
            try:
                sink(event)
            except Exception:  # a consumer's fault must not reach the publisher
                logger.exception("event subscriber of %s failed; unsubscribed", self.thread_id)
                self.close()
            return
        if len(self._buffer) >= self.max_queue:
            self._overflow()
            return
        if self.max_bytes is not None:
            size = event_size(event)
            if self._bytes + size > self.max_bytes:
                self._overflow()
                return
            self._sizes.append(size)
            self._bytes += size
        self._buffer.append(event)
        self._wake()

    def _overflow(self) -> None:
        self._overflowed = True
        self._detach()
        self._wake()
        if self.on_overflow is not None:
            self.on_overflow()

    def _detach(self) -> None:
        if self._attached:
            self._attached = False
            self._bus._remove(self)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def pending(self) -> int:
        """Events buffered and not yet read."""
        return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        """The ``event_size`` of the events buffered now (0 when bytes are unbounded)."""
        return self._bytes

    @property
    def overflowed(self) -> bool:
        """True once the buffer overflowed: the subscription left the bus then."""
        return self._overflowed

    @property
    def closed(self) -> bool:
        return self._closed

    def _take(self) -> ThreadEvent:
        event = self._buffer.popleft()
        if self._sizes:
            self._bytes -= self._sizes.popleft()
        return event

    def forward(self, sink: Callable[[ThreadEvent], None]) -> None:
        """From now on hand each event to ``sink`` as it is published, holding none here
        (a consumer that bounds what it keeps itself). Drain the buffer first: the events
        it holds are not handed on. ``sink`` runs in the publisher's call and must not
        block; an exception it raises is logged and ends the subscription."""
        if self._buffer:
            raise RuntimeError("drain the subscription before forwarding it")
        self._sink = sink

    def __aiter__(self) -> AsyncIterator[ThreadEvent]:
        return self

    async def __anext__(self) -> ThreadEvent:
        while True:
            if self._buffer:
                return self._take()
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
        self._sizes.clear()
        self._bytes = 0
        return out

    def close(self) -> None:
        """Leave the bus and drop what is buffered."""
        if not self._closed:
            self._closed = True
            self._sink = None
            self._detach()
            self._buffer.clear()
            self._sizes.clear()
            self._bytes = 0
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
        self.on_listeners: Callable[[bool], None] | None = None
        """Called with ``True`` when the first subscription to every thread opens, with
        ``False`` when the last one closes (thread lists, spec 09 §9.14)."""

    def subscribe(
        self,
        thread_id: str | None = None,
        *,
        kinds: Iterable[str] | None = None,
        max_queue: int = 1000,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> Subscription:
        """Subscribe to one thread's events (or every thread's with ``thread_id=None``),
        buffering at most ``max_queue`` events and ``max_bytes`` bytes of them (``None``:
        no byte bound)."""
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        kind_set = frozenset(kinds) if kinds else None
        sub = Subscription(self, thread_id, kind_set, max_queue, max_bytes)
        group = self._subscriptions.get(thread_id)
        if group is None:
            group = self._subscriptions[thread_id] = set()
            if thread_id is None:
                if self.on_listeners is not None:
                    self.on_listeners(True)
            elif self.on_first_subscriber is not None:
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
                if sub.thread_id is None:
                    if self.on_listeners is not None:
                        self.on_listeners(False)
                elif self.on_last_subscriber is not None:
                    self.on_last_subscriber(sub.thread_id)

    @property
    def subscriber_count(self) -> int:
        return sum(len(group) for group in self._subscriptions.values())
