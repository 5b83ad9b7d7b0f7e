"""OpenTelemetry spans of runs, model calls and tool executions, named and attributed after
the GenAI semantic conventions (``semantic-conventions-genai`` v0.1.0; spec 13 §13.6,
docs/telemetry.md).

Whether a runtime traces is decided once, by ``Runtime.open`` (:func:`open_tracing`): the
``opentelemetry-api`` package must be importable (``threadloom[otel]``) and a real tracer
provider configured — not the API's no-op default — or tracing asked for explicitly. When it
is off, the engine holds ``None`` where it would hold a :class:`Tracing`, and the turn never
calls into OpenTelemetry: each place that would open a span asks ``is not None`` and nothing
more.

Spans: ``invoke_agent {agent}`` per run (INTERNAL), the current span of the run's task while
it runs; ``chat {model}`` per model request attempt (CLIENT), its child; ``execute_tool
{tool}`` per tool call (INTERNAL), the run's child too, and the current span while the tool
runs, so what a tool does (a sub-prompt's model calls, a subagent's run, an instrumented
HTTP client) nests under it. Message contents go on the spans only when
``capture_content`` is on.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from threadloom.engine.env import StepEnv
from threadloom.engine.run.loop import Run
from threadloom.engine.step.outcome import CallOutcome, ModelResult
from threadloom.errors import InvalidArgument
from threadloom.providers.types import ProviderRequest
from threadloom.records import FAILED_REASONS, REASON_ERRORS, ToolCall
from threadloom.version import __version__

CONVENTIONS = "semantic-conventions-genai v0.1.0"
"""The GenAI semantic conventions the attribute names follow."""

ENABLE_ENV = "THREADLOOM_OTEL"
"""``1``/``on``: trace even with no provider configured yet; ``0``/``off``: never trace."""
CAPTURE_ENV = (
    "THREADLOOM_OTEL_CAPTURE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
)
"""Either set to ``1``/``true``: record message contents on the spans."""

_ON = frozenset(("1", "true", "on", "yes"))
_OFF = frozenset(("0", "false", "off", "no"))


CHILD_TOOLS = frozenset(("subagent_create", "subagent_message"))
"""The runtime tools of subagent relationships (names reserved, spec 06 §6.3.1)."""


@dataclass(frozen=True)
class TracingOptions:
    """``Runtime.open(tracing=…)``: ``enabled`` None traces when a tracer provider is
    configured (else ``THREADLOOM_OTEL`` decides); ``tracer_provider`` replaces the global
    one; ``capture_content`` None reads ``THREADLOOM_OTEL_CAPTURE_CONTENT``."""

    enabled: bool | None = None
    tracer_provider: Any = None
    capture_content: bool | None = None


def _flag(value: str | None, name: str) -> bool | None:
    if value is None or not value.strip():
        return None
    text = value.strip().lower()
    if text in _ON:
        return True
    if text in _OFF:
        return False
    raise InvalidArgument(f"{name} must be 1/true/on or 0/false/off, not {value!r}")


def _capture_from(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for message contents: ``THREADLOOM_OTEL_CAPTURE_CONTENT``
    (a flag; another value is an error), or OpenTelemetry's own variable, which GenAI
    instrumentations also set to ``SPAN_ONLY``, ``EVENT_ONLY`` or ``SPAN_AND_EVENT`` (all
    asking for contents here; an unknown value asks for none)."""
    ours = _flag(environ.get(CAPTURE_ENV[0]), CAPTURE_ENV[0])
    if ours is not None:
        return ours
    theirs = (environ.get(CAPTURE_ENV[1]) or "").strip().lower()
    return theirs in _ON or theirs in ("span_only", "event_only", "span_and_event")


