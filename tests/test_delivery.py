"""Ordered delivery (spec 12 §12.7.1 rule 4, §12.7.2 rule 3): a subscribed thread's durable
events reach its subscribers in ``seq`` order whichever way each came, and an ephemeral
frame waits behind the durable ones that arrived before it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from threadloom import Runtime
from threadloom.node.delivery import OrderedDelivery, order_delivery
from threadloom.server.stream.frames import Filters, Frame, Framer
from threadloom.thread.events import Subscription, ThreadEvent
from threadloom.thread.hub import ThreadHub
from threadloom.thread.state import ThreadState


@dataclass
class _Watched:
    """A thread with one subscriber, its events ordered as on a store several nodes share."""

    hub: ThreadHub
    delivery: OrderedDelivery
    state: ThreadState
    subscription: Subscription

    @property
    def tid(self) -> str:
        return self.state.thread_id

    async def head(self) -> int:
        """The thread's event number once the subscription's head read is done."""
        await self.delivery.idle(self.tid)
        row = await self.state.hub.store.get_thread(self.tid)
        assert row is not None
        return row.event_seq

    async def written_elsewhere(self, *texts: str) -> None:
        """Messages committed and not published here, as another node's are."""
        emit = self.hub._emit
        self.hub._emit = lambda event: None
        try:
            for text in texts:
                await self.state.inject_message(role="user", content=text)
        finally:
            self.hub._emit = emit


async def _watched(runtime: Runtime) -> _Watched:
    delivery = order_delivery(runtime.hub, lambda: not runtime.cluster.peers)
    state = await runtime.create_thread("a")
    return _Watched(runtime.hub, delivery, state, runtime.events.subscribe(state.thread_id))


async def test_a_gap_is_filled_from_the_store_before_what_follows(runtime: Runtime) -> None:
    """Two messages written without being published here (as another node's are), then a
    local one: the subscriber gets the two read from their rows, then the local one, then
    a chunk offered behind it; the late notification of the two delivers nothing twice."""
    w = await _watched(runtime)
    head = await w.head()  # the thread's head is read: events from here on are due
    await w.written_elsewhere("elsewhere 1", "elsewhere 2")
    await w.state.inject_message(role="user", content="here")
    chunk = {"message_id": "m", "depth": 0, "chunk": "x", "offset": 0}
    w.delivery.offer(ThreadEvent(w.tid, "message_chunk", None, chunk, 0))
    w.delivery.expect(w.tid, head + 1, head + 2)  # their notification, late
    await w.delivery.idle(w.tid)
    seen = [
        (e.kind, e.seq, e.data.get("message", {}).get("content") if e.seq else e.data["chunk"])
        for e in w.subscription.drain()
    ]
    assert seen == [
        ("message", head + 1, "elsewhere 1"),
        ("message", head + 2, "elsewhere 2"),
        ("message", head + 3, "here"),
        ("message_chunk", None, "x"),
    ]
    assert w.delivery.gaps_read == 2
    w.subscription.close()
    assert w.tid not in w.delivery.threads  # nothing kept for a thread nobody subscribes to


async def test_events_after_a_subscription_wait_for_its_head(runtime: Runtime) -> None:
    """Events offered before the new subscription's head is read are held, not dropped,
    and come out in order; a notification of rows that are gone delivers nothing."""
    w = await _watched(runtime)
    await w.state.inject_message(role="user", content="one")  # before the head is read
    await w.state.inject_message(role="user", content="two")
    w.delivery.expect(w.tid, 10_000, 10_001)  # never committed
    await w.delivery.idle(w.tid)
    contents = [e.data["message"]["content"] for e in w.subscription.drain() if e.seq]
    assert contents == ["one", "two"]
    w.subscription.close()


