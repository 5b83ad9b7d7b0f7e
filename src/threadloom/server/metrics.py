"""``GET /metrics``: the Prometheus exposition of a node (spec 17 §17.1, docs/metrics.md),
and the HTTP request metrics the outer pipeline counts.

A scrape joins three sources into one answer, in the text format (or OpenMetrics when the
scraper asks for it), with ``prometheus-client``:

- the runtime's counters and histograms (``threadloom/metrics.py``: runs, turns, model
  requests, tokens, cost, tool calls, lost runs), counted where those things happen;
- the HTTP requests of this app (:class:`HttpMetrics`), by method, route template and
  status;
- gauges read at scrape time: one aggregate read of the store (threads by run state and
  reason, the queue, leases by node — ``Store.operating_stats``; the same value on every
  node of a fleet, named ``threadloom_store_*``), and this node's own state (open streams,
  runs it runs, its sweeper).

The route is not part of the JSON API (not in ``/openapi.json``). It answers a request
with ``Authorization: Bearer <THREADLOOM_METRICS_TOKEN>`` or an admin principal (the
admin token, an admin's key or session; the local principal of local development mode);
no credential is a 401, another principal a 403, and ``THREADLOOM_METRICS=off`` a 404.
One process serves a node, so no multiprocess mode of the library is needed.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import threadloom
from threadloom.metrics import Counts, Timings
from threadloom.server import deps
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.store.base import OperatingStats

PATH = "/metrics"

HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
UNMATCHED = "(unmatched)"
"""The ``route`` label of a request no route matched (a 404, a refused preflight)."""


class HttpMetrics:
    """The HTTP requests of one app (counted as the runtime's are: ``threadloom/metrics.py``)."""

    def __init__(self) -> None:
        self.requests = Counts(
            "threadloom_http_requests",
            "HTTP requests answered, by method, route template and status code.",
            ["method", "route", "status"],
        )
        self.duration = Timings(
            "threadloom_http_request_duration_seconds",
            "Seconds from a request's arrival to the end of its answer, by method and route"
            " template (a stream's answer lasts as long as the stream).",
            ["method", "route"],
            HTTP_BUCKETS,
        )

    def observe(self, method: str, route: object, status: int, seconds: float) -> None:
        """One request answered (the pipeline's ``Observe``)."""
        if method not in METHODS:
            method = "OTHER"
        template = getattr(route, "path_format", None) or getattr(route, "path", None)
        label = template if isinstance(template, str) and template else UNMATCHED
        self.requests.add((method, label, str(status)))
        self.duration.observe((method, label), seconds)

    def families(self) -> Iterator[Metric]:
        yield self.requests.family()
        yield self.duration.family()


def _node_id(ctx: deps.ServerContext) -> str:
    """This node's id: the runtime's (its leases carry it), else the settings'."""
    return ctx.runtime.cluster.node_id or ctx.settings.node_id


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


class _Scrape(Collector):
    """What one scrape answers: the registries' samples and the gauges read for it."""

    def __init__(
        self,
        registries: Iterable[CollectorRegistry],
        http: HttpMetrics | None,
        ctx: deps.ServerContext,
        stats: OperatingStats | None,
        read_s: float,
    ) -> None:
        self.registries = tuple(registries)
        self.http = http
        self.ctx = ctx
        self.stats = stats
        self.read_s = read_s

    def collect(self) -> Iterator[Metric]:
        for registry in self.registries:
            yield from registry.collect()
        if self.http is not None:
            yield from self.http.families()
        yield from self._store()
        yield from self._node()

    def _store(self) -> Iterator[Metric]:
        stats = self.stats
        yield _gauge(
            "threadloom_store_up",
            "1 when this scrape's read of the store succeeded, else 0 (the store's gauges"
            " are then missing).",
            1 if stats is not None else 0,
        )
        yield _gauge(
            "threadloom_store_read_seconds",
            "Seconds this scrape's aggregate read of the store took.",
            self.read_s,
        )
        if stats is None:
            return
        threads = GaugeMetricFamily(
            "threadloom_store_threads",
            "Threads by their run status: state (idle, running, failed) and reason code of"
            " the last run's end (empty: none). Store-wide: every node reports the same.",
            labels=["state", "reason"],
        )
        for (state, reason), count in sorted(stats.threads.items()):
            threads.add_metric([state, reason], count)
        yield threads
        yield _gauge(
            "threadloom_store_queued_messages",
            "Messages waiting in threads' queues (store-wide).",
            stats.queued_messages,
        )
        yield _gauge(
            "threadloom_store_queued_threads",
            "Threads with at least one waiting message (store-wide).",
            stats.queued_threads,
        )
        oldest = stats.oldest_queued_us
        yield _gauge(
            "threadloom_store_queue_oldest_age_seconds",
            "Age of the oldest waiting message in seconds; 0 when none waits (store-wide).",
            max(0.0, time.time() - oldest / 1e6) if oldest is not None else 0.0,
        )
        leases = GaugeMetricFamily(
            "threadloom_store_leases",
            "Running threads by the node holding their lease (store-wide; on a store one"
            " process runs, that process's node id).",
            labels=["node"],
        )
        own = _node_id(self.ctx)
        for node, count in sorted(stats.leases.items()):
            leases.add_metric([node or own], count)
        yield leases

    def _node(self) -> Iterator[Metric]:
        ctx = self.ctx
        runtime = ctx.runtime
        node = _node_id(ctx)
        info = GaugeMetricFamily(
            "threadloom_node_info",
            "1, with this node's id, Threadloom version and store kind as labels.",
            labels=["node", "version", "store"],
        )
        info.add_metric([node, threadloom.__version__, runtime.store.kind], 1)
        yield info
        yield _gauge(
            "threadloom_node_draining",
            "1 while this node drains or shuts down (its health answers 503), else 0.",
            1 if ctx.draining else 0,
        )
        yield _gauge(
            "threadloom_node_runs_active",
            "Runs this node runs now.",
            len(runtime.runs.active),
        )
        yield _gauge(
            "threadloom_stream_subscribers",
            "Open WebSocket and SSE streams of this node (thread streams, log streams,"
            " /api/events).",
            ctx.open_streams,
        )
        replica = runtime.store.replica_stats()
        if replica:
            reads = CounterMetricFamily(
                "threadloom_replica_reads",
                "Reads of GET pages and thread lists with a read replica configured, by who"
                " answered: replica, or the primary because the replica lagged, cancelled"
                " the read (conflict) or was unreachable (spec 17 §17.5.4).",
                labels=["node", "served"],
            )
            for served, count in replica.items():
                reads.add_metric([node, served], count)
            yield reads
        liveness = runtime.liveness
        if liveness is None:
            return
        sweeps = CounterMetricFamily(
            "threadloom_node_sweeps",
            "Sweeps this node started (lost runs, unclaimed queues; spec 12 §12.6).",
            labels=["node"],
        )
        sweeps.add_metric([node], liveness.sweeps)
        yield sweeps
        if liveness.swept_at is not None:
            lag = GaugeMetricFamily(
                "threadloom_node_sweep_age_seconds",
                "Seconds since this node's last sweep ended: the sweeper's lag (healthy:"
                " under 1.2 × THREADLOOM_SWEEP_SECONDS plus a sweep's duration).",
                labels=["node"],
            )
            lag.add_metric([node], max(0.0, time.time() - liveness.swept_at))
            yield lag
        fenced = GaugeMetricFamily(
            "threadloom_node_fenced",
            "1 while this node has fenced itself (its heartbeat did not reach the database"
            " in time), else 0.",
            labels=["node"],
        )
        fenced.add_metric([node], 1 if liveness.fenced else 0)
        yield fenced
        failovers = CounterMetricFamily(
            "threadloom_node_failovers",
            "Database failovers this node found (a new PostgreSQL timeline: its runs were"
            " dropped and settled, spec 17 §17.5).",
            labels=["node"],
        )
        failovers.add_metric([node], liveness.cluster.failovers)
        yield failovers


async def _allowed(request: Request, ctx: deps.ServerContext) -> None:
    """The metrics token, or an admin principal; else the principal's refusal."""
    token = ctx.settings.metrics_token
    if token is not None:
        presented = deps.bearer(request)
        if presented is not None and hmac.compare_digest(presented.encode(), token.encode()):
            return
    who = await deps.principal(request)
    if not who.is_admin:
        raise ApiError(403, "admin_required", "Forbidden: Admin access required")


router = Router(include_in_schema=False)


@router.get(PATH)
async def metrics(request: Request) -> Response:
    ctx = deps.context(request)
    if not ctx.settings.metrics:
        raise ApiError(404, "not_found", "Not found")
    await _allowed(request, ctx)
    runtime = ctx.runtime
    started = time.perf_counter()
    stats: OperatingStats | None
    try:
        stats = await runtime.store.operating_stats()
    except Exception:  # a scrape still answers while the database is away
        stats = None
    read_s = time.perf_counter() - started
    http: Any = getattr(request.app.state, "http_metrics", None)
    http = http if isinstance(http, HttpMetrics) else None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Scrape([runtime.metrics.registry], http, ctx, stats, read_s))
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(
        encoder(registry), media_type=content_type, headers={"cache-control": "no-store"}
    )


def install(app: FastAPI) -> None:
    app.include_router(router)
