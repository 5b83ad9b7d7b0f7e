"""A thread's shared state and run context on every store (spec 02 §2.20, spec 13
§13.2.11): stored with the thread, versioned, written with a ``shared_state`` event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from threadloom.errors import InvalidArgument, StateConflict, StateTooLarge, ThreadNotFound
from threadloom.records import SHARED_STATE_MAX_BYTES, ContextEntry
from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.shapes import NewThread, StateChange


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


async def test_c02_101_state_is_stored_versioned_with_one_event_per_change(store: Store) -> None:
    """C02-101: a new thread's state is {} at version 0; a replacement and a merge each
    commit a version and one ``shared_state`` event; an equal write changes nothing."""
    await store.create_thread(NewThread(id="t1", agent_id="chat"))
    first = await store.get_shared_state("t1")
    assert (first.value, first.version, first.updated_at) == ({}, 0, None)
    written = await store.write_shared_state(
        "t1", StateChange(replace={"todo": ["a"], "n": 1, "nested": {"x": None}})
    )
    assert written.state.version == 1 and written.state.updated_at is not None
    (event,) = written.events
    assert (event.kind, event.entity_id) == ("shared_state", None)
    assert event.data == written.state.to_wire()
    merged = await store.write_shared_state("t1", StateChange(merge={"n": 2}, remove=("todo",)))
    assert merged.state.value == {"n": 2, "nested": {"x": None}}
    assert merged.state.version == 2 and merged.events[0].seq == event.seq + 1
    same = await store.write_shared_state("t1", StateChange(merge={"n": 2}))
    assert same.events == [] and same.state.version == 2
    again = await store.get_shared_state("t1")
    assert again == merged.state
    rows = await store.read_events("t1", event.seq - 1, 10)
    assert [(r.kind, r.seq) for r in rows] == [
        ("shared_state", event.seq),
        ("shared_state", event.seq + 1),
    ]


async def test_c02_102_a_versioned_write_refuses_a_stale_version(store: Store) -> None:
    """C02-102: a write naming the stored version lands; one naming an older version is
    ``StateConflict`` carrying the stored version, and changes nothing."""
    await store.create_thread(NewThread(id="t2", agent_id="chat"))
    ok = await store.write_shared_state("t2", StateChange(replace={"a": 1}, expected_version=0))
    assert ok.state.version == 1
    with pytest.raises(StateConflict) as caught:
        await store.write_shared_state("t2", StateChange(replace={"a": 2}, expected_version=0))
    assert caught.value.version == 1
    assert (await store.get_shared_state("t2")).value == {"a": 1}


async def test_c02_103_limits_and_bad_values_change_nothing(store: Store) -> None:
    """C02-103: a state over SHARED_STATE_MAX_BYTES of JSON is ``StateTooLarge``; a value
    JSON cannot hold is ``InvalidArgument``; an unknown thread ``ThreadNotFound``."""
    await store.create_thread(NewThread(id="t3", agent_id="chat"))
    await store.write_shared_state("t3", StateChange(replace={"keep": True}))
    big = {"blob": "x" * SHARED_STATE_MAX_BYTES}
    with pytest.raises(StateTooLarge):
        await store.write_shared_state("t3", StateChange(merge=big))
    with pytest.raises(InvalidArgument):
        await store.write_shared_state("t3", StateChange(merge={"nan": float("nan")}))
    assert (await store.get_shared_state("t3")).value == {"keep": True}
    with pytest.raises(ThreadNotFound):
        await store.get_shared_state("nope")
    with pytest.raises(ThreadNotFound):
        await store.write_shared_state("nope", StateChange(replace={}))


async def test_c02_104_concurrent_updates_of_different_keys_all_land(store: Store) -> None:
    """C02-104: merges of different keys at once are ordered by the thread's transaction:
    every key lands and the versions count every write."""
    await store.create_thread(NewThread(id="t4", agent_id="chat"))
    await asyncio.gather(
        *(store.write_shared_state("t4", StateChange(merge={f"k{i}": i})) for i in range(8))
    )
    state = await store.get_shared_state("t4")
    assert state.value == {f"k{i}": i for i in range(8)} and state.version == 8


async def test_c13_070_run_context_is_kept_with_the_thread(store: Store) -> None:
    """C13-070 (store): the run context is replaced as a whole, none clears it, and it is
    no event of the thread."""
    row = await store.create_thread(NewThread(id="t5", agent_id="chat"))
    assert await store.get_run_context("t5") == []
    entries = [
        ContextEntry(description="user", value="Ada"),
        ContextEntry(description="é", value="1"),
    ]
    await store.set_run_context("t5", entries)
    assert await store.get_run_context("t5") == entries
    await store.set_run_context("t5", [])
    assert await store.get_run_context("t5") == []
    after = await store.get_thread("t5")
    assert after is not None and after.event_seq == row.event_seq
    with pytest.raises(ThreadNotFound):
        await store.set_run_context("nope", entries)
