"""The shared state of a thread through ``ThreadState`` (spec 02 §2.20) on both stores: a
tool reads and changes it inside a run, a hook puts it into the prompt's system text, every
change is a durable ``shared_state`` event on the bus; at rest, versioned replacements and
updates, and the refusals that change nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from threadloom import ThreadState, hook
from threadloom.define import tool
from threadloom.errors import InvalidArgument, StateConflict, StateTooLarge
from threadloom.providers.script import Call, Reply
from threadloom.providers.types import SystemMessage


@tool
async def add_todo(state: ThreadState, item: str) -> str:
    """Add an item to the shared todo list."""
    todos = (await state.get_shared_state()).get("todos", [])
    written = await state.update_shared_state({"todos": [*todos, item]})
    return json.dumps({"version": written.version, "todos": written.value["todos"]})


@hook("after_system_message", id="todos_in_prompt")
async def todos_in_prompt(state: ThreadState, system: str) -> str:
    todos = (await state.get_shared_state()).get("todos", [])
    return f"{system}\nThe todo list: {', '.join(todos) or 'empty'}."


def system_text(request: Any) -> str:
    (system,) = [m for m in request.messages if isinstance(m, SystemMessage)]
    return system.text


async def test_c02_105_a_tool_changes_the_state_and_the_prompt_reads_it(make_chat: Any) -> None:
    """C02-105: in a run, a tool reads the state and updates it (the next request's system
    text, through an ``after_system_message`` hook, shows the change); each change is one
    durable ``shared_state`` event whose data is the state with its version; the stored
    state is the tool's result."""
    chat = await make_chat(
        [Reply.tool_calls(Call("add_todo", {"item": "milk"})), Reply.text("Added.")],
        prompt={"tools": ["add_todo"]},
        agent={"hooks": ("todos_in_prompt",)},
        extra=[add_todo, todos_in_prompt],
    )
    state = await chat.thread()
    await state.set_shared_state({"todos": ["eggs"]})
    sub = chat.runtime.events.subscribe(state.thread_id, kinds={"shared_state"})
    await chat.runtime.send_message(state.thread_id, "Add milk")
    await chat.runtime.wait_idle(state.thread_id, timeout=10)
    first, second = chat.provider.requests
    assert system_text(first).endswith("The todo list: eggs.")
    assert system_text(second).endswith("The todo list: eggs, milk.")
    async with asyncio.timeout(5):
        event = await anext(aiter(sub))
    sub.close()
    assert event.kind == "shared_state" and isinstance(event.seq, int)
    assert event.data["state"] == {"todos": ["eggs", "milk"]} and event.data["version"] == 2
    stored = await (await chat.runtime.thread(state.thread_id)).read_shared_state()
    assert (stored.value, stored.version) == ({"todos": ["eggs", "milk"]}, 2)
    page = await state.get_messages(order="asc", include_silent=True)
    result = next(m for m in page.messages if m.role == "tool")
    assert json.loads(result.content or "") == {"version": 2, "todos": ["eggs", "milk"]}


async def test_c02_106_at_rest_writes_versions_and_refusals(make_chat: Any) -> None:
    """C02-106: at rest, ``set_shared_state`` replaces, ``update_shared_state`` sets and
    removes keys; ``version=`` refuses a stale write with ``StateConflict``; a value that is
    not a JSON object, ``remove`` given as a string, a bad version → ``InvalidArgument``; a
    state over the limit → ``StateTooLarge``; none of them changes anything. The value read
    is a copy: changing it changes nothing stored. A terminated thread's state still
    works."""
    chat = await make_chat([Reply.text("ok")])
    state = await chat.thread()
    assert await state.get_shared_state() == {}
    one = await state.set_shared_state({"a": 1, "b": {"c": [1]}})
    assert one.version == 1
    two = await state.update_shared_state({"d": True}, remove=["a"])
    assert (two.value, two.version) == ({"b": {"c": [1]}, "d": True}, 2)
    with pytest.raises(StateConflict) as caught:
        await state.update_shared_state({"x": 1}, version=1)
    assert caught.value.version == 2
    for bad in (
        lambda: state.set_shared_state([1, 2]),  # type: ignore[arg-type]
        lambda: state.set_shared_state({"n": float("inf")}),
        lambda: state.update_shared_state({}, remove="a"),
        lambda: state.set_shared_state({}, version=-1),
    ):
        with pytest.raises(InvalidArgument):
            await bad()
    with pytest.raises(StateTooLarge):
        await state.update_shared_state({"blob": "x" * 300_000})
    copy = await state.get_shared_state()
    copy["b"]["c"].append(2)
    assert (await state.read_shared_state()) == two
    await state.terminate()
    three = await state.update_shared_state({"done": True}, version=2)
    assert three.version == 3 and three.value["done"] is True
