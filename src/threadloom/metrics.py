"""The runtime's Prometheus instruments (spec 17 §17.1, docs/metrics.md): a leaf that the
engine and the node count on, and the server exposes (``server/metrics.py``).

Event-like values — turns, steps, runs started and ended, model requests with their
latency, tokens and cost, tool calls, lost runs settled — are counted where the thing
already happens once. Each :class:`Metrics` is a collector on a registry of its own (never
the library's global one), so that two runtimes in one process (tests, embedding) count
apart. State-like values (threads by run state, the queue, leases) are read from the store
at scrape time by ``server/metrics.py``.

Counting is a dictionary addition (:class:`Counts`, :class:`Timings`); ``prometheus-client``
makes the exposition from them (its metric families, its text and OpenMetrics encoders).
The library's own labelled ``Counter`` costs about 5 µs an increment (``labels()`` checks
and locks each time): ten of them made a turn 5 % more instructions
(``bench/instructions_bench.py``), over the turn's budget. Everything counts on the event
loop's thread, and a scrape reads there too, so no lock is needed.

Label values are bounded: model, agent and tool names of the project's definitions,
reason codes, HTTP route templates — never thread, user or message ids.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

Key = tuple[str, ...]

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds of a model request: from a fast cached answer to a long reasoning one."""

SETTLE_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 45.0, 60.0, 120.0, 300.0)
"""Seconds from a lost run's last heartbeat to its settlement (spec 12 §12.6.1: within
30 s where the timings are valid)."""

UNOFFERED_TOOL = "(not_offered)"
"""The ``tool`` label of a call of a tool the step did not offer (a name the model made
up: never a label value of its own)."""


class Counts:
    """A counter with labels: a value by label values (``name`` without ``_total``)."""

    __slots__ = ("documentation", "labels", "name", "values")

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.values: dict[Key, float] = {}

    def add(self, key: Key, amount: float = 1) -> None:
        values = self.values
        values[key] = values.get(key, 0) + amount

    def family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, value in sorted(self.values.items()):
            family.add_metric(key, value)
        return family


class Timings:
    """A histogram with labels: per label values, the count of each bucket and the sum."""

    __slots__ = ("bounds", "documentation", "labels", "name", "values")

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.bounds = tuple(buckets)
        self.values: dict[Key, list[float]] = {}
        """Per key: a count per bucket (the last one +Inf's), then the sum."""

    def observe(self, key: Key, value: float) -> None:
        slots = self.values.get(key)
        if slots is None:
            slots = self.values[key] = [0.0] * (len(self.bounds) + 2)
        slots[bisect_left(self.bounds, value)] += 1  # the first bucket with value <= le
        slots[-1] += value

    def family(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        edges = [*map(floatToGoString, self.bounds), "+Inf"]
        for key, slots in sorted(self.values.items()):
            running = 0.0
            buckets = []
            for edge, count in zip(edges, slots, strict=False):
                running += count
                buckets.append((edge, running))
            family.add_metric(key, buckets, sum_value=slots[-1])
        return family


class Metrics(Collector):
    """One runtime's instruments, exposed by ``registry`` (its own)."""

    def __init__(self) -> None:
        self.runs_started = Counts(
            "threadloom_runs_started", "Runs started on this node, by agent.", ["agent"]
        )
        self.runs_ended = Counts(
            "threadloom_runs_ended",
            "Runs ended on this node, by the status they settled in (idle or failed) and its"
            " reason code (spec 04 §4.22); aborted and lost runs settled here included.",
            ["state", "reason"],
        )
        self.turns = Counts(
            "threadloom_turns",
            "Completed turns (spec 04 §4.8.3), by agent and side.",
            ["agent", "side"],
        )
        self.steps = Counts("threadloom_steps", "Model steps taken, by agent.", ["agent"])
        self.model_requests = Counts(
            "threadloom_model_requests",
            "Model request attempts, by model (the definition's name), provider and outcome"
            " (ok, or the provider error's code).",
            ["model", "provider", "outcome"],
        )
        self.model_latency = Timings(
            "threadloom_model_request_duration_seconds",
            "Seconds of a successful model request attempt, from sending it to its last"
            " chunk, by model and provider.",
            ["model", "provider"],
            LATENCY_BUCKETS,
        )
        self.tokens = Counts(
            "threadloom_model_tokens",
            "Tokens of model responses, by model and kind (input, output, cached,"
            " reasoning; cached and reasoning are parts of input and output).",
            ["model", "kind"],
        )
        self.cost = Counts(
            "threadloom_model_cost_usd",
            "Cost of model requests in US dollars, by model (requests of models without a"
            " price add nothing).",
            ["model"],
        )
        self.tool_calls = Counts(
            "threadloom_tool_calls",
            "Tool calls whose result was stored, by tool and status (success or error).",
            ["tool", "status"],
        )
        self.lost_runs = Counts(
            "threadloom_lost_runs_settled",
            "Lost runs this node settled (spec 12 §12.6.3), by reason.",
            ["reason"],
        )
        self.lost_settle = Timings(
            "threadloom_lost_run_settle_seconds",
            "Seconds from the last heartbeat of the node that lost a run to the run's"
            " settlement here (PostgreSQL, where nodes heartbeat).",
            [],
            SETTLE_BUCKETS,
        )
        self.schedule_fires = Counts(
            "threadloom_schedule_fires",
            "Schedule fires settled on this node (spec 18), by outcome: fired, skipped (the"
            " overlap rule), missed (catch-up skip) or failed.",
            ["outcome"],
        )
        self.webhook_attempts = Counts(
            "threadloom_webhook_attempts",
            "Outbound webhook delivery attempts recorded on this node (spec 19), by the state"
            " they left the delivery in: delivered, pending (due again) or dead.",
            ["state"],
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for instrument in (
            self.runs_started,
            self.runs_ended,
            self.turns,
            self.steps,
            self.model_requests,
            self.model_latency,
            self.tokens,
            self.cost,
            self.tool_calls,
            self.lost_runs,
            self.lost_settle,
            self.schedule_fires,
            self.webhook_attempts,
        ):
            yield instrument.family()

    # -- what the engine reports ---------------------------------------------------------
    def model_ok(self, model: str, provider: str, seconds: float, row: Any) -> None:
        """A model request attempt answered; ``row`` its log row (tokens and cost)."""
        self.model_requests.add((model, provider, "ok"))
        self.model_latency.observe((model, provider), seconds)
        add = self.tokens.add
        if row.input_tokens:
            add((model, "input"), row.input_tokens)
        if row.output_tokens:
            add((model, "output"), row.output_tokens)
        if row.cached_tokens:
            add((model, "cached"), row.cached_tokens)
        if row.reasoning_tokens:
            add((model, "reasoning"), row.reasoning_tokens)
        if row.cost_total:
            self.cost.add((model,), row.cost_total)

    def model_failed(self, model: str, provider: str, code: str) -> None:
        self.model_requests.add((model, provider, code or "unknown"))

    def run_ended(self, reason: str, failed: bool) -> None:
        self.runs_ended.add(("failed" if failed else "idle", reason))

    def lost_run(self, reason: str, since_heartbeat_s: float | None) -> None:
        self.lost_runs.add((reason,))
        if since_heartbeat_s is not None:
            self.lost_settle.observe((), max(0.0, since_heartbeat_s))
