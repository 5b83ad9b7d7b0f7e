"""Spec 17 §17.1: ``GET /metrics`` — a real server on both stores is scraped before and
after a run with a tool call, and the values move with the run; who may read it; the text
is Prometheus's (parsed with ``prometheus_client.parser``); gauges read from the store at
scrape time (threads by run state, the queue, leases, open streams)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import Api
from threadloom import Agent, Runtime, Side, ThreadState
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage
from threadloom.records import ThreadStatus
from threadloom.server.app import create_app
from threadloom.server.settings import ServerSettings, SettingsError

TOKEN = "m" * 40
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, by name and labels (the parser refuses a bad text)."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


async def scrape(api: Api, token: str = TOKEN) -> Samples:
    response = await api.client(None, Authorization=f"Bearer {token}").get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def metered() -> tuple[Any, ...]:
    """Agent ``metered``: a priced model that calls ``ping`` once, then answers."""

    @tool
    def ping(text: str) -> str:
        """Answer pong."""
        return f"pong {text}"

    def reply(request: ProviderRequest) -> Reply:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return Reply.text("done")
        return Reply.tool_calls(Call("ping", {"text": "x"}))

    return (
        ping,
        Model(
            name="metered_model",
            provider=ScriptedProvider(reply),
            model="scripted-metered",
            input_price=3.0,
            output_price=15.0,
        ),
        Prompt(name="metered_prompt", model="metered_model", system="You ping.", tools=["ping"]),
        Agent(name="metered", side_a=Side(prompt="metered_prompt"), side_b=Side(label="User")),
    )


def settings(**overrides: Any) -> ServerSettings:
    return ServerSettings(auth="required", metrics_token=TOKEN, **overrides)


async def test_c17_001_a_run_moves_the_counters(make_api: Callable[..., Any]) -> None:
    """C17-001: after a run with one tool call, a scrape shows one more run, turn, tool
    call, two more model requests with their latency, tokens and cost (the thread's cost
    report's), and the HTTP requests by route template and status."""
    api: Api = await make_api(settings(), extra=metered())
    before = await scrape(api)
    thread = await api.thread("metered")
    sent = await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    assert sent.status_code in (200, 201, 202), sent.text
    await api.settle(thread)
    after = await scrape(api)

    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved("threadloom_runs_started_total", agent="metered") == 1
    assert moved("threadloom_runs_ended_total", state="idle", reason="stop_on_response") == 1
    assert moved("threadloom_turns_total", agent="metered", side="a") == 1
    assert moved("threadloom_steps_total", agent="metered") == 2
    assert moved("threadloom_tool_calls_total", tool="ping", status="success") == 1
    assert moved("threadloom_model_requests_total", model="metered_model", outcome="ok") == 2
    count = "threadloom_model_request_duration_seconds_count"
    assert moved(count, model="metered_model") == 2
    assert moved("threadloom_model_request_duration_seconds_sum", model="metered_model") > 0
    assert moved("threadloom_model_tokens_total", model="metered_model", kind="input") > 0
    assert moved("threadloom_model_tokens_total", model="metered_model", kind="output") > 0
    report = (await api.client().get(f"/api/threads/{thread}/cost")).json()
    cost = moved("threadloom_model_cost_usd_total", model="metered_model")
    assert cost > 0
    assert cost == pytest.approx(report["totalCost"], rel=1e-9, abs=1e-12)
    assert (
        moved(
            "threadloom_http_requests_total",
            method="POST",
            route="/api/threads/{id}/messages",
            status=str(sent.status_code),
        )
        == 1
    )
    assert moved("threadloom_http_requests_total", method="POST", route="/api/threads") == 1
    # the store's gauges: this store has one idle thread ended by stop_on_response
    assert value(after, "threadloom_store_threads", state="idle", reason="stop_on_response") == 1
    assert value(after, "threadloom_store_up") == 1
    assert value(after, "threadloom_store_queued_messages") == 0


async def test_c17_002_who_may_read_it(make_api: Callable[..., Any]) -> None:
    """C17-002: the metrics token or an admin reads ``/metrics``; no credential is a 401, a
    wrong token a 401, a user's key a 403 — none of them with a metric in the body; the
    metrics token reads nothing else; ``THREADLOOM_METRICS=off`` answers 404."""
    api: Api = await make_api(settings())
    none = await api.client(None).get("/metrics")
    wrong = await api.client(None, Authorization=f"Bearer {'x' * 40}").get("/metrics")
    user = await api.client("alice").get("/metrics")
    assert (none.status_code, wrong.status_code, user.status_code) == (401, 401, 403)
    for refused in (none, wrong, user):
        assert "threadloom_" not in refused.text
        assert refused.json()["code"] in ("unauthorized", "admin_required")
    assert (await api.client("root").get("/metrics")).status_code == 200
    assert (await api.client(None, Authorization=f"Bearer {TOKEN}").get("/metrics")).is_success
    other = await api.client(None, Authorization=f"Bearer {TOKEN}").get("/api/threads")
    assert other.status_code == 401
    spec = (await api.client("root").get("/openapi.json")).json()
    assert "/metrics" not in spec["paths"]
    off = create_app(api.runtime, settings(metrics=False))  # the same runtime, served again
    transport = httpx.ASGITransport(app=off)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        gone = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert gone.status_code == 404 and "threadloom_" not in gone.text


def test_c17_003_the_token_setting() -> None:
    """C17-003: ``THREADLOOM_METRICS_TOKEN`` shorter than 32 characters refuses to start;
    ``THREADLOOM_METRICS=off`` turns the route off."""
    with pytest.raises(SettingsError, match="THREADLOOM_METRICS_TOKEN"):
        ServerSettings.from_env({"THREADLOOM_METRICS_TOKEN": "short"})
    read = ServerSettings.from_env({"THREADLOOM_METRICS_TOKEN": TOKEN, "THREADLOOM_METRICS": "off"})
    assert (read.metrics_token, read.metrics) == (TOKEN, False)
    assert ServerSettings.from_env({}).metrics is True


async def test_c17_004_names_and_formats(make_api: Callable[..., Any]) -> None:
    """C17-004: every family is named ``threadloom_…``, counters end in ``_total``; a
    scraper that asks for OpenMetrics gets it."""
    api: Api = await make_api(settings(), extra=metered())
    thread = await api.thread("metered")
    await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    client = api.client(None, Authorization=f"Bearer {TOKEN}")
    text = (await client.get("/metrics")).text
    families = list(text_string_to_metric_families(text))
    assert len(families) >= 20
    for family in families:
        assert family.name.startswith("threadloom_"), family.name
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        for sample in family.samples:  # no id of a thread, user or message as a label
            assert thread not in sample.labels.values()
    open_metrics = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert open_metrics.text.rstrip().endswith("# EOF")


async def test_c17_005_state_read_at_scrape_time(make_api: Callable[..., Any]) -> None:
    """C17-005: while a run waits on its model, with a second message queued behind it and
    an SSE stream open: one running thread, its lease on this node, one queued message, one
    stream subscriber; after it settles the gauges fall back."""
    api: Api = await make_api(settings())
    thread = await api.thread("gate")
    client = api.client()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "one"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    await client.post(f"/api/threads/{thread}/messages", json={"content": "two"})
    node = api.runtime.cluster.node_id or api.app.settings.node_id
    async with api.client().stream(
        "GET", f"/api/threads/{thread}/stream", headers={"Accept": "text/event-stream"}
    ) as stream:
        assert stream.status_code == 200
        during = await scrape(api)
    assert value(during, "threadloom_store_threads", state="running", reason="") == 1
    assert value(during, "threadloom_store_leases", node=node) == 1
    assert value(during, "threadloom_store_queued_messages") == 1
    assert value(during, "threadloom_store_queued_threads") == 1
    assert value(during, "threadloom_store_queue_oldest_age_seconds") >= 0
    assert value(during, "threadloom_node_runs_active") == 1
    assert value(during, "threadloom_stream_subscribers") == 1
    api.gate.open()
    await api.settle(thread)
    after = await scrape(api)
    assert value(after, "threadloom_store_threads", state="running", reason="") == 0
    assert total(after, "threadloom_store_leases") == 0
    assert value(after, "threadloom_store_queued_messages") == 0
    assert value(after, "threadloom_node_runs_active") == 0
    assert value(after, "threadloom_stream_subscribers") == 0
    assert (
        value(after, "threadloom_node_info", node=node, version=_version(), store=_kind(api)) == 1
    )


def _version() -> str:
    import threadloom

    return threadloom.__version__


def _kind(api: Api) -> str:
    return api.runtime.store.kind


async def test_c17_006_tool_errors_and_model_failures(make_api: Callable[..., Any]) -> None:
    """C17-006: a tool that raises counts as ``status="error"``; a call of a tool the step did
    not offer is labelled ``(not_offered)``, never with the name the model made up; a model
    that fails counts its attempts by the provider error's code and the run's end as
    ``failed``."""

    @tool
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("no")

    def reply(request: ProviderRequest) -> Reply:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return Reply.text("done")
        return Reply.tool_calls(Call("boom", {}), Call("made_up_tool_7f3a", {}))

    def failing(request: ProviderRequest) -> Reply:
        raise RuntimeError("the provider is down")

    extra = (
        boom,
        Model(name="boom_model", provider=ScriptedProvider(reply), model="scripted-boom"),
        Prompt(name="boom_prompt", model="boom_model", system="You fail.", tools=["boom"]),
        Agent(name="boomer", side_a=Side(prompt="boom_prompt"), side_b=Side(label="User")),
        Model(
            name="down_model",
            provider=ScriptedProvider(failing),
            model="scripted-down",
            max_attempts=1,
        ),
        Prompt(name="down_prompt", model="down_model", system="You fail."),
        Agent(name="down", side_a=Side(prompt="down_prompt"), side_b=Side(label="User")),
    )
    api: Api = await make_api(settings(), extra=extra)
    for agent in ("boomer", "down"):
        thread = await api.thread(agent)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        await api.settle(thread)
    after = await scrape(api)
    assert value(after, "threadloom_tool_calls_total", tool="boom", status="error") == 1
    assert value(after, "threadloom_tool_calls_total", tool="(not_offered)", status="error") == 1
    assert total(after, "threadloom_tool_calls_total", tool="made_up_tool_7f3a") == 0
    failed = total(after, "threadloom_model_requests_total", model="down_model")
    ok = total(after, "threadloom_model_requests_total", model="down_model", outcome="ok")
    assert (failed, ok) == (1, 0)
    assert total(after, "threadloom_runs_ended_total", state="failed") == 1
    assert value(after, "threadloom_store_threads", state="failed", reason="step_error") == 1


async def test_c17_007_a_lost_run_is_counted(db_url: str) -> None:
    """C17-007: a run lost with its process is counted when the next start settles it."""
    rt = await Runtime.open(db_url)
    state: ThreadState = await rt.create_thread("chat")
    await rt.store.set_status(state.thread_id, ThreadStatus(state="running", since=1, reason=None))
    await rt.close()
    reopened = await Runtime.open(db_url)
    try:
        samples = parse(_exposition(reopened))
        assert value(samples, "threadloom_lost_runs_settled_total", reason="execution_lost") == 1
        ended = value(
            samples, "threadloom_runs_ended_total", state="failed", reason="execution_lost"
        )
        assert ended == 1
    finally:
        await reopened.close()


def _exposition(runtime: Runtime) -> str:
    from prometheus_client import generate_latest

    return generate_latest(runtime.metrics.registry).decode()


@pytest.mark.postgres_only
async def test_c17_008_lost_run_settle_time_and_the_sweeper(db_url: str) -> None:
    """C17-008: a run held by a node whose last heartbeat was 20 s ago is settled by this
    node's sweep; the settle time (last heartbeat → settlement) is observed, at least those
    20 s; a scrape shows this node's sweeps and the age of its last sweep."""
    import psycopg

    from threadloom.node.liveness import NodeTimings

    timings = NodeTimings(heartbeat_s=0.2, ttl_s=1.0, sweep_s=0.3)
    rt = await Runtime.open(db_url, node_id="metrics-node", node_timings=timings)
    try:
        state: ThreadState = await rt.create_thread("chat")
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO nodes (node_id, host, pid, heartbeat_at)"
                " VALUES ('dead-node', 'elsewhere', 1, now() - interval '20 seconds')"
            )
            conn.execute(
                "UPDATE threads SET lease_node = 'dead-node' WHERE id = %s", (state.thread_id,)
            )
        await rt.store.set_status(
            state.thread_id, ThreadStatus(state="running", since=1, reason=None)
        )
        async with asyncio.timeout(10):
            while (await state.status()).state == "running":
                await asyncio.sleep(0.05)
        assert (await state.status()).reason == "execution_lost"
        app = create_app(rt, settings())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        samples = parse(answer.text)
        assert value(samples, "threadloom_lost_run_settle_seconds_count") == 1
        assert 20 <= value(samples, "threadloom_lost_run_settle_seconds_sum") < 30
        assert value(samples, "threadloom_lost_run_settle_seconds_bucket", le="15.0") == 0
        assert value(samples, "threadloom_lost_run_settle_seconds_bucket", le="30.0") == 1
        assert value(samples, "threadloom_node_sweeps_total", node="metrics-node") >= 1
        age = value(samples, "threadloom_node_sweep_age_seconds", node="metrics-node")
        assert 0 <= age < 5
        assert value(samples, "threadloom_node_fenced", node="metrics-node") == 0
    finally:
        await rt.close()


