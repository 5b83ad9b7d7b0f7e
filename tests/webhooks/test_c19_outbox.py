"""Outbound webhooks' subscriptions and outbox (spec 19 §19.1-§19.3) on both stores: what
the store writes, in the transaction of each event, for the subscriptions that want it.
Real Runtime, real store, scripted model."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom import Budget
from threadloom.errors import InvalidField
from threadloom.providers.script import Call, Reply
from threadloom.records import WebhookSubscription, new_id, new_webhook_secret


def sub(url: str = "https://hooks.example.com/x", *types: str, **more: Any) -> WebhookSubscription:
    return WebhookSubscription(
        id=new_id(), url=url, secret=new_webhook_secret(), event_types=types, **more
    )


async def test_c19_001_subscriptions_are_created_listed_changed_and_deleted(
    make_runtime: Any,
) -> None:
    """C19-001: a subscription is stored with its URL, secret, event types and enabled
    flag; listed, changed and deleted; an unknown event type is refused and stores nothing."""
    runtime = await make_runtime()
    store = runtime.store
    await runtime.webhooks.stop()  # nothing is sent here
    made = await store.create_webhook(sub("https://a.example.com/h", "run.settled"))
    assert made.event_types == ("run.settled",) and made.enabled and made.created_at > 0
    assert made.secret.startswith("whsec_")
    assert await store.get_webhook(made.id) == made
    assert [s.id for s in await store.list_webhooks()] == [made.id]
    changed = await store.update_webhook(made.id, {"enabled": False, "event_types": ()})
    assert changed is not None and not changed.enabled and changed.event_types == ()
    assert changed.updated_at >= made.updated_at
    with pytest.raises(InvalidField):
        await store.create_webhook(sub("https://b.example.com/h", "run.exploded"))
    with pytest.raises(InvalidField):
        await store.update_webhook(made.id, {"event_types": ("nope",)})
    assert len(await store.list_webhooks()) == 1
    assert await store.update_webhook(new_id(), {"enabled": True}) is None
    assert await store.delete_webhook(made.id) is True
    assert await store.delete_webhook(made.id) is False
    assert await store.list_webhooks() == []


async def test_c19_002_events_are_written_for_the_subscriptions_that_want_them(
    make_runtime: Any,
) -> None:
    """C19-002: with no subscription nothing is written; a subscription gets the types it
    names (none named: every type); a disabled one gets nothing; every subscription's row
    of one event has the same event id."""
    runtime = await make_runtime([Reply.text("hi")] * 3)
    store = runtime.store
    await runtime.webhooks.stop()
    await runtime.create_thread("chat")
    assert await store.list_webhook_deliveries() == []
    only_settled = await store.create_webhook(sub("https://a.example.com/h", "run.settled"))
    every = await store.create_webhook(sub("https://b.example.com/h"))
    off = await store.create_webhook(sub("https://c.example.com/h", enabled=False))
    state = await runtime.create_thread("chat")
    await runtime.send_message(state.thread_id, "hello")
    await runtime.wait_idle(state.thread_id, timeout=5)
    rows = await store.list_webhook_deliveries()
    by_sub: dict[str, list[str]] = {}
    for row in rows:
        by_sub.setdefault(row.subscription_id, []).append(row.event_type)
    assert by_sub[only_settled.id] == ["run.settled"]
    assert by_sub[every.id] == ["thread.created", "run.settled"]
    assert off.id not in by_sub
    settled = [r for r in rows if r.event_type == "run.settled"]
    assert len({r.event_id for r in settled}) == 1 and settled[0].event_id.startswith("evt_")
    assert all(r.state == "pending" and r.attempts == 0 for r in rows)


async def test_c19_003_run_settled_and_thread_lifecycle_carry_what_happened(
    make_runtime: Any,
) -> None:
    """C19-003: ``thread.created`` names the thread and agent; ``run.settled`` the status
    with its reason; ``thread.terminated`` the time; the body is ``{type, timestamp, data}``."""
    runtime = await make_runtime([Reply.text("hi")])
    store = runtime.store
    await runtime.webhooks.stop()
    hook = await store.create_webhook(sub())
    state = await runtime.create_thread("chat", user_id="u1")
    tid = state.thread_id
    await runtime.send_message(tid, "hello")
    await runtime.wait_idle(tid, timeout=5)
    await runtime.terminate(tid)
    rows = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert [r.event_type for r in rows] == ["thread.created", "run.settled", "thread.terminated"]
    created, settled, ended = (r.payload for r in rows)
    assert created["type"] == "thread.created" and created["timestamp"].endswith("Z")
    assert created["data"] == {
        "thread_id": tid,
        "agent_id": "chat",
        "user_id": "u1",
        "parent_id": None,
    }
    status = (await state.status()).to_wire()
    assert settled["data"]["thread_id"] == tid
    assert settled["data"]["reason"] == "stop_on_response"
    assert settled["data"]["status"]["state"] == "idle"
    assert settled["data"]["status"] == status or status["state"] != "idle"
    assert ended["data"]["thread_id"] == tid and ended["data"]["terminated"] > 0


async def test_c19_004_approvals_requested_and_decided(make_runtime: Any) -> None:
    """C19-004: a call that needs approval writes ``approval.requested`` (and the parked run
    ``run.settled`` / ``awaiting_approval``); its decision ``approval.decided``."""
    runtime = await make_runtime(
        [Reply.tool_calls(Call("pay", {"amount": 5}, id="c1")), Reply.text("done")]
    )
    store = runtime.store
    await runtime.webhooks.stop()
    hook = await store.create_webhook(
        sub("https://a.example.com/h", "approval.requested", "approval.decided", "run.settled")
    )
    state = await runtime.create_thread("chat")
    await runtime.send_message(state.thread_id, "pay")
    await runtime.wait_idle(state.thread_id, timeout=5)
    [pending] = await state.get_approvals()
    await state.decide_approval(
        "c1", approve=True, arguments_hash=pending.arguments_hash, decided_by="ann"
    )
    await runtime.wait_idle(state.thread_id, timeout=5)
    rows = await store.list_webhook_deliveries(subscription_id=hook.id)
    kinds = [r.event_type for r in rows]
    assert kinds[:3] == ["approval.requested", "run.settled", "approval.decided"]
    requested, parked, decided = (r.payload["data"] for r in rows[:3])
    assert requested["approval"]["state"] == "pending"
    assert requested["approval"]["tool_call_id"] == "c1"
    assert parked["reason"] == "awaiting_approval"
    assert decided["approval"]["state"] == "approved"
    assert decided["approval"]["decided_by"] == "ann"
    assert kinds[-1] == "run.settled" and rows[-1].payload["data"]["reason"] == "stop_on_response"


async def test_c19_005_budget_exceeded_with_the_failed_run(make_runtime: Any) -> None:
    """C19-005: a run stopped by its budget writes ``budget.exceeded`` beside its
    ``run.settled`` (``failed`` / ``budget_exceeded``), in the same transaction."""
    runtime = await make_runtime([Reply.tool_calls(Call("pay", {"amount": 1}))] * 3)
    store = runtime.store
    await runtime.webhooks.stop()
    hook = await store.create_webhook(sub("https://a.example.com/h", "budget.exceeded"))
    state = await runtime.create_thread("chat", budget=Budget(requests=0))
    await runtime.send_message(state.thread_id, "go")
    await runtime.wait_idle(state.thread_id, timeout=5)
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "budget_exceeded")
    [row] = await store.list_webhook_deliveries(subscription_id=hook.id)
    assert row.event_type == "budget.exceeded"
    assert row.payload["data"]["status"]["error"]["type"] == "BudgetExceeded"


async def test_c19_006_budget_warning(make_runtime: Any) -> None:
    """C19-006: a budget's warning (spec 15 §15.6) is written as ``budget.warning`` with the
    limit, dimension, spend and threshold, once per run and amount, by the time the run ends."""
    runtime = await make_runtime([Reply.text("hi")] * 2)
    store = runtime.store
    await runtime.webhooks.stop()
    hook = await store.create_webhook(sub("https://a.example.com/h", "budget.warning"))
    state = await runtime.create_thread("chat", budget=Budget(requests=2, warn_at=0.5))
    await runtime.send_message(state.thread_id, "go")
    await runtime.wait_idle(state.thread_id, timeout=5)
    [row] = await store.list_webhook_deliveries(subscription_id=hook.id)
    data = row.payload["data"]
    assert row.event_type == "budget.warning" and data["thread_id"] == state.thread_id
    assert (data["dimension"], data["spent"], data["limit"], data["threshold"]) == (
        "requests",
        1,
        2,
        0.5,
    )
    assert data["budget"] == "the run's budget" and data["scope"] == "run"
