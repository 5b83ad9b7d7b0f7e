"""The send path and its shortcuts (``RunManager.send_message``, ``wait_idle``): what the
runtime remembers between sends must follow the registry, and waiting must not touch the
run it waits for."""

from __future__ import annotations

import asyncio
from typing import Any

from threadloom.define import hook
from threadloom.providers.scripted import Reply
from threadloom.records import Message


async def test_a_create_hook_added_after_a_send_ends_the_fast_start(make_chat: Any) -> None:
    """The fast start (one commit for send, start and delivery) skips the create
    lifecycle, so it is only for a registry without create hooks (spec 03 §3.6.6). The
    answer is remembered between sends and must follow ``Definitions.add``: after a
    hook is added, deliveries go through the create lifecycle (more commits)."""
    chat = await make_chat([Reply.text("one"), Reply.text("two"), Reply.text("three")])
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    await rt.send_message(tid, "first")
    await rt.wait_idle(tid, timeout=5)
    commits = rt.store.commits
    await rt.send_message(tid, "second")
    await rt.wait_idle(tid, timeout=5)
    fast = rt.store.commits - commits
    assert not rt.runs.create_hooks_registered()

    @hook("before_create_message")
    def watch(state: Any, message: Message) -> None:
        pass

    rt.definitions.add(watch)
    assert rt.runs.create_hooks_registered()
    commits = rt.store.commits
    await rt.send_message(tid, "third")
    await rt.wait_idle(tid, timeout=5)
    assert rt.store.commits - commits > fast
    texts = [m.content for m in (await state.get_messages(limit=10, order="asc")).messages]
    assert texts == ["first", "one", "second", "two", "third", "three"]


async def test_wait_idle_cancelled_leaves_the_run_running(make_chat: Any) -> None:
    """A cancelled ``wait_idle`` neither cancels the run it waited for nor takes on its
    outcome; a later wait sees the run end normally."""
    chat = await make_chat([Reply.text("done", delay=0.2)])
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    await rt.send_message(tid, "hello")
    waiter = asyncio.ensure_future(rt.wait_idle(tid))
    await asyncio.sleep(0.01)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert waiter.cancelled()
    assert rt.running(tid)
    await rt.wait_idle(tid, timeout=5)
    assert not rt.running(tid)
    texts = [m.content for m in (await state.get_messages(limit=10, order="asc")).messages]
    assert texts == ["hello", "done"]
