"""The send path and its shortcuts (``RunManager.send_message``, ``wait_idle``): what the
runtime remembers between sends must follow the registry, and waiting must not touch the
run it waits for."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, hook
from threadloom.providers.scripted import Reply, ScriptedProvider
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


def test_wait_idle_lets_the_loop_settle_a_stopped_run(tmp_path: Path) -> None:
    """A waiter that finds the run's task done while the run is still registered (a stop
    cancelled it and is settling it, on the same loop) must give the loop back instead of
    looping on the done task, which would keep the settlement, and everything else, from
    ever running. The scenario runs on a loop of its own in a thread, so a stuck loop
    fails this test instead of hanging the suite."""
    outcome: dict[str, Any] = {}

    async def scenario() -> None:
        definitions = Definitions().add(
            Model(name="M", provider=ScriptedProvider([Reply.text("late", delay=5.0)]), model="m"),
            Prompt(name="P", model="M", system="s"),
            Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
        )
        runtime = await Runtime.open(f"sqlite:///{tmp_path / 't.db'}", definitions=definitions)
        try:
            state = await runtime.create_thread("chat")
            await runtime.send_message(state.thread_id, "hello")
            waiter = asyncio.ensure_future(runtime.wait_idle(state.thread_id))
            await asyncio.sleep(0.05)  # the waiter waits on the run's task
            assert await runtime.stop(state.thread_id)
            await asyncio.wait_for(waiter, 5)
            outcome["status"] = await state.status()
        finally:
            await runtime.close()

    worker = threading.Thread(target=lambda: asyncio.run(scenario()), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the event loop is stuck in wait_idle"
    status = outcome["status"]
    assert (status.state, status.reason) == ("idle", "aborted_by_user")