async def test_c17_009_http_labels_are_bounded(make_api: Callable[..., Any]) -> None:
    """C17-009: a request no route matches is labelled ``(unmatched)``, not with its path; a
    ``HEAD`` is labelled with the route of its ``GET`` twin; a path's ids never appear."""
    api: Api = await make_api(settings())
    client = api.client()
    thread = await api.thread()
    assert (await client.get("/api/no-such-route-4b1e")).status_code == 404
    assert (await client.head("/api/health")).status_code == 200
    assert (await client.get(f"/api/threads/{thread}")).status_code == 200
    samples = await scrape(api)
    requests = "threadloom_http_requests_total"
    assert value(samples, requests, method="GET", route="(unmatched)", status="404") == 1
    assert value(samples, requests, method="HEAD", route="/api/health", status="200") == 1
    assert value(samples, requests, method="GET", route="/api/threads/{id}", status="200") == 1
    labels = {v for (_, ls) in samples for _, v in ls}
    assert not any("no-such-route" in v or thread in v for v in labels)


async def test_c17_010_each_runtime_counts_apart(tmp_path: Any) -> None:
    """C17-010: each runtime counts on a registry of its own — two runtimes in one process
    do not add to each other's values, and the library's global registry holds no
    Threadloom metric."""
    from prometheus_client import REGISTRY

    from threadloom.testing import Reply as TestReply
    from threadloom.testing import ScriptedProvider as TestProvider

    def definitions() -> Any:
        from threadloom import Definitions

        return Definitions().add(
            Model(name="m", provider=TestProvider(lambda r: TestReply.text("hi")), model="s"),
            Prompt(name="p", model="m", system="Answer."),
            Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
        )

    one = await Runtime.open(f"sqlite:///{tmp_path / 'one.db'}", definitions=definitions())
    two = await Runtime.open(f"sqlite:///{tmp_path / 'two.db'}", definitions=definitions())
    try:
        state = await one.create_thread("a")
        await one.send_message(state.thread_id, "hello")
        await one.wait_idle(state.thread_id, 10)
        assert value(parse(_exposition(one)), "threadloom_turns_total", agent="a", side="a") == 1
        assert value(parse(_exposition(two)), "threadloom_turns_total", agent="a", side="a") == 0
        assert one.metrics.registry is not two.metrics.registry
        assert not [m.name for m in REGISTRY.collect() if m.name.startswith("threadloom_")]
    finally:
        await one.close()
        await two.close()
