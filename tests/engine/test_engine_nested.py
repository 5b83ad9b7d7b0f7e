"""Sub-prompts, handoffs and stop_session (spec 04 §4.16.2, §4.17, §4.18)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom import Agent, Side
from threadloom.define import Prompt, tool
from threadloom.errors import InvalidArgument
from threadloom.providers.script import Call, Reply


async def _rows(state: Any) -> list[Any]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True, max_depth=None)
    return page.messages


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("boom")


async def test_c04_086_subprompt_runs_one_nested_step(make_chat: Any) -> None:
    """C04-086: P calls sub-prompt S; S answers "sub"; P answers "fin" → S's assistant row
    has depth 1 and parent_id = P's tool row id; P's tool content "sub"; 3 requests."""
    chat = await make_chat(
        [Reply.tool_calls(Call("S", {})), Reply.text("sub"), Reply.text("fin")],
        prompt={"tools": ["echo", "S"]},
        extra=[Prompt(name="S", model="M", system="You are S.")],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    nested = [m for m in rows if m.depth == 1]
    tool_row = next(m for m in rows if m.role == "tool" and m.depth == 0)
    assert [(m.role, m.content, m.prompt) for m in nested] == [("assistant", "sub", "S")]
    assert nested[0].parent_id == tool_row.id
    assert tool_row.content == "sub" and tool_row.tool_status == "success"
    assert rows[-1].content == "fin"
    assert len(chat.provider.requests) == 3
    # the nested request carries S's system text; the caller's current call is not in it
    assert chat.provider.requests[1].messages[0].content == "You are S."
    top = await state.get_messages(order="asc", limit=None)
    assert all(m.depth == 0 for m in top.messages)


async def test_c04_087_subprompt_tool_failure_fails_the_call(make_chat: Any) -> None:
    """C04-087: the sub-prompt's tool fails → the caller's tool row is an error starting
    `Failed to execute tool: Sub-prompt failed with 1 error(s):`."""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("S", {})),
            Reply.tool_calls(Call("broken", {})),
            Reply.text("fin"),
        ],
        prompt={"tools": ["echo", "S"]},
        extra=[Prompt(name="S", model="M", tools=["broken"]), broken],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    caller_result = next(m for m in rows if m.role == "tool" and m.depth == 0)
    assert caller_result.tool_status == "error"
    assert caller_result.content.startswith(
        "Failed to execute tool: Sub-prompt failed with 1 error(s):"
    )
    assert "  broken: boom" in caller_result.content
    nested_tool = next(m for m in rows if m.role == "tool" and m.depth == 1)
    assert nested_tool.content == "Failed to execute tool: boom"


async def test_c04_088_queue_waits_for_the_next_top_level_step(make_chat: Any) -> None:
    """C04-088: an entry queued while a sub-prompt step runs is not delivered by it; the
    next top-level step delivers it."""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("S", {})),
            Reply(content="sub", delay=0.3),
            Reply.text("fin"),
        ],
        prompt={"tools": ["echo", "S"]},
        extra=[Prompt(name="S", model="M")],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    for _ in range(200):
        if len(chat.provider.requests) >= 2:
            break
        await asyncio.sleep(0.01)
    late = await chat.runtime.send_message(state.thread_id, "late")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    order = [(m.depth, m.role, m.content) for m in rows]
    assert order.index((0, "user", "late")) > order.index((1, "assistant", "sub"))
    assert next(m for m in rows if m.content == "late").id == late.id
    third = chat.provider.requests[2]
    assert any(getattr(m, "content", None) == "late" for m in third.messages)
    assert not any(
        getattr(m, "content", None) == "late" for m in chat.provider.requests[1].messages
    )


async def test_c04_089_handoff_rebinds_the_thread(make_chat: Any) -> None:
    """C04-089: P lists ai_human agent X; calling X → `Handoff complete`; the next request
    of the same run uses X's side a prompt; thread agent = X; agent_handoff published."""
    chat = await make_chat(
        [Reply.tool_calls(Call("X", {"topic": "billing"})), Reply.text("X here")],
        prompt={"tools": ["echo", "X"]},
        extra=[
            Prompt(name="PX", model="M", system="You are X about {{topic}}."),
            Agent(
                name="X",
                side_a=Side(prompt="PX", label="X"),
                side_b=Side(label="C"),
                expose_as_tool=True,
                tool_description="Billing specialist",
            ),
        ],
    )
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["telemetry"])
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    result = next(m for m in rows if m.role == "tool")
    assert (result.content, result.tool_status) == ("Handoff complete", "success")
    assert rows[-1].content == "X here" and rows[-1].prompt == "PX" and rows[-1].name == "X"
    assert chat.provider.requests[1].messages[0].content == "You are X about billing."
    assert (await chat.runtime.get_thread_record(state.thread_id)).agent_id == "X"
    handoffs = [e.data for e in sub.drain() if e.data.get("type") == "agent_handoff"]
    assert handoffs and handoffs[0]["new_agent_id"] == "X"


