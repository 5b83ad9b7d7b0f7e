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
from threadloom.store.postgres.dialect import channels


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


async def test_c12_027_a_node_notifies_only_what_another_node_watches(schema: str) -> None:
    """C12-027: one node alone → a turn sends no notification; a second node joins but
    watches nothing → still none (the first node runs the thread itself); the second node
    subscribes to the thread → the first node's turn notifies its events, in commit order,
    the status as committed (``running`` too); the second node unsubscribes → none again."""
    url = schema_url(schema)
    first = await Runtime.open(url, definitions=_definitions(), node_id="first")
    listener = await psycopg.AsyncConnection.connect(PG_URL, autocommit=True)
    try:
        events = channels(schema)["events"]
        await listener.execute(f'LISTEN "{events}"')
        thread = await first.create_thread("a")
        tid = thread.thread_id

        async def turn(text: str) -> list[dict[str, object]]:
            await first.send_message(tid, text)
            await first.wait_idle(tid)
            return await _heard(listener, 0.5)

        assert await turn("alone") == []  # a turn's transactions, no NOTIFY
        second = await Runtime.open(url, definitions=_definitions(), node_id="second")
        try:
            await asyncio.sleep(0.3)  # "joined" reaches the first node
            assert first.cluster.peers is True
            assert await turn("unwatched") == []
            watching = second.events.subscribe(tid)
            await asyncio.sleep(0.3)  # the watch reaches the first node
            heard = await turn("watched")
            assert heard and {h["n"] for h in heard} == {"first"}
            assert all(h["t"] == tid for h in heard)
            seqs = [(h["f"], h["s"]) for h in heard]
            assert seqs == sorted(seqs)  # in commit order, ranges one after another
            states = [h["a"]["status"]["state"] for h in heard if isinstance(h.get("a"), dict)]
            assert states[0] == "running" and states[-1] == "idle"
            watching.close()
            await asyncio.sleep(0.3)
            assert await turn("unwatched again") == []
        finally:
            await second.close()
    finally:
        await listener.close()
        await first.close()