def open_tracing(
    setting: TracingOptions | bool | None, environ: Mapping[str, str] = os.environ
) -> Tracing | None:
    """The runtime's tracing, or ``None`` when it does not trace (decided once)."""
    options = setting if isinstance(setting, TracingOptions) else TracingOptions(enabled=setting)
    enabled = options.enabled
    if enabled is None:
        enabled = _flag(environ.get(ENABLE_ENV), ENABLE_ENV)
    if enabled is False:
        return None
    if (
        enabled is None
        and options.tracer_provider is None
        and "opentelemetry.trace" not in sys.modules
        and not environ.get("OTEL_PYTHON_TRACER_PROVIDER")
    ):
        # a provider is configured by code that imported the API, or by that variable:
        # nobody did, and the API is not even imported (its import costs the process)
        return None
    try:
        from opentelemetry import trace
    except ImportError:
        if enabled or options.tracer_provider is not None:
            raise InvalidArgument(
                "tracing needs the opentelemetry-api package: pip install 'threadloom[otel]'"
            ) from None
        return None
    provider = options.tracer_provider
    if provider is None:
        provider = trace.get_tracer_provider()
        if enabled is None and isinstance(
            provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
        ):
            return None  # nobody configured a provider: every span would be dropped
    capture = options.capture_content
    if capture is None:
        capture = _capture_from(environ)
    return Tracing(provider.get_tracer("threadloom", __version__), capture)


def _content(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _arguments(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


def input_messages(request: ProviderRequest) -> tuple[list[Any], list[Any]]:
    """``(system instructions, input messages)`` of a request in the conventions' JSON
    shapes (parts of type text, reasoning, tool_call, tool_call_response, blob)."""
    from threadloom.providers.types import AssistantMessage, SystemMessage, UserMessage

    system: list[Any] = []
    messages: list[Any] = []
    for message in request.messages:
        if isinstance(message, SystemMessage):
            system.append({"type": "text", "content": message.content})
            continue
        parts: list[dict[str, Any]] = []
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                parts.append({"type": "text", "content": message.content})
            else:
                for part in message.content:
                    if part.type == "text":
                        parts.append({"type": "text", "content": part.text})
                    else:
                        parts.append(
                            {"type": "blob", "modality": "image", "mime_type": part.media_type}
                        )
        elif isinstance(message, AssistantMessage):
            if message.reasoning_content:
                parts.append({"type": "reasoning", "content": message.reasoning_content})
            if message.content:
                parts.append({"type": "text", "content": message.content})
            for call in message.tool_calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": call.id,
                        "name": call.name,
                        "arguments": _arguments(call.arguments),
                    }
                )
        else:
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": message.tool_call_id,
                    "response": message.content,
                }
            )
        messages.append({"role": message.role, "parts": parts})
    return system, messages


def output_messages(result: ModelResult) -> list[Any]:
    """The answer as the conventions' one output message."""
    parts: list[dict[str, Any]] = []
    if result.reasoning_content:
        parts.append({"type": "reasoning", "content": result.reasoning_content})
    if result.content:
        parts.append({"type": "text", "content": result.content})
    for call in result.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
            }
        )
    return [{"role": "assistant", "parts": parts, "finish_reason": result.finish_reason}]


def _provider_name(provider: Any) -> str:
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) and name else str(provider)


