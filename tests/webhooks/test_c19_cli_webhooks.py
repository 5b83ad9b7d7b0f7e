"""``threadloom webhooks …`` (spec 19 §19.8) on both stores, beside a runtime whose delivery
worker sends what the command line subscribes and re-delivers; the receiver is a local
HTTP server the test starts (loopback allowed explicitly)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook
from typer.testing import CliRunner

from threadloom.cli.commands import app
from threadloom.providers.script import Reply
from webhook_receiver import Receiver


def _cli(db_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["webhooks", *args, "--store", db_url])
    return result.exit_code, result.output


async def _run(db_url: str, *args: str) -> tuple[int, str]:
    return await asyncio.to_thread(_cli, db_url, *args)


async def _until(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_c19_040_the_command_line_manages_subscriptions_and_dead_letters(
    db_url: str, make_runtime: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C19-040: ``add`` subscribes a URL (id and secret printed, the secret verifies the
    deliveries), ``list`` shows it; a receiver answering 503 leaves the event dead and
    ``dead`` lists it; ``redeliver`` makes it pending and the worker delivers it with the
    same id; redelivering it again exits 1; ``remove`` removes it. An unknown event type
    or a target the policy refuses exits 2 and stores nothing; an unknown id exits 1."""
    receiver.default = 503
    runtime = await make_runtime([Reply.text("hi")])
    code, out = await _run(db_url, "add", receiver.url, "--event", "run.settled")
    assert code == 0, out
    webhook_id = out.splitlines()[0].removeprefix("added webhook ")
    secret = out.splitlines()[1].removeprefix("secret: ")
    stored = await runtime.store.get_webhook(webhook_id)
    assert stored is not None and stored.secret == secret
    assert stored.event_types == ("run.settled",)
    assert (await _run(db_url, "add", receiver.url, "--event", "run.exploded"))[0] == 2
    monkeypatch.setenv("THREADLOOM_WEBHOOK_ALLOW_PRIVATE", "0")
    code, out = await _run(db_url, "add", receiver.url)
    assert code == 2 and "url" in out
    monkeypatch.setenv("THREADLOOM_WEBHOOK_ALLOW_PRIVATE", "1")
    assert [w.id for w in await runtime.store.list_webhooks()] == [webhook_id]
    code, out = await _run(db_url, "list")
    assert out.splitlines()[1].split() == [webhook_id, "yes", "run.settled", receiver.url]
    state = await runtime.create_thread("chat")
    await runtime.send_message(state.thread_id, "hello")
    await runtime.wait_idle(state.thread_id, timeout=5)
    [dead] = await _until(lambda: runtime.store.list_webhook_deliveries(state="dead"))
    code, out = await _run(db_url, "dead")
    assert code == 0
    row = out.splitlines()[1].split()
    assert row[:4] == [dead.event_id, webhook_id, "run.settled", "3"]
    receiver.default = 200
    code, out = await _run(db_url, "redeliver", webhook_id, dead.event_id)
    assert code == 0, out
    await _until(lambda: runtime.store.list_webhook_deliveries(state="delivered"))
    assert receiver.ids() == [dead.event_id] * 4
    last = receiver.received[-1]
    assert Webhook(secret).verify(last.body, last.headers)["type"] == "run.settled"
    assert (await _run(db_url, "redeliver", webhook_id, dead.event_id))[0] == 1
    assert (await _run(db_url, "redeliver", webhook_id, "evt_unknown"))[0] == 1
    assert (await _run(db_url, "dead"))[1].splitlines()[1:] == []
    assert (await _run(db_url, "remove", webhook_id))[0] == 0
    assert await runtime.store.list_webhooks() == []
    assert (await _run(db_url, "remove", webhook_id))[0] == 1
