"""Per-thread ordered delivery of events where several nodes write one store (spec 12 §12.7).

A node publishes its own commits from memory as they commit; the other nodes' commits
reach it as notifications that name a range of event numbers (``expect``), whose rows it
reads. A thread's subscribers must see its durable events strictly in ``seq`` order,
whichever way each came, so for each thread with subscribers of its own this keeps the
next number due and holds back what arrives early: a local event past a gap waits until
the missing rows are read, and an ephemeral frame (a chunk) waits behind the durable ones
that arrived before it (a chunk never precedes the ``message_data`` that created its
message, spec 09 §9.8 rule 2).

While nothing is out of order an event is handed to the bus at once, without a task. The
first subscription of a thread starts it with nothing due yet: events are held until the
thread's event number is read, so those committed after the subscription (which the
subscriber's snapshot may not hold) are never dropped as old. Two kinds need not wait for
that read: an ephemeral frame with nothing held before it, and this node's own commit
while no other node is known to write (a single node: its events are then buffered when
the write returns, as without this ordering).

The hub publishes through it once ``order_delivery`` routes it so (``ThreadHub.
route_through``): the ordering is the node's, the hub only publishes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from threadloom.store.base import StoredEvent
from threadloom.thread.events import EventBus, ThreadEvent
from threadloom.thread.hub import ThreadHub

logger = logging.getLogger("threadloom.thread")

READ_PAGE = 500


@dataclass(slots=True)
class _Expect:
    """Another node committed events ``first`` … ``last`` of the thread."""

    first: int
    last: int


@dataclass(slots=True)
class _Thread:
    next: int | None = None
    """The durable event number due next; ``None`` until the thread's head is read."""
    floor: int = 0
    """Past the events handed on while the head was being read (never delivered twice)."""
    delivered: int = 0
    """The last durable event handed to the bus: one the head read counted but this node
    had not offered yet (committed just before the read, offered just after) is above it,
    and still due."""
    held: list[ThreadEvent | _Expect] = field(default_factory=list)
    """What waits, in arrival order."""
    task: asyncio.Task[None] | None = None

    def busy(self) -> bool:
        return self.next is None or bool(self.held) or self.task is not None


