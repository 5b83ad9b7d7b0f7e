"""Spec 12 §12.2 rule 4, §12.7.2: a node that may have been taken for dead relays nothing of
its runs. Two runtimes on one schema in this process are the two nodes; the first one's
pause is its last successful heartbeat set back past the fencing delay, as a process stopped
(SIGSTOP) for that long finds it when it wakes (tests/multinode/test_c12_takeover_streams.py
pauses real nodes)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import Reply, ScriptedProvider

TEXT = "a slow answer, two characters at a time, long enough to pause in"


def _definitions() -> Definitions:
    slow = ScriptedProvider(lambda r: Reply.text(TEXT, chunk_size=2, chunk_delay=0.05))
    return Definitions().add(
        Model(name="m", provider=slow, model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    require_postgres()
    name = f"tl_fr_{uuid.uuid4().hex[:12]}"
    create_schema(name)
    try:
        yield name
    finally:
        drop_schema(name)


async def test_c12_034_a_node_late_with_its_heartbeat_relays_no_frame(schema: str) -> None:
    """C12-034: the first node generates an answer slowly, its chunks relayed to a
    subscriber on the second node; the first node's last successful heartbeat is set back
    past the fencing delay (a pause it wakes from) → from that moment the subscriber gets no
    ephemeral frame of the run (the node fences itself at its first relay attempt, before
    its liveness loop comes round), and the run is dropped (and settled lost when the next
    heartbeat gets through)."""
    url = schema_url(schema)
    first = await Runtime.open(url, definitions=_definitions(), node_id="first")
    second = await Runtime.open(url, definitions=_definitions(), node_id="second")
    try:
        assert first.liveness is not None
        await asyncio.sleep(0.3)  # "joined" reaches the first node
        tid = (await first.create_thread("a")).thread_id
        watching = second.events.subscribe(tid, max_queue=10_000)
        await asyncio.sleep(0.5)  # the watch reaches the first node
        await first.send_message(tid, "go")
        chunks = 0
        while chunks < 3:  # the generation is relayed
            event = await watching.get(10)
            chunks += event.kind == "message_chunk"
        liveness = first.liveness
        liveness._last_ok = time.monotonic() - liveness.timings.fence_after_s - 1  # paused
        paused_at = time.monotonic()
        late: list[str] = []
        while time.monotonic() - paused_at < 1.5:
            try:
                event = await watching.get(max(0.0, 1.5 - (time.monotonic() - paused_at)))
            except TimeoutError:
                break
            if event.seq is None and event.kind != "telemetry":
                late.append(event.kind)
        # a frame relayed before the pause may still be on its way: at most one
        assert late.count("message_chunk") <= 1, late
        assert not first.runs.running(tid)  # dropped when it fenced itself
        watching.close()
        status = await (await second.thread(tid)).status()  # settled once the heartbeat
        assert (status.state, status.reason) == ("failed", "execution_lost")  # got through
    finally:
        await second.close()
        await first.close()
