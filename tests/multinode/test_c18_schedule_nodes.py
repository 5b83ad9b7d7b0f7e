"""Spec 18 §18.4 with two nodes: two runtimes on one PostgreSQL schema in this process (each
a node with its own id, heartbeat and claims), racing for the same due fires."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Schedule, Side
from threadloom.define import Model, Prompt
from threadloom.engine.run.schedules import Fire, ScheduleOptions
from threadloom.providers.scripted import ScriptedProvider


def _definitions() -> Definitions:
    return Definitions().add(
        Model(name="m", provider=ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


@pytest.fixture
async def url() -> AsyncIterator[str]:
    require_postgres()
    name = f"tl_sch_{uuid.uuid4().hex[:12]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


async def _nodes(url: str, tick_s: float | None) -> list[Runtime]:
    options = ScheduleOptions(tick_s=tick_s)
    return [
        await Runtime.open(url, definitions=_definitions(), node_id=n, schedules=options)
        for n in ("n1", "n2")
    ]


async def test_c18_070_two_nodes_racing_for_each_due_fire_fire_it_once(url: str) -> None:
    """C18-070: two nodes tick at the same moment, 8 times a second apart, for a schedule
    due at each tick (interval 1 s, the clock the real one) → every due time fired exactly
    once, by one node or the other, and each fire's thread holds its one message."""
    n1, n2 = await _nodes(url, tick_s=None)
    try:
        await n1.schedules.create(Schedule(id="race", message="go", interval_s=1, agent="a"))
        fires: list[tuple[str, Fire]] = []
        for _ in range(8):
            await asyncio.sleep(1.0)
            one, two = await asyncio.gather(n1.schedules.tick(), n2.schedules.tick())
            fires += [("n1", f) for f in one] + [("n2", f) for f in two]
        dues = Counter(f.due_us for _, f in fires)
        assert fires and all(count == 1 for count in dues.values()), dues
        assert all(f.status == "fired" for _, f in fires)
        print("C18-070 fires by node:", Counter(node for node, _ in fires))
        row = await n2.schedules.get("race")
        assert row.fire_count == len(fires) and row.fire_due_us is None
        for _, fire in fires:
            assert fire.thread_id is not None
            for _ in range(500):  # the run on whichever node started it
                row_ = await n2.store.get_thread(fire.thread_id)
                if row_ is not None and row_.status.state != "running":
                    break
                await asyncio.sleep(0.02)
            page = await (await n2.thread(fire.thread_id)).get_messages(order="asc")
            assert [m.content for m in page.messages if m.role == "user"] == ["go"]
    finally:
        await n1.close(drain=0)
        await n2.close(drain=0)


async def test_c18_071_background_ticks_of_two_nodes_fire_each_time_once(url: str) -> None:
    """C18-071: both nodes' own tick loops (every 20 ms) run for 4 s against a schedule due
    every second → each due time fired once across the two nodes (no duplicate, no gap
    between the first and the last), and the schedule's count agrees."""
    n1, n2 = await _nodes(url, tick_s=0.02)
    fires: list[tuple[str, Fire]] = []

    def listen(node: str) -> object:
        async def on_fire(fire: Fire) -> None:
            fires.append((node, fire))

        return on_fire

    n1.schedules.on_fire = listen("n1")  # type: ignore[assignment]
    n2.schedules.on_fire = listen("n2")  # type: ignore[assignment]
    try:
        await n1.schedules.create(Schedule(id="tick", message="go", interval_s=1, agent="a"))
        await asyncio.sleep(4.3)
        await n1.schedules.update("tick", {"enabled": False})
        await asyncio.sleep(0.2)
        dues = sorted(f.due_us for _, f in fires)
        assert len(dues) >= 3 and len(set(dues)) == len(dues), dues
        assert all(b - a == 1_000_000 for a, b in itertools.pairwise(dues)), dues
        assert (await n1.schedules.get("tick")).fire_count == len(dues)
        print("C18-071 fires by node:", Counter(node for node, _ in fires), "due times:", len(dues))
    finally:
        await n1.close(drain=0)
        await n2.close(drain=0)
