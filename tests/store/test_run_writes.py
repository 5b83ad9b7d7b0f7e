"""The store's run-start write (``enqueue_and_begin_run``) and message updates: what
they return is what a read gives back afterwards, whichever path the write took.

A send to an idle thread with an empty queue becomes its message in the same transaction
without a queue row; with entries already waiting it is queued and every entry is
delivered in queue order; when the run does not start it stays queued. Real ``Runtime`` on
a real SQLite file; raw SQL only to assert the storage."""

from __future__ import annotations

from typing import Any

from store_probe import probe
from threadloom import Runtime
from threadloom.records import QueueEntry, ThreadStatus, new_id


def _entry(content: str, **fields: Any) -> QueueEntry:
    return QueueEntry(
        id=new_id(), role="user", content=content, source="api", created_at=0, **fields
    )


def _running(rt: Runtime) -> ThreadStatus:
    return ThreadStatus(state="running", since=rt.store.clock(), reason=None)  # type: ignore[attr-defined]


def _queue_rows(rt: Runtime, thread_id: str) -> list[tuple[Any, ...]]:
    return probe(rt).rows(
        "SELECT id FROM message_queue WHERE thread_id = ? ORDER BY qseq", (thread_id,)
    )


async def test_a_send_to_an_idle_thread_is_delivered_without_a_queue_row(
    runtime: Runtime,
) -> None:
    state = await runtime.create_thread("a")
    tid = state.thread_id
    await state.inject_message(role="user", content="before")
    head = (await runtime.store.get_thread(tid)).event_seq  # type: ignore[union-attr]
    entry = _entry("hello", metadata={"k": [1, {"x": None}]})

    stored, event, begun = await runtime.store.enqueue_and_begin_run(
        tid, entry, clear_stop=True, status=_running(runtime)
    )

    assert begun is not None
    assert _queue_rows(runtime, tid) == []
    [message] = begun.delivered
    assert message.id == stored.id == entry.id
    assert message.created_at > stored.created_at
    assert message.metadata == {"k": [1, {"x": None}]}
    assert await runtime.store.get_message(tid, message.id) == message
    # the entry's event, then the run start, then the delivery: as queued then delivered
    assert (event.seq, event.kind, event.entity_id) == (head + 1, "message", entry.id)
    assert [(e.seq, e.kind, e.entity_id) for e in begun.events] == [
        (head + 2, "status", tid),
        (head + 3, "message", entry.id),
    ]
    assert await runtime.store.read_events(tid, head) == [event, *begun.events]
    row = await runtime.store.get_thread(tid)
    assert row is not None
    assert begun.row.status == row.status == _status_of(begun)
    assert begun.row.event_seq == row.event_seq == head + 3
    page = await state.get_messages(order="asc", limit=None)
    assert [m.content for m in page.messages] == ["before", "hello"]
    assert page.total == 2


def _status_of(begun: Any) -> ThreadStatus:
    status = begun.events[0].data["status"]
    return ThreadStatus(**status)


async def test_entries_already_waiting_are_delivered_first_in_queue_order(
    runtime: Runtime,
) -> None:
    state = await runtime.create_thread("a")
    tid = state.thread_id
    first, _ = await runtime.store.enqueue(tid, _entry("first"), clear_stop=False)
    second = _entry("second")

    stored, _, begun = await runtime.store.enqueue_and_begin_run(
        tid, second, clear_stop=True, status=_running(runtime)
    )

    assert begun is not None
    assert [m.id for m in begun.delivered] == [first.id, stored.id]
    assert [m.content for m in begun.delivered] == ["first", "second"]
    assert [e.kind for e in begun.events] == ["status", "message", "message"]
    for message in begun.delivered:
        assert await runtime.store.get_message(tid, message.id) == message
    assert _queue_rows(runtime, tid) == []


async def test_a_send_that_starts_no_run_stays_queued(runtime: Runtime) -> None:
    state = await runtime.create_thread("a")
    tid = state.thread_id
    entry = _entry("wait")

    stored, event, begun = await runtime.store.enqueue_and_begin_run(
        tid, entry, clear_stop=True, status=_running(runtime), runnable=lambda agent: False
    )

    assert begun is None
    assert _queue_rows(runtime, tid) == [(entry.id,)]
    assert await runtime.store.list_queue(tid) == [stored]
    assert await runtime.store.read_events(tid, 0) == [event]
    row = await runtime.store.get_thread(tid)
    assert row is not None and row.status.state == "idle"


async def test_an_update_returns_what_a_read_gives_back(runtime: Runtime) -> None:
    state = await runtime.create_thread("a")
    tid = state.thread_id
    message = await state.inject_message(role="user", content="one", metadata={"a": 1})
    total = (await state.get_messages(limit=1)).total

    quiet = await state.update_message(message.id, silent=True, metadata={"b": [2]})
    assert await runtime.store.get_message(tid, message.id) == quiet
    assert quiet.silent is True and quiet.metadata == {"a": 1, "b": [2]}  # merged
    assert (await state.get_messages(limit=1)).total == total - 1

    same = await state.update_message(message.id, silent=True, metadata={"b": [2]})
    assert same == quiet == await runtime.store.get_message(tid, message.id)
    loud = await state.update_message(message.id, silent=False, content="two")
    assert await runtime.store.get_message(tid, message.id) == loud
    assert (loud.content, loud.silent) == ("two", False)
    assert (await state.get_messages(limit=1)).total == total
