"""Conformance cases C02-001 … C02-053 of spec 02 §2.19: reading, ids mode, workblocks,
``get_message``, ``inject_message``, ``queue_message``, ``update_message`` and
``delete_message`` (spec 02 §2.4–§2.8, §2.17; hooks per spec 03 §3.4–§3.7).

Out of scope here: the [engine] cases (C02-027, C02-028, C02-033…C02-036, the engine part
of C02-043). C02-054 is held in tests/files/ with the file system. The store-level
part of C02-043 is covered by seeding a ``pending`` model message through the store.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from fakes import FakeClock
from threadloom import Agent, Definitions, Runtime, hook
from threadloom.errors import (
    InvalidArgument,
    InvalidMessage,
    InvalidUpdate,
    MessageGenerating,
    MessageNotFound,
)
from threadloom.records import Message, new_id
from threadloom.thread.state import ThreadState

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
QUEUE_KEYS = {"queued": True, "queue_status": "queued", "queue_source": "queue_message"}


def calls(*ids: str) -> list[dict[str, Any]]:
    return [
        {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}} for cid in ids
    ]


def ids_of(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


async def everything(state: ThreadState) -> list[Message]:
    """Every candidate (stored at any depth, silent included, queue entries) oldest first."""
    page = await state.get_messages(limit=None, order="asc", include_silent=True, max_depth=None)
    return page.messages


async def event_seq(rt: Runtime, thread_id: str) -> int:
    row = await rt.store.get_thread(thread_id)
    assert row is not None
    return row.event_seq


@pytest.fixture
async def state(runtime: Runtime) -> ThreadState:
    return await runtime.create_thread("a")


@pytest.fixture
async def five(state: ThreadState) -> list[Message]:
    """m1…m5: five stored top-level messages, oldest first."""
    return [await state.inject_message(role="user", content=f"m{i}") for i in range(1, 6)]


class Hooked:
    """A runtime whose agent "a" lists four recording lifecycle hooks."""

    def __init__(self, rt: Runtime, state: ThreadState, log: list[tuple[Any, ...]]) -> None:
        self.rt = rt
        self.state = state
        self.log = log

    def names(self) -> list[str]:
        return [entry[0] for entry in self.log]


@pytest.fixture
async def make_hooked(open_runtime: Callable[..., Any]) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []

    async def make(
        *,
        before_create: Callable[[Message], Any] | None = None,
        before_update: Callable[[str, dict[str, Any]], Any] | None = None,
        clock: FakeClock | None = None,
    ) -> Hooked:
        log: list[tuple[Any, ...]] = []

        @hook("before_create_message")
        def rec_before_create(state: ThreadState, message: Message) -> Any:
            log.append(("before_create_message", message))
            return before_create(message) if before_create else None

        @hook("after_create_message")
        def rec_after_create(state: ThreadState, message: Message) -> None:
            log.append(("after_create_message", message))

        @hook("before_update_message")
        def rec_before_update(state: ThreadState, message_id: str, updates: dict[str, Any]) -> Any:
            log.append(("before_update_message", message_id, updates))
            return before_update(message_id, updates) if before_update else None

        @hook("after_update_message")
        def rec_after_update(state: ThreadState, message: Message) -> None:
            log.append(("after_update_message", message))

        fns = [rec_before_create, rec_after_create, rec_before_update, rec_after_update]
        defs = Definitions().add(Agent(name="a", hooks=tuple(f.__name__ for f in fns)), *fns)
        options: dict[str, Any] = {"definitions": defs}
        if clock is not None:
            options["clock"] = clock
        rt = await open_runtime(**options)
        opened.append(rt)
        return Hooked(rt, await rt.create_thread("a"), log)

    yield make
    for rt in opened:
        await rt.close()


# ---------------------------------------------------------------------------------------
# §2.4.1 get_messages: pagination


async def test_c02_001_desc_limit_two(state: ThreadState, five: list[Message]) -> None:
    """C02-001: 5 stored messages → get_messages(limit=2) → [m5, m4], total 5, has_more."""
    page = await state.get_messages(limit=2)
    assert ids_of(page.messages) == [five[4].id, five[3].id]
    assert page.total == 5
    assert page.has_more is True


async def test_c02_002_asc_limit_two(state: ThreadState, five: list[Message]) -> None:
    """C02-002: get_messages(order="asc", limit=2) → [m1, m2], has_more is True."""
    page = await state.get_messages(order="asc", limit=2)
    assert ids_of(page.messages) == [five[0].id, five[1].id]
    assert page.total == 5
    assert page.has_more is True


async def test_c02_003_offset_reaches_oldest(state: ThreadState, five: list[Message]) -> None:
    """C02-003: get_messages(limit=2, offset=4) → [m1], has_more is False."""
    page = await state.get_messages(limit=2, offset=4)
    assert ids_of(page.messages) == [five[0].id]
    assert page.total == 5
    assert page.has_more is False


async def test_c02_004_limit_none_and_zero(state: ThreadState, five: list[Message]) -> None:
    """C02-004: limit=None → all five newest first; limit=0 → [], total 5, has_more True."""
    page = await state.get_messages(limit=None)
    assert ids_of(page.messages) == [m.id for m in reversed(five)]
    assert page.total == 5
    assert page.has_more is False
    empty = await state.get_messages(limit=0)
    assert empty.messages == []
    assert empty.total == 5
    assert empty.has_more is True


async def test_c02_005_silent_filter(state: ThreadState) -> None:
    """C02-005: a visible and a silent message → default read returns only the visible one
    (total 1); include_silent=True returns both (total 2)."""
    visible = await state.inject_message(role="user", content="seen")
    silent = await state.inject_message(role="user", content="hidden", silent=True)
    page = await state.get_messages()
    assert ids_of(page.messages) == [visible.id]
    assert page.total == 1
    assert page.has_more is False
    both = await state.get_messages(include_silent=True)
    assert ids_of(both.messages) == [silent.id, visible.id]
    assert both.total == 2


async def test_c02_006_depth_filter(runtime: Runtime, state: ThreadState) -> None:
    """C02-006: a depth-0 and a depth-1 message → the default read excludes the depth-1
    message; max_depth=1 and max_depth=None include it."""
    top = await state.inject_message(role="user", content="top")
    nested, _ = await runtime.store.insert_message(
        state.thread_id,
        Message(id=new_id(), role="assistant", content="inner", depth=1, parent_id=top.id),
    )
    page = await state.get_messages()
    assert ids_of(page.messages) == [top.id]
    assert page.total == 1
    for max_depth in (1, None):
        deep = await state.get_messages(max_depth=max_depth, order="asc")
        assert ids_of(deep.messages) == [top.id, nested.id], max_depth
        assert deep.total == 2
        assert deep.messages[1].depth == 1


async def test_c02_007_queue_entry_ends_asc_read(state: ThreadState) -> None:
    """C02-007: 2 stored messages and 1 queue entry → get_messages(order="asc") ends with
    the pending view; total == 3."""
    m1 = await state.inject_message(role="user", content="one")
    m2 = await state.inject_message(role="assistant", content="two")
    entry = await state.queue_message(role="user", content="three")
    page = await state.get_messages(order="asc")
    assert ids_of(page.messages) == [m1.id, m2.id, entry.id]
    assert page.total == 3
    assert page.has_more is False
    last = page.messages[-1]
    assert last.status == "pending"
    assert last.metadata == QUEUE_KEYS
    assert last.model_dump() == entry.model_dump()


async def test_c02_008_invalid_arguments(state: ThreadState, five: list[Message]) -> None:
    """C02-008: limit=-1, offset=-1, order="up", max_depth=-2, limit=True → each raises
    InvalidArgument."""
    bad: list[dict[str, Any]] = [
        {"limit": -1},
        {"offset": -1},
        {"order": "up"},
        {"max_depth": -2},
        {"limit": True},
    ]
    for kwargs in bad:
        with pytest.raises(InvalidArgument):
            await state.get_messages(**kwargs)
    # Further rules of §2.4.1 "Validation": bool is not an int, flags must be bool.
    for kwargs in (
        {"offset": True},
        {"max_depth": False},
        {"include_silent": 1},
        {"include_workblocks": "yes"},
        {"limit": 2.0},
    ):
        with pytest.raises(InvalidArgument):
            await state.get_messages(**kwargs)


# ---------------------------------------------------------------------------------------
# §2.4.2 ids mode


async def test_c02_009_ids_mode_canonical_order(state: ThreadState) -> None:
    """C02-009: get_messages(ids=[m3, m1, "nope", m1]) → [m1, m3], total 2, has_more False."""
    m1, _m2, m3 = [await state.inject_message(role="user", content=f"m{i}") for i in (1, 2, 3)]
    page = await state.get_messages(ids=[m3.id, m1.id, "nope", m1.id], limit=1, order="desc")
    assert ids_of(page.messages) == [m1.id, m3.id]
    assert page.total == 2
    assert page.has_more is False


async def test_c02_010_too_many_ids(state: ThreadState) -> None:
    """C02-010: get_messages(ids=<201 distinct ids>) → InvalidArgument with text
    `Too many message IDs requested`."""
    many = [new_id() for _ in range(201)]
    with pytest.raises(InvalidArgument) as info:
        await state.get_messages(ids=many)
    assert str(info.value) == "Too many message IDs requested"
    # 200 distinct ids (duplicates collapsed first) are allowed.
    page = await state.get_messages(ids=many[:200] + many[:5])
    assert page.messages == []
    assert page.total == 0
    assert page.has_more is False


async def test_c02_011_workblocks(state: ThreadState) -> None:
    """C02-011: u, a(tool_calls c1, c2), t1, t2, a2 →
    get_messages(ids=[t1], include_workblocks=True) → [a, t1, t2]."""
    await state.inject_message(role="user", content="u")
    a = await state.inject_message(role="assistant", content=None, tool_calls=calls("c1", "c2"))
    t1 = await state.inject_message(role="tool", content="r1", tool_call_id="c1", name="f")
    t2 = await state.inject_message(role="tool", content="r2", tool_call_id="c2", name="f")
    await state.inject_message(role="assistant", content="done")
    page = await state.get_messages(ids=[t1.id], include_workblocks=True)
    assert ids_of(page.messages) == [a.id, t1.id, t2.id]
    assert page.total == 3
    assert page.has_more is False
    plain = await state.get_messages(ids=[t1.id])
    assert ids_of(plain.messages) == [t1.id]


async def test_c02_012_ids_mode_queue_entry(state: ThreadState) -> None:
    """C02-012: get_messages(ids=[<queue entry id>]) → [<its pending view>], total == 1."""
    await state.inject_message(role="user", content="stored")
    entry = await state.queue_message(role="user", content="waiting")
    page = await state.get_messages(ids=[entry.id])
    assert [m.model_dump() for m in page.messages] == [entry.model_dump()]
    assert page.messages[0].status == "pending"
    assert page.messages[0].metadata == QUEUE_KEYS
    assert page.total == 1
    assert page.has_more is False


# ---------------------------------------------------------------------------------------
# §2.4.3 get_message


async def test_c02_013_get_message_unknown_or_foreign(runtime: Runtime, state: ThreadState) -> None:
    """C02-013: get_message("nope") → None; get_message(<id of another thread's message>)
    → None."""
    other = await runtime.create_thread("a")
    foreign = await other.inject_message(role="user", content="elsewhere")
    foreign_entry = await other.queue_message(role="user", content="queued elsewhere")
    assert await state.get_message("nope") is None
    assert await state.get_message(foreign.id) is None
    assert await state.get_message(foreign_entry.id) is None
    assert (await other.get_message(foreign.id)) is not None


async def test_c02_014_get_message_old_nested_silent(runtime: Runtime, state: ThreadState) -> None:
    """C02-014: 150 top-level messages and a silent depth-1 message as the oldest →
    get_message(<its id>) returns it. (Being the oldest message it has no parent, so it is
    seeded with ``parent_id=None``; the reference would miss it, as it only searches the
    newest 100 top-level messages.)"""
    oldest, _ = await runtime.store.insert_message(
        state.thread_id,
        Message(id=new_id(), role="assistant", content="deep", depth=1, silent=True),
    )
    for i in range(150):
        await state.inject_message(role="user", content=f"n{i}")
    found = await state.get_message(oldest.id)
    assert found is not None
    assert found.id == oldest.id
    assert (found.depth, found.silent, found.content) == (1, True, "deep")
    assert oldest.id not in ids_of((await state.get_messages()).messages)


async def test_c02_015_get_message_queue_entry(state: ThreadState) -> None:
    """C02-015: get_message(<queue entry id>) → the pending view with status "pending"."""
    entry = await state.queue_message(role="user", content="q")
    found = await state.get_message(entry.id)
    assert found is not None
    assert found.status == "pending"
    assert found.metadata == QUEUE_KEYS
    assert (found.depth, found.parent_id) == (0, None)
    assert found.model_dump() == entry.model_dump()


# ---------------------------------------------------------------------------------------
# §2.5 inject_message


async def test_c02_016_inject_at_rest(state: ThreadState) -> None:
    """C02-016: at rest inject_message(role="user", content="hi") → status completed,
    depth 0, parent_id None, prompt None, silent False; get_message(id) is equal."""
    msg = await state.inject_message(role="user", content="hi")
    assert UUID4.match(msg.id)
    assert (msg.role, msg.content) == ("user", "hi")
    assert msg.status == "completed"
    assert msg.depth == 0
    assert msg.parent_id is None
    assert msg.prompt is None
    assert msg.silent is False
    assert msg.created_at > 0
    stored = await state.get_message(msg.id)
    assert stored is not None
    assert stored.model_dump() == msg.model_dump()
    assert stored.to_wire() == msg.to_wire()


async def test_c02_017_create_hooks_run_once(make_hooked: Callable[..., Any]) -> None:
    """C02-017: one inject_message → before_create_message and after_create_message each
    run exactly once; after_create_message receives the record as stored."""
    h = await make_hooked()
    msg = await h.state.inject_message(role="user", content="hello")
    assert h.names() == ["before_create_message", "after_create_message"]
    before, after = h.log[0][1], h.log[1][1]
    assert before.content == "hello"
    assert before.id == msg.id
    stored = await h.state.get_message(msg.id)
    assert stored is not None
    assert after.model_dump() == stored.model_dump() == msg.model_dump()


async def test_c02_018_before_create_raises(make_hooked: Callable[..., Any]) -> None:
    """C02-018: before_create_message raising RuntimeError("no") → inject_message raises
    that RuntimeError; no message stored; no message event; after_create_message not
    called (and no hook-error log row, spec 03 §3.5.2)."""

    def boom(message: Message) -> Any:
        raise RuntimeError("no")

    h = await make_hooked(before_create=boom)
    sub = h.rt.events.subscribe(h.state.thread_id)
    with pytest.raises(RuntimeError) as info:
        await h.state.inject_message(role="user", content="x")
    assert type(info.value) is RuntimeError
    assert str(info.value) == "no"
    assert await everything(h.state) == []
    assert sub.drain() == []
    assert h.names() == ["before_create_message"]
    assert await h.rt.store.list_logs(h.state.thread_id) == []


async def test_c02_019_before_create_transforms(make_hooked: Callable[..., Any]) -> None:
    """C02-019: before_create_message returning {"content": "HI"} → stored and returned
    content == "HI"."""
    h = await make_hooked(before_create=lambda m: {"content": "HI"})
    msg = await h.state.inject_message(role="user", content="hi")
    assert msg.content == "HI"
    stored = await h.state.get_message(msg.id)
    assert stored is not None and stored.content == "HI"
    assert h.log[1][1].content == "HI"  # after_create_message sees the stored record


async def test_c02_020_hook_cannot_change_id_or_created_at(
    make_hooked: Callable[..., Any],
) -> None:
    """C02-020: before_create_message returning a message with a different id and
    created_at → the stored id is the runtime's; created_at follows the thread clock."""
    clock = FakeClock()
    forged = "11111111-1111-4111-8111-111111111111"
    h = await make_hooked(
        before_create=lambda m: m.model_copy(update={"id": forged, "created_at": 7}),
        clock=clock,
    )
    clock.now += 5_000
    first = await h.state.inject_message(role="user", content="one")
    second = await h.state.inject_message(role="user", content="two")  # same µs
    for msg in (first, second):
        assert msg.id != forged
        assert UUID4.match(msg.id)
    assert first.id == h.log[0][1].id  # the candidate id the runtime gave the hook
    assert first.created_at == clock.now
    assert second.created_at == clock.now + 1
    assert await h.state.get_message(forged) is None
    stored = await h.state.get_message(first.id)
    assert stored is not None and stored.created_at == clock.now


async def test_c02_021_invalid_role(make_hooked: Callable[..., Any]) -> None:
    """C02-021: inject_message(role="robot", content="x") → InvalidMessage; no hook ran;
    nothing stored."""
    h = await make_hooked()
    sub = h.rt.events.subscribe(h.state.thread_id)
    with pytest.raises(InvalidMessage):
        await h.state.inject_message(role="robot", content="x")
    assert h.log == []
    assert await everything(h.state) == []
    assert sub.drain() == []


async def test_c02_022_inject_refuses_status(state: ThreadState) -> None:
    """C02-022: inject_message(role="user", content="x", status="failed") → InvalidMessage
    naming `status`."""
    with pytest.raises(InvalidMessage) as info:
        await state.inject_message(role="user", content="x", status="failed")
    assert str(info.value) == "inject_message does not accept field 'status'"
    assert await everything(state) == []


async def test_c02_023_mapping_and_keywords(state: ThreadState) -> None:
    """C02-023: inject_message({"role": "user", "content": "x"}, silent=True) → TypeError."""
    with pytest.raises(TypeError):
        await state.inject_message({"role": "user", "content": "x"}, silent=True)
    assert await everything(state) == []


async def test_c02_024_reserved_and_oversized_metadata(
    runtime: Runtime, state: ThreadState
) -> None:
    """C02-024: metadata={"queued": True, "a": 1} → InvalidMessage (`metadata.queued is
    reserved`); nothing stored. Metadata of 20 KiB → InvalidMessage."""
    sub = runtime.events.subscribe(state.thread_id)
    with pytest.raises(InvalidMessage) as info:
        await state.inject_message(role="user", content="x", metadata={"queued": True, "a": 1})
    assert "metadata.queued is reserved" in str(info.value)
    with pytest.raises(InvalidMessage):
        await state.inject_message(role="user", content="x", metadata={"blob": "x" * 20_480})
    assert await everything(state) == []
    assert sub.drain() == []


async def test_c02_025_inject_keeps_idle(open_runtime: Callable[..., Any]) -> None:
    """C02-025: idle T → inject_message(...) → status() still idle with the same since;
    no execution started."""
    clock = FakeClock()
    rt = await open_runtime(clock=clock)
    try:
        state = await rt.create_thread("a")
        before = await state.status()
        assert before.state == "idle"
        clock.now += 1_000_000
        await state.inject_message(role="user", content="hello")
        await asyncio.sleep(0)
        after = await state.status()
        assert after == before
        assert (after.state, after.since, after.reason) == ("idle", before.since, None)
    finally:
        await rt.close()


async def test_c02_026_silent_inject_event(runtime: Runtime, state: ThreadState) -> None:
    """C02-026: subscriber on T → inject_message(silent=True) → one message event with
    seq = previous + 1 and data.message.silent is True."""
    await state.inject_message(role="user", content="earlier")
    previous = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    msg = await state.inject_message(role="user", content="quiet", silent=True)
    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [("message", previous + 1)]
    assert events[0].thread_id == state.thread_id
    assert events[0].data["message"]["silent"] is True
    assert events[0].data["message"] == msg.to_wire()


# ---------------------------------------------------------------------------------------
# §2.6 queue_message


async def test_c02_029_queue_at_rest(make_hooked: Callable[..., Any]) -> None:
    """C02-029: idle T without engine → queue_message(role="user", content="q") → a pending
    view with metadata == {queued, queue_status "queued", queue_source "queue_message"};
    get_messages() lists it; no hook ran."""
    h = await make_hooked()
    sub = h.rt.events.subscribe(h.state.thread_id)
    view = await h.state.queue_message(role="user", content="q")
    assert UUID4.match(view.id)
    assert (view.role, view.content, view.status) == ("user", "q", "pending")
    assert view.metadata == QUEUE_KEYS
    assert (view.depth, view.parent_id, view.prompt) == (0, None, None)
    page = await h.state.get_messages()
    assert [m.model_dump() for m in page.messages] == [view.model_dump()]
    assert page.total == 1
    assert h.log == []
    events = sub.drain()
    assert [e.kind for e in events] == ["message"]
    assert events[0].data["message"] == view.to_wire()
    assert (await h.state.status()).state == "idle"


async def test_c02_030_concurrent_queue_order(open_runtime: Callable[..., Any]) -> None:
    """C02-030: 200 concurrent queue_message calls started in order with contents
    "0"…"199" → 200 entries, distinct ids, read back in that order; none lost or
    duplicated after closing and reopening the Runtime."""
    expected = [str(i) for i in range(200)]
    rt = await open_runtime()
    try:
        state = await rt.create_thread("a")
        tid = state.thread_id
        start = await event_seq(rt, tid)
        sub = rt.events.subscribe(tid)
        views = await asyncio.gather(
            *[state.queue_message(role="user", content=c) for c in expected]
        )
        assert [v.content for v in views] == expected
        view_ids = [v.id for v in views]
        assert len(set(view_ids)) == 200
        page = await state.get_messages(order="asc", limit=None)
        assert [m.content for m in page.messages] == expected
        assert ids_of(page.messages) == view_ids
        assert page.total == 200
        assert page.has_more is False
        stamps = [m.created_at for m in page.messages]
        assert stamps == sorted(stamps) and len(set(stamps)) == 200
        events = sub.drain()
        assert [e.seq for e in events] == list(range(start + 1, start + 201))
        assert [e.data["message"]["id"] for e in events] == view_ids
    finally:
        await rt.close()
    reopened = await open_runtime()
    try:
        again = await reopened.thread(tid)
        page = await again.get_messages(order="asc", limit=None)
        assert [m.content for m in page.messages] == expected
        assert ids_of(page.messages) == view_ids
        assert page.total == 200
        assert all(m.status == "pending" and m.metadata == QUEUE_KEYS for m in page.messages)
        queue = await reopened.store.list_queue(tid)
        assert [e.id for e in queue] == view_ids
    finally:
        await reopened.close()


async def test_c02_031_queue_roles_and_blank(state: ThreadState) -> None:
    """C02-031: role "tool" → InvalidMessage; role "system" → accepted, a pending view with
    role "system"; blank content → InvalidMessage `Message content or attachments
    required`."""
    with pytest.raises(InvalidMessage):
        await state.queue_message(role="tool", content="x")
    system = await state.queue_message(role="system", content="x")
    assert (system.role, system.status, system.content) == ("system", "pending", "x")
    assert system.metadata == QUEUE_KEYS
    with pytest.raises(InvalidMessage) as info:
        await state.queue_message(role="user", content="  ")
    assert str(info.value) == "Message content or attachments required"
    page = await state.get_messages()
    assert ids_of(page.messages) == [system.id]


async def test_c02_032_queue_survives_restart(open_runtime: Callable[..., Any]) -> None:
    """C02-032: queue 3 entries, close the Runtime, reopen → the 3 entries are still listed
    as pending in order."""
    rt = await open_runtime()
    try:
        state = await rt.create_thread("a")
        views = [await state.queue_message(role="user", content=f"q{i}") for i in range(3)]
    finally:
        await rt.close()
    reopened = await open_runtime()
    try:
        again = await reopened.thread(state.thread_id)
        page = await again.get_messages(order="asc")
        assert [m.model_dump() for m in page.messages] == [v.model_dump() for v in views]
        assert [m.content for m in page.messages] == ["q0", "q1", "q2"]
        assert all(m.status == "pending" and m.metadata == QUEUE_KEYS for m in page.messages)
        assert page.total == 3
    finally:
        await reopened.close()


async def test_c02_037_delete_queue_entry(runtime: Runtime, state: ThreadState) -> None:
    """C02-037: queue an entry, then delete_message(<entry id>) → True; it disappears from
    reads."""
    kept = await state.inject_message(role="user", content="stored")
    entry = await state.queue_message(role="user", content="q", silent=True)
    previous = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(entry.id) is True
    assert await state.get_message(entry.id) is None
    assert ids_of(await everything(state)) == [kept.id]
    assert (await state.get_messages(include_silent=True)).total == 1
    assert await runtime.store.list_queue(state.thread_id) == []
    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [("message_deleted", previous + 1)]
    assert events[0].data == {"message_id": entry.id, "depth": 0, "silent": True}
    assert await state.delete_message(entry.id) is False


# ---------------------------------------------------------------------------------------
# §2.7 update_message


async def test_c02_038_update_merges_metadata(runtime: Runtime, state: ThreadState) -> None:
    """C02-038: update_message(m, content="new", metadata={"edited": True}) on metadata
    {"a": 1} → content "new", metadata {"a": 1, "edited": True}, created_at unchanged."""
    m = await state.inject_message(role="user", content="old", metadata={"a": 1})
    await asyncio.sleep(0.002)
    updated = await state.update_message(m.id, content="new", metadata={"edited": True})
    assert updated.content == "new"
    assert updated.metadata == {"a": 1, "edited": True}
    assert updated.created_at == m.created_at
    stored = await state.get_message(m.id)
    assert stored is not None
    assert stored.model_dump() == updated.model_dump()
    assert ids_of(await everything(state)) == [m.id]


async def test_c02_039_metadata_key_removed(state: ThreadState) -> None:
    """C02-039: update_message(m, metadata={"a": None}) on metadata {"a": 1} → metadata is
    None; the wire record has no metadata key."""
    m = await state.inject_message(role="user", content="x", metadata={"a": 1})
    updated = await state.update_message(m.id, metadata={"a": None})
    assert updated.metadata is None
    assert "metadata" not in updated.to_wire()
    stored = await state.get_message(m.id)
    assert stored is not None and stored.metadata is None
    assert "metadata" not in stored.to_wire()


async def test_c02_040_update_unknown(state: ThreadState) -> None:
    """C02-040: update_message("nope", content="x") → MessageNotFound."""
    with pytest.raises(MessageNotFound) as info:
        await state.update_message("nope", content="x")
    assert info.value.message_id == "nope"


async def test_c02_041_update_role_refused(runtime: Runtime, state: ThreadState) -> None:
    """C02-041: update_message(m, role="assistant") → InvalidUpdate; record unchanged; no
    event."""
    m = await state.inject_message(role="user", content="x")
    sub = runtime.events.subscribe(state.thread_id)
    with pytest.raises(InvalidUpdate) as info:
        await state.update_message(m.id, role="assistant")
    assert str(info.value) == "field 'role' cannot be updated"
    stored = await state.get_message(m.id)
    assert stored is not None and stored.model_dump() == m.model_dump()
    assert sub.drain() == []


async def test_c02_042_update_queue_entry(make_hooked: Callable[..., Any]) -> None:
    """C02-042: update_message(<entry>, content="x", metadata={"k": 1}) → the pending view
    with content "x" and metadata.k == 1; no hook ran; a message event was published;
    update_message(<entry>, name="n") → InvalidUpdate."""
    h = await make_hooked()
    entry = await h.state.queue_message(role="user", content="q")
    previous = await event_seq(h.rt, h.state.thread_id)
    sub = h.rt.events.subscribe(h.state.thread_id)
    view = await h.state.update_message(entry.id, content="x", metadata={"k": 1})
    assert view.id == entry.id
    assert view.content == "x"
    assert view.status == "pending"
    assert view.metadata == {"k": 1, **QUEUE_KEYS}
    assert view.created_at == entry.created_at
    assert h.log == []
    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [("message", previous + 1)]
    assert events[0].data["message"] == view.to_wire()
    found = await h.state.get_message(entry.id)
    assert found is not None and found.model_dump() == view.model_dump()
    with pytest.raises(InvalidUpdate):
        await h.state.update_message(entry.id, name="n")
    assert sub.drain() == []
    found = await h.state.get_message(entry.id)
    assert found is not None and found.model_dump() == view.model_dump()


async def test_c02_043_pending_model_message_store_level(
    runtime: Runtime, state: ThreadState
) -> None:
    """C02-043 (store-level part; the streaming run is [engine]): a model message that is
    still pending → update_message(id, content="x") and delete_message(id) raise
    MessageGenerating; nothing changes."""
    await state.inject_message(role="user", content="question")
    pending, _ = await runtime.store.insert_message(
        state.thread_id,
        Message(id=new_id(), role="assistant", content=None, status="pending", name="A"),
    )
    before = await state.get_message(pending.id)
    assert before is not None and before.status == "pending" and before.content is None
    head = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    with pytest.raises(MessageGenerating):
        await state.update_message(pending.id, content="x")
    with pytest.raises(MessageGenerating):
        await state.delete_message(pending.id)
    after = await state.get_message(pending.id)
    assert after is not None and after.model_dump() == before.model_dump()
    assert sub.drain() == []
    assert await event_seq(runtime, state.thread_id) == head


async def test_c02_044_update_hooks(make_hooked: Callable[..., Any]) -> None:
    """C02-044: update_message(m, content="x") → before_update_message receives
    (m, {"content": "x"}); after_update_message receives the full updated record; one
    message event. ("m" in the case is the message id: the hook signature of spec 03 §3.6.8
    is ``(state, message_id, updates)``.)"""
    h = await make_hooked()
    m = await h.state.inject_message(role="user", content="old", metadata={"a": 1})
    h.log.clear()
    sub = h.rt.events.subscribe(h.state.thread_id)
    updated = await h.state.update_message(m.id, content="x")
    assert h.names() == ["before_update_message", "after_update_message"]
    assert h.log[0][1:] == (m.id, {"content": "x"})
    after = h.log[1][1]
    stored = await h.state.get_message(m.id)
    assert stored is not None
    assert after.model_dump() == updated.model_dump() == stored.model_dump()
    assert (after.content, after.metadata, after.role) == ("x", {"a": 1}, "user")
    events = sub.drain()
    assert [e.kind for e in events] == ["message"]
    assert events[0].data["message"] == updated.to_wire()


async def test_c02_045_before_update_raises(make_hooked: Callable[..., Any]) -> None:
    """C02-045: before_update_message raising → the exception propagates; record
    unchanged; no event."""

    class Refused(Exception):
        pass

    def refuse(message_id: str, updates: dict[str, Any]) -> Any:
        raise Refused("not allowed")

    h = await make_hooked(before_update=refuse)
    m = await h.state.inject_message(role="user", content="keep")
    h.log.clear()
    sub = h.rt.events.subscribe(h.state.thread_id)
    with pytest.raises(Refused, match=r"^not allowed$"):
        await h.state.update_message(m.id, content="changed")
    stored = await h.state.get_message(m.id)
    assert stored is not None and stored.model_dump() == m.model_dump()
    assert sub.drain() == []
    assert h.names() == ["before_update_message"]
    assert await h.rt.store.list_logs(h.state.thread_id) == []


async def test_c02_046_update_to_silent(state: ThreadState) -> None:
    """C02-046: update_message(m, silent=True) on a visible message → default reads no
    longer list it and total drops by 1."""
    m1 = await state.inject_message(role="user", content="one")
    m2 = await state.inject_message(role="user", content="two")
    before = await state.get_messages()
    assert before.total == 2
    updated = await state.update_message(m2.id, silent=True)
    assert updated.silent is True
    after = await state.get_messages()
    assert ids_of(after.messages) == [m1.id]
    assert after.total == before.total - 1
    assert (await state.get_messages(include_silent=True)).total == 2


async def test_c02_047_update_status_pending_refused(runtime: Runtime, state: ThreadState) -> None:
    """C02-047: update_message(m, status="pending") → InvalidUpdate."""
    m = await state.inject_message(role="user", content="x")
    sub = runtime.events.subscribe(state.thread_id)
    with pytest.raises(InvalidUpdate):
        await state.update_message(m.id, status="pending")
    stored = await state.get_message(m.id)
    assert stored is not None and stored.status == "completed"
    assert sub.drain() == []


async def test_c02_048_update_without_fields(make_hooked: Callable[..., Any]) -> None:
    """C02-048: update_message(m) with no fields → returns the current record; no hook ran;
    no event."""
    h = await make_hooked()
    m = await h.state.inject_message(role="user", content="x", metadata={"a": 1})
    h.log.clear()
    sub = h.rt.events.subscribe(h.state.thread_id)
    same = await h.state.update_message(m.id)
    assert same.model_dump() == m.model_dump()
    same_again = await h.state.update_message(m.id, {})
    assert same_again.model_dump() == m.model_dump()
    assert h.log == []
    assert sub.drain() == []


# ---------------------------------------------------------------------------------------
# §2.8 delete_message


async def _work_block(state: ThreadState) -> tuple[Message, Message, Message, Message]:
    """u, then a with calls c1, c2 and tool results t1, t2."""
    u = await state.inject_message(role="user", content="u")
    a = await state.inject_message(
        role="assistant", content="calling", tool_calls=calls("c1", "c2")
    )
    t1 = await state.inject_message(role="tool", content="r1", tool_call_id="c1", name="f")
    t2 = await state.inject_message(role="tool", content="r2", tool_call_id="c2", name="f")
    return u, a, t1, t2


async def test_c02_049_delete_cascades_tool_results(runtime: Runtime, state: ThreadState) -> None:
    """C02-049: a with calls c1, c2, tool results t1, t2, unrelated u → delete_message(a) →
    True; a, t1, t2 gone; u kept; three message_deleted events for a, t1, t2, in that
    order, with consecutive seq."""
    u, a, t1, t2 = await _work_block(state)
    previous = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(a.id) is True
    for gone in (a, t1, t2):
        assert await state.get_message(gone.id) is None
    assert ids_of(await everything(state)) == [u.id]
    page = await state.get_messages()
    assert page.total == 1
    events = sub.drain()
    assert [e.kind for e in events] == ["message_deleted"] * 3
    assert [e.seq for e in events] == [previous + 1, previous + 2, previous + 3]
    assert [e.data for e in events] == [
        {"message_id": mid, "depth": 0, "silent": False} for mid in (a.id, t1.id, t2.id)
    ]
    # The call ids are free again (their tool_calls rows went with a).
    again = await state.inject_message(role="assistant", content=None, tool_calls=calls("c1"))
    assert again.tool_calls is not None


async def test_c02_050_delete_keeps_log_rows(runtime: Runtime, state: ThreadState) -> None:
    """C02-050: a log row anchored to message m → delete_message(m) → the log row still
    exists with message_id is None."""
    m = await state.inject_message(role="user", content="x")
    row = await state.log(name="anchored", cost=0.25)
    assert row is not None and row.message_id == m.id
    assert await state.delete_message(m.id) is True
    kept = await runtime.store.get_log(state.thread_id, row.id)
    assert kept is not None
    assert kept.message_id is None
    assert kept.model == "anchored"
    assert kept.app_cost == 0.25
    assert [r.id for r in await runtime.store.list_logs(state.thread_id)] == [row.id]


async def test_c02_051_delete_single_tool_result(runtime: Runtime, state: ThreadState) -> None:
    """C02-051: delete_message(t1) → True; only t1 removed; a and t2 kept."""
    u, a, t1, t2 = await _work_block(state)
    previous = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(t1.id) is True
    assert ids_of(await everything(state)) == [u.id, a.id, t2.id]
    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [("message_deleted", previous + 1)]
    assert events[0].data == {"message_id": t1.id, "depth": 0, "silent": False}


async def test_c02_052_delete_unknown_or_twice(runtime: Runtime, state: ThreadState) -> None:
    """C02-052: delete_message("nope") → False; a second delete_message(a) after success
    → False (nothing published for either)."""
    _u, a, _t1, _t2 = await _work_block(state)
    other = await runtime.create_thread("a")
    foreign = await other.inject_message(role="user", content="elsewhere")
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message("nope") is False
    assert await state.delete_message(foreign.id) is False
    assert await other.get_message(foreign.id) is not None
    assert sub.drain() == []
    assert await state.delete_message(a.id) is True
    assert len(sub.drain()) == 3
    assert await state.delete_message(a.id) is False
    assert sub.drain() == []


async def test_c02_053_delete_cascades_nested(runtime: Runtime, state: ThreadState) -> None:
    """C02-053: a tool message t with two nested depth-1 messages whose parent_id is t →
    delete_message(t) removes all three."""
    a = await state.inject_message(role="assistant", content=None, tool_calls=calls("c1"))
    t = await state.inject_message(role="tool", content="r", tool_call_id="c1", name="f")
    nested = []
    for role, content, silent in (("assistant", "inner", False), ("user", "inner2", True)):
        stored, _ = await runtime.store.insert_message(
            state.thread_id,
            Message(
                id=new_id(), role=role, content=content, depth=1, parent_id=t.id, silent=silent
            ),
        )
        nested.append(stored)
    after_t = await state.inject_message(role="user", content="later")
    assert len(await everything(state)) == 5
    previous = await event_seq(runtime, state.thread_id)
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(t.id) is True
    for gone in (t, *nested):
        assert await state.get_message(gone.id) is None
    assert ids_of(await everything(state)) == [a.id, after_t.id]
    assert (await state.get_messages(max_depth=None, include_silent=True)).total == 2
    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [
        ("message_deleted", previous + 1),
        ("message_deleted", previous + 2),
        ("message_deleted", previous + 3),
    ]
    assert [e.data for e in events] == [
        {"message_id": t.id, "depth": 0, "silent": False},
        {"message_id": nested[0].id, "depth": 1, "silent": False},
        {"message_id": nested[1].id, "depth": 1, "silent": True},
    ]


# ---------------------------------------------------------------------------------------
# Extra rules stated in §2.4.1 / §2.7.4 without a numbered case


@pytest.mark.parametrize(
    ("order", "limit", "offset", "expected", "has_more"),
    [
        ("desc", 2, 1, ["q1", "s3"], True),
        ("desc", 3, 0, ["q2", "q1", "s3"], True),
        ("desc", 2, 2, ["s3", "s2"], True),
        ("desc", 2, 4, ["s1"], False),
        ("desc", None, 1, ["q1", "s3", "s2", "s1"], False),
        ("desc", 0, 1, [], True),
        ("desc", 3, 9, [], False),
        ("asc", 2, 2, ["s3", "q1"], True),
        ("asc", 2, 3, ["q1", "q2"], False),
        ("asc", 5, 4, ["q2"], False),
        ("asc", None, 0, ["s1", "s2", "s3", "q1", "q2"], False),
    ],
)
async def test_extra_windows_straddle_stored_and_queue(
    state: ThreadState,
    order: str,
    limit: int | None,
    offset: int,
    expected: list[str],
    has_more: bool,
) -> None:
    """§2.4.1 steps 3–6: 3 stored + 2 queued; windows across the stored/queue boundary are
    cut from [s1 s2 s3 q1 q2] (queue after stored), total counts queue entries, and
    has_more = offset + len(messages) < total (e.g. desc limit=2 offset=1 → [q1, s3])."""
    for i in (1, 2, 3):
        await state.inject_message(role="user", content=f"s{i}")
    for i in (1, 2):
        await state.queue_message(role="user", content=f"q{i}")
    page = await state.get_messages(order=order, limit=limit, offset=offset)  # type: ignore[arg-type]
    assert [m.content for m in page.messages] == expected
    assert page.total == 5
    assert page.has_more is has_more
    assert all((m.status == "pending") == m.content.startswith("q") for m in page.messages)


async def test_extra_silent_filter_applies_to_queue(state: ThreadState) -> None:
    """§2.4.1 step 2: silent queue entries are dropped from pagination and from total
    unless include_silent; queue entries (depth 0) survive max_depth=0; ids mode applies
    the silent filter to queue entries too."""
    s1 = await state.inject_message(role="user", content="s1")
    hidden = await state.inject_message(role="user", content="hidden", silent=True)
    s2 = await state.inject_message(role="user", content="s2")
    q1 = await state.queue_message(role="user", content="q1")
    qs = await state.queue_message(role="user", content="qs", silent=True)
    q2 = await state.queue_message(role="user", content="q2")
    page = await state.get_messages(limit=2, offset=1)
    assert ids_of(page.messages) == [q1.id, s2.id]
    assert page.total == 4
    assert page.has_more is True
    full = await state.get_messages(include_silent=True, order="asc", limit=None)
    assert ids_of(full.messages) == [s1.id, hidden.id, s2.id, q1.id, qs.id, q2.id]
    assert full.total == 6
    window = await state.get_messages(include_silent=True, limit=3, offset=1)
    assert ids_of(window.messages) == [qs.id, q1.id, s2.id]
    assert window.has_more is True
    by_ids = await state.get_messages(ids=[qs.id, q2.id, hidden.id, s1.id])
    assert ids_of(by_ids.messages) == [s1.id, q2.id]
    by_ids_all = await state.get_messages(ids=[qs.id, q2.id, hidden.id, s1.id], include_silent=True)
    assert ids_of(by_ids_all.messages) == [s1.id, hidden.id, qs.id, q2.id]
    assert by_ids_all.total == 4


async def test_extra_update_queue_entry_metadata_merge(
    runtime: Runtime, state: ThreadState
) -> None:
    """§2.7.4 rule 1 with §2.7.1: editing a waiting entry merges metadata one level deep
    (None removes a key, metadata=None clears the caller's keys), reserved queue keys are
    refused, and the entry must keep content or attachments; position is unchanged."""
    first = await state.queue_message(
        role="user", content="q", metadata={"a": 1, "b": {"x": 1}, "c": 3}
    )
    second = await state.queue_message(role="user", content="after")
    merged = await state.update_message(first.id, metadata={"b": {"y": 2}, "c": None, "d": 4})
    assert merged.metadata == {"a": 1, "b": {"y": 2}, "d": 4, **QUEUE_KEYS}
    assert merged.content == "q"
    found = await state.get_message(first.id)
    assert found is not None and found.metadata == merged.metadata
    sub = runtime.events.subscribe(state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.update_message(first.id, metadata={"queue_status": "cancelled"})
    with pytest.raises(InvalidMessage):
        await state.update_message(first.id, metadata={"queued": False})
    with pytest.raises(InvalidUpdate):
        await state.update_message(first.id, content="   ")
    with pytest.raises(InvalidUpdate):
        await state.update_message(first.id, status="completed")
    assert sub.drain() == []
    unchanged = await state.get_message(first.id)
    assert unchanged is not None and unchanged.model_dump() == merged.model_dump()
    cleared = await state.update_message(first.id, metadata=None, silent=True)
    assert cleared.metadata == QUEUE_KEYS
    assert cleared.silent is True
    page = await state.get_messages(order="asc", include_silent=True)
    assert ids_of(page.messages) == [first.id, second.id]
    assert [e.kind for e in sub.drain()] == ["message"]


async def test_extra_update_stored_metadata_rules(state: ThreadState) -> None:
    """§2.7.1: metadata=None clears all metadata; reserved queue keys are refused; the merged
    result must stay ≤ 16 KiB; an empty result is stored as None."""
    m = await state.inject_message(role="user", content="x", metadata={"a": 1, "b": 2})
    with pytest.raises(InvalidMessage):
        await state.update_message(m.id, metadata={"queued": True})
    with pytest.raises(InvalidMessage):
        await state.update_message(m.id, metadata={"big": "x" * 16_400})
    kept = await state.get_message(m.id)
    assert kept is not None and kept.metadata == {"a": 1, "b": 2}
    cleared = await state.update_message(m.id, metadata=None)
    assert cleared.metadata is None
    again = await state.update_message(m.id, metadata={})
    assert again.metadata is None
