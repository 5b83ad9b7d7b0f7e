"""AG-UI bridge (spec 11 §11.7.3): export of frames recorded from the real server (C11-041),
import by the threadplane AG-UI reducer rules (C11-042 to C11-044), and the optional extra."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from ag_ui.core import BaseEvent, Event, EventType
from pydantic import TypeAdapter

from server.conftest import last_user_text
from threadloom import Agent, Side
from threadloom.client import AsyncClient
from threadloom.client.chat import Delivery, Outcome, Phase, ToolUseBlock
from threadloom.client.convert.agui import (
    AguiExporter,
    AguiImporter,
    agui_events,
    encode_sse,
)
from threadloom.client.frames import Frame, ThreadStatusFrame
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
THOUGHT = "I read the prompt."


def thinking_echo() -> tuple[Any, ...]:
    """Agent ``thinker``: the ``echo`` agent with reasoning, both streamed in 4-character
    chunks (``make_api(extra=…)``)."""
    provider = ScriptedProvider(
        lambda request: Reply(
            content=f"echo: {last_user_text(request)}", reasoning_content=THOUGHT, chunk_size=4
        )
    )
    return (
        Model(name="think_model", provider=provider, model="scripted-think"),
        Prompt(name="think_prompt", model="think_model", system="You echo, thinking first."),
        Agent(name="thinker", side_a=Side(prompt="think_prompt"), side_b=Side(label="Customer")),
    )


def looking_up() -> tuple[Any, ...]:
    """Agent ``looker``: calls ``lookup`` once, then answers with text."""

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return json.dumps({"city": city, "n": 1})

    def reply(request: ProviderRequest) -> Reply:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return Reply.text("found it")
        return Reply.tool_calls(("lookup", {"city": "Lisbon"}))

    return (
        lookup,
        Model(name="look_model", provider=ScriptedProvider(reply), model="scripted-look"),
        Prompt(name="look_prompt", model="look_model", system="You look.", tools=["lookup"]),
        Agent(name="looker", side_a=Side(prompt="look_prompt"), side_b=Side(label="Customer")),
    )


def run_ended(frame: Frame) -> bool:
    return (
        isinstance(frame, ThreadStatusFrame)
        and not frame.snapshot
        and frame.status.state != "running"
    )


async def record_exchange(client: AsyncClient, agent: str, text: str) -> tuple[str, list[Frame]]:
    """The frames of one exchange on a new thread, recorded from the real server."""
    thread = (await client.threads.create(agent)).thread_id
    page = await client.messages.list(thread)
    frames: list[Frame] = []
    async with client.stream(thread, since=page.seq, include_silent=True) as stream:
        await client.messages.send(thread, text)
        async with asyncio.timeout(10):
            async for frame in stream:
                frames.append(frame)
                if run_ended(frame):
                    break
    return thread, frames


def export(thread: str, frames: list[Frame]) -> list[BaseEvent]:
    exporter = AguiExporter(thread)
    return [event for frame in frames for event in exporter.feed(frame)]


def validates(event: BaseEvent) -> bool:
    """The event's wire JSON parses back, through the AG-UI union, into an equal event."""
    again = EVENT.validate_json(event.model_dump_json(by_alias=True))
    return type(again) is type(event) and again == event