class OrderedDelivery:
    """The ordered hand-off of a shared store's events to the bus, per subscribed thread."""

    def __init__(
        self,
        bus: EventBus,
        head: Callable[[str], Awaitable[int | None]],
        read: Callable[[str, int, int], Awaitable[list[StoredEvent]]],
        build: Callable[[StoredEvent], Awaitable[ThreadEvent]],
        alone: Callable[[], bool] = lambda: False,
    ) -> None:
        self.bus = bus
        self._alone = alone
        """Whether no other node is known to write the store now."""
        self._head = head
        self._read = read
        self._build = build
        self._threads: dict[str, _Thread] = {}
        self.built: Callable[[ThreadEvent], None] | None = None
        """Called with each event read from the store, as it is delivered."""
        self.gaps_read = 0
        """Events read from the store to fill a gap (information for tests)."""
        bus.on_first_subscriber = self._subscribed
        bus.on_last_subscriber = self._unsubscribed

    def _subscribed(self, thread_id: str) -> None:
        self._unsubscribed(thread_id)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # subscribed outside a loop: nothing relays to it, nothing is held
        state = self._threads[thread_id] = _Thread()
        self._run(thread_id, state)

    def _unsubscribed(self, thread_id: str) -> None:
        state = self._threads.pop(thread_id, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    def _state(self, thread_id: str) -> _Thread | None:
        return self._threads.get(thread_id)

    def offer(self, event: ThreadEvent) -> None:
        """Hand a published event on now, or hold it until what precedes it is delivered."""
        state = self._state(event.thread_id)
        if state is None:
            self.bus.publish(event)
            return
        seq = event.seq
        if state.next is None and not state.held and (seq is None or self._alone()):
            # nothing is due before it: an ephemeral frame, or this node's commit while
            # no other node writes (those it committed are published as they commit)
            if seq is not None:
                state.floor = max(state.floor, seq + 1)
            self._hand(state, event)
            return
        if not state.busy():
            if seq is None:
                self.bus.publish(event)
                return
            if seq == state.next:
                state.next = seq + 1
                self._hand(state, event)
                return
            if state.next is not None and seq < state.next:
                if seq > state.delivered:  # counted by the head read, never handed on
                    self._hand(state, event)
                return  # else delivered already (a read filled it)
        state.held.append(event)
        self._run(event.thread_id, state)

    def expect(self, thread_id: str, first: int, last: int) -> None:
        """Another node committed events ``first`` … ``last`` of ``thread_id``."""
        state = self._state(thread_id)
        if state is None:
            return
        if state.next is not None and last < state.next and not state.held:
            return
        state.held.append(_Expect(first, last))
        self._run(thread_id, state)

    def resync(self) -> None:
        """After missed notifications (a lost LISTEN connection): every subscribed
        thread catches up to its head as the store has it now."""
        for thread_id, state in list(self._threads.items()):
            state.held.append(_Expect(0, -1))  # -1: up to the head read then
            self._run(thread_id, state)

    def resync_thread(self, thread_id: str) -> None:
        """Read one subscribed thread up to its head now (what a late notice missed)."""
        state = self._threads.get(thread_id)
        if state is not None:
            state.held.append(_Expect(0, -1))
            self._run(thread_id, state)

    async def idle(self, thread_id: str) -> None:
        """Return once nothing of the thread waits (tests, shutdown)."""
        while (state := self._threads.get(thread_id)) is not None and state.task is not None:
            await asyncio.wait([state.task])

    @property
    def threads(self) -> list[str]:
        """Threads with subscribers whose events are ordered here."""
        return list(self._threads)

    def _run(self, thread_id: str, state: _Thread) -> None:
        if state.task is None:
            state.task = asyncio.get_running_loop().create_task(
                self._drain(thread_id, state), name=f"delivery {thread_id}"
            )

    async def _drain(self, thread_id: str, state: _Thread) -> None:
        try:
            if state.next is None:
                head = await self._head(thread_id)
                starts = [(head or 0) + 1]
                for held in state.held:
                    start = held.first if isinstance(held, _Expect) else held.seq
                    if start is not None and start > 0:
                        starts.append(start)
                state.next = max(min(starts), state.floor)
            while state.held:
                due = state.next
                item = state.held.pop(0)
                if isinstance(item, _Expect):
                    last = item.last
                    if last < 0:
                        last = await self._head(thread_id) or 0
                    await self._fill(thread_id, state, last)
                elif item.seq is None:
                    self.bus.publish(item)
                elif item.seq >= due:
                    await self._fill(thread_id, state, item.seq - 1)
                    state.next = item.seq + 1
                    self._hand(state, item)
                elif item.seq > state.delivered:  # counted by the head read only
                    self._hand(state, item)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("thread %s: ordered delivery failed", thread_id)
            state.held.clear()
        finally:
            state.task = None
        if state.held and self._threads.get(thread_id) is state:
            self._run(thread_id, state)

    def _hand(self, state: _Thread, event: ThreadEvent) -> None:
        """Publish a durable event of a subscribed thread, remembering how far it got."""
        if event.seq is not None:
            state.delivered = max(state.delivered, event.seq)
        self.bus.publish(event)

    async def _fill(self, thread_id: str, state: _Thread, last: int) -> None:
        """Read and deliver the events from ``state.next`` through ``last``."""
        assert state.next is not None
        while state.next <= last:
            count = min(READ_PAGE, last - state.next + 1)
            batch = await self._read(thread_id, state.next - 1, count)
            if not batch:
                return  # not there (deleted, or never committed): nothing to deliver
            if batch[0].seq != state.next:
                # pruned before they were relayed: the subscribers cannot be brought up to
                # date frame by frame, and rebuild over HTTP (spec 12 §12.7.4, spec 09 §9.7.3).
                # The resync's seq is the last number gone, below every frame that follows
                # (seq never decreases on a socket), and delivery goes on past the gap.
                gone = min(batch[0].seq, last + 1) - 1
                logger.warning(
                    "thread %s: events %d-%d were pruned before they were relayed",
                    thread_id,
                    state.next,
                    gone,
                )
                data = {"since": state.next - 1, "seq": gone, "reason": "expired"}
                self.bus.publish(ThreadEvent(thread_id, "resync", None, data, batch[0].created_at))
                state.next = gone + 1
            for stored in batch:
                if stored.seq > last:
                    break
                self.gaps_read += 1
                event = await self._build(stored)
                state.next = stored.seq + 1
                self._hand(state, event)
                if self.built is not None:
                    self.built(event)


def order_delivery(hub: ThreadHub, alone: Callable[[], bool]) -> OrderedDelivery:
    """Deliver each subscribed thread's events in ``seq`` order, whichever node wrote them
    (spec 12 §12.7.1 rule 4), for a store several nodes share: the hub's publishing goes
    through the returned delivery from now on (the one already routed, if any).
    ``alone``: whether no other node is known to write the store now."""
    if isinstance(hub.router, OrderedDelivery):
        return hub.router

    async def head(thread_id: str) -> int | None:
        row = await hub.store.get_thread(thread_id)
        return row.event_seq if row is not None else None

    delivery = OrderedDelivery(hub.bus, head, hub.store.read_events, hub.relayed_event, alone)
    hub.route_through(delivery)
    return delivery
