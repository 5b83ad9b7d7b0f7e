"""The claims of trigger calls by idempotency key (spec 22 §22.2, §22.4) on both stores:
one claimer per key, a claim whose caller died taken over after its lease, a failed call's
key freed, and ``trigger.fired`` written to the webhook outbox in the settlement's
transaction, once per call. Real Runtime, real store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import ScriptedProvider
from threadloom.records import Trigger, WebhookSubscription, new_id, new_webhook_secret


def _definitions() -> Definitions:
    return Definitions().add(
        Model(name="m", provider=ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="Answer."),
        Agent(name="a", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )


@pytest.fixture
async def runtime(db_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(db_url, definitions=_definitions())
    if rt.webhooks is not None:
        await rt.webhooks.stop()  # the outbox is read here, nothing is sent
    yield rt
    await rt.close(drain=0)


async def test_c22_020_a_key_is_claimed_once_and_taken_over_after_its_lease(
    runtime: Runtime,
) -> None:
    """C22-020: the first claim of a key does the work; later claims are replays with the
    first thread id (``done`` false until it settles, true after); an unsettled claim
    whose lease ran out is taken over with its thread id; a released claim frees the key;
    settling twice counts once."""
    store = runtime.store
    await runtime.triggers.create(Trigger(id="t", agent="a"))
    first = await store.claim_trigger_fire("t", "k", "thread-1", 60_000_000)
    assert (first.replayed, first.thread_id) == (False, "thread-1")
    replay = await store.claim_trigger_fire("t", "k", "thread-2", 60_000_000)
    assert (replay.replayed, replay.thread_id, replay.done) == (True, "thread-1", False)
    dead = await store.claim_trigger_fire("t", "dies", "thread-3", 1)  # its lease: 1 µs
    assert not dead.replayed
    await asyncio.sleep(0.01)
    taken = await store.claim_trigger_fire("t", "dies", "thread-4", 60_000_000)
    assert (taken.replayed, taken.thread_id) == (False, "thread-3")
    assert await store.finish_trigger_fire("t", "k") is True
    assert await store.finish_trigger_fire("t", "k") is False
    done = await store.claim_trigger_fire("t", "k", "thread-5", 1)
    assert (done.replayed, done.done) == (True, True)
    await asyncio.sleep(0.01)  # a settled call is never taken over
    assert (await store.claim_trigger_fire("t", "k", "thread-5", 1)).replayed is True
    assert await store.release_trigger_fire("t", "dies") is True
    assert (await store.claim_trigger_fire("t", "dies", "thread-6", 1)).thread_id == "thread-6"
    row = await store.get_trigger("t")
    assert row is not None and row.fire_count == 1 and row.last_thread_id == "thread-1"
    await runtime.triggers.delete("t")
    assert await store.get_trigger("t") is None
    await runtime.triggers.create(Trigger(id="t", agent="a"))
    fresh = await store.claim_trigger_fire("t", "k", "thread-7", 1)  # calls went with it
    assert fresh.replayed is False


async def test_c22_021_an_accepted_call_writes_trigger_fired_once(runtime: Runtime) -> None:
    """C22-021: a call that starts its thread writes one ``trigger.fired`` row (trigger id,
    thread id, idempotency key) for a subscription that wants it; its replay writes
    none."""
    store = runtime.store
    hook = await store.create_webhook(
        WebhookSubscription(
            id=new_id(),
            url="https://hooks.example.com/t",
            secret=new_webhook_secret(),
            event_types=("trigger.fired",),
        )
    )
    row = await runtime.triggers.create(Trigger(id="t", agent="a"))
    fired = await runtime.triggers.fire(row, "hello", "key-1")
    replay = await runtime.triggers.fire(row, "hello", "key-1")
    assert (fired.replayed, replay.replayed) == (False, True)
    assert replay.thread_id == fired.thread_id
    rows = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert [r.event_type for r in rows] == ["trigger.fired"]
    assert rows[0].payload["data"] == {
        "trigger_id": "t",
        "thread_id": fired.thread_id,
        "idempotency_key": "key-1",
    }
