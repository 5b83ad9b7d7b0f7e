"""The runtime's Prometheus instruments (spec 17 §17.1, docs/metrics.md): a leaf that the
engine and the node count on, and the server exposes (``server/metrics.py``).

Event-like values — turns, steps, runs started and ended, model requests with their
latency, tokens and cost, tool calls, lost runs settled — are counters and histograms of
the ``prometheus-client`` library, incremented where the thing already happens once. Each
:class:`Metrics` has a registry of its own (never the library's global one), so that two
runtimes in one process (tests, embedding) count apart. State-like values (threads by run
state, the queue, leases) are read from the store at scrape time by ``server/metrics.py``.

Label values are bounded: model, agent and tool names of the project's definitions,
reason codes, HTTP route templates — never thread, user or message ids.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds of a model request: from a fast cached answer to a long reasoning one."""

SETTLE_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 45.0, 60.0, 120.0, 300.0)
"""Seconds from a lost run's last heartbeat to its settlement (spec 12 §12.6.1: within
30 s where the timings are valid)."""

TOKEN_KINDS = ("input", "output", "cached", "reasoning")

UNOFFERED_TOOL = "(not_offered)"
"""The ``tool`` label of a call of a tool the step did not offer (a name the model made
up: never a label value of its own)."""


class Metrics:
    """One runtime's instruments, on ``registry`` (a new one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.runs_started = Counter(
            "threadloom_runs_started", "Runs started on this node, by agent.", ["agent"], registry=r
        )
        self.runs_ended = Counter(
            "threadloom_runs_ended",
            "Runs ended on this node, by the status they settled in (idle or failed) and its"
            " reason code (spec 04 §4.22); lost runs settled here included.",
            ["state", "reason"],
            registry=r,
        )
        self.turns = Counter(
            "threadloom_turns",
            "Completed turns (spec 04 §4.8.3), by agent and side.",
            ["agent", "side"],
            registry=r,
        )
        self.steps = Counter(
            "threadloom_steps", "Model steps taken, by agent.", ["agent"], registry=r
        )
        self.model_requests = Counter(
            "threadloom_model_requests",
            "Model request attempts, by model (the definition's name), provider and outcome"
            " (ok, or the provider error's code).",
            ["model", "provider", "outcome"],
            registry=r,
        )
        self.model_latency = Histogram(
            "threadloom_model_request_duration_seconds",
            "Seconds of a successful model request attempt, from sending it to its last"
            " chunk, by model and provider.",
            ["model", "provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "threadloom_model_tokens",
            "Tokens of model responses, by model and kind (input, output, cached,"
            " reasoning; cached and reasoning are parts of input and output).",
            ["model", "kind"],
            registry=r,
        )
        self.cost = Counter(
            "threadloom_model_cost_usd",
            "Cost of model requests in US dollars, by model (requests of models without a"
            " price add nothing).",
            ["model"],
            registry=r,
        )
        self.tool_calls = Counter(
            "threadloom_tool_calls",
            "Tool calls whose result was stored, by tool and status (success or error).",
            ["tool", "status"],
            registry=r,
        )
        self.lost_runs = Counter(
            "threadloom_lost_runs_settled",
            "Lost runs this node settled (spec 12 §12.6.3), by reason.",
            ["reason"],
            registry=r,
        )
        self.lost_settle = Histogram(
            "threadloom_lost_run_settle_seconds",
            "Seconds from the last heartbeat of the node that lost a run to the run's"
            " settlement here (PostgreSQL, where nodes heartbeat).",
            buckets=SETTLE_BUCKETS,
            registry=r,
        )

    # -- what the engine reports ---------------------------------------------------------
    def model_ok(self, model: str, provider: str, seconds: float, row: Any) -> None:
        """A model request attempt answered; ``row`` its log row (tokens and cost)."""
        self.model_requests.labels(model, provider, "ok").inc()
        self.model_latency.labels(model, provider).observe(seconds)
        tokens = self.tokens
        for kind, value in (
            ("input", row.input_tokens),
            ("output", row.output_tokens),
            ("cached", row.cached_tokens),
            ("reasoning", row.reasoning_tokens),
        ):
            if value:
                tokens.labels(model, kind).inc(value)
        if row.cost_total:
            self.cost.labels(model).inc(row.cost_total)

    def model_failed(self, model: str, provider: str, code: str) -> None:
        self.model_requests.labels(model, provider, code or "unknown").inc()

    def run_ended(self, reason: str, failed: bool) -> None:
        self.runs_ended.labels("failed" if failed else "idle", reason).inc()

    def lost_run(self, reason: str, since_heartbeat_s: float | None) -> None:
        self.lost_runs.labels(reason).inc()
        if since_heartbeat_s is not None:
            self.lost_settle.observe(max(0.0, since_heartbeat_s))
