"""A ``traceparent`` header on the HTTP request that starts a run parents the run's span
(spec 13 §13.6), over real HTTP to a real server (SQLite and PostgreSQL); a send that joins a
running run is linked to it instead."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_support import by_name, children, in_memory, tree
from server.conftest import Api
from server.test_c13_agui import run, run_input, user


def traceparent() -> tuple[str, int, int]:
    """A W3C ``traceparent`` of a sampled remote span: ``(header, trace id, span id)``."""
    trace_id, span_id = uuid.uuid4().int, uuid.uuid4().int >> 64
    return f"00-{trace_id:032x}-{span_id:016x}-01", trace_id, span_id


def runs_of(spans: Any) -> list[ReadableSpan]:
    return sorted(by_name(spans, "invoke_agent"), key=lambda s: s.start_time or 0)


async def test_c13_045_a_traceparent_header_parents_the_run_span(
    make_api: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    api: Api = await make_api(tracing=options)
    thread_id = await api.thread("echo")
    header, trace_id, span_id = traceparent()
    client = api.client("alice", traceparent=header)
    response = await client.post(f"/api/threads/{thread_id}/messages", json={"content": "hi"})
    assert response.status_code == 202, response.text
    await api.settle(thread_id)
    spans = exporter.get_finished_spans()
    print("\n" + tree(spans))
    (span,) = runs_of(spans)
    assert span.name == "invoke_agent echo"
    assert span.parent is not None and span.parent.is_remote
    assert span.parent.span_id == span_id
    assert span.context is not None and span.context.trace_id == trace_id
    assert (span.attributes or {})["gen_ai.conversation.id"] == thread_id
    (chat,) = children(spans, span)
    assert chat.name == "chat scripted-echo" and chat.context.trace_id == trace_id

    # without the header: a trace of its own
    response = await api.client().post(f"/api/threads/{thread_id}/messages", json={"content": "2"})
    assert response.status_code == 202
    await api.settle(thread_id)
    second = runs_of(exporter.get_finished_spans())[1]
    assert second.parent is None and second.context.trace_id != trace_id


async def test_c13_046_a_send_that_joins_a_running_run_is_a_link(
    make_api: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    api: Api = await make_api(tracing=options)
    thread_id = await api.thread("gate")
    first, first_trace, first_span = traceparent()
    second, second_trace, second_span = traceparent()
    response = await api.client("alice", traceparent=first).post(
        f"/api/threads/{thread_id}/messages", json={"content": "one"}
    )
    assert response.status_code == 202
    await api.gate.entered.wait()  # the run waits in its model request
    response = await api.client("alice", traceparent=second).post(
        f"/api/threads/{thread_id}/messages", json={"content": "two"}
    )
    assert response.status_code == 202
    api.gate.open()
    await api.settle(thread_id)
    spans = exporter.get_finished_spans()
    print("\n" + tree(spans))
    started = runs_of(spans)[0]
    assert started.parent is not None and started.parent.span_id == first_span
    assert started.context.trace_id == first_trace
    links = [(link.context.trace_id, link.context.span_id) for link in started.links]
    assert (second_trace, second_span) in links  # joined, not parented
    assert all(s.context.trace_id != second_trace for s in spans)
    # the second message was answered (in this run or the next one the run started)
    assert len(api.gate.requests) == 2
    for later in runs_of(spans)[1:]:  # a run the end-of-run check started: linked back
        assert later.parent is None
        assert any(link.attributes.get("threadloom.link") == "previous_run" for link in later.links)


async def test_c13_047_continue_and_agui_requests_carry_the_traceparent(
    make_api: Callable[..., Any],
) -> None:
    options, exporter = in_memory()
    api: Api = await make_api(tracing=options)
    thread_id = await api.thread("echo", initial_messages=[{"role": "user", "content": "hi"}])
    header, trace_id, span_id = traceparent()
    response = await api.client("alice", traceparent=header).post(
        f"/api/threads/{thread_id}/continue", json={}
    )
    assert response.status_code == 202, response.text
    await api.settle(thread_id)
    (span,) = runs_of(exporter.get_finished_spans())
    assert span.parent is not None and span.parent.span_id == span_id

    header, trace_id, span_id = traceparent()
    agui_thread = str(uuid.uuid4())
    response, events = await run(
        api, "echo", run_input(agui_thread, user("hello")), traceparent=header
    )
    assert response.status_code == 200 and events[-1][1]["type"] == "RUN_FINISHED"
    agui_runs = [
        s
        for s in runs_of(exporter.get_finished_spans())
        if (s.attributes or {}).get("threadloom.thread.id") == agui_thread
    ]
    assert len(agui_runs) == 1
    assert agui_runs[0].parent is not None and agui_runs[0].parent.span_id == span_id
    assert agui_runs[0].context.trace_id == trace_id
