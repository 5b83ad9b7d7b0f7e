"""Delivering outbound webhooks (spec 19 §19.4-§19.5) on both stores: signed after the
Standard Webhooks spec (verified with the ``standardwebhooks`` package's own verifier),
retried with backoff, dead after the last attempt and delivered again on request, at least
once with a stable id — a receiver that fails, hangs, or a worker killed mid-delivery.
Receivers are local HTTP servers the tests start (loopback allowed explicitly)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import generate_latest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from threadloom.node.webhook_targets import TargetPolicy
from threadloom.node.webhooks import WebhookOptions, WebhookWorker
from threadloom.providers.script import Reply
from threadloom.records import WebhookSubscription, new_id, new_webhook_secret
from webhook_receiver import Receiver


async def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def subscribe(runtime: Any, receiver: Receiver, *types: str) -> WebhookSubscription:
    return await runtime.store.create_webhook(
        WebhookSubscription(
            id=new_id(), url=receiver.url, secret=new_webhook_secret(), event_types=types
        )
    )


async def one_run(runtime: Any) -> str:
    state = await runtime.create_thread("chat")
    await runtime.send_message(state.thread_id, "hello")
    await runtime.wait_idle(state.thread_id, timeout=5)
    return str(state.thread_id)


async def test_c19_010_a_delivery_is_signed_after_standard_webhooks(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-010: each delivery carries ``webhook-id`` (the event id), ``webhook-timestamp``
    and ``webhook-signature``; the ``standardwebhooks`` verifier accepts it with the
    subscription's secret and refuses it with another secret or a changed body."""
    runtime = await make_runtime([Reply.text("hi")])
    hook = await subscribe(runtime, receiver, "run.settled")
    tid = await one_run(runtime)
    await until(lambda: receiver.received)
    got = receiver.received[0]
    [row] = await runtime.store.list_webhook_deliveries(subscription_id=hook.id)
    assert got.headers["webhook-id"] == row.event_id
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 60
    assert got.headers["webhook-signature"].startswith("v1,")
    assert got.headers["content-type"] == "application/json"
    payload = Webhook(hook.secret).verify(got.body, got.headers)
    assert payload["type"] == "run.settled" and payload["data"]["thread_id"] == tid
    with pytest.raises(WebhookVerificationError):
        Webhook(new_webhook_secret()).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(hook.secret).verify(got.body.replace(b"run.settled", b"run.setlled"), got.headers)
    done = await until(lambda: _state(runtime, hook.id, "delivered"))
    assert done[0].attempts == 1 and done[0].last_status == 200


async def _state(runtime: Any, sub_id: str, state: str) -> list[Any]:
    rows = await runtime.store.list_webhook_deliveries(subscription_id=sub_id)
    return rows if rows and all(r.state == state for r in rows) else []