class Tracing:
    """The spans of one runtime (``RunManager.tracing``; ``None`` when it does not trace)."""

    def __init__(self, tracer: Any, capture_content: bool) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        self.capture_content = capture_content
        self._context = context
        self._propagate = propagate
        self._trace = trace
        self._kind = SpanKind
        self._error = Status
        self._error_code = StatusCode.ERROR

    # -- incoming trace context ------------------------------------------------------
    @contextlib.contextmanager
    def incoming(self, headers: Mapping[str, str], run: Run | None) -> Iterator[None]:
        """A send or continue that came with W3C trace headers (``traceparent``): while it
        runs, the caller's span is the current one, so a run it starts is its child; when
        the thread is already running here, the running run's span gets a link to it
        instead. A request that already has a current span (an instrumented server) keeps
        it."""
        current = self._trace.get_current_span().get_span_context()
        if current.is_valid:
            if run is not None:
                self.join(run, current)
            yield
            return
        extracted = self._propagate.extract(headers)
        caller = self._trace.get_current_span(extracted).get_span_context()
        if not caller.is_valid:
            yield
            return
        if run is not None:
            self.join(run, caller)
            yield
            return
        token = self._context.attach(extracted)
        try:
            yield
        finally:
            self._context.detach(token)

    def join(self, run: Run, caller: Any) -> None:
        """Link ``run``'s span to a caller whose send joined it (now, or when its next run
        starts)."""
        attributes = {"threadloom.link": "joined_send"}
        if run.span is not None:
            run.span.add_link(caller, attributes)
        else:
            run.trace_links = (*run.trace_links, caller)

    # -- runs --------------------------------------------------------------------------
    def start_run(self, run: Run) -> None:
        """Open ``run``'s span and make it the current one of its task. The first run of a
        task is a child of what was current where it was started (a send's caller, a tool
        that queued work); the runs the end-of-run check starts after it are new traces
        linked to the run before."""
        agent = run.agent
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            "gen_ai.conversation.id": run.thread_id,
            "threadloom.thread.id": run.thread_id,
            "threadloom.run.id": run.run_id,
        }
        description = getattr(agent, "description", "")
        if description:
            attributes["gen_ai.agent.description"] = description
        if run.row.parent_id is not None:
            attributes["threadloom.thread.parent_id"] = run.row.parent_id
        side = agent.side_a if run.side == "a" else agent.side_b
        prompt = run.definitions.prompt(side.prompt) if side is not None and side.prompt else None
        model = run.definitions.model(prompt.model) if prompt is not None else None
        if model is not None:
            attributes["gen_ai.provider.name"] = _provider_name(run.providers_for(model))
            attributes["gen_ai.request.model"] = model.model
        else:
            attributes["gen_ai.provider.name"] = "threadloom"
        links = [self._trace.Link(c, {"threadloom.link": "joined_send"}) for c in run.trace_links]
        parent = None
        if run.trace_previous is not None:  # a later run of the same task: a new trace
            parent = self._context.Context()
            links.append(self._trace.Link(run.trace_previous, {"threadloom.link": "previous_run"}))
        span = self.tracer.start_span(
            f"invoke_agent {agent.name}",
            context=parent,
            kind=self._kind.INTERNAL,
            attributes=attributes,
            links=links,
        )
        run.trace_links = ()
        run.trace_cost = 0.0
        run.span = span
        run.trace_token = self._context.attach(self._trace.set_span_in_context(span))

    def end_run(self, run: Run, reason: str) -> None:
        """Close ``run``'s span with its status and reason code (and cost); a failed run's
        span has the error status."""
        span = run.span
        if span is None:
            return
        run.span = None
        token, run.trace_token = run.trace_token, None
        if token is not None:
            with contextlib.suppress(Exception):  # detached already if the task moved on
                self._context.detach(token)
        failed = reason in FAILED_REASONS
        span.set_attribute("threadloom.run.status", "failed" if failed else "idle")
        span.set_attribute("threadloom.run.reason", reason)
        span.set_attribute("threadloom.run.steps", run.run_steps)
        span.set_attribute("threadloom.cost_usd", round(run.trace_cost, 12))
        if failed:
            failure = run.failure
            text = failure.message if failure is not None else REASON_ERRORS[reason][1]
            span.set_attribute("error.type", reason)
            span.set_status(self._error(self._error_code, text))
        run.trace_previous = span.get_span_context()
        span.end()

    # -- model calls -------------------------------------------------------------------
    def start_chat(
        self,
        env: StepEnv,
        provider_name: str,
        model: Any,
        request: ProviderRequest,
        attempt: int,
        log_id: str,
    ) -> tuple[Any, Any]:
        """Open the span of one model request attempt, current while it streams; returns
        ``(span, token)``."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name,
            "gen_ai.request.model": request.model,
            "gen_ai.request.stream": True,
            "gen_ai.conversation.id": env.state.thread_id,
            "threadloom.model": model.name,
            "threadloom.prompt": env.prompt.name,
            "threadloom.attempt": attempt,
            "threadloom.log.id": log_id,
        }
        if request.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_output_tokens
        if request.output is not None:  # a declared output type (spec 24 §24.2)
            attributes["gen_ai.output.type"] = "json"
        if self.capture_content:
            system, messages = input_messages(request)
            if system:
                attributes["gen_ai.system_instructions"] = _content(system)
            attributes["gen_ai.input.messages"] = _content(messages)
        span = self.tracer.start_span(
            f"chat {request.model}", kind=self._kind.CLIENT, attributes=attributes
        )
        return span, self._context.attach(self._trace.set_span_in_context(span))

    def end_chat(
        self, env: StepEnv, span: Any, token: Any, result: ModelResult, request_model: str
    ) -> None:
        """Close an attempt's span with the response: model, id, finish reason, tokens,
        cost (added to the run's)."""
        self._context.detach(token)
        usage = result.usage
        row = result.log_row
        cost = row.cost_total if row is not None else None
        attributes: dict[str, Any] = {
            "gen_ai.response.model": result.response_model or request_model,
            "gen_ai.response.finish_reasons": (result.finish_reason,),
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
            "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
        }
        if result.response_id:
            attributes["gen_ai.response.id"] = result.response_id
        if cost is not None:
            attributes["threadloom.cost_usd"] = cost
            env.run.trace_cost += cost
        if self.capture_content:
            attributes["gen_ai.output.messages"] = _content(output_messages(result))
        span.set_attributes(attributes)
        span.end()

    def fail_chat(self, span: Any, token: Any, error: BaseException, code: str) -> None:
        """Close a failed attempt's span: error status, ``error.type`` the provider error's
        code, the exception as an event."""
        self._context.detach(token)
        span.set_attribute("error.type", code)
        span.record_exception(error)
        span.set_status(self._error(self._error_code, str(error)))
        span.end()

    def cancel(self, span: Any, token: Any) -> None:
        """Close the span of an operation a stop or an abort cancelled (no error: the run's
        span says why it ended)."""
        self._context.detach(token)
        span.set_attribute("threadloom.cancelled", True)
        span.end()

    # -- compaction (spec 23) --------------------------------------------------------
    def compacted(self, span: Any, record: Any) -> None:
        """Record a compaction as the event ``gen_ai.conversation.compacted`` on ``span``
        (the run's, for the threshold trigger) or else on the current span (an API call's,
        a tool's)."""
        target = span if span is not None else self._trace.get_current_span()
        attributes: dict[str, Any] = {
            "gen_ai.conversation.id": record.thread_id,
            "threadloom.compaction.id": record.id,
            "threadloom.compaction.trigger": record.trigger,
            "threadloom.compaction.first_message_id": record.first_message_id,
            "threadloom.compaction.last_message_id": record.last_message_id,
            "threadloom.compaction.message_count": record.message_count,
            "gen_ai.usage.input_tokens": record.input_tokens,
            "gen_ai.usage.output_tokens": record.output_tokens,
        }
        if record.model is not None:
            attributes["gen_ai.request.model"] = record.model
        target.add_event("gen_ai.conversation.compacted", attributes)

    # -- tool calls --------------------------------------------------------------------
    def start_tool(self, env: StepEnv, call: ToolCall) -> tuple[Any, Any]:
        """Open the span of one tool call, current while it runs."""
        name = call.function.name
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": env.state.thread_id,
        }
        offered = env.offered.get(name)
        kind = getattr(offered, "kind", None)
        if name in CHILD_TOOLS:  # offered as runtime tools, they start or message a child
            kind = "subagent"
        if isinstance(kind, str):
            attributes["threadloom.tool.kind"] = kind
        description = getattr(offered, "description", None)
        if isinstance(description, str) and description:
            attributes["gen_ai.tool.description"] = description
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = call.function.arguments or "{}"
        span = self.tracer.start_span(
            f"execute_tool {name}", kind=self._kind.INTERNAL, attributes=attributes
        )
        return span, self._context.attach(self._trace.set_span_in_context(span))

    def end_tool(self, span: Any, token: Any, outcome: CallOutcome) -> None:
        """Close a tool call's span: an error result gives the error status."""
        self._context.detach(token)
        result = outcome.result
        span.set_attribute("threadloom.tool.status", result.status)
        if result.status == "error":
            span.set_attribute("error.type", "tool_error" if outcome.executed else "tool_refused")
            span.set_status(self._error(self._error_code, result.error or "tool error"))
        elif self.capture_content and result.result is not None:
            span.set_attribute("gen_ai.tool.call.result", result.result)
        span.end()


__all__ = [
    "CAPTURE_ENV",
    "CONVENTIONS",
    "ENABLE_ENV",
    "Tracing",
    "TracingOptions",
    "input_messages",
    "open_tracing",
    "output_messages",
]
