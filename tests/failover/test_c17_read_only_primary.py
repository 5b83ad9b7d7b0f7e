"""A failover's old primary left running read-only (spec 17 §17.5): the store and the LISTEN
connection leave it for the server that takes writes, without a restart."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
from replication import replicated, require_replication

from pg_support import schema_url
from threadloom.node.pg import PgCluster
from threadloom.store.postgres.store import PostgresStore
from threadloom.store.shapes import NewThread


def _fence_read_only(url: str) -> None:
    """What an operator does to an old primary that must take no more writes."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        conn.execute("SELECT pg_reload_conf()")
    for _ in range(100):  # the postmaster reloads, and signals every backend, at its pace
        with psycopg.connect(url, autocommit=True) as conn:
            shown = conn.execute("SHOW default_transaction_read_only").fetchone()
        if shown == ("on",):
            time.sleep(0.1)
            return
        time.sleep(0.05)
    raise AssertionError("the old primary did not become read-only")


def _thread_on(url: str, schema: str, thread_id: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f'SELECT 1 FROM "{schema}".threads WHERE id = %s', (thread_id,))
        return row.fetchone() is not None


async def test_c17_066_a_read_only_old_primary_is_left_for_the_new_one() -> None:
    """C17-066: nodes' store (one connection, so the same connection is reused) and LISTEN
    connection on the multi-host URL, both on the primary; the standby promoted while the
    old primary keeps running, then fenced read-only (``default_transaction_read_only =
    on``, reloaded) → the next write is stored on the new primary, not refused and not
    answered 500 (the connection that got ``25006 read_only_sql_transaction`` is dropped and
    made again, and ``target_session_attrs=read-write`` picks the new primary); a read after
    it sees the write; the LISTEN connection reconnects to the new primary within its check
    interval and hears a notification sent there."""
    require_replication()
    with replicated(synchronous=False) as pair:
        schema = f"tl_ro_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pair.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = schema_url(schema, pair.url)
        store = await PostgresStore.open(url, pool_size=1)
        cluster = PgCluster(store)
        heard: list[dict[str, Any]] = []
        try:
            before = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
            await cluster.listen(lambda topic, payload: heard.append(payload), _connected)
            notifications = cluster.notifications
            assert notifications is not None and notifications.connects == 1
            pair.wait_streaming()
            while pair.replay_lag_bytes():  # the standby has the thread
                await asyncio.sleep(0.05)
            pair.promote()
            _fence_read_only(pair.primary_url)

            after = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
            assert _thread_on(pair.standby_url, schema, after.id)  # the new primary
            assert not _thread_on(pair.primary_url, schema, after.id)
            assert (await store.get_thread(after.id)) is not None
            assert (await store.get_thread(before.id)) is not None

            for _ in range(200):  # the check runs every 5 s
                if notifications.connects == 2 and notifications.listening:
                    break
                await asyncio.sleep(0.05)
            assert notifications.connects == 2
            assert await cluster.notify("control", {"probe": 1})
            for _ in range(100):
                if heard:
                    break
                await asyncio.sleep(0.05)
            assert heard == [{"probe": 1}]
        finally:
            await cluster.close()
            await store.close()


async def _connected(first: bool) -> None:
    return None