async def test_c19_011_a_receiver_that_answers_500_then_200(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-011: a 500 is retried after a backoff; the 200 that follows delivers it; both
    requests carry the same ``webhook-id``, each signed anew."""
    receiver.answers = [500]
    runtime = await make_runtime([Reply.text("hi")])
    hook = await subscribe(runtime, receiver, "run.settled")
    await one_run(runtime)
    [row] = await until(lambda: _state(runtime, hook.id, "delivered"))
    assert len(receiver.received) == 2 and row.attempts == 2
    first, second = receiver.received
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == row.event_id
    assert second.at - first.at >= 0.02  # the backoff: half its cap at least (0.05 s)
    for got in receiver.received:
        Webhook(hook.secret).verify(got.body, got.headers)


async def test_c19_012_a_receiver_that_hangs_never_holds_a_run(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-012: while a receiver hangs past the timeout (1 s), runs settle at their pace;
    the attempt times out, is recorded, and the retry delivers it with the same id."""
    receiver.answers = [("hang", 3.0)]
    runtime = await make_runtime([Reply.text("hi")] * 3)
    hook = await subscribe(runtime, receiver, "thread.created")
    state = await runtime.create_thread("chat")
    await until(lambda: receiver.received)  # the first request is hanging now
    started = time.monotonic()
    for text in ("one", "two"):
        await runtime.send_message(state.thread_id, text)
        await runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started < 0.9  # well inside the hanging request's timeout
    [row] = await until(lambda: _state(runtime, hook.id, "delivered"))
    assert row.attempts == 2 and len(receiver.received) == 2
    assert receiver.ids() == [row.event_id, row.event_id]


async def test_c19_013_dead_after_the_last_attempt_and_delivered_again(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-013: a receiver that always fails gets ``max_attempts`` (3) attempts; the
    delivery is then dead, listed as dead with its last status; delivered again on request,
    it is sent with the same id and delivered."""
    receiver.default = 503
    runtime = await make_runtime([Reply.text("hi")])
    store = runtime.store
    hook = await subscribe(runtime, receiver, "run.settled")
    await one_run(runtime)
    [dead] = await until(lambda: store.list_webhook_deliveries(state="dead"))
    assert dead.attempts == 3 and dead.last_status == 503 and len(receiver.received) == 3
    assert await store.list_webhook_deliveries(state="pending") == []
    receiver.default = 200
    again = await store.redeliver_webhook(dead.event_id, hook.id)
    assert again is not None and again.state == "pending" and again.attempts == 0
    assert await store.redeliver_webhook(dead.event_id, hook.id) is None  # not dead now
    [row] = await until(lambda: _state(runtime, hook.id, "delivered"))
    assert receiver.ids() == [dead.event_id] * 4 and row.delivered_at is not None


async def test_c19_014_a_worker_killed_mid_delivery(make_runtime: Any, receiver: Receiver) -> None:
    """C19-014: a node's worker is killed (its task cancelled, nothing recorded) while its
    request hangs; once its lease ran out a second node's worker sends the event again —
    the same ``webhook-id`` — and it is delivered once more, not lost and not duplicated
    under another id."""
    runtime = await make_runtime([Reply.text("hi")])
    store = runtime.store
    await runtime.webhooks.stop()  # two workers of our own: node A and node B
    options = WebhookOptions(
        poll_s=0.05, timeout_s=5.0, lease_s=0.5, policy=TargetPolicy(allow_private=True)
    )
    receiver.answers = [("hang", 2.0)]
    hook = await subscribe(runtime, receiver, "run.settled")
    await one_run(runtime)
    node_a = WebhookWorker(store, "node-a", options)
    node_a.start()
    await until(lambda: receiver.received)
    await node_a.stop()  # killed mid-delivery: the attempt is never recorded
    [row] = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert row.state == "pending" and row.attempts == 1
    node_b = WebhookWorker(store, "node-b", options)
    assert await node_b.run_once() == 0  # A's lease still holds it
    await asyncio.sleep(0.6)
    assert await node_b.run_once() == 1
    await node_b.stop()
    [row] = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert row.state == "delivered" and row.attempts == 2
    assert receiver.ids() == [row.event_id, row.event_id]
    bodies = {got.body for got in receiver.received}
    assert len(bodies) == 1 and json.loads(next(iter(bodies)))["type"] == "run.settled"


async def test_c19_015_two_workers_racing_send_each_event_once(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-015: two nodes' workers claiming the same due rows at once send each event once
    (the claim is a lease on the row)."""
    runtime = await make_runtime([Reply.text("hi")] * 5)
    store = runtime.store
    await runtime.webhooks.stop()
    hook = await subscribe(runtime, receiver, "thread.created")
    for _ in range(10):
        await runtime.create_thread("chat")
    options = WebhookOptions(policy=TargetPolicy(allow_private=True), batch=4)
    a, b = WebhookWorker(store, "node-a", options), WebhookWorker(store, "node-b", options)
    while await asyncio.gather(a.run_once(), b.run_once()) != [0, 0]:
        pass
    await a.stop()
    await b.stop()
    rows = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert len(rows) == 10 and all(r.state == "delivered" and r.attempts == 1 for r in rows)
    assert sorted(receiver.ids()) == sorted(r.event_id for r in rows)


async def test_c19_016_a_hanging_receiver_never_delays_another(
    make_runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C19-016: while one subscription's receiver hangs (timeout 3 s), another
    subscription's later events are delivered at once: each attempt holds one place of the
    worker, never the others'."""
    monkeypatch.setenv("THREADLOOM_WEBHOOK_TIMEOUT_S", "3")
    slow, fast = Receiver(answers=[("hang", 5.0)]).start(), Receiver().start()
    try:
        runtime = await make_runtime()
        hanging = await subscribe(runtime, slow, "thread.created")
        await subscribe(runtime, fast, "thread.created")
        await runtime.create_thread("chat")
        await until(lambda: slow.received and fast.received)
        started = time.monotonic()
        await runtime.create_thread("chat")
        await until(lambda: len(fast.received) == 2)
        assert time.monotonic() - started < 1.0
        first = (await runtime.store.list_webhook_deliveries(subscription_id=hanging.id))[0]
        assert first.state == "pending" and first.last_error is None  # still hanging
    finally:
        slow.stop()
        fast.stop()


async def test_c17_090_webhook_attempts_are_counted_by_the_state_they_leave(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C17-090: one receiver answers 500 then 200, another always 503 (3 attempts) →
    ``threadloom_webhook_attempts_total`` holds pending 1 + 2, delivered 1, dead 1."""
    receiver.answers = [500]
    failing = Receiver().start()
    failing.default = 503
    try:
        runtime = await make_runtime([Reply.text("hi")])
        await subscribe(runtime, receiver, "run.settled")
        await subscribe(runtime, failing, "run.settled")
        await one_run(runtime)
        store = runtime.store
        await until(lambda: store.list_webhook_deliveries(state="dead"))
        await until(lambda: store.list_webhook_deliveries(state="delivered"))
        counted = runtime.metrics.webhook_attempts.values
        assert counted == {("pending",): 3, ("delivered",): 1, ("dead",): 1}
        exposed = generate_latest(runtime.metrics.registry).decode()
        assert 'threadloom_webhook_attempts_total{state="dead"} 1.0' in exposed
    finally:
        failing.stop()
