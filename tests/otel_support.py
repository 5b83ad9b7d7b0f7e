"""OpenTelemetry test support (spec 13 §13.6): a tracer provider of the SDK whose spans land
in its in-memory exporter, and the span tree they make, printed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from threadloom.engine.telemetry import TracingOptions

SHOWN = (
    "gen_ai.agent.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "threadloom.run.status",
    "threadloom.run.reason",
    "threadloom.cost_usd",
    "error.type",
)


def in_memory(capture_content: bool | None = None) -> tuple[TracingOptions, InMemorySpanExporter]:
    """``Runtime.open(tracing=…)`` options with a provider of its own, and its exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return TracingOptions(tracer_provider=provider, capture_content=capture_content), exporter


def by_name(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    """The spans whose parent is ``parent``, in start order."""
    assert parent.context is not None
    found = [
        s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def tree(spans: Sequence[ReadableSpan], shown: Sequence[str] = SHOWN) -> str:
    """The spans as an indented tree: name, kind, status and the ``shown`` attributes."""
    ids = {s.context.span_id for s in spans if s.context is not None}
    roots = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    lines: list[str] = []

    def line(span: ReadableSpan, depth: int) -> None:
        attributes: Any = span.attributes or {}
        values = ", ".join(f"{key}={_short(attributes[key])}" for key in shown if key in attributes)
        status = span.status.status_code.name
        kind = span.kind.name
        lines.append(f"{'    ' * depth}{span.name}  [{kind}, {status}]  {values}")
        for child in children(spans, span):
            line(child, depth + 1)

    for root in sorted(roots, key=lambda s: s.start_time or 0):
        line(root, 0)
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)
