"""Smaller engine rules: generation telemetry and session-binding result text."""

from __future__ import annotations

import math
from typing import Any

from threadloom.define import SessionBinding, tool
from threadloom.providers.script import Call, Reply


async def test_generation_telemetry_about_every_80_characters(make_chat: Any) -> None:
    """Spec 04 §4.12.2: roughly every 80 characters of output a `generation` record
    `{outputTokens: ceil(chars / 4)}` is published."""
    text = "x" * 250
    chat = await make_chat([Reply.text(text, chunk_size=10)])
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["telemetry"])
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    tokens = [e.data["outputTokens"] for e in sub.drain() if e.data["type"] == "generation"]
    assert tokens == [math.ceil(n / 4) for n in (80, 160, 240)]


@tool
def finish(summary: str) -> str:
    """Finish the session."""
    return "finished"


async def test_session_binding_message_property_is_the_stored_result(make_chat: Any) -> None:
    """Spec 04 §4.14.5: a successful `session_stop` binding with `message_property` stores
    that argument's value as the tool result text; the run ends `session_stop`."""
    chat = await make_chat(
        [Reply.tool_calls(Call("finish", {"summary": "All three tasks done."}))],
        prompt={"tools": ["finish"]},
        side_a={"session_stop": SessionBinding(name="finish", message_property="summary")},
        extra=[finish],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    page = await state.get_messages(order="asc", limit=None)
    result = next(m for m in page.messages if m.role == "tool")
    assert (result.content, result.tool_status) == ("All three tasks done.", "success")
    status = await state.status()
    assert status.reason == "session_stop"


@tool
def double(n: int) -> str:
    """Double a number."""
    return str(2 * n)


async def test_queue_tool_runs_after_the_models_calls_and_is_stored(make_chat: Any) -> None:
    """Spec 04 §4.14.6: a call queued by code in-flow runs after the response's calls,
    bypasses the allow-list, is stored as a tool message (never in any message's
    tool_calls) and is listed in the step's log row `queued_tools`."""

    @tool
    async def plan(state: Any) -> str:
        """Queue a follow-up call."""
        await state.queue_tool("double", {"n": 21})
        return "planned"

    chat = await make_chat(
        [Reply.tool_calls(Call("plan", {})), Reply.text("ok")],
        prompt={"tools": ["plan"]},  # double is not offered to the model
        extra=[plan, double],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    page = await state.get_messages(order="asc", limit=None)
    tools = [(m.name, m.content) for m in page.messages if m.role == "tool"]
    assert tools == [("plan", "planned"), ("double", "42")]
    assistant = page.messages[1]
    assert [c.function.name for c in assistant.decoded_tool_calls()] == ["plan"]
    row = (await chat.runtime.store.list_logs(state.thread_id))[0]
    assert row.queued_tools is not None and '"double"' in row.queued_tools


async def test_invoke_tool_returns_the_result_without_storing(make_chat: Any) -> None:
    """Spec 04 §4.14.6: `invoke_tool` in-flow and at rest returns the ToolResult, stores
    nothing and ignores the allow-list; bad arguments come back as an error result."""
    seen: list[Any] = []

    @tool
    async def probe(state: Any) -> str:
        """Invoke another tool directly."""
        seen.append(await state.invoke_tool("double", {"n": 5}))
        return "probed"

    chat = await make_chat(
        [Reply.tool_calls(Call("probe", {})), Reply.text("ok")],
        prompt={"tools": ["probe"]},
        extra=[probe, double],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert [(r.status, r.result) for r in seen] == [("success", "10")]
    page = await state.get_messages(order="asc", limit=None)
    assert [m.name for m in page.messages if m.role == "tool"] == ["probe"]
    at_rest = await state.invoke_tool("double", {"n": 4})
    assert (at_rest.status, at_rest.result) == ("success", "8")
    bad = await state.invoke_tool("double", {"n": "x"})
    assert bad.status == "error" and bad.error.startswith("Tool argument validation failed")
    missing = await state.invoke_tool("nope")
    assert (missing.status, missing.error) == ("error", 'Tool "nope" is not defined')


async def test_tool_call_started_reports_progress_and_runs_before_the_call(
    make_chat: Any,
) -> None:
    """Spec 03 §3.6.12 / 04 §4.26: with a progress argument, `tool_call_started` carries its
    value once it has streamed; the hooks run in the background and the call waits for
    them; the event is published once per call."""
    import asyncio

    from threadloom import hook
    from threadloom.define import Agent

    order: list[str] = []

    @tool(progress_argument="query")
    def search(query: str) -> str:
        """Search."""
        order.append("tool")
        return f"found {query}"

    @hook("tool_call_started")
    async def announce(state: Any, call: Any, progress: str | None) -> None:
        order.append(f"hook:{progress}")
        await asyncio.sleep(0.05)
        order.append("hook done")

    chat = await make_chat(
        [Reply.tool_calls(Call("search", {"query": "flights to Lisbon"})), Reply.text("ok")],
        prompt={"tools": ["search"], "hooks": ("announce",)},
        extra=[search, announce],
    )
    assert isinstance(chat.runtime.definitions.agent("chat"), Agent)
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["event"])
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    started = [e.data["data"] for e in sub.drain() if e.data["event_type"] == "tool_call_started"]
    assert [(s["name"], s["progress"]) for s in started] == [("search", "flights to Lisbon")]
    assert order == ["hook:flights to Lisbon", "hook done", "tool"]


PNG_640x480 = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x02\x80\x00\x00\x01\xe0\x08\x02\x00\x00\x00"
    b"\x00\x00\x00\x00"
)


async def test_c04_079_no_vision_placeholder(make_chat: Any) -> None:
    """C04-079: model supports_images=False, a user message with only an image → the
    request's part list is the text `[Image omitted: model does not support vision]`."""
    chat = await make_chat([Reply.text("ok")], model={"supports_images": False})
    state = await chat.thread()
    ref = await state.write_attachment(PNG_640x480, name="a.png", mime_type="image/png")
    await chat.runtime.send_message(state.thread_id, "", attachments=[ref])
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    user = chat.provider.requests[0].messages[-1]
    assert user.role == "user"
    assert [p.model_dump() for p in user.content] == [
        {"type": "text", "text": "[Image omitted: model does not support vision]"}
    ]


async def test_c04_080_old_images_as_text_recent_as_parts(make_chat: Any) -> None:
    """C04-080: an image on a user message older than the last 10 messages → text
    `[Image: a.png (640x480)]`, a blank line, the content; a recent one → an image part."""
    import base64

    chat = await make_chat([Reply.text(f"r{i}") for i in range(7)])
    state = await chat.thread()
    ref = await state.write_attachment(PNG_640x480, name="a.png", mime_type="image/png")
    await chat.runtime.send_message(state.thread_id, "look", attachments=[ref])
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    first = chat.provider.requests[0].messages[-1]
    assert [p.type for p in first.content] == ["text", "image"]
    assert first.content[0].text == "look"
    assert base64.b64decode(first.content[1].data) == PNG_640x480
    assert first.content[1].media_type == "image/png"
    for i in range(6):  # 12 more messages: the image message is no longer among the last 10
        await chat.runtime.send_message(state.thread_id, f"q{i}")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    old = chat.provider.requests[-1].messages[1]
    assert old.role == "user" and old.content == "[Image: a.png (640x480)]\n\nlook"


async def test_c03_020_child_required_parent_hooks(make_chat: Any, db_url: str) -> None:
    """C03-020: a child agent requiring parent hook c1 at before_parent and c2 at
    after_parent, the parent prompt listing p1, all filter_messages → they run c1, p1, c2;
    with c1 unregistered, loading the project raises UnknownHookError."""
    import pytest

    from threadloom import Definitions, Runtime, Side, hook
    from threadloom.define import Agent, Model, ParentHook, Prompt, Subagent
    from threadloom.errors import UnknownHookError

    ran: list[str] = []

    def recorder(hook_id: str) -> Any:
        @hook("filter_messages", id=hook_id)
        def record(state: Any, messages: list[Any]) -> None:
            ran.append(hook_id)

        return record

    c1, c2, p1 = recorder("c1"), recorder("c2"), recorder("p1")
    child = Agent(
        name="child",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="A helper pair",
        side_a=Side(prompt="CA"),
        side_b=Side(prompt="CB"),
        parent_hooks=(ParentHook(hook="c1", stage="before_parent"), ParentHook(hook="c2")),
    )
    extra = [Prompt(name="CA", model="M"), Prompt(name="CB", model="M"), child, c1, c2, p1]
    chat = await make_chat(
        [Reply.text("ok")],
        prompt={"tools": ["echo", Subagent("child")], "hooks": ("p1",)},
        extra=extra,
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert ran == ["c1", "p1", "c2"]

    defs = Definitions().add(
        Model(name="M", provider="scripted", model="x"),
        Prompt(name="P", model="M", tools=[Subagent("child")]),
        Prompt(name="CA", model="M"),
        Prompt(name="CB", model="M"),
        child,
        c2,
        Agent(name="parent", side_a=Side(prompt="P")),
    )
    with pytest.raises(UnknownHookError, match="c1"):
        await Runtime.open(db_url.replace(".db", "-2.db"), definitions=defs)


async def test_no_locks_or_gates_kept_after_runs(make_chat: Any) -> None:
    """A long-running runtime keeps no per-thread lock or start gate for idle threads."""
    chat = await make_chat([Reply.text(f"r{i}") for i in range(5)])
    states = [await chat.thread() for _ in range(5)]
    for state in states:
        await chat.runtime.send_message(state.thread_id, "hi")
    for state in states:
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert chat.runtime.runs.open_gates == 0
    assert chat.runtime.hub.active_locks == 0
    reasons = [(await s.status()).reason for s in states]
    assert reasons == ["stop_on_response"] * 5