async def test_c04_042_stop_session_skips_pending_calls(make_chat: Any) -> None:
    """C04-042: a tool calling `state.stop_session()` in one-at-a-time mode with two more
    calls pending → those calls get no rows; the run ends `state_stop_session`."""

    @tool
    async def finish(state: Any) -> str:
        """Stop the session."""
        await state.stop_session("all done")
        return "stopping"

    chat = await make_chat(
        [Reply.tool_calls(Call("finish", {}), Call("echo", {"v": 1}), Call("echo", {"v": 2}))],
        prompt={"tools": ["echo", "finish"], "parallel_tool_calls": False},
        extra=[finish],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    assert [m.content for m in rows if m.role == "tool"] == ["stopping"]
    status = await state.status()
    assert status.reason == "state_stop_session"
    assert len(chat.provider.requests) == 1


async def test_c04_043_stop_session_validates_arguments(make_chat: Any) -> None:
    """C04-043: `stop_session(notify_parent="  ")` → InvalidArgument with the spec's text;
    outside a run → RuntimeError."""
    errors: list[BaseException] = []

    @tool
    async def finish(state: Any) -> str:
        """Try to stop the session with a blank parent note."""
        try:
            await state.stop_session(notify_parent="  ")
        except InvalidArgument as exc:
            errors.append(exc)
        return "ok"

    chat = await make_chat(
        [Reply.tool_calls(Call("finish", {})), Reply.text("done")],
        prompt={"tools": ["echo", "finish"]},
        extra=[finish],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert [str(e) for e in errors] == ["stop_session notify_parent requires non-empty content"]
    with pytest.raises(RuntimeError, match="stop_session requires active execution"):
        await state.stop_session()


@tool
def as_dict() -> dict[str, int]:
    """Return a mapping."""
    return {"x": 1}


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def explode() -> str:
    """Raise."""
    raise ValueError("boom")


async def _stored_result(make_chat: Any, name: str) -> tuple[Any, Any]:
    chat = await make_chat(
        [Reply.tool_calls(Call(name, {})), Reply.text("ok")],
        prompt={"tools": [name]},
        extra=[as_dict, nothing, explode],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    result = next(m for m in await _rows(state) if m.role == "tool")
    rows = await chat.runtime.store.list_logs(state.thread_id)
    return result, rows[0]


async def test_c04_015_dict_result_is_stored_as_indented_json(make_chat: Any) -> None:
    """C04-015: a tool returning {"x": 1} → stored content `{\n  "x": 1\n}`."""
    result, row = await _stored_result(make_chat, "as_dict")
    assert (result.content, result.tool_status) == ('{\n  "x": 1\n}', "success")
    assert row.error is None


async def test_c04_016_none_result(make_chat: Any) -> None:
    """C04-016: a tool returning None → `Tool executed successfully`, success."""
    result, _ = await _stored_result(make_chat, "nothing")
    assert (result.content, result.tool_status) == ("Tool executed successfully", "success")


async def test_c04_017_raising_tool(make_chat: Any) -> None:
    """C04-017: ValueError("boom") → `Failed to execute tool: boom`, error; the log row has
    `error_type` tool_execution_error and `error_origin` tool:<name>."""
    result, row = await _stored_result(make_chat, "explode")
    assert (result.content, result.tool_status) == ("Failed to execute tool: boom", "error")
    assert (row.error_type, row.error_origin) == ("tool_execution_error", "tool:explode")
    assert row.error == 'Tool "explode" failed: boom'


async def test_c02_028_inject_inside_a_subprompt(make_chat: Any) -> None:
    """C02-028: a tool inside a sub-prompt injects → the message has the sub-prompt's
    depth and parent_id, and prompt = the sub-prompt's name."""

    @tool
    async def note(state: Any) -> str:
        """Inject a note."""
        await state.inject_message(role="user", content="inside", silent=True)
        return "noted"

    chat = await make_chat(
        [Reply.tool_calls(Call("S", {})), Reply.tool_calls(Call("note", {})), Reply.text("fin")],
        prompt={"tools": ["S"]},
        extra=[Prompt(name="S", model="M", tools=["note"]), note],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _rows(state)
    caller_result = next(m for m in rows if m.role == "tool" and m.depth == 0)
    injected = next(m for m in rows if m.content == "inside")
    assert (injected.depth, injected.parent_id, injected.prompt) == (1, caller_result.id, "S")
