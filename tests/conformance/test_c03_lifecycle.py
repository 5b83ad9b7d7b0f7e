"""Conformance cases C03-005 … C03-017 (spec 03 §3.2–§3.7): the message lifecycle hooks,
integrated with a real ``Runtime`` and ``ThreadState`` on a real SQLite file.

The hook runner itself is unit-tested in tests/test_hooks_unit.py; here the observable
outcome of each case is checked end to end: what is stored, which events are published,
which ``hook_error`` log rows are written, and which exceptions reach the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, ThreadState, hook
from threadloom.define.hook import HookContext
from threadloom.errors import (
    DefinitionError,
    HookRecursionError,
    HookTimeout,
    InvalidMessage,
    UnknownHookError,
)
from threadloom.records import LogRow, Message

# --------------------------------------------------------------------------------------
# Helpers


async def open_with(db_url: str, *items: Any, **options: Any) -> Runtime:
    """A Runtime whose definitions hold ``items`` (agents and ``@hook`` functions)."""
    return await Runtime.open(db_url, definitions=Definitions().add(*items), **options)


async def all_messages(state: ThreadState) -> list[Message]:
    page = await state.get_messages(limit=None, order="asc", include_silent=True, max_depth=None)
    return page.messages


async def event_rows(rt: Runtime, thread_id: str) -> list[tuple[int, str, str | None]]:
    return [(e.seq, e.kind, e.entity_id) for e in await rt.store.read_events(thread_id, 0)]


async def logs(rt: Runtime, thread_id: str) -> list[LogRow]:
    return await rt.store.list_logs(thread_id, limit=None)


def assert_hook_error_row(row: LogRow, *, hook_id: str, hook_name: str, error_head: str) -> None:
    """A runtime error row for a swallowed hook failure (spec 03 §3.5.1 item 2)."""
    assert row.kind is None
    assert row.provider == "system"
    assert row.model == hook_id
    assert row.endpoint == f"hook.{hook_name}"
    assert row.error_type == "hook_error"
    assert row.error_origin == f"hook:{hook_id}"
    assert row.is_complete is True
    assert row.error is not None
    assert row.error.startswith(f"{error_head}\n\nStack trace:\n")
    assert "Traceback" in row.error
    assert len(row.error.split("\n\nStack trace:\n", 1)[1].splitlines()) <= 100
    assert row.cost_total is None
    assert row.app_level is None


async def assert_nothing_written(
    rt: Runtime, t: ThreadState, events_before: list[tuple[int, str, str | None]]
) -> None:
    """No message, no durable event, no log row (spec 03 §3.5.2)."""
    assert await all_messages(t) == []
    assert await event_rows(rt, t.thread_id) == events_before
    assert await logs(rt, t.thread_id) == []


# --------------------------------------------------------------------------------------
# §3.2 rule 8


async def test_c03_005_unknown_hook_id_fails_loading(db_url: str) -> None:
    """C03-005: a prompt listing the unregistered id ``ghost`` → loading the project raises
    ``UnknownHookError`` naming ``ghost`` and the prompt.

    At this stage prompts and project discovery do not exist yet: "loading the project" is
    ``Runtime.open(url, definitions=defs)``, and the definition listing ``ghost`` is an
    Agent (spec 03 §3.2 rule 8 covers a prompt's and an agent's ``hooks`` list alike)."""

    @hook("before_create_message")
    def known(state: ThreadState, message: Message) -> None:
        return None

    defs = Definitions().add(Agent(name="support", hooks=["known", "ghost"]), known)
    with pytest.raises(UnknownHookError) as info:
        await Runtime.open(db_url, definitions=defs)
    assert isinstance(info.value, DefinitionError)
    text = str(info.value)
    assert "ghost" in text
    assert "support" in text
    assert '"known"' not in text  # only the unknown id is reported


# --------------------------------------------------------------------------------------
# §3.3, §3.4: resolution and chaining


async def test_c03_006_transform_hooks_chain_in_list_order(db_url: str) -> None:
    """C03-006: agent hooks ``[a, b]``, both ``before_create_message``, ``a`` appends "A" and
    ``b`` appends "B" to the content → ``inject_message(content="x")`` stores ``"xAB"``.

    The order is the agent list's, not the registration order: an agent listing ``[b, a]``
    stores ``"xBA"``."""

    @hook("before_create_message")
    def a(state: ThreadState, message: Message) -> dict[str, Any]:
        return {"content": f"{message.content}A"}

    @hook("before_create_message")
    def b(state: ThreadState, message: Message) -> dict[str, Any]:
        return {"content": f"{message.content}B"}

    rt = await open_with(
        db_url, a, b, Agent(name="ab", hooks=["a", "b"]), Agent(name="ba", hooks=["b", "a"])
    )
    try:
        t = await rt.create_thread("ab")
        sub = rt.events.subscribe(t.thread_id)
        stored = await t.inject_message(role="user", content="x")
        assert stored.content == "xAB"
        assert (await t.get_message(stored.id)).content == "xAB"  # type: ignore[union-attr]
        events = sub.drain()
        assert [e.data["message"]["content"] for e in events] == ["xAB"]

        t2 = await rt.create_thread("ba")
        assert (await t2.inject_message(role="user", content="x")).content == "xBA"
    finally:
        await rt.close()


async def test_c03_007_repeated_id_runs_once(db_url: str) -> None:
    """C03-007: agent hooks ``[a, a]`` → ``a`` runs once per insert."""
    calls: list[str] = []

    @hook("before_create_message")
    def a(state: ThreadState, message: Message) -> dict[str, Any]:
        calls.append(message.content or "")
        return {"content": f"{message.content}!"}

    rt = await open_with(db_url, a, Agent(name="support", hooks=["a", "a"]))
    try:
        t = await rt.create_thread("support")
        first = await t.inject_message(role="user", content="one")
        second = await t.inject_message(role="user", content="two")
        assert calls == ["one", "two"]
        assert (first.content, second.content) == ("one!", "two!")
    finally:
        await rt.close()


# --------------------------------------------------------------------------------------
# §3.5: failures


async def test_c03_008_failing_event_hook_is_recorded(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """C03-008: ``after_create_message`` hooks ``[a, b, c]``, ``b`` raises → ``a`` and ``c``
    run; the message stays stored; ``inject_message`` returns normally; a log row with
    ``error_type == "hook_error"``, ``error_origin == "hook:b"``, ``endpoint ==
    "hook.after_create_message"``.

    Also (§3.5.1): the row is published as a ``log`` event after the ``message`` event and
    anchored to the newest top-level message; a WARNING goes to ``threadloom.hooks``."""
    ran: list[tuple[str, str]] = []

    @hook("after_create_message")
    def a(state: ThreadState, message: Message) -> None:
        ran.append(("a", message.id))

    @hook("after_create_message")
    def b(state: ThreadState, message: Message) -> None:
        ran.append(("b", message.id))
        raise RuntimeError("b is broken")

    @hook("after_create_message")
    async def c(state: ThreadState, message: Message) -> None:
        ran.append(("c", message.id))

    rt = await open_with(db_url, a, b, c, Agent(name="support", hooks=["a", "b", "c"]))
    try:
        t = await rt.create_thread("support")
        sub = rt.events.subscribe(t.thread_id)
        with caplog.at_level(logging.WARNING, logger="threadloom.hooks"):
            stored = await t.inject_message(role="user", content="hello")

        assert ran == [("a", stored.id), ("b", stored.id), ("c", stored.id)]
        assert await t.get_message(stored.id) == stored
        rows = await logs(rt, t.thread_id)
        assert len(rows) == 1
        row = rows[0]
        assert_hook_error_row(
            row,
            hook_id="b",
            hook_name="after_create_message",
            error_head="RuntimeError: b is broken",
        )
        assert row.message_id == stored.id
        events = sub.drain()
        assert [e.kind for e in events] == ["message", "log"]
        assert events[1].data["log"]["id"] == row.id
        assert events[1].data["log"]["error_type"] == "hook_error"
        assert events[1].seq == events[0].seq + 1  # type: ignore[operator]
        warnings = [r for r in caplog.records if r.name == "threadloom.hooks"]
        assert len(warnings) == 1
        assert warnings[0].levelno == logging.WARNING
        assert "after_create_message" in warnings[0].getMessage()
        assert "b" in warnings[0].getMessage()
        assert warnings[0].exc_info is not None
    finally:
        await rt.close()


async def test_c03_009_before_create_none_and_bad_return(db_url: str) -> None:
    """C03-009: ``before_create_message`` returning ``None`` → message stored as given;
    returning ``42`` on ``inject_message`` → ``InvalidMessage`` naming the hook; nothing
    stored (and, §3.5.2, nothing published, no log row)."""
    seen: list[str] = []

    @hook("before_create_message")
    def keep(state: ThreadState, message: Message) -> None:
        seen.append(message.id)
        message.content = "mutated in place"  # discarded: None means unchanged (§3.4)
        return None

    @hook("before_create_message")
    def answer_42(state: ThreadState, message: Message) -> int:
        return 42

    @hook("after_create_message")
    def after(state: ThreadState, message: Message) -> None:
        seen.append("after")

    rt = await open_with(
        db_url,
        keep,
        answer_42,
        after,
        Agent(name="keeper", hooks=["keep"]),
        Agent(name="broken", hooks=["answer_42", "after"]),
    )
    try:
        t = await rt.create_thread("keeper")
        stored = await t.inject_message(
            role="user", content="as given", name="ann", metadata={"k": 1}
        )
        assert (stored.content, stored.name, stored.metadata) == ("as given", "ann", {"k": 1})
        assert seen == [stored.id]
        assert await t.get_message(stored.id) == stored

        bad = await rt.create_thread("broken")
        before = await event_rows(rt, bad.thread_id)
        sub = rt.events.subscribe(bad.thread_id)
        with pytest.raises(InvalidMessage, match="answer_42"):
            await bad.inject_message(role="user", content="x")
        await assert_nothing_written(rt, bad, before)
        assert sub.drain() == []
        assert seen == [stored.id]  # after_create_message did not run
    finally:
        await rt.close()


async def test_c03_010_hook_context_only_when_declared(db_url: str) -> None:
    """C03-010: a hook declaring ``hook_context`` → receives ``source.kind == "agent"`` and
    the agent name for an at-rest inject; a hook without that parameter is called without
    it."""
    contexts: list[HookContext] = []
    plain_calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    @hook("before_create_message")
    def with_ctx(state: ThreadState, message: Message, *, hook_context: HookContext) -> None:
        contexts.append(hook_context)

    @hook("before_create_message")
    def without_ctx(*args: Any, **kwargs: Any) -> None:
        plain_calls.append((args, kwargs))

    rt = await open_with(
        db_url, with_ctx, without_ctx, Agent(name="support", hooks=["with_ctx", "without_ctx"])
    )
    try:
        t = await rt.create_thread("support")
        stored = await t.inject_message(role="user", content="hi")

        assert len(contexts) == 1
        ctx = contexts[0]
        assert ctx.hook_name == "before_create_message"
        assert ctx.hook_id == "with_ctx"
        assert dict(ctx.source) == {"kind": "agent", "agent_name": "support"}

        assert len(plain_calls) == 1
        args, kwargs = plain_calls[0]
        assert kwargs == {}
        assert len(args) == 2
        state, message = args
        assert isinstance(state, ThreadState)
        assert state.thread_id == t.thread_id
        assert state.execution is None
        assert isinstance(message, Message)
        assert message.id == stored.id
        assert message.content == "hi"
    finally:
        await rt.close()


async def test_c03_011_sync_and_async_hooks_are_equivalent(db_url: str) -> None:
    """C03-011: a plain ``def`` hook and an ``async def`` hook with the same logic →
    identical results."""
    after_sync: list[Message] = []
    after_async: list[Message] = []

    @hook("before_create_message")
    def shout_sync(state: ThreadState, message: Message) -> dict[str, Any]:
        return {"content": (message.content or "").upper(), "metadata": {"shouted": True}}

    @hook("before_create_message")
    async def shout_async(state: ThreadState, message: Message) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"content": (message.content or "").upper(), "metadata": {"shouted": True}}

    @hook("after_create_message")
    def seen_sync(state: ThreadState, message: Message) -> None:
        after_sync.append(message)

    @hook("after_create_message")
    async def seen_async(state: ThreadState, message: Message) -> None:
        await asyncio.sleep(0)
        after_async.append(message)

    rt = await open_with(
        db_url,
        shout_sync,
        shout_async,
        seen_sync,
        seen_async,
        Agent(name="sync_agent", hooks=["shout_sync", "seen_sync"]),
        Agent(name="async_agent", hooks=["shout_async", "seen_async"]),
    )
    try:
        ts = await rt.create_thread("sync_agent")
        ta = await rt.create_thread("async_agent")
        ms = await ts.inject_message(role="user", content="quiet please", silent=True)
        ma = await ta.inject_message(role="user", content="quiet please", silent=True)

        volatile = {"id", "created_at"}
        assert ms.model_dump(exclude=volatile) == ma.model_dump(exclude=volatile)
        assert ms.content == "QUIET PLEASE"
        assert ms.metadata == {"shouted": True}
        assert after_sync == [ms]
        assert after_async == [ma]
    finally:
        await rt.close()


async def test_c03_012_before_create_timeout_propagates(db_url: str) -> None:
    """C03-012: ``before_create_message`` sleeping longer than its ``timeout_s=0.1`` →
    ``inject_message`` raises ``HookTimeout``; nothing stored.

    Also (§3.5.4): without a ``timeout_s`` the runtime option ``hook_timeout_s`` applies."""

    @hook("before_create_message", timeout_s=0.1)
    async def slow(state: ThreadState, message: Message) -> None:
        await asyncio.sleep(5)

    @hook("before_create_message")
    async def slow_default(state: ThreadState, message: Message) -> None:
        await asyncio.sleep(5)

    rt = await open_with(
        db_url,
        slow,
        slow_default,
        Agent(name="support", hooks=["slow"]),
        Agent(name="default", hooks=["slow_default"]),
        hook_timeout_s=0.1,
    )
    try:
        for agent in ("support", "default"):
            t = await rt.create_thread(agent)
            before = await event_rows(rt, t.thread_id)
            sub = rt.events.subscribe(t.thread_id)
            started = time.monotonic()
            with pytest.raises(HookTimeout) as info:
                await t.inject_message(role="user", content="x")
            assert time.monotonic() - started < 2
            assert isinstance(info.value, TimeoutError)
            await assert_nothing_written(rt, t, before)
            assert sub.drain() == []
    finally:
        await rt.close()


async def test_c03_013_after_create_timeout_is_recorded(db_url: str) -> None:
    """C03-013: ``after_create_message`` exceeding its timeout → recorded as a
    ``hook_error`` row; ``inject_message`` returns the stored message."""

    @hook("after_create_message", timeout_s=0.1)
    async def slow_after(state: ThreadState, message: Message) -> None:
        await asyncio.sleep(5)

    rt = await open_with(db_url, slow_after, Agent(name="support", hooks=["slow_after"]))
    try:
        t = await rt.create_thread("support")
        started = time.monotonic()
        stored = await t.inject_message(role="user", content="x")
        assert time.monotonic() - started < 2
        assert await t.get_message(stored.id) == stored
        rows = await logs(rt, t.thread_id)
        assert len(rows) == 1
        assert_hook_error_row(
            rows[0],
            hook_id="slow_after",
            hook_name="after_create_message",
            error_head="HookTimeout: hook slow_after (after_create_message) timed out after 0.1 s",
        )
        assert rows[0].message_id == stored.id
    finally:
        await rt.close()


async def test_c03_014_recursive_inject_raises_recursion_error(db_url: str) -> None:
    """C03-014: ``before_create_message`` that always calls ``inject_message`` → the outer
    ``inject_message`` raises ``HookRecursionError``; no message stored.

    §3.5.5: the ninth nested hook call raises instead of running, so the hook ran 8 times."""
    depth_calls: list[str] = []

    @hook("before_create_message")
    async def echo(state: ThreadState, message: Message) -> None:
        depth_calls.append(message.content or "")
        await state.inject_message(role="user", content=f"{message.content}+")

    rt = await open_with(db_url, echo, Agent(name="support", hooks=["echo"]))
    try:
        t = await rt.create_thread("support")
        before = await event_rows(rt, t.thread_id)
        sub = rt.events.subscribe(t.thread_id)
        with pytest.raises(HookRecursionError):
            await t.inject_message(role="user", content="x")
        assert len(depth_calls) == 8
        assert depth_calls[0] == "x"
        await assert_nothing_written(rt, t, before)
        assert sub.drain() == []
    finally:
        await rt.close()


async def test_c03_015_before_update_rewrites_or_fails(db_url: str) -> None:
    """C03-015: ``before_update_message`` returning ``{"content": "Z"}`` for
    ``update_message(m, content="x")`` → stored content ``"Z"``; returning ``{"role":
    "tool"}`` → ``InvalidMessage``, record unchanged (and no event, no log row)."""
    received: list[tuple[str, dict[str, Any]]] = []
    after: list[Message] = []

    @hook("before_update_message")
    def to_z(state: ThreadState, message_id: str, updates: dict[str, Any]) -> dict[str, Any]:
        received.append((message_id, dict(updates)))
        return {"content": "Z"}

    @hook("before_update_message")
    def to_tool(state: ThreadState, message_id: str, updates: dict[str, Any]) -> dict[str, Any]:
        return {"role": "tool"}

    @hook("after_update_message")
    def updated(state: ThreadState, message: Message) -> None:
        after.append(message)

    rt = await open_with(
        db_url,
        to_z,
        to_tool,
        updated,
        Agent(name="rewrite", hooks=["to_z", "updated"]),
        Agent(name="broken", hooks=["to_tool", "updated"]),
    )
    try:
        t = await rt.create_thread("rewrite")
        m = await t.inject_message(role="user", content="orig")
        sub = rt.events.subscribe(t.thread_id)
        result = await t.update_message(m.id, content="x")
        assert received == [(m.id, {"content": "x"})]
        assert result.content == "Z"
        assert (await t.get_message(m.id)).content == "Z"  # type: ignore[union-attr]
        assert after == [result]
        assert [e.data["message"]["content"] for e in sub.drain()] == ["Z"]

        bad = await rt.create_thread("broken")
        m2 = await bad.inject_message(role="user", content="orig")
        before = await event_rows(rt, bad.thread_id)
        sub2 = rt.events.subscribe(bad.thread_id)
        with pytest.raises(InvalidMessage):
            await bad.update_message(m2.id, content="x")
        assert await bad.get_message(m2.id) == m2
        assert await event_rows(rt, bad.thread_id) == before
        assert await logs(rt, bad.thread_id) == []
        assert sub2.drain() == []
        assert after == [result]  # after_update_message did not run for the failure
    finally:
        await rt.close()


# --------------------------------------------------------------------------------------
# §3.6.1 after_thread_created


async def test_c03_017_after_thread_created(db_url: str) -> None:
    """C03-017: ``create_thread()`` with an agent listing an ``after_thread_created`` hook →
    it runs once with a state whose ``execution is None``; a raising hook leaves the thread
    created and writes a ``hook_error`` row."""
    calls: list[tuple[str, Any, str]] = []

    @hook("after_thread_created")
    async def welcome(state: ThreadState) -> None:
        status = await state.status()  # the thread is committed when the hook runs
        calls.append((state.thread_id, state.execution, status.state))

    @hook("after_thread_created")
    def explode(state: ThreadState) -> None:
        raise ValueError("no welcome")

    rt = await open_with(
        db_url,
        welcome,
        explode,
        Agent(name="greeter", hooks=["welcome"]),
        Agent(name="broken", hooks=["explode"]),
    )
    try:
        t = await rt.create_thread("greeter")
        assert calls == [(t.thread_id, None, "idle")]
        assert t.execution is None
        await rt.thread(t.thread_id)  # reopening runs no creation hook
        assert len(calls) == 1

        sub = rt.events.subscribe(None)
        bad = await rt.create_thread("broken")
        record = await rt.get_thread_record(bad.thread_id)
        assert record.agent_id == "broken"
        rows = await logs(rt, bad.thread_id)
        assert len(rows) == 1
        assert_hook_error_row(
            rows[0],
            hook_id="explode",
            hook_name="after_thread_created",
            error_head="ValueError: no welcome",
        )
        assert rows[0].message_id is None
        events = [e for e in sub.drain() if e.kind != "thread_created"]  # spec 09 §9.14
        assert [(e.thread_id, e.kind) for e in events] == [(bad.thread_id, "log")]
        assert events[0].data["log"]["id"] == rows[0].id
        assert len(calls) == 1  # the other agent's hook did not run
    finally:
        await rt.close()
