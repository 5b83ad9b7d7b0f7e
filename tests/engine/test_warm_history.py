"""Warm histories (docs/thread-core.md "Live histories"): a run reuses the history kept
from the thread's previous run only when no other process wrote to the thread since."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom import Runtime
from threadloom.providers.scripted import Call, Reply


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


async def test_warm_histories_beyond_the_budget_are_evicted_oldest_first(
    make_chat: Any,
) -> None:
    """The warm budget counts messages; going over it detaches the least recently run
    threads' histories, and the next run of an evicted thread still sees its messages."""
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
