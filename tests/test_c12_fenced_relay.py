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


async def test_c12_034_a_node_late_with_its_heartbeat_relays_no_frame(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C12-034: the first node generates an answer slowly, its chunks relayed to a
    subscriber on the second node; the first node's last successful heartbeat is set back
    past the fencing delay (a pause it wakes from) → the subscriber gets no chunk of what the
    run generates from that moment (the node fences itself at its first relay attempt,
    before its liveness loop comes round), and the run is dropped (and settled lost when the
    next heartbeat gets through)."""
    # heartbeats 1.2 s apart: after one, the liveness loop sleeps that long before it looks
    # at the fence again — the window in which only the relay's own check can hold it
    monkeypatch.setenv("THREADLOOM_NODE_HEARTBEAT_SECONDS", "1.2")
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
        run = first.runs.run_of(tid)
        assert run is not None and len(run.partial) == 1
        liveness = first.liveness
        seen = liveness._beating
        while liveness._beating is seen or not liveness._beating.done():
            await asyncio.sleep(0.005)  # a heartbeat just got through (none is in flight)
        liveness._last_ok = time.monotonic() - liveness.timings.fence_after_s - 1  # paused
        (generated,) = run.partial.values()
        mark = len(generated)  # what the run generated before the "pause"
        relayed: list[tuple[str, int]] = []
        deadline = time.monotonic() + 1.5
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = await watching.get(left)
            except TimeoutError:
                break
            if event.kind == "message_chunk":
                relayed.append((event.data["chunk"], event.data["offset"]))
        # what was generated before the mark may still arrive (sent, or sent late without
        # the fence); nothing generated after it does
        assert all(offset < mark for _, offset in relayed), (mark, relayed)
        assert not first.runs.running(tid)  # dropped when it fenced itself
        watching.close()

        async def settled() -> tuple[str, str | None]:  # once a heartbeat gets through
            status = await (await second.thread(tid)).status()
            return status.state, status.reason

        for _ in range(100):
            if await settled() != ("running", None):
                break
            await asyncio.sleep(0.1)
        assert await settled() == ("failed", "execution_lost")
    finally:
        await second.close()
        await first.close()
