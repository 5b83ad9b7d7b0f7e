"""Ordered delivery (spec 12 §12.7.1 rule 4, §12.7.2 rule 3): a subscribed thread's durable
events reach its subscribers in ``seq`` order whichever way each came, and an ephemeral
frame waits behind the durable ones that arrived before it."""

from __future__ import annotations

import json

from threadloom import Runtime
from threadloom.server.stream_frames import Filters, Frame, Framer
from threadloom.thread.events import ThreadEvent


async def test_a_gap_is_filled_from_the_store_before_what_follows(runtime: Runtime) -> None:
    """Two messages written without being published here (as another node's are), then a
    local one: the subscriber gets the two read from their rows, then the local one, then
    a chunk offered behind it; the late notification of the two delivers nothing twice."""
    hub = runtime.hub
    delivery = hub.order_delivery()
    state = await runtime.create_thread("a")
    tid = state.thread_id
    subscription = runtime.events.subscribe(tid)
    await delivery.idle(tid)  # the thread's head is read: events from here on are due
    head = (await runtime.store.get_thread(tid)).event_seq  # type: ignore[union-attr]
    emit = hub._emit
    hub._emit = lambda event: None  # "another node": committed, not published here
    try:
        await state.inject_message(role="user", content="elsewhere 1")
        await state.inject_message(role="user", content="elsewhere 2")
    finally:
        hub._emit = emit
    await state.inject_message(role="user", content="here")
    chunk = {"message_id": "m", "depth": 0, "chunk": "x", "offset": 0}
    delivery.offer(ThreadEvent(tid, "message_chunk", None, chunk, 0))
    delivery.expect(tid, head + 1, head + 2)  # their notification, late
    await delivery.idle(tid)
    seen = [
        (e.kind, e.seq, e.data.get("message", {}).get("content") if e.seq else e.data["chunk"])
        for e in subscription.drain()
    ]
    assert seen == [
        ("message", head + 1, "elsewhere 1"),
        ("message", head + 2, "elsewhere 2"),
        ("message", head + 3, "here"),
        ("message_chunk", None, "x"),
    ]
    assert delivery.gaps_read == 2
    subscription.close()
    assert tid not in delivery.threads  # nothing kept for a thread nobody subscribes to


async def test_events_after_a_subscription_wait_for_its_head(runtime: Runtime) -> None:
    """Events offered before the new subscription's head is read are held, not dropped,
    and come out in order; a notification of rows that are gone delivers nothing."""
    hub = runtime.hub
    delivery = hub.order_delivery()
    state = await runtime.create_thread("a")
    tid = state.thread_id
    subscription = runtime.events.subscribe(tid)
    await state.inject_message(role="user", content="one")  # before the head is read
    await state.inject_message(role="user", content="two")
    delivery.expect(tid, 10_000, 10_001)  # never committed
    await delivery.idle(tid)
    contents = [e.data["message"]["content"] for e in subscription.drain() if e.seq]
    assert contents == ["one", "two"]
    subscription.close()


async def test_c12_026_rows_pruned_before_they_were_relayed_give_a_resync(runtime: Runtime) -> None:
    """C12-026: events another node committed are pruned before this node reads
    them → the subscribers get one ``resync`` (reason ``expired``, from the last delivered
    ``seq``), then the events still there, in order."""
    hub = runtime.hub
    delivery = hub.order_delivery()
    state = await runtime.create_thread("a")
    tid = state.thread_id
    subscription = runtime.events.subscribe(tid)
    await delivery.idle(tid)
    head = (await runtime.store.get_thread(tid)).event_seq  # type: ignore[union-attr]
    emit = hub._emit
    hub._emit = lambda event: None  # "another node": committed, not published here
    try:
        for i in range(4):
            await state.inject_message(role="user", content=f"elsewhere {i}")
    finally:
        hub._emit = emit
    pruned = await runtime.store.prune_events(older_than_us=0, keep=1)
    assert pruned is not None
    delivery.expect(tid, head + 1, head + 4)  # the notification, after the pruning
    await delivery.idle(tid)
    seen = [(e.kind, e.seq, e.data) for e in subscription.drain()]
    assert seen[0] == ("resync", None, {"since": head, "seq": head + 4, "reason": "expired"})
    assert [(kind, seq) for kind, seq, _ in seen[1:]] == [
        ("message", head + 3),
        ("message", head + 4),
    ]
    subscription.close()
    # a stream socket (and a log socket) sends it as spec 09 §9.7.3's frame
    for filters in (Filters(), Filters(logs=True, log_socket=True)):
        frame = Framer(tid, filters, head).convert("resync", None, seen[0][2], 0)
        assert isinstance(frame, Frame)
        assert json.loads(frame.text) == {
            "type": "resync",
            "seq": head + 4,
            "since": head,
            "reason": "expired",
        }
