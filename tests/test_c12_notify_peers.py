"""Spec 12 §12.7.6: a PostgreSQL node notifies only while another node is live. Two
runtimes on one schema in this process are the two nodes; a LISTEN connection of the test
hears what their transactions send."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from pg_support import PG_URL, create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.store.postgres.notify import channels


def _definitions() -> Definitions:
    return Definitions().add(
        Model(name="m", provider=ScriptedProvider(lambda r: Reply.text("ok")), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    require_postgres()
    name = f"tl_np_{uuid.uuid4().hex[:12]}"
    create_schema(name)
    try:
        yield name
    finally:
        drop_schema(name)


async def _heard(listener: psycopg.AsyncConnection[object], wait: float) -> list[dict[str, object]]:
    """The notifications that arrive within ``wait`` seconds."""
    heard: list[dict[str, object]] = []

    async def collect() -> None:
        async for notice in listener.notifies():
            heard.append({"channel": notice.channel, **json.loads(notice.payload)})

    try:
        await asyncio.wait_for(collect(), wait)
    except TimeoutError:
        pass
    return heard


async def test_c12_027_a_lone_node_notifies_nothing_until_another_joins(schema: str) -> None:
    url = schema_url(schema)
    first = await Runtime.open(url, definitions=_definitions(), node_id="first")
    listener = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    try:
        events = channels(schema)["events"]
        await listener.execute(f'LISTEN "{events}"')
        thread = await first.create_thread("a")
        await first.send_message(thread.thread_id, "alone")
        await first.wait_idle(thread.thread_id)
        assert await _heard(listener, 0.5) == []  # a turn's transactions, no NOTIFY

        second = await Runtime.open(url, definitions=_definitions(), node_id="second")
        try:
            await asyncio.sleep(0.3)  # "joined" reaches the first node
            assert first.store.peers is True
            await first.send_message(thread.thread_id, "together")
            await first.wait_idle(thread.thread_id)
            heard = await _heard(listener, 0.5)
            assert heard and {h["n"] for h in heard} == {"first"}
            assert all(h["t"] == thread.thread_id for h in heard)
            seqs = [(h["f"], h["s"]) for h in heard]
            assert seqs == sorted(seqs)  # in commit order, ranges one after another
            assert any(h.get("a") == 1 for h in heard)  # the run's status changes
        finally:
            await second.close()
    finally:
        await listener.close()
        await first.close()
