"""Schedules' fires announced to webhooks (spec 19 §19.2, §19.3 rule 1): ``schedule.fired``
and ``schedule.failed`` written to the outbox in the transaction that settles the fire, on
both stores; delivered signed like every event. Real Runtime, real store, scripted model,
a local receiver the test starts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from standardwebhooks.webhooks import Webhook

from threadloom.providers.script import Reply
from threadloom.records import Schedule, WebhookSubscription, new_id, new_webhook_secret
from webhook_receiver import Receiver


async def until_received(receiver: Receiver, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not receiver.received:
        assert time.monotonic() < deadline, "nothing was delivered in time"
        await asyncio.sleep(0.02)


def sub(url: str, *types: str) -> WebhookSubscription:
    return WebhookSubscription(id=new_id(), url=url, secret=new_webhook_secret(), event_types=types)


async def test_c19_034_a_fired_schedule_writes_schedule_fired_with_its_thread(
    make_runtime: Any,
) -> None:
    """C19-034: a fire that sends its message writes one ``schedule.fired`` row with the
    schedule id, the due time (µs and RFC 3339), the status and the thread it sent to."""
    runtime = await make_runtime([Reply.text("done")])
    await runtime.webhooks.stop()
    hook = await runtime.store.create_webhook(
        sub("https://a.example.com/h", "schedule.fired", "schedule.failed")
    )
    await runtime.schedules.create(
        Schedule(id="daily", message="report", interval_s=3600, agent="chat")
    )
    fire = await runtime.schedules.fire_now("daily")
    assert fire.status == "fired" and fire.thread_id is not None
    rows = await runtime.store.list_webhook_deliveries(subscription_id=hook.id)
    assert [r.event_type for r in rows] == ["schedule.fired"]
    body = rows[0].payload
    assert body["type"] == "schedule.fired"
    data = body["data"]
    assert data["schedule_id"] == "daily" and data["thread_id"] == fire.thread_id
    assert data["due_at"] == fire.due_us and data["status"] == "fired"
    assert data["due_time"].endswith("Z") and data["error"] is None


async def test_c19_035_a_failed_fire_writes_schedule_failed_with_its_error(
    make_runtime: Any,
) -> None:
    """C19-035: a fire that fails (its agent is not defined) writes ``schedule.failed``
    with the error; a subscription to ``schedule.fired`` only gets nothing."""
    runtime = await make_runtime()
    await runtime.webhooks.stop()
    failed_only = await runtime.store.create_webhook(
        sub("https://a.example.com/h", "schedule.failed")
    )
    fired_only = await runtime.store.create_webhook(
        sub("https://b.example.com/h", "schedule.fired")
    )
    # stored directly: the runtime refuses to create a schedule of an unknown agent
    await runtime.store.create_schedule(
        Schedule(id="ghost", message="m", interval_s=60, agent="ghost"), "api", None
    )
    fire = await runtime.schedules.fire_now("ghost")
    assert fire.status == "failed" and fire.error
    rows = await runtime.store.list_webhook_deliveries(subscription_id=failed_only.id)
    assert [r.event_type for r in rows] == ["schedule.failed"]
    data = rows[0].payload["data"]
    assert data["schedule_id"] == "ghost" and data["status"] == "failed"
    assert data["error"] == fire.error and data["thread_id"] is None
    assert await runtime.store.list_webhook_deliveries(subscription_id=fired_only.id) == []


async def test_c19_036_a_settlement_that_lost_its_claim_writes_nothing(make_runtime: Any) -> None:
    """C19-036: the event is the settlement's: a node whose claim of the fire is gone
    (another node took it over) settles nothing and writes no event; a skipped fire
    (overlap) writes none either."""
    runtime = await make_runtime()
    await runtime.webhooks.stop()
    store = runtime.store
    await store.create_webhook(sub("https://a.example.com/h"))
    await store.create_schedule(
        Schedule(id="s", message="m", interval_s=60, agent="chat"), "api", None
    )
    claimed = await store.claim_schedule_fire("s", 1_000, "node-a", 2_000)
    assert claimed is not None
    assert not await store.finish_schedule_fire("s", 1_000, "node-b", "fired", None, None)
    assert await store.list_webhook_deliveries() == []
    assert await store.finish_schedule_fire("s", 1_000, "node-a", "skipped", None, None)
    assert await store.list_webhook_deliveries() == []


async def test_c19_037_schedule_fired_is_delivered_signed(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-037: the worker delivers ``schedule.fired`` signed; the ``standardwebhooks``
    verifier accepts it with the subscription's secret."""
    runtime = await make_runtime([Reply.text("done")])
    hook = await runtime.store.create_webhook(sub(receiver.url, "schedule.fired"))
    await runtime.schedules.create(Schedule(id="now", message="go", interval_s=3600, agent="chat"))
    fire = await runtime.schedules.fire_now("now")
    await until_received(receiver)
    got = receiver.received[0]
    verified = Webhook(hook.secret).verify(got.body, got.headers)
    assert verified["type"] == "schedule.fired"
    assert json.loads(got.body)["data"]["thread_id"] == fire.thread_id
    assert got.headers["webhook-id"].startswith("evt_")
