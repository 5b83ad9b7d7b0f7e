"""Spec 22 §22.4 with two nodes: two runtimes on one PostgreSQL schema in this process (each
a node with its own id), called at once with the same idempotency key."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import ScriptedProvider
from threadloom.records import Trigger


def _definitions() -> Definitions:
    return Definitions().add(
        Model(name="m", provider=ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


@pytest.fixture
async def url() -> AsyncIterator[str]:
    require_postgres()
    name = f"tl_trg_{uuid.uuid4().hex[:12]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


async def test_c22_022_two_nodes_called_with_one_key_start_one_thread(url: str) -> None:
    """C22-022: two nodes each take four calls with the same key at once → all eight answer
    one thread id, one call is not ``replayed``, the store holds one thread with one user
    message, and the trigger counts one call."""
    n1, n2 = [await Runtime.open(url, definitions=_definitions(), node_id=n) for n in ("n1", "n2")]
    try:
        row = await n1.triggers.create(Trigger(id="t", agent="a"))
        calls = [node.triggers.fire(row, "once", "same") for node in (n1, n2) for _ in range(4)]
        fires = await asyncio.gather(*calls)
        assert len({f.thread_id for f in fires}) == 1
        assert sorted(f.replayed for f in fires) == [False] + [True] * 7
        thread_id = fires[0].thread_id
        await n1.wait_idle(thread_id, timeout=10)
        await n2.wait_idle(thread_id, timeout=10)
        _, total = await n1.store.list_threads(limit=1)
        assert total == 1
        messages = await n1.store.top_level_history(thread_id)
        assert [m.content for m in messages if m.role == "user"] == ["once"]
        stored = await n1.store.get_trigger("t")
        assert stored is not None and stored.fire_count == 1
    finally:
        await n1.close(drain=0)
        await n2.close(drain=0)
