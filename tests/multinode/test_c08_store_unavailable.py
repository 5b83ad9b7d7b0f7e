"""The store cannot be reached → 503 ``unavailable`` with ``Retry-After``, never 500 (spec 08
§8.1.3 rule 7): a real ``threadloom serve`` on a PostgreSQL cluster of the test's own, which
the test stops and starts again (never the shared server), and a store error that is not
about reaching the store, which stays a 500."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_harness import Cluster, Node, spawn_node, stop_node, wait_healthy
from fastapi import FastAPI

from pg_cluster import PgCluster, private_cluster, require_cluster
from threadloom.errors import StoreError, StoreUnavailable
from threadloom.server import errors


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[PgCluster, Node]]:
    """A private cluster and one ``threadloom serve`` on it."""
    require_cluster()
    with private_cluster() as pg:
        gates = tmp_path / "gates"
        gates.mkdir()
        node = spawn_node(Cluster(pg.url, [], gates), "s1", tmp_path / "s1.log")
        try:
            wait_healthy(node)
            yield pg, node
        finally:
            stop_node(node)


def _requests(node: Node, thread: str, client_id: str) -> dict[str, httpx.Response]:
    send = {"content": f"hello {client_id}", "metadata": {"client_message_id": client_id}}
    return {
        "list": node.get("/api/threads"),
        "get": node.get(f"/api/threads/{thread}"),
        "messages": node.get(f"/api/threads/{thread}/messages"),
        "send": node.post(f"/api/threads/{thread}/messages", send),
    }


def test_c08_143_the_store_stopped_is_503_with_retry_after_then_served_again(
    served: tuple[PgCluster, Node],
) -> None:
    """C08-143: the cluster stopped → list, get, messages and send each answer 503
    ``unavailable`` with ``Retry-After: 2`` in the error shape (never 500); started again,
    the server not restarted → the same requests succeed, and the refused send's
    ``client_message_id`` is new (``queued``, not ``duplicate``): it was not stored."""
    pg, node = served
    created = node.post("/api/threads", {"agent_id": "echo"})
    assert created.status_code == 200, created.text
    thread = created.json()["threadId"]
    client_id = f"c-{uuid.uuid4().hex[:8]}"

    pg.stop()
    down = _requests(node, thread, client_id)
    for name, answer in down.items():
        assert answer.status_code == 503, (name, answer.status_code, answer.text)
        body: dict[str, Any] = answer.json()
        assert body == {
            "error": "The store cannot be reached now; try again later",
            "code": "unavailable",
        }, name
        assert answer.headers["retry-after"] == "2", name
        assert answer.headers["x-threadloom-node"] == "s1", name

    pg.start()
    up = _requests(node, thread, client_id)
    assert {name: answer.status_code for name, answer in up.items()} == {
        "list": 200,
        "get": 200,
        "messages": 200,
        "send": 202,
    }, {name: answer.text for name, answer in up.items()}
    assert up["send"].json()["status"] == "queued"
    assert node.alive


async def test_c08_144_a_store_fault_not_about_reaching_it_stays_500() -> None:
    """C08-144: the error handlers of the server (``errors.install``) → a ``StoreError``
    that is not ``StoreUnavailable`` (broken data, a bug) → 500 ``internal_error`` with
    ``requestId`` and no ``Retry-After``; a ``StoreUnavailable`` → 503 with it."""
    app = FastAPI()
    errors.install(app)

    @app.get("/fault")
    async def fault() -> None:
        raise StoreError("the request body of log row L is broken at L")

    @app.get("/down")
    async def down() -> None:
        raise StoreUnavailable("cannot reach PostgreSQL database postgresql://x: refused")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        fault_answer = await client.get("/fault")
        down_answer = await client.get("/down")
    assert fault_answer.status_code == 500
    assert fault_answer.json()["code"] == "internal_error"
    assert "retry-after" not in fault_answer.headers
    assert down_answer.status_code == 503
    assert down_answer.json()["code"] == "unavailable"
    assert down_answer.headers["retry-after"] == "2"
