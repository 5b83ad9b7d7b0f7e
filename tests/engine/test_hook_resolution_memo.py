"""The hub remembers which hooks run for a name (``ThreadHub.resolve_hooks``, spec 03 §3.3)
per registry state: a hook or agent registered later is seen by the next resolution."""

from __future__ import annotations

from typing import Any

from threadloom import Agent, Side, hook
from threadloom.providers.script import Reply


@hook("after_system_message", id="late_system")
def late_system(state: Any, text: str) -> str:
    return text + " (late)"


async def test_memo_follows_agents_and_hooks_registered_later(make_chat: Any) -> None:
    chat = await make_chat()
    hub = chat.runtime.hub
    name = "after_system_message"
    assert hub.resolve_hooks(name, "late", None, ()) == ()  # no such agent yet
    hub.definitions.add(Agent(name="late", side_a=Side(prompt="P"), hooks=["late_system"]))
    assert hub.resolve_hooks(name, "late", None, ()) == ()  # listed, not registered
    hub.definitions.hooks.register(late_system)
    resolved = hub.resolve_hooks(name, "late", None, ())
    assert [(d.id, c.source["kind"]) for d, c in resolved] == [("late_system", "agent")]
    assert list(resolved) == hub._resolve_hooks(name, "late", None, ())  # unremembered answer
    # a tuple, shared by every caller: none can change what the others get (issue 40: no
    # new list per question, a step holds several across its awaits)
    assert type(resolved) is tuple and hub.resolve_hooks(name, "late", None, ()) is resolved
    # the prompt's list replaces the agent's, and is part of the key
    assert hub.resolve_hooks(name, "late", "P", ("other",)) == ()


async def test_a_hook_registered_between_turns_runs_on_the_next_turn(make_chat: Any) -> None:
    """Through the engine: an agent added after open whose hook is registered only
    after its first turn — the second turn's request has the hook's system prompt."""
    chat = await make_chat([Reply.text("zero"), Reply.text("one"), Reply.text("two")])
    warm = await chat.thread()  # the memo holds the answers for "chat" first
    await chat.runtime.send_message(warm.thread_id, "warm")
    await chat.runtime.wait_idle(warm.thread_id, timeout=5)
    definitions = chat.runtime.hub.definitions
    definitions.add(
        Agent(
            name="late",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
            hooks=["late_system"],
        )
    )
    state = await chat.runtime.create_thread("late")
    await chat.runtime.send_message(state.thread_id, "first")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    definitions.hooks.register(late_system)
    await chat.runtime.send_message(state.thread_id, "second")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    systems = [r.messages[0].content for r in chat.provider.requests]
    assert systems == ["You are P.", "You are P.", "You are P. (late)"]


async def test_a_hookless_agent_answers_nothing_for_every_name(make_chat: Any) -> None:
    """The shortcut for an agent that names no hooks and whose subagents require none
    gives the unremembered answer, for every name, and is forgotten with the registry."""
    chat = await make_chat()
    hub = chat.runtime.hub
    names = ["after_system_message", "filter_messages", "tool_call_done", "nope"]
    for name in names:
        assert list(hub.resolve_hooks(name, "chat", "P", ())) == hub._resolve_hooks(
            name, "chat", "P", ()
        )
    assert hub._hookless == {"chat": True}
    assert hub.hookless("chat", ()) and not hub.hookless("chat", ("late_system",))
    hub.definitions.hooks.register(late_system)
    hub.definitions.add(Agent(name="chat2", side_a=Side(prompt="P"), hooks=["late_system"]))
    resolved = hub.resolve_hooks("after_system_message", "chat2", None, ())
    assert [d.id for d, _ in resolved] == ["late_system"]
    assert hub._hookless == {"chat2": False}
    assert not hub.hookless("chat2", ())


async def test_an_unregistered_hook_a_subagent_requires_is_still_refused(make_chat: Any) -> None:
    """An agent naming no hooks whose subagent requires a parent hook that is not
    registered is not hookless: resolving raises ``UnknownHookError`` as before."""
    import pytest

    from threadloom.define import ParentHook, Prompt, Subagent
    from threadloom.errors import UnknownHookError

    chat = await make_chat()
    hub = chat.runtime.hub
    child = Agent(
        name="needy",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="A helper pair",
        side_a=Side(prompt="P"),
        side_b=Side(prompt="P"),
        parent_hooks=(ParentHook(hook="missing_hook"),),
    )
    hub.definitions.add(
        Prompt(name="PP", model="M", tools=[Subagent("needy")]),
        child,
        Agent(name="parent", side_a=Side(prompt="PP")),
    )
    for _ in range(2):  # remembered or not
        with pytest.raises(UnknownHookError, match="missing_hook"):
            hub.resolve_hooks("filter_messages", "parent", None, ())
    assert hub._hookless == {"parent": False}