async def test_c11_041_agui_export_of_a_live_echo_exchange_with_reasoning(
    make_api: Any,
) -> None:
    api = await make_api(extra=thinking_echo())
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        thread, frames = await record_exchange(client, "thinker", "hi")
        stored = await client.messages.list(thread)
    events = export(thread, frames)
    assert all(validates(e) for e in events)
    reply = stored.messages[-1]
    assert reply.content == "echo: hi"
    run_events = {EventType.RUN_STARTED, EventType.RUN_FINISHED}
    order = [
        e.type for e in events if e.type in run_events or getattr(e, "message_id", "") == reply.id
    ]
    expected = [
        EventType.RUN_STARTED,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        *[EventType.REASONING_MESSAGE_CONTENT] * 5,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TEXT_MESSAGE_START,
        *[EventType.TEXT_MESSAGE_CONTENT] * 2,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert order == expected
    assert events[0].type is EventType.MESSAGES_SNAPSHOT
    started = next(e for e in events if e.type is EventType.RUN_STARTED)
    finished = next(e for e in events if e.type is EventType.RUN_FINISHED)
    assert started.run_id == finished.run_id and started.run_id.startswith(f"{thread}:")
    assert finished.outcome is not None and finished.outcome.type == "success"
    texts = [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT]
    thoughts = [e.delta for e in events if e.type is EventType.REASONING_MESSAGE_CONTENT]
    assert "".join(thoughts) == THOUGHT
    assert texts[-2:] == ["echo", ": hi"] and texts[0] == "hi"  # the user's message, then ours
    # the SSE encoding carries every event, and importing the events rebuilds the exchange
    assert encode_sse(events).count("data: ") == len(events)
    importer = AguiImporter()
    for event in events:
        view = importer.feed(event)
    assert [m.id for m in view.messages] == [m.id for m in stored.messages]
    imported = view.messages[-1]
    assert (imported.text, imported.reasoning) == ("echo: hi", THOUGHT)
    assert imported.delivery == Delivery.complete(f"run:{started.run_id}", Outcome.SUCCESS)


async def test_agui_export_of_a_live_tool_exchange(make_api: Any) -> None:
    """Tool calls leave with their assistant's completing record, results as TOOL_CALL_RESULT,
    and the importer settles the call with the decoded result."""
    api = await make_api(extra=looking_up())
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        thread, frames = await record_exchange(client, "looker", "where?")
        stored = await client.messages.list(thread)
    events = export(thread, frames)
    assert all(validates(e) for e in events)
    kinds = [e.type for e in events if e.type.name.startswith("TOOL_CALL")]
    assert kinds == [
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
    ]
    start = next(e for e in events if e.type is EventType.TOOL_CALL_START)
    caller = next(m for m in stored.messages if m.tool_calls)
    assert (start.tool_call_name, start.parent_message_id) == ("lookup", caller.id)
    args = next(e for e in events if e.type is EventType.TOOL_CALL_ARGS)
    assert json.loads(args.delta) == {"city": "Lisbon"}
    importer = AguiImporter()
    for event in events:
        view = importer.feed(event)
    call = view.tool_calls[start.tool_call_id]
    assert (call.status, call.args, call.result) == (
        "complete",
        {"city": "Lisbon"},
        {"city": "Lisbon", "n": 1},
    )
    assert [m.role for m in view.messages] == [m.role for m in stored.messages]
    assert view.messages[-1].text == "found it"


async def test_agui_events_streams_a_snapshot_then_the_run(make_api: Any) -> None:
    api = await make_api(extra=thinking_echo())
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        thread = (await client.threads.create("thinker")).thread_id
        await client.messages.send(thread, "first")
        await api.settle(thread)
        events: list[BaseEvent] = []
        source = agui_events(client, thread)
        async with asyncio.timeout(10):
            async for event in source:
                events.append(event)
                if len(events) == 2:  # the stream is open: its connect status came through
                    assert event.type is EventType.CUSTOM
                    await client.messages.send(thread, "second")
                if event.type is EventType.RUN_FINISHED:
                    break
        await source.aclose()
    snapshot = events[0]
    assert snapshot.type is EventType.MESSAGES_SNAPSHOT
    assert [(m.role, m.content) for m in snapshot.messages if m.role != "reasoning"] == [
        ("user", "first"),
        ("assistant", "echo: first"),
    ]
    assert [m.content for m in snapshot.messages if m.role == "reasoning"] == [THOUGHT]
    texts = [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT]
    assert "".join(texts) == "secondecho: second", encode_sse(events)


# --- import ------------------------------------------------------------------------------------


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def test_c11_042_agui_import_of_the_threadplane_reasoning_fixture() -> None:
    chunks = ["I read the prompt ", "and decided ", "to greet the user."]
    fixture = [
        ev("REASONING_MESSAGE_START", messageId="m1", role="reasoning"),
        *[ev("REASONING_MESSAGE_CONTENT", messageId="m1", delta=c) for c in chunks],
        ev("REASONING_MESSAGE_END", messageId="m1"),
        ev("TEXT_MESSAGE_START", messageId="m1", role="assistant"),
        *[ev("TEXT_MESSAGE_CONTENT", messageId="m1", delta=c) for c in ["Hel", "lo", "!"]],
        ev("TEXT_MESSAGE_END", messageId="m1"),
    ]
    importer = AguiImporter()
    for event in fixture:
        view = importer.feed(event)
    (message,) = view.messages
    assert (message.role, message.content) == ("assistant", "Hello!")
    assert message.reasoning == "I read the prompt and decided to greet the user."
    assert message.reasoning_duration_ms is not None and message.reasoning_duration_ms >= 0
    # with arrival times given: END − START, stamped once
    timed = AguiImporter()
    for at, event in enumerate(fixture):
        timed.feed(event, at_ms=100 + 50 * at)
    assert timed.view.messages[0].reasoning_duration_ms == 200
    again = timed.feed(ev("REASONING_MESSAGE_END", messageId="m1"), at_ms=10_000)
    assert again.messages[0].reasoning_duration_ms == 200


def test_c11_043_agui_tool_call_without_parent_is_its_own_assistant_message() -> None:
    importer = AguiImporter()
    importer.feed(ev("RUN_STARTED", threadId="t", runId="r1"))
    view = importer.feed(ev("TOOL_CALL_START", toolCallId="call_1", toolCallName="weather"))
    (message,) = view.messages
    assert (message.id, message.role, message.content) == ("call_1", "assistant", "")
    assert message.tool_call_ids == ("call_1",)
    assert view.tool_calls["call_1"].status == "running"
    assert view.tool_calls["call_1"].message_id == "call_1"
    importer.feed(ev("TOOL_CALL_ARGS", toolCallId="call_1", delta='{"loca'))
    view = importer.feed(ev("TOOL_CALL_ARGS", toolCallId="call_1", delta='tion":"Lisbon"}'))
    assert view.tool_calls["call_1"].args == {"location": "Lisbon"}
    view = importer.feed(ev("TOOL_CALL_END", toolCallId="call_1"))
    assert view.tool_calls["call_1"].status == "complete"
    (block,) = view.messages[0].tool_uses
    assert block == ToolUseBlock(
        id="call_1", name="weather", args={"location": "Lisbon"}, args_raw='{"location":"Lisbon"}'
    )
    view = importer.feed(
        ev("TOOL_CALL_RESULT", messageId="t1", toolCallId="call_1", content='{"temp": 21}')
    )
    assert view.tool_calls["call_1"].result == {"temp": 21}
    assert (view.messages[-1].role, view.messages[-1].tool_call_id) == ("tool", "call_1")
    view = importer.feed(
        ev("TOOL_CALL_RESULT", messageId="t2", toolCallId="call_2", content="not json")
    )
    assert view.tool_calls["call_2"].result == "not json"


def test_c11_044_agui_foreign_runs_and_child_events_stay_out_of_the_transcript() -> None:
    importer = AguiImporter()
    importer.feed(ev("RUN_STARTED", threadId="t", runId="r1"))
    importer.feed(ev("TEXT_MESSAGE_START", messageId="a1", role="assistant", runId="r1"))
    view = importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a1", delta="mine"))
    before = view
    for foreign in (
        ev("TEXT_MESSAGE_CONTENT", messageId="a1", delta=" theirs", runId="r0"),
        ev("TEXT_MESSAGE_START", messageId="x1", role="assistant", runId="r0"),
        ev("RUN_FINISHED", threadId="t", runId="r0"),
    ):
        assert importer.feed(foreign) is before
    assert before.running and before.messages[0].delivery.phase is Phase.STREAMING
    view = importer.feed(
        ev("SUBAGENT_STARTED", subagentRunId="child-1", name="researcher", description="digs")
    )
    assert view.subagents["child-1"].status == "running"
    view = importer.feed(
        ev("TEXT_MESSAGE_START", messageId="c1", role="assistant", subagentRunId="child-1")
    )
    view = importer.feed(
        ev("TEXT_MESSAGE_CONTENT", messageId="c1", delta="child text", subagentRunId="child-1")
    )
    assert [m.id for m in view.messages] == ["a1"]
    assert view.messages[0].delivery.phase is Phase.STREAMING  # the child did not end our step
    child = importer.children["child-1"].view
    assert [(m.id, m.text) for m in child.messages] == [("c1", "child text")]
    view = importer.feed(ev("SUBAGENT_FINISHED", subagentRunId="child-1"))
    assert view.subagents["child-1"].status == "idle"
    assert importer.children["child-1"].view.messages[0].delivery.outcome is Outcome.SUCCESS
    view = importer.feed(ev("RUN_FINISHED", threadId="t", runId="r1"))
    assert view.messages[0].text == "mine"
    assert view.messages[0].delivery == Delivery.complete("run:r1", Outcome.SUCCESS)
    assert not view.running
    # after the run, a late event of it is ignored too
    assert importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a1", delta="!", runId="r1")) is view


def test_agui_import_run_outcomes_steps_and_snapshots() -> None:
    importer = AguiImporter()
    importer.feed(ev("MESSAGES_SNAPSHOT", messages=[{"id": "u0", "role": "user", "content": "q"}]))
    assert importer.view.messages[0].delivery == Delivery.static("u0")
    importer.feed(ev("RUN_STARTED", threadId="t", runId="r1"))
    importer.feed(ev("TEXT_MESSAGE_START", messageId="a1"))
    importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a1", delta="step one"))
    view = importer.feed(ev("TEXT_MESSAGE_START", messageId="a2"))
    first = view.by_id("a1")
    assert first is not None and first.delivery == Delivery.complete("run:r1", Outcome.SUCCESS)
    assert importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a1", delta="late")) is view
    importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a2", delta="two"))
    snapshot = [
        {"id": "u0", "role": "user", "content": "q"},
        {"id": "a1", "role": "assistant", "content": "step one"},
    ]
    view = importer.feed(ev("MESSAGES_SNAPSHOT", messages=snapshot))
    assert [m.id for m in view.messages] == ["u0", "a1", "a2"]  # the current step is kept
    view = importer.feed(ev("TEXT_MESSAGE_CONTENT", messageId="a2", delta=" more"))
    current = view.by_id("a2")
    assert current is not None and current.text == "two more"
    view = importer.feed(
        ev("RUN_FINISHED", threadId="t", runId="r1", outcome={"type": "cancelled"})
    )
    current = view.by_id("a2")
    assert current is not None and current.delivery.outcome is Outcome.ABORTED
    assert view.status is not None and view.status.reason == "aborted_by_user"
    importer.feed(ev("RUN_STARTED", threadId="t", runId="r2"))
    importer.feed(ev("TEXT_MESSAGE_START", messageId="a3"))
    interrupt = {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "approval"}]}
    view = importer.feed(ev("RUN_FINISHED", threadId="t", runId="r2", outcome=interrupt))
    paused = view.by_id("a3")
    assert paused is not None and paused.delivery.outcome is Outcome.PAUSED
    assert [i.id for i in importer.interrupts] == ["i1"]
    importer.feed(ev("RUN_STARTED", threadId="t", runId="r3"))
    importer.feed(ev("TEXT_MESSAGE_START", messageId="a4"))
    view = importer.feed(ev("RUN_ERROR", message="model overloaded", code="overloaded"))
    failed = view.by_id("a4")
    assert failed is not None and failed.delivery.outcome is Outcome.ERROR
    assert view.error is not None and view.error.message == "model overloaded"
    assert view.status is not None and view.status.state == "failed"
    assert importer.feed(ev("RUN_STARTED", threadId="t", runId="r4")).error is None
    for ignored in (ev("STEP_STARTED", stepName="s"), ev("RAW", event={"x": 1})):
        assert importer.feed(ignored) is importer.view


def test_agui_extra_is_optional_and_named_when_missing() -> None:
    """The core client never imports ``ag_ui``; the bridge without it says what to install."""
    probe = (
        "import sys\n"
        "import threadloom.client, threadloom.client.convert.openai\n"
        "import threadloom.client.convert.anthropic, threadloom.client.session\n"
        "assert 'ag_ui' not in sys.modules, 'ag_ui imported by the core client'\n"
        "sys.modules['ag_ui'] = None\n"
        "try:\n"
        "    import threadloom.client.convert.agui\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'threadloom[agui]'" in done.stdout
