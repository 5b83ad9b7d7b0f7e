"""The connect timeout of a node's connections (spec 17 §17.5.1 rule 6): the URL's own when
it gives one, 10 s otherwise — for the store's connections and the LISTEN connection alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom.node.pg import PgCluster
from threadloom.store.postgres.store import PostgresStore


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    require_postgres()
    name = f"tl_ct_{uuid.uuid4().hex[:10]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


async def _timeouts(url: str) -> tuple[str, str]:
    """The ``connect_timeout`` of a store connection and of the LISTEN connection."""
    store = await PostgresStore.open(url, pool_size=1)
    cluster = PgCluster(store)
    try:
        await cluster.listen(lambda topic, payload: None, _connected)
        listener = cluster.notifications._listener if cluster.notifications else None
        assert listener is not None
        return _param(store._connection().info.dsn), _param(listener.info.dsn)
    finally:
        await cluster.close()
        await store.close()


def _param(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["connect_timeout"])


async def _connected(first: bool) -> None:
    return None


async def test_c17_068_the_urls_connect_timeout_applies_to_every_connection(
    pg_schema_url: str,
) -> None:
    """C17-068: a URL with ``connect_timeout=3`` → the store's connections and the LISTEN
    connection are made with 3 s; a URL without one → with 10 s (a LISTEN connection was
    made without any, the driver's 130 s, before)."""
    assert await _timeouts(pg_schema_url + "&connect_timeout=3") == ("3", "3")
    assert await _timeouts(pg_schema_url) == ("10", "10")
