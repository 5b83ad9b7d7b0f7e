"""Read replicas (spec 17 §17.5.4): ``GET`` pages and thread lists read on a streaming
standby, never older than the primary was when the request began."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from replication import replicated, require_replication
from test_c17_lost_writes import _cut_replication

from multinode.cluster_harness import Node, start_cluster
from pg_support import schema_url
from test_cli_run import run_cli
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.errors import StoreError, StoreUnavailable
from threadloom.providers.scripted import ScriptedProvider
from threadloom.store.base import NewThread
from threadloom.store.postgres.store import PostgresStore
from threadloom.store.shapes import ThreadQuery


def _served(node: Node) -> dict[str, float]:
    """The node's ``threadloom_replica_reads_total`` by ``served``."""
    text = httpx.get(f"{node.base}/metrics", timeout=10).raise_for_status().text
    return {
        sample.labels["served"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "threadloom_replica_reads_total"
    }


def _page_contents(node: Node, thread: str) -> list[str]:
    page = node.get(f"/api/threads/{thread}/messages", order="asc", limit=1000)
    assert page.status_code == 200, page.text
    return [m["content"] for m in page.json()["messages"] if m["role"] == "user"]


def _listed(node: Node) -> set[str]:
    found = node.get("/api/threads", limit=1000)
    assert found.status_code == 200, found.text
    return {t["id"] for t in found.json()["threads"]}


def test_c17_071_c17_072_replica_pages_read_your_writes_then_fall_back(tmp_path: Path) -> None:
    """C17-071: asynchronous standby, a node reading pages and lists there; each send or
    create is followed at once by a read through the node → it holds what was just
    acknowledged, and the replica answered (``served="replica"`` counted). C17-072: the
    standby stops receiving → a page still holds the new message (the primary answered,
    ``lagging``); the standby stopped → pages and lists answer 200 (``unreachable``)."""
    require_replication()
    with (
        replicated(synchronous=False) as pair,
        start_cluster(
            tmp_path,
            n=1,
            pg_url=pair.primary_url,
            THREADLOOM_DATABASE_READ_URL=pair.standby_url,
        ) as cluster,
    ):
        node = cluster.nodes[0]
        threads: list[str] = []
        for t in range(6):
            thread = cluster.create_thread(node)
            threads.append(thread)
            assert thread in _listed(node), "a thread just created is listed"
            for i in range(3):
                cluster.send(node, thread, f"t{t}-m{i}")
                assert f"t{t}-m{i}" in _page_contents(node, thread)
        served = _served(node)
        # 6 lists and 18 pages; the page cache may answer a repeated page unread
        assert served.get("replica", 0) >= 12, served
        assert served.get("unreachable", 0) == 0, served

        _cut_replication(pair.standby_url, pair.primary_url)
        cluster.send(node, threads[0], "after-cut")
        assert "after-cut" in _page_contents(node, threads[0])
        assert _served(node).get("lagging", 0) >= 1

        pair.stop_standby()
        cluster.send(node, threads[1], "standby-down")
        assert "standby-down" in _page_contents(node, threads[1])
        assert set(threads) <= _listed(node)
        assert _served(node).get("unreachable", 0) >= 1
        assert "the read replica is unreachable" in node.output()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {
                "THREADLOOM_DATABASE_URL": "sqlite:///p.db",
                "THREADLOOM_DATABASE_READ_URL": "postgresql://postgres@127.0.0.1:1/x",
            },
            "PostgreSQL",
        ),
        (
            {
                "THREADLOOM_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x",
                "THREADLOOM_DATABASE_READ_URL": "mysql://replica/x",
            },
            "postgresql://",
        ),
    ],
)
def test_c17_073_a_read_url_needs_postgresql(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    """C17-073: a read URL with an SQLite store, or one that is not PostgreSQL's → exit 2."""
    done = run_cli("serve", "--port", "0", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert "THREADLOOM_DATABASE_READ_URL" in done.stderr and named in done.stderr


def test_c17_074_a_replica_read_waits_for_the_primarys_position() -> None:
    """C17-074: the standby applies commits 300 ms late; a thread created on the primary
    is found at once by a list through ``replica()`` that waited for the standby (it
    answered); with a 50 ms wait the primary answers (``lagging``) and finds it too; a
    write through the view is refused."""
    require_replication()
    with replicated(synchronous=False, standby_settings="recovery_min_apply_delay = 300\n") as p:
        asyncio.run(_store_reads(p.primary_url, p.standby_url))


async def _store_reads(primary_url: str, standby_url: str) -> None:
    store = await PostgresStore.open(primary_url, read_url=standby_url, read_wait_s=5.0)
    hasty = await PostgresStore.open(primary_url, read_url=standby_url, read_wait_s=0.05)
    try:
        replica = store.replica()
        assert replica is not store
        first = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
        began = time.monotonic()
        rows, _ = await replica.query_threads(ThreadQuery(limit=100))
        assert first.id in {r.id for r in rows}
        assert time.monotonic() - began >= 0.2, "the read waited for the standby's replay"
        assert store.replica_stats()["replica"] == 1

        second = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
        rows, _ = await hasty.replica().query_threads(ThreadQuery(limit=100))
        assert second.id in {r.id for r in rows}
        assert hasty.replica_stats() == {
            "replica": 0,
            "lagging": 1,
            "conflict": 0,
            "unreachable": 0,
        }
        with pytest.raises(StoreError, match="read replica takes no writes"):
            await replica.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
        with psycopg.connect(standby_url, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    finally:
        await hasty.close()
        await store.close()


async def test_c17_075_a_failover_forgets_the_cached_rows() -> None:
    """C17-075: a runtime on the multi-host URL of a primary and an asynchronous standby;
    a turn leaves the thread's history warm; the primary killed and the standby promoted;
    the next write finds the new timeline → the runtime's failover listeners (the server's
    page cache) are called once, the warm history is not used again, and a message sent
    then is answered from the history read anew."""
    require_replication()
    with replicated(synchronous=False) as pair:
        schema = f"tl_fo_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pair.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        runtime = await Runtime.open(
            schema_url(schema, pair.url),
            definitions=Definitions().add(
                Model(name="M", provider=ScriptedProvider(), model="scripted-1"),
                Prompt(name="P", model="M", system="You answer."),
                Agent(name="a", side_a=Side(prompt="P"), side_b=Side(label="User")),
            ),
        )
        forgot: list[int] = []
        runtime.failover_forgets.append(lambda: forgot.append(1))
        try:
            state = await runtime.create_thread("a")
            tid = state.thread_id
            await runtime.send_message(tid, "first")
            await runtime.wait_idle(tid, timeout=20)
            row = await runtime.store.get_thread(tid)
            assert row is not None
            assert runtime.hub.warm_history(tid, row.event_seq) is not None
            while pair.replay_lag_bytes():
                await asyncio.sleep(0.05)
            pair.kill_primary()
            pair.promote()
            for _ in range(100):  # the first writes may meet the dead primary's connections
                try:
                    await runtime.send_message(tid, "second")
                    break
                except StoreUnavailable:
                    await asyncio.sleep(0.1)
            for _ in range(100):
                if forgot:
                    break
                await asyncio.sleep(0.05)
            assert forgot == [1]
            row = await runtime.store.get_thread(tid)
            assert row is not None
            assert runtime.hub.warm_history(tid, row.event_seq) is None
            for _ in range(200):
                page = await runtime.store.read_page(
                    tid, limit=None, offset=0, order="asc", include_silent=False, max_depth=0
                )
                texts = [(m.role, m.content) for m in page[0]]
                if ("user", "second") in texts and texts[-1][0] == "assistant":
                    break
                await asyncio.sleep(0.1)
            assert texts[-2:] == [("user", "second"), ("assistant", "Test response received.")]
        finally:
            await runtime.close(drain=0)