async def test_c12_026_rows_pruned_before_they_were_relayed_give_a_resync(runtime: Runtime) -> None:
    """C12-026: events another node committed are pruned before this node reads
    them → the subscribers get one ``resync`` (reason ``expired``, from the last delivered
    ``seq`` to the last one pruned: below every frame that follows), then the events still
    there, in order."""
    w = await _watched(runtime)
    head = await w.head()
    await w.written_elsewhere(*(f"elsewhere {i}" for i in range(4)))
    pruned = await runtime.store.prune_events(older_than_us=0, keep=1)
    assert pruned is not None
    w.delivery.expect(w.tid, head + 1, head + 4)  # the notification, after the pruning
    await w.delivery.idle(w.tid)
    seen = [(e.kind, e.seq, e.data) for e in w.subscription.drain()]
    assert seen[0] == ("resync", None, {"since": head, "seq": head + 2, "reason": "expired"})
    assert [(kind, seq) for kind, seq, _ in seen[1:]] == [
        ("message", head + 3),
        ("message", head + 4),
    ]
    w.subscription.close()
    # a stream socket (and a log socket) sends it as spec 09 §9.7.3's frame
    for filters in (Filters(), Filters(logs=True, log_socket=True)):
        frame = Framer(w.tid, filters, head).convert("resync", None, seen[0][2], 0)
        assert isinstance(frame, Frame)
        assert json.loads(frame.text) == {
            "type": "resync",
            "seq": head + 2,
            "since": head,
            "reason": "expired",
        }


async def test_c12_033_a_range_wholly_pruned_gives_one_resync_and_delivery_goes_on(
    runtime: Runtime,
) -> None:
    """C12-033: a notification names only events that were pruned, while later ones of the
    thread are still stored → one ``resync`` (``seq`` the last pruned number), and delivery
    goes on past the gap: the later events, when their notification comes, are delivered
    (before: the gap was read again and again, a ``resync`` each time, nothing delivered)."""
    w = await _watched(runtime)
    head = await w.head()
    await w.written_elsewhere(*(f"elsewhere {i}" for i in range(4)))
    assert await runtime.store.prune_events(older_than_us=0, keep=1) is not None
    w.delivery.expect(w.tid, head + 1, head + 2)  # all of it pruned
    await asyncio.wait_for(w.delivery.idle(w.tid), 5)
    w.delivery.expect(w.tid, head + 3, head + 4)
    await asyncio.wait_for(w.delivery.idle(w.tid), 5)
    seen = [(e.kind, e.seq, e.data if e.kind == "resync" else None) for e in w.subscription.drain()]
    assert seen == [
        ("resync", None, {"since": head, "seq": head + 2, "reason": "expired"}),
        ("message", head + 3, None),
        ("message", head + 4, None),
    ]
    w.subscription.close()


async def test_c12_029_an_event_the_head_read_counted_before_it_was_offered_is_delivered(
    runtime: Runtime,
) -> None:
    """C12-029: a subscriber subscribes; this node commits a message; the subscription's
    head read runs after the commit and counts it; only then is the commit's event offered
    (its publication runs after the commit's transaction returns): the subscriber gets it,
    once. Before, the head read made it look delivered and it was dropped."""
    delivery = order_delivery(runtime.hub, lambda: not runtime.cluster.peers)
    state = await runtime.create_thread("a")
    tid = state.thread_id
    read_head, gate = delivery._head, asyncio.Event()

    async def late_head(thread_id: str) -> int | None:
        await gate.wait()  # the head is read once the commit below is done
        return await read_head(thread_id)

    delivery._head = late_head
    subscription = runtime.events.subscribe(tid)
    held: list[ThreadEvent] = []
    emit = runtime.hub._emit
    runtime.hub._emit = held.append  # committed, not offered yet
    try:
        await state.inject_message(role="user", content="in flight")
    finally:
        runtime.hub._emit = emit
    gate.set()
    await delivery.idle(tid)  # the head read counted the message's event already
    row = await runtime.store.get_thread(tid)
    assert row is not None
    assert [e.seq for e in held if e.kind == "message"] == [row.event_seq]
    for event in held:
        delivery.offer(event)
    for event in held:  # offered again (say, relayed too): still delivered once
        delivery.offer(event)
    await delivery.idle(tid)
    seen = [(e.kind, e.seq, e.data["message"]["content"]) for e in subscription.drain()]
    assert seen == [("message", row.event_seq, "in flight")]
    subscription.close()
