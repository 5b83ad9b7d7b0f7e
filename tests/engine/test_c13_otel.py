"""OpenTelemetry GenAI spans of runs, model calls and tool calls (spec 13 §13.6), recorded by
the SDK's in-memory exporter on a real Runtime (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import opentelemetry
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from otel_support import by_name, children, in_memory, tree
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, SessionBinding, Subagent, tool
from threadloom.engine.telemetry import TracingOptions, open_tracing
from threadloom.errors import InvalidArgument
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

USAGE = {"input_tokens": 120, "output_tokens": 30, "cached_tokens": 100, "reasoning_tokens": 8}


@tool
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order} ships Friday"


@tool
def report(summary: str) -> str:
    """Report the outcome and end the session."""
    return "Reported."


@tool
async def broken_tool(order: str) -> str:
    """A tool that raises."""
    raise RuntimeError(f"no such order {order}")


def tool_then_text(tool_name: str = "lookup") -> Callable[[ProviderRequest], Reply]:
    """Call ``tool_name`` once (with reasoning first), then answer in text."""

    def answer(request: ProviderRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return Reply.text("It ships Friday.", usage=USAGE)
        return Reply.reasoning(
            None,
            "The user wants an order: look it up.",
            tool_calls=[Call(tool_name, {"order": "A-1"}, id="call_1")],
            usage=USAGE,
        )

    return answer


def definitions(reply: Any, tools: tuple[Any, ...] = (lookup,)) -> Definitions:
    names = [t.__name__ for t in tools]
    return Definitions().add(
        Model(
            name="M",
            provider=ScriptedProvider(reply),
            model="scripted-1",
            input_price=2.0,
            output_price=10.0,
            cached_price=0.5,
            max_attempts=1,
        ),
        Prompt(name="P", model="M", system="You look orders up.", tools=names),
        Agent(
            name="support",
            description="Answers order questions",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
        ),
        *tools,
    )


@pytest.fixture
async def opened(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    runtimes: list[Runtime] = []

    async def open_(defs: Definitions, **options: Any) -> Runtime:
        runtime = await Runtime.open(db_url, definitions=defs, **options)
        runtimes.append(runtime)
        return runtime

    yield open_
    for runtime in runtimes:
        await runtime.close(drain=0)


async def one_turn(runtime: Runtime, text: str = "Where is order A-1?") -> str:
    state = await runtime.create_thread("support")
    await runtime.send_message(state.thread_id, text)
    await runtime.wait_idle(state.thread_id, 10)
    return state.thread_id


async def test_c13_040_a_tool_using_turn_is_one_run_span_with_model_and_tool_children(
    opened: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    runtime = await opened(definitions(tool_then_text()), tracing=options)
    thread_id = await one_turn(runtime)
    spans = exporter.get_finished_spans()
    print("\n" + tree(spans))
    assert [s.name for s in spans if s.parent is None] == ["invoke_agent support"]
    run = by_name(spans, "invoke_agent")[0]
    assert run.kind == SpanKind.INTERNAL
    kids = children(spans, run)
    assert [s.name for s in kids] == [
        "chat scripted-1",
        "execute_tool lookup",
        "chat scripted-1",
    ]
    assert len(spans) == 4  # nothing else
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}
    assert [s.kind for s in kids] == [SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.CLIENT]
    # the tool span runs between the two model calls
    assert kids[0].end_time <= kids[1].start_time and kids[1].end_time <= kids[2].start_time
    attributes = dict(run.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "support"
    assert attributes["gen_ai.agent.description"] == "Answers order questions"
    assert attributes["gen_ai.conversation.id"] == thread_id
    assert attributes["threadloom.thread.id"] == thread_id
    assert attributes["gen_ai.provider.name"] == "scripted"
    assert attributes["gen_ai.request.model"] == "scripted-1"
    assert attributes["threadloom.run.status"] == "idle"
    assert attributes["threadloom.run.reason"] == "stop_on_response"
    assert run.status.status_code == StatusCode.UNSET
    tool_span = kids[1]
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "lookup"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool_span.attributes["gen_ai.tool.description"] == "Look an order up."
    assert tool_span.attributes["threadloom.tool.status"] == "success"
    assert tool_span.status.status_code == StatusCode.UNSET


async def test_c13_041_model_call_spans_carry_usage_finish_reason_and_cost(
    opened: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    runtime = await opened(definitions(tool_then_text()), tracing=options)
    thread_id = await one_turn(runtime)
    spans = exporter.get_finished_spans()
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.start_time or 0)
    first, second = (dict(s.attributes or {}) for s in chats)
    for attributes in (first, second):
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert attributes["gen_ai.request.model"] == "scripted-1"
        assert attributes["gen_ai.response.model"] == "scripted-1"  # the scripted model names none
        assert attributes["gen_ai.conversation.id"] == thread_id
        assert attributes["gen_ai.usage.input_tokens"] == 120
        assert attributes["gen_ai.usage.output_tokens"] == 30
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 100
        assert attributes["gen_ai.usage.reasoning.output_tokens"] == 8
        assert attributes["threadloom.model"] == "M"
        assert attributes["threadloom.prompt"] == "P"
        assert attributes["threadloom.attempt"] == 1
        assert str(attributes["gen_ai.response.id"]).startswith("scripted-")
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second["gen_ai.response.finish_reasons"] == ("stop",)
    # each span names its LLM log row, and its cost is the row's
    for attributes in (first, second):
        row = await runtime.store.get_log(thread_id, str(attributes["threadloom.log.id"]))
        assert row is not None and row.model == "M"
        assert attributes["threadloom.cost_usd"] == pytest.approx(row.cost_total)
    # (20 uncached × 2 + 100 cached × 0.5 + 30 output × 10) / 1e6 per call
    assert first["threadloom.cost_usd"] == pytest.approx(390 / 1e6)
    run = dict(by_name(spans, "invoke_agent")[0].attributes or {})
    assert run["threadloom.cost_usd"] == pytest.approx(2 * 390 / 1e6)
    cost = await (await runtime.thread(thread_id)).cost()
    assert run["threadloom.cost_usd"] == pytest.approx(cost.total_cost)


async def test_c13_042_a_failed_step_sets_the_error_status(opened: Callable[..., Any]) -> None:
    options, exporter = in_memory()
    failing = Reply.error("the model is down", code="server_error")
    runtime = await opened(definitions(lambda request: failing), tracing=options)
    await one_turn(runtime)
    spans = exporter.get_finished_spans()
    print("\n" + tree(spans))
    run = by_name(spans, "invoke_agent")[0]
    (chat,) = children(spans, run)
    assert chat.name == "chat scripted-1"
    assert chat.status.status_code == StatusCode.ERROR
    assert "the model is down" in (chat.status.description or "")
    assert (chat.attributes or {})["error.type"] == "server_error"
    assert [e.name for e in chat.events] == ["exception"]
    assert run.status.status_code == StatusCode.ERROR
    attributes = dict(run.attributes or {})
    assert attributes["error.type"] == "step_error"
    assert attributes["threadloom.run.status"] == "failed"
    assert attributes["threadloom.run.reason"] == "step_error"
    assert "the model is down" in (run.status.description or "")


async def test_c13_042_a_failing_tool_is_an_error_span_in_a_run_that_goes_on(
    opened: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    defs = definitions(tool_then_text("broken_tool"), tools=(broken_tool,))
    runtime = await opened(defs, tracing=options)
    await one_turn(runtime)
    spans = exporter.get_finished_spans()
    (tool_span,) = by_name(spans, "execute_tool")
    assert tool_span.name == "execute_tool broken_tool"
    assert tool_span.status.status_code == StatusCode.ERROR
    assert tool_span.status.description == "no such order A-1"
    assert (tool_span.attributes or {})["error.type"] == "tool_error"
    run = by_name(spans, "invoke_agent")[0]
    assert run.status.status_code == StatusCode.UNSET  # the model saw the error and answered
    assert (run.attributes or {})["threadloom.run.reason"] == "stop_on_response"


CONTENT_KEYS = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


async def test_c13_043_message_contents_are_recorded_only_when_asked(
    opened: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    runtime = await opened(definitions(tool_then_text()), tracing=options)
    await one_turn(runtime)
    for span in exporter.get_finished_spans():
        assert not set(CONTENT_KEYS) & set(span.attributes or {}), span.name
        assert "A-1" not in json.dumps(dict(span.attributes or {}))
    await runtime.close(drain=0)

    options, exporter = in_memory(capture_content=True)
    runtime = await opened(definitions(tool_then_text()), tracing=options)
    await one_turn(runtime)
    spans = exporter.get_finished_spans()
    first, second = sorted(by_name(spans, "chat "), key=lambda s: s.start_time or 0)
    a1: Any = first.attributes
    assert json.loads(a1["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You look orders up."}
    ]
    assert json.loads(a1["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is order A-1?"}]}
    ]
    assert json.loads(a1["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "The user wants an order: look it up."},
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "lookup",
                    "arguments": {"order": "A-1"},
                },
            ],
            "finish_reason": "tool_calls",
        }
    ]
    a2: Any = second.attributes
    sent = json.loads(a2["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["parts"] == [
        {"type": "tool_call_response", "id": "call_1", "response": "order A-1 ships Friday"}
    ]
    assert json.loads(a2["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "It ships Friday."}
    ]
    (tool_span,) = by_name(spans, "execute_tool")
    t: Any = tool_span.attributes
    assert json.loads(t["gen_ai.tool.call.arguments"]) == {"order": "A-1"}
    assert t["gen_ai.tool.call.result"] == "order A-1 ships Friday"


async def test_c13_043_the_environment_asks_for_contents(
    opened: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADLOOM_OTEL_CAPTURE_CONTENT", "1")
    options, exporter = in_memory()
    runtime = await opened(definitions(tool_then_text()), tracing=options)
    await one_turn(runtime)
    (tool_span,) = by_name(exporter.get_finished_spans(), "execute_tool")
    assert "gen_ai.tool.call.arguments" in (tool_span.attributes or {})


async def test_c13_044_without_a_tracer_provider_a_turn_never_calls_opentelemetry(
    opened: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("THREADLOOM_OTEL", raising=False)
    # the API is installed, and nobody configured a provider: its default, a proxy
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    runtime = await opened(definitions(tool_then_text()))
    assert runtime.runs.tracing is None
    package = os.path.dirname(opentelemetry.__path__[0]) + os.sep + "opentelemetry"
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    state = await runtime.create_thread("support")
    sys.setprofile(profile)
    try:
        await runtime.send_message(state.thread_id, "Where is order A-1?")
        await runtime.wait_idle(state.thread_id, 10)
    finally:
        sys.setprofile(None)
    messages = sorted((await state.get_messages()).messages, key=lambda m: m.created_at)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert calls == []


def test_c13_044_tracing_is_decided_once_from_the_setting_and_the_provider() -> None:
    options, _ = in_memory()
    assert open_tracing(None, {}) is None  # the API's default provider: no-op
    assert open_tracing(False, {}) is None
    assert open_tracing(None, {"THREADLOOM_OTEL": "0"}) is None
    assert (
        open_tracing(TracingOptions(enabled=False, tracer_provider=options.tracer_provider), {})
        is None
    )
    assert open_tracing(options, {}) is not None  # a provider of its own
    forced = open_tracing(None, {"THREADLOOM_OTEL": "1"})  # spans reach a provider set later
    assert forced is not None and forced.capture_content is False

    def captures(**environ: str) -> bool:
        tracing = open_tracing(True, environ)
        assert tracing is not None
        return tracing.capture_content

    theirs = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    assert captures(**{theirs: "true"}) and captures(**{theirs: "SPAN_ONLY"})
    assert not captures(**{theirs: "NO_CONTENT"})
    assert not captures(**{theirs: "SPAN_ONLY", "THREADLOOM_OTEL_CAPTURE_CONTENT": "0"})
    assert captures(THREADLOOM_OTEL_CAPTURE_CONTENT="1")
    with pytest.raises(InvalidArgument, match="THREADLOOM_OTEL"):
        open_tracing(None, {"THREADLOOM_OTEL": "maybe"})
    with pytest.raises(InvalidArgument, match="THREADLOOM_OTEL_CAPTURE_CONTENT"):
        captures(THREADLOOM_OTEL_CAPTURE_CONTENT="sometimes")


async def test_c13_049_what_a_tool_call_does_nests_under_its_span(
    opened: Callable[..., Any],
) -> None:
    """C13-049: a sub-prompt's model call is a child of the sub-prompt's tool span, and the
    run of a child thread that a blocking ``subagent_create`` starts is a child of that
    call's tool span, in the parent run's trace (§13.6.4)."""

    def boss(request: ProviderRequest) -> Reply:
        last = request.messages[-1]
        system = request.messages[0].text if request.messages else ""
        if system == "You summarise.":
            return Reply.text("summary", usage=USAGE)
        if isinstance(last, ToolMessage):
            if last.name == "S":
                create = {"agent": "helper", "name": "h", "message": "go", "attachments": []}
                return Reply.tool_calls(Call("subagent_create", create, id="call_2"))
            return Reply.text("done", usage=USAGE)
        return Reply.tool_calls(Call("S", {}, id="call_1"), usage=USAGE)

    defs = Definitions().add(
        Model(name="M", provider=ScriptedProvider(boss), model="boss-1", max_attempts=1),
        Model(
            name="C",
            provider=ScriptedProvider(
                lambda request: Reply.tool_calls(Call("report", {"summary": "child answer"}))
            ),
            model="child-1",
        ),
        Prompt(
            name="P",
            model="M",
            system="You delegate.",
            tools=["S", Subagent("child", relationship="helper", blocking=True)],
        ),
        Prompt(name="S", model="M", system="You summarise."),
        Prompt(name="CP", model="C", system="You help.", tools=["report"]),
        Agent(name="boss", side_a=Side(prompt="P"), side_b=Side(label="User")),
        Agent(
            name="child",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Helps",
            max_session_turns=2,
            side_a=Side(
                prompt="CP",
                session_stop=SessionBinding(name="report", message_property="summary"),
            ),
            side_b=Side(prompt="CP", label="Boss"),
        ),
        report,
    )
    options, exporter = in_memory()
    runtime = await opened(defs, tracing=options)
    state = await runtime.create_thread("boss")
    await runtime.send_message(state.thread_id, "Delegate this.")
    await runtime.wait_idle(state.thread_id, 10)
    spans = exporter.get_finished_spans()
    print("\n" + tree(spans))
    (run,) = [s for s in spans if s.name == "invoke_agent boss"]
    assert run.parent is None
    assert [s.name for s in children(spans, run)] == [
        "chat boss-1",
        "execute_tool S",
        "chat boss-1",
        "execute_tool subagent_create",
        "chat boss-1",
    ]
    subprompt_call = children(spans, run)[1]
    assert [s.name for s in children(spans, subprompt_call)] == ["chat boss-1"]
    assert subprompt_call.attributes is not None
    assert subprompt_call.attributes["threadloom.tool.kind"] == "subprompt"
    create_call = children(spans, run)[3]
    assert create_call.attributes is not None
    assert create_call.attributes["threadloom.tool.kind"] == "subagent"
    (child_run,) = children(spans, create_call)
    assert child_run.name == "invoke_agent child"
    assert child_run.attributes is not None
    assert child_run.attributes["threadloom.thread.parent_id"] == state.thread_id
    assert [s.name for s in children(spans, child_run)] == ["chat child-1", "execute_tool report"]
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}
