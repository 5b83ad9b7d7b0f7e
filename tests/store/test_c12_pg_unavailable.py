"""The PostgreSQL store when the database cannot be reached (spec 12 §12.8 rule 9): every
failure to reach it is a ``StoreUnavailable`` naming the URL without its password and
chained to the driver's error — never a raw ``psycopg.OperationalError`` — and the same
store works again once the database is back. On a cluster of the test's own
(tests/pg_cluster.py), stopped and started; never the shared server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from pg_cluster import PgCluster, private_cluster, require_cluster
from threadloom.errors import StoreUnavailable
from threadloom.node.pg import PgCluster as NodeCluster
from threadloom.store.base import NewThread
from threadloom.store.postgres.store import PostgresStore


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    require_cluster()
    with private_cluster() as pg:
        yield pg


@pytest.fixture
async def store(cluster: PgCluster) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(cluster.url, pool_size=2)
    yield opened
    await opened.close()


def _unavailable(raised: pytest.ExceptionInfo[StoreUnavailable], url: str) -> None:
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    assert url in str(raised.value)
    assert raised.value.retry_after_s == 2


async def test_c12_040_a_stopped_database_is_store_unavailable_then_served_again(
    cluster: PgCluster, store: PostgresStore
) -> None:
    """C12-040: the cluster stopped → a read (``list_threads``), a write (``create_thread``)
    and a point read (``get_thread``) each raise ``StoreUnavailable`` (the URL named, the
    psycopg error its cause), the heartbeat is ``False``; started again → the same store
    reads and writes, without being reopened."""
    first = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
    cluster.stop()
    try:
        calls: dict[str, Any] = {
            "read": lambda: store.list_threads(),
            "write": lambda: store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="a")),
            "point read": lambda: store.get_thread(first.id),
        }
        for name, call in calls.items():
            with pytest.raises(StoreUnavailable) as raised:
                await call()
            _unavailable(raised, cluster.url)
            assert name  # each of the three
        assert await NodeCluster(store).heartbeat() is False
    finally:
        cluster.start()
    assert (await store.get_thread(first.id)) == first
    second = await store.create_thread(NewThread(id=str(uuid.uuid4()), agent_id="echo"))
    rows, total = await store.list_threads()
    assert {r.id for r in rows} >= {first.id, second.id} and total >= 2


async def test_c12_041_a_connection_broken_mid_statement_or_in_the_commit(
    cluster: PgCluster, store: PostgresStore
) -> None:
    """C12-041: a statement whose connection breaks every time (the backend terminated) →
    run once more on a new connection, then ``StoreUnavailable`` ("lost the connection"),
    for a read and a write alike; a connection that breaks in the COMMIT itself (a deferred
    trigger terminating its backend) → ``StoreUnavailable`` saying whether it was stored is
    unknown, not run again; the store serves the next call."""
    attempts: list[str] = []

    def kill_own_backend(conn: Any, *clock: Any) -> None:
        attempts.append("read" if not clock else "write")
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(StoreUnavailable, match="lost the connection") as raised:
        await store._read(kill_own_backend)
    _unavailable(raised, cluster.url)
    with pytest.raises(StoreUnavailable, match="lost the connection") as raised:
        await store._write(kill_own_backend)
    _unavailable(raised, cluster.url)
    assert attempts == ["read", "read", "write", "write"]

    table = f"t_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        admin.execute(
            "CREATE OR REPLACE FUNCTION tl_die() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$"
        )
        admin.execute(f"CREATE TABLE {table} (x int)")
        admin.execute(
            f"CREATE CONSTRAINT TRIGGER die AFTER INSERT ON {table} DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW EXECUTE FUNCTION tl_die()"
        )

    def insert(conn: Any, clock: Any) -> None:
        attempts.append("commit")
        conn.execute(f"INSERT INTO {table} VALUES (1)")

    with pytest.raises(StoreUnavailable, match="during a commit") as raised:
        await store._write(insert)
    _unavailable(raised, cluster.url)
    assert "unknown" in str(raised.value)
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        rows = admin.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert rows == (0,)  # the trigger ran before the commit ended: nothing stored
    assert attempts[4:] == ["commit"]  # not run again: it might have been stored
    assert await store.list_threads() is not None
