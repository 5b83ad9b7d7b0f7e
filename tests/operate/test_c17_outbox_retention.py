"""Retention of the webhook outbox (spec 17 §17.2.3 rule 7, spec 19 §19.5) on both stores:
delivered rows go N days after their delivery, dead letters N days after their last
attempt (a setting of their own: unset, the dead-letter list keeps them), a pending row
never. Rows are made by the real store (a subscription, threads whose creation writes
``thread.created``) and settled through its claim and record calls on a clock the test
moves; the runtime's own delivery worker is stopped."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from threadloom import RetentionPolicy, Runtime
from threadloom.cli.commands import app
from threadloom.errors import InvalidArgument
from threadloom.records import WebhookSubscription, new_id, new_webhook_secret

DAY_US = 86_400_000_000
LEASE_US = 60_000_000


class Clock:
    """A clock the test moves: microseconds since the epoch."""

    def __init__(self, now: int = 1_800_000_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1
        return self.now

    def days(self, n: float) -> None:
        self.now += round(n * DAY_US)


async def opened(db_url: str, clock: Clock, **policy: Any) -> Runtime:
    rt = await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(interval_s=None, **policy)
    )
    await rt.webhooks.stop()  # the test settles the rows itself
    return rt


async def subscribed(rt: Runtime) -> str:
    sub = await rt.store.create_webhook(
        WebhookSubscription(
            id=new_id(),
            url="https://hooks.example.com/in",
            secret=new_webhook_secret(),
            event_types=("thread.created",),
        )
    )
    return sub.id


async def rows(rt: Runtime, state: str, n: int) -> list[str]:
    """``n`` new events settled in ``state`` (``pending``: claimed, failed, due again in
    100 days; ``delivered``; ``dead``); their event ids."""
    for _ in range(n):
        await rt.create_thread("a")
    claimed = await rt.store.claim_webhooks("node-t", 1000, LEASE_US)
    assert len(claimed) == n
    for delivery, sub in claimed:
        next_at = rt.store.clock() + 100 * DAY_US if state == "pending" else None
        status = 200 if state == "delivered" else 503
        recorded = await rt.store.record_webhook_attempt(
            delivery.event_id, sub.id, "node-t", state, next_at, status, None
        )
        assert recorded
    return [d.event_id for d, _ in claimed]


async def left(rt: Runtime, state: str) -> list[str]:
    return sorted(d.event_id for d in await rt.store.list_webhook_deliveries(state=state))


async def test_c17_091_delivered_rows_go_n_days_after_their_delivery(db_url: str) -> None:
    """C17-091: ``webhook_delivered_days`` deletes the rows delivered more than N days ago;
    rows delivered since, dead letters and pending rows (however old) stay."""
    clock = Clock()
    rt = await opened(db_url, clock, webhook_delivered_days=2)
    try:
        await subscribed(rt)
        old = await rows(rt, "delivered", 3)
        dead = await rows(rt, "dead", 1)
        waiting = await rows(rt, "pending", 1)
        clock.days(3)
        recent = await rows(rt, "delivered", 2)
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.outbox_rows) == ("webhook_delivered_days", 3)
        assert report.lines() == ["webhook_delivered_days: deleted 3 webhook outbox rows"]
        assert await left(rt, "delivered") == sorted(recent)
        assert await left(rt, "dead") == dead
        assert await left(rt, "pending") == waiting
        assert not set(old) & {d.event_id for d in await rt.store.list_webhook_deliveries()}
        assert (await rt.apply_retention()).outcomes[0].outbox_rows == 0
    finally:
        await rt.close()


async def test_c17_092_dead_letters_stay_unless_their_own_rule_is_set(db_url: str) -> None:
    """C17-092: without ``webhook_dead_days`` a dead letter stays whatever its age (the
    dead-letter list keeps it for a re-delivery); with it, a dead letter whose last attempt
    was due more than N days ago goes, a newer one stays, and one delivered again
    (pending, due now) stays."""
    clock = Clock()
    rt = await opened(db_url, clock, webhook_delivered_days=1)
    try:
        sub_id = await subscribed(rt)
        old_dead = await rows(rt, "dead", 2)
        clock.days(30)
        assert (await rt.apply_retention()).outcomes[0].outbox_rows == 0
        assert await left(rt, "dead") == sorted(old_dead)
    finally:
        await rt.close()
    rt = await opened(db_url, clock, webhook_dead_days=10)
    try:
        new_dead = await rows(rt, "dead", 1)
        again = await rt.store.redeliver_webhook(old_dead[0], sub_id)
        assert again is not None and again.state == "pending"
        report = await rt.apply_retention()
        assert [(o.rule, o.outbox_rows) for o in report.outcomes] == [("webhook_dead_days", 1)]
        assert await left(rt, "dead") == new_dead
        assert await left(rt, "pending") == [old_dead[0]]
    finally:
        await rt.close()


async def test_c17_093_dry_run_counts_and_a_pass_deletes_past_a_batch(db_url: str) -> None:
    """C17-093: a dry run counts per outbox rule the rows a pass would delete and deletes
    nothing; the pass, in transactions of ``batch`` rows, then deletes exactly those —
    more than one batch — after the thread rules and the log-body rule."""
    clock = Clock()
    policy = {"webhook_delivered_days": 1, "webhook_dead_days": 1, "log_body_days": 1}
    rt = await opened(db_url, clock, batch=2, **policy)
    try:
        await subscribed(rt)
        delivered = await rows(rt, "delivered", 5)
        dead = await rows(rt, "dead", 3)
        clock.days(2)
        dry = await rt.apply_retention(dry_run=True)
        assert [(o.rule, o.outbox_rows) for o in dry.outcomes] == [
            ("log_body_days", 0),
            ("webhook_delivered_days", 5),
            ("webhook_dead_days", 3),
        ]
        assert dry.lines()[1] == "webhook_delivered_days: would delete 5 webhook outbox rows"
        assert await left(rt, "delivered") == sorted(delivered)
        assert await left(rt, "dead") == sorted(dead)
        real = await rt.apply_retention()
        assert [(o.rule, o.outbox_rows) for o in real.outcomes] == [
            (o.rule, o.outbox_rows) for o in dry.outcomes
        ]
        assert real.to_dict()["rules"][1]["outbox_rows"] == 5
        assert await rt.store.list_webhook_deliveries() == []
    finally:
        await rt.close()


def test_c17_094_settings_from_the_environment_and_the_command_line(tmp_path: Any) -> None:
    """C17-094: ``THREADLOOM_RETENTION_WEBHOOK_DELIVERED_DAYS`` and ``…_DEAD_DAYS`` set the
    outbox rules (a bad value refused naming the variable); each alone enables the policy;
    ``threadloom retention --webhook-delivered-days`` runs the rule (exit 0)."""
    env = {
        "THREADLOOM_RETENTION_WEBHOOK_DELIVERED_DAYS": "7",
        "THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS": "30.5",
    }
    policy = RetentionPolicy.from_env(env)
    assert (policy.webhook_delivered_days, policy.webhook_dead_days) == (7.0, 30.5)
    assert RetentionPolicy(webhook_dead_days=1).enabled
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(InvalidArgument, match="THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS"):
            RetentionPolicy.from_env({"THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS": bad})
    with pytest.raises(InvalidArgument, match="webhook_delivered_days"):
        RetentionPolicy(webhook_delivered_days=0)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    done = CliRunner().invoke(
        app, ["retention", "--store", url, "--json", "--webhook-delivered-days", "3"]
    )
    assert done.exit_code == 0, done.output
    assert '"rule": "webhook_delivered_days"' in done.output
    assert '"outbox_rows": 0' in done.output
