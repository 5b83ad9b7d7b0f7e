"""The event bus's subscriptions are bounded in events and in bytes; one that overflows
leaves the bus at once (issue 23 item 2); a forwarded one holds nothing."""

from __future__ import annotations

import pytest

from threadloom.errors import EventOverflow
from threadloom.thread.events import EventBus, ThreadEvent, event_size


def event(text: str, thread_id: str = "t", seq: int | None = 1) -> ThreadEvent:
    return ThreadEvent(thread_id, "message", seq, {"message": {"content": text}}, 0)


def test_event_size_counts_the_strings_and_survives_any_nesting() -> None:
    small, large = event("x"), event("x" * 100_000)
    assert 100_000 < event_size(large) < 100_000 + 200
    assert event_size(large) - event_size(small) == 99_999
    deep: object = "leaf"
    for _ in range(10_000):  # deeper than the interpreter's recursion limit
        deep = {"k": [deep]}
    size = event_size(ThreadEvent("t", "event", None, {"data": deep}, 0))
    assert size > 10_000 * 5


async def test_an_overflowing_subscription_leaves_the_bus_at_once() -> None:
    bus = EventBus()
    overflowed: list[bool] = []
    sub = bus.subscribe("t", max_bytes=10_000)
    sub.on_overflow = lambda: overflowed.append(True)
    bound = bus.subscribe("t")  # the default byte bound: 64 MiB
    for n in range(3):
        bus.publish(event(str(n) + "x" * 3000, seq=n + 1))
        assert sub.buffered_bytes <= 10_000
    assert not overflowed and bus.subscriber_count == 2
    bus.publish(event("3" + "x" * 3000, seq=4))
    assert overflowed == [True] and sub.overflowed
    assert bus.subscriber_count == 1  # only ``bound`` is left: nothing more reaches sub
    bus.publish(event("late", seq=5))
    assert sub.pending() == 3 and bound.pending() == 5
    got = [e.seq async for e in _until_overflow(sub)]
    assert got == [1, 2, 3]  # what it held, then EventOverflow
    assert sub.buffered_bytes == 0 and bus.subscriber_count == 1
    bound.close()
    assert bus.subscriber_count == 0 and not bus.listened


async def _until_overflow(sub: object) -> object:
    try:
        async for item in sub:  # type: ignore[attr-defined]
            yield item
    except EventOverflow:
        return
    raise AssertionError("no EventOverflow")


def test_the_event_count_bound_holds_too() -> None:
    bus = EventBus()
    sub = bus.subscribe("t", max_queue=2, max_bytes=None)
    for n in range(2):
        bus.publish(event("x" * 1_000_000, seq=n + 1))
    assert sub.pending() == 2 and sub.buffered_bytes == 0 and bus.subscriber_count == 1
    bus.publish(event("y", seq=3))
    assert sub.overflowed and bus.subscriber_count == 0


def test_closing_drops_what_is_buffered() -> None:
    bus = EventBus()
    sub = bus.subscribe("t")
    bus.publish(event("x" * 1000))
    assert sub.pending() == 1 and sub.buffered_bytes > 1000
    sub.close()
    assert sub.pending() == 0 and sub.buffered_bytes == 0 and bus.subscriber_count == 0


def test_a_forwarded_subscription_holds_nothing_and_its_faults_stay_its_own() -> None:
    bus = EventBus()
    sub = bus.subscribe("t", max_bytes=1000)
    bus.publish(event("held"))
    with pytest.raises(RuntimeError):
        sub.forward(lambda e: None)  # the held event would be lost
    assert [e.data["message"]["content"] for e in sub.drain()] == ["held"]
    seen: list[str] = []

    def sink(e: ThreadEvent) -> None:
        if e.data["message"]["content"] == "boom":
            raise ValueError("a consumer's fault")
        seen.append(e.data["message"]["content"])

    sub.forward(sink)
    bus.publish(event("x" * 2000))  # over max_bytes: forwarded events are not buffered
    assert seen == ["x" * 2000] and sub.pending() == 0 and not sub.overflowed
    bus.publish(event("boom"))  # the publisher goes on; the subscription ends
    assert sub.closed and bus.subscriber_count == 0
    bus.publish(event("after"))
    assert seen == ["x" * 2000]


def test_bounds_must_be_positive() -> None:
    bus = EventBus()
    with pytest.raises(ValueError):
        bus.subscribe("t", max_bytes=0)
    with pytest.raises(ValueError):
        bus.subscribe("t", max_queue=0)
