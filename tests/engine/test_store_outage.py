"""A run whose writes fail because the database is down (spec 04 §4.21.1): a real Runtime on
a PostgreSQL server of the test's own (``pg_cluster.py``), stopped while a model answers.

SQLite has no server to lose: its file is the process's own, so these tests run on the
PostgreSQL store only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from pg_cluster import PgCluster, private_cluster, require_cluster
from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.script import Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest

TIMINGS = {
    "THREADLOOM_NODE_HEARTBEAT_SECONDS": "1",
    "THREADLOOM_NODE_TTL_SECONDS": "12",
    "THREADLOOM_SWEEP_SECONDS": "1",
}
"""The node fences itself after 7 s without a heartbeat: longer than the outages here, so
the node stays live through them (as with the default timings) and must mend its runs."""


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PgCluster, str]]:
    require_postgres()
    require_cluster()
    for key, value in TIMINGS.items():
        monkeypatch.setenv(key, value)
    with private_cluster() as cluster:
        name = f"tl_{uuid.uuid4().hex[:12]}"
        create_schema(name, cluster.url)
        try:
            yield cluster, schema_url(name, cluster.url)
        finally:
            drop_schema(name, cluster.url)


def _last_user(request: ProviderRequest) -> str:
    return next((m.text for m in reversed(request.messages) if m.role == "user"), "")


class Gated:
    """A model that answers ``first`` once ``gate`` is set, and echoes anything else."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def __call__(self, request: ProviderRequest) -> Reply:
        text = _last_user(request)
        if text == "first":
            self.waiting.set()
            await self.gate.wait()
            return Reply.text("answer one")
        return Reply.text(f"echo: {text}")


@pytest.fixture
async def gated(pg: tuple[PgCluster, str]) -> AsyncIterator[tuple[Runtime, Gated, PgCluster]]:
    cluster, url = pg
    model = Gated()
    defs = Definitions().add(
        Model(name="M", provider=ScriptedProvider(model), model="gated-1"),
        Prompt(name="P", model="M", system="Answer."),
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(url, definitions=defs)
    try:
        yield runtime, model, cluster
    finally:
        await runtime.close(drain=0)


async def _until(check: Any, timeout: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            value = await check()
        except Exception:
            value = None  # the store is still coming back
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{check.__name__} did not hold within {timeout:g} s")
        await asyncio.sleep(0.1)


async def test_c04_120_a_run_broken_by_the_store_is_settled_and_its_queue_delivered(
    gated: tuple[Runtime, Gated, PgCluster],
) -> None:
    """C04-120: T runs (its model waits), a second message is queued behind the run; the
    database stops; the model answers (every write of the step fails, the step error's log
    row too); the database starts again → without a restart of the runtime, T's run is
    settled ``failed``/``step_error`` with the store's error, the pending message is
    ``failed``, the step error's log row is written, and the queued message is delivered
    and answered by a new run."""
    runtime, model, cluster = gated
    thread = await runtime.create_thread("chat")
    statuses = runtime.events.subscribe(thread.thread_id, kinds=("status",), max_queue=1000)
    await runtime.send_message(thread.thread_id, "first")
    await asyncio.wait_for(model.waiting.wait(), 10)
    await runtime.send_message(thread.thread_id, "second")  # queued behind the run
    await asyncio.to_thread(cluster.stop, "fast")
    model.gate.set()
    run = runtime.runs.run_of(thread.thread_id)
    assert run is not None and run.task is not None
    await asyncio.wait_for(asyncio.shield(run.task), 20)  # its writes failed: it broke
    await asyncio.to_thread(cluster.start)

    async def settled_and_answered() -> bool:
        state = await runtime.thread(thread.thread_id)
        messages = (await state.get_messages(limit=100, order="asc")).messages
        return bool(messages) and messages[-1].content == "echo: second"

    await _until(settled_and_answered)
    state = await runtime.thread(thread.thread_id)
    messages = (await state.get_messages(limit=100, order="asc")).messages
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].status == "failed"  # the answer its broken step could not store
    assert (await state.status()).state == "idle"
    logs = await runtime.store.list_logs(thread.thread_id)
    errors = [row for row in logs if row.error_type == "step_execution_error"]
    assert len(errors) == 1, [(r.provider, r.model, r.error_type, r.error) for r in logs]
    broken_request = next(row for row in logs if row.provider == "scripted")
    assert broken_request.is_complete
    assert broken_request.error_type == "interrupted_incomplete"
    # the settlement between the runs: failed/step_error, saying what broke it
    seen = []
    while statuses.pending():
        seen.append((await statuses.get(1)).data["status"])
    statuses.close()
    assert [s["state"] for s in seen] == ["running", "failed", "running", "idle"], seen
    failed = [s for s in seen if s["state"] == "failed"]
    assert failed[0]["reason"] == "step_error"
    assert failed[0]["error"]["log_id"] == errors[0].id
    assert "127.0.0.1" in failed[0]["error"]["message"]  # the store's own words


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A schema of the shared PostgreSQL server (nothing restarts it)."""
    require_postgres()
    name = f"tl_{uuid.uuid4().hex[:12]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


async def test_c12_031_a_run_of_this_node_with_no_execution_is_settled_by_its_sweeper(
    pg_schema: str,
) -> None:
    """C12-031: a thread ``running`` under this node's lease while no run of it is
    registered here (as a run whose task ended without a settlement leaves it) → the
    node's own sweeper settles it ``failed``/``execution_lost`` (two sweeps later), and
    the thread runs again on the next send."""
    from store_probe import StoreProbe

    url = pg_schema
    defs = Definitions().add(
        Model(name="M", provider=ScriptedProvider.echo(), model="echo-1"),
        Prompt(name="P", model="M", system="Echo."),
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(url, definitions=defs)
    try:
        assert runtime.liveness is not None
        thread = (await runtime.create_thread("chat")).thread_id
        probe = StoreProbe(url)
        probe.rows(
            "UPDATE threads SET status_state = 'running', lease_node = ?,"
            " lease_token = lease_token + 1 WHERE id = ? RETURNING id",
            (runtime.store.node_id, thread),
        )
        assert not runtime.runs.owns(thread)

        async def settled() -> Any:
            status = await (await runtime.thread(thread)).status()
            return status if status.state != "running" else None

        status = await _until(settled, timeout=20)
        assert (status.state, status.reason) == ("failed", "execution_lost")
        await runtime.send_message(thread, "again")

        async def answered() -> bool:
            state = await runtime.thread(thread)
            messages = (await state.get_messages(limit=10, order="asc")).messages
            return bool(messages) and messages[-1].role == "assistant"

        await _until(answered)
    finally:
        await runtime.close(drain=0)
