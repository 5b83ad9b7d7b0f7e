"""Warm histories (docs/thread-core.md "Live histories"): a run reuses the history kept
from the thread's previous run only when no other process wrote to the thread since."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.providers.scripted import Call, Reply
from threadloom.records import Message


def texts(request: Any) -> list[str]:
    return [m.text for m in request.messages if m.role != "system"]


async def test_next_run_reuses_the_warm_history(make_chat: Any) -> None:
    """Every write of a turn (tool call and result, LLM rows, status) is published in
    order, so the next run in the same process takes the kept history."""
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}, id="c1")), Reply.text("one"), Reply.text("two")]
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "first")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    kept = chat.runtime.hub.warm_history(
        state.thread_id, (await chat.runtime.store.get_thread(state.thread_id)).event_seq
    )
    assert kept is not None
    await chat.runtime.send_message(state.thread_id, "second")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert chat.runtime.hub._warm[state.thread_id] is kept  # no reload from the store
    assert texts(chat.provider.requests[2]) == ["first", "", "echo 1", "one", "second"]


async def test_a_write_by_another_process_is_not_masked_by_a_local_one(
    make_chat: Any, db_url: str
) -> None:
    """Another Runtime on the same file injects a message between two runs; the start of
    the next run writes the status (a local event right after the foreign one) — the next
    request still contains the injected message."""
    chat = await make_chat([Reply.text("one"), Reply.text("two")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "first")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)

    other = await Runtime.open(db_url, exclusive=False)  # shares the file
    try:
        foreign = await other.thread(state.thread_id)
        await foreign.inject_message({"role": "user", "content": "from elsewhere"})
    finally:
        await other.close()

    await chat.runtime.send_message(state.thread_id, "second")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert texts(chat.provider.requests[1]) == ["first", "one", "from elsewhere", "second"]


async def test_c04_119_warm_histories_beyond_the_budget_are_evicted_oldest_first(
    make_chat: Any,
) -> None:
    """C04-119: the warm budget counts messages; going over it detaches the least recently
    run threads' histories, and the next run of an evicted thread reads its messages again
    (eviction costs a read, never a message)."""
    chat = await make_chat([Reply.text(f"r{i}") for i in range(5)])
    hub = chat.runtime.hub
    hub.warm_messages = 5  # Runtime.open(warm_messages=5)
    states = [await chat.thread() for _ in range(3)]
    for i, state in enumerate(states):  # 2 messages each: the third pushes the first out
        await chat.runtime.send_message(state.thread_id, f"q{i}")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert list(hub._warm) == [states[1].thread_id, states[2].thread_id]
    assert hub._warm_total == 4
    await chat.runtime.send_message(states[0].thread_id, "again")
    await chat.runtime.wait_idle(states[0].thread_id, timeout=5)
    assert texts(chat.provider.requests[-1]) == ["q0", "r0", "again"]
    # the reloaded thread now holds 4 messages: with 2 of the last one kept, 6 > 5
    assert list(hub._warm) == [states[0].thread_id]
    assert hub._warm_total == 4


async def test_the_warm_budget_is_an_option_of_the_runtime_and_the_server(db_url: str) -> None:
    from threadloom import Runtime
    from threadloom.errors import InvalidArgument
    from threadloom.server.settings import ServerSettings, SettingsError

    runtime = await Runtime.open(db_url, warm_messages=2_000)
    try:
        assert runtime.hub.warm_messages == 2_000
    finally:
        await runtime.close()
    with pytest.raises(InvalidArgument, match="warm_messages"):
        await Runtime.open(db_url, warm_messages=-1)
    assert ServerSettings.from_env({"THREADLOOM_WARM_MESSAGES": "5000"}).warm_messages == 5000
    assert ServerSettings.from_env({}).warm_messages is None
    with pytest.raises(SettingsError, match="THREADLOOM_WARM_MESSAGES"):
        ServerSettings.from_env({"THREADLOOM_WARM_MESSAGES": "lots"})


THREADS = 8


async def test_c04_117_a_running_thread_keeps_its_own_messages_past_the_warm_budget(
    db_url: str,
) -> None:
    """C04-117: many threads run at once under a warm budget far below what they hold, so
    each run starts over the budget while the others wait in a tool call (on 22b7bf0 that
    evicted their histories: 33 tool calls for 8 turns). Every run still sends the model
    all of its thread's messages up to that point — its own tool result included — so
    each turn makes exactly one tool call: eviction may cost a read, never a message."""
    from threadloom import Agent, Definitions, Side
    from threadloom.define import Model, Prompt, tool
    from threadloom.providers.scripted import ScriptedProvider
    from threadloom.providers.types import ProviderRequest

    everyone_waits = asyncio.Event()
    started: list[str] = []

    @tool
    async def refund(order: str) -> str:
        """Refund an order (once: a second call is a second refund)."""
        started.append(order)
        if len(started) == THREADS:
            everyone_waits.set()  # every run is inside its tool call: all started
        await everyone_waits.wait()
        return f"refunded {order}"

    runtime: Runtime | None = None
    seen: dict[str, list[tuple[list[Any], list[Message]]]] = {}

    async def model(request: ProviderRequest) -> Reply:
        assert runtime is not None
        thread_id = request.metadata["thread_id"]
        stored = await runtime.store.top_level_history(thread_id)
        seen.setdefault(thread_id, []).append((list(request.messages), stored))
        last = request.messages[-1]
        if last.role == "tool" and last.text.startswith("refunded"):  # the result: answer
            return Reply.text(f"done: {last.text}")
        order = next(m.text for m in request.messages if m.role == "user")  # (again)
        return Reply.tool_calls(Call("refund", {"order": order}))

    defs = Definitions().add(
        Model(name="M", provider=ScriptedProvider(model), model="scripted-1"),
        Prompt(name="P", model="M", system="You are P.", tools=["refund"]),
        Agent(
            name="shop",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
            max_run_steps=6,
        ),
        refund,
    )
    runtime = await Runtime.open(db_url, definitions=defs, warm_messages=3)
    try:
        threads = [(await runtime.create_thread("shop")).thread_id for _ in range(THREADS)]
        for i, thread_id in enumerate(threads):
            await runtime.send_message(thread_id, f"order-{i}")
        for thread_id in threads:
            await runtime.wait_idle(thread_id, timeout=30)

        assert sorted(started) == sorted(f"order-{i}" for i in range(THREADS))  # one each
        for thread_id in threads:
            requests = seen[thread_id]
            assert len(requests) == 2  # the call, then the answer
            for messages, stored in requests:
                sent = [(m.role, m.text) for m in messages if m.role != "system"]
                held = [(m.role, m.content or "") for m in stored if m.status == "completed"]
                assert sent == held  # every stored message of the thread, in order
            final = await runtime.store.top_level_history(thread_id)
            assert [m.role for m in final] == ["user", "assistant", "tool", "assistant"]
    finally:
        await runtime.close(drain=0)


async def test_c04_118_a_write_during_the_history_read_is_in_the_run_history(
    make_chat: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C04-118: a run that reads its thread's history from the store (none warm: a new
    thread, or one evicted) while another caller writes to the thread loses nothing — a
    write committed after the read's snapshot and before the history was attached would
    be in neither. The history is read under the thread's write lock, so the write waits
    for it and is reflected in the attached history; the next run, reusing that history,
    sends it."""
    chat = await make_chat([Reply.text("one"), Reply.text("two")])
    runtime = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    writes: list[asyncio.Task[Any]] = []
    read = runtime.store.top_level_history

    async def read_then_write(thread_id: str) -> list[Message]:
        rows = await read(thread_id)  # the snapshot is taken
        if thread_id == tid and not writes:
            writer = await runtime.thread(tid)
            write = asyncio.get_running_loop().create_task(
                writer.inject_message({"role": "user", "content": "meanwhile"}),
                context=contextvars.Context(),  # another caller's: not the run's lease fence
            )
            writes.append(write)
            if not runtime.hub.lock(tid).locked():
                await write  # nothing keeps it out: it commits before the history is attached
        return rows

    monkeypatch.setattr(runtime.store, "top_level_history", read_then_write)
    await runtime.send_message(tid, "first")
    await runtime.wait_idle(tid, timeout=5)
    await asyncio.gather(*writes)
    monkeypatch.undo()

    await runtime.send_message(tid, "second")
    await runtime.wait_idle(tid, timeout=5)
    stored = [m.content for m in await runtime.store.top_level_history(tid)]
    assert "meanwhile" in stored
    assert texts(chat.provider.requests[-1]) == stored[:-1]  # all but the answer "two"
