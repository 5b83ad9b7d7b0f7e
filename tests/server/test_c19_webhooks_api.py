"""Outbound webhooks over HTTP (spec 19 §19.7), admin only, on a real server and Runtime:
subscriptions made, read, changed and deleted; SSRF targets refused with a 400; the
dead-letter list and delivering a dead one again, received by a local receiver."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from conftest import Api
from webhook_receiver import Receiver

FAST = {
    "THREADLOOM_WEBHOOK_POLL_S": "0.05",
    "THREADLOOM_WEBHOOK_BACKOFF_S": "0.02",
    "THREADLOOM_WEBHOOK_BACKOFF_MAX_S": "0.05",
    "THREADLOOM_WEBHOOK_MAX_ATTEMPTS": "2",
    "THREADLOOM_WEBHOOK_TIMEOUT_S": "1",
}


async def test_c19_030_admins_manage_subscriptions(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C19-030: an admin creates a subscription (201, the secret answered once), lists,
    reads, changes and deletes it; a user gets 403; an unknown id 404; a bad body 400."""
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    api: Api = await make_api()
    root = api.client("root")
    made = await root.post(
        "/api/webhooks",
        json={"url": "https://8.8.8.8/hook", "event_types": ["run.settled"], "description": "d"},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    hook_id = body["id"]
    assert body["secret"].startswith("whsec_") and body["event_types"] == ["run.settled"]
    assert body["enabled"] is True and body["url"] == "https://8.8.8.8/hook"
    listed = (await root.get("/api/webhooks")).json()["webhooks"]
    assert [h["id"] for h in listed] == [hook_id] and "secret" not in listed[0]
    one = (await root.get(f"/api/webhooks/{hook_id}")).json()
    assert one["description"] == "d" and "secret" not in one
    patched = await root.patch(f"/api/webhooks/{hook_id}", json={"enabled": False})
    assert patched.status_code == 200 and patched.json()["enabled"] is False
    assert "secret" not in patched.json()
    alice = api.client("alice")
    assert (await alice.get("/api/webhooks")).status_code == 403
    assert (await alice.post("/api/webhooks", json={"url": "https://8.8.8.8/"})).status_code == 403
    for bad in (
        {"url": "ftp://x/"},
        {"url": "https://8.8.8.8/", "event_types": ["run.exploded"]},
        {"url": "https://8.8.8.8/", "secret": "plain"},
        {"url": "https://8.8.8.8/", "enabled": "yes"},
        {},
    ):
        refused = await root.post("/api/webhooks", json=bad)
        assert refused.status_code == 400, (bad, refused.text)
    missing = "/api/webhooks/00000000-0000-4000-8000-000000000000"
    assert (await root.get(missing)).status_code == 404
    assert (await root.patch(missing, json={"enabled": True})).status_code == 404
    assert (await root.delete(f"/api/webhooks/{hook_id}")).json() == {"success": True}
    assert (await root.delete(f"/api/webhooks/{hook_id}")).status_code == 404


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/h", "http://169.254.169.254/latest/", "http://10.0.0.1/", "http://[::1]/"],
)
async def test_c19_031_ssrf_targets_are_refused_at_subscribe_time(make_api: Any, url: str) -> None:
    """C19-031: a target resolving to a loopback, private, link-local or metadata address
    is a 400 naming ``url`` unless the settings allow it; nothing is stored."""
    api: Api = await make_api()
    root = api.client("root")
    refused = await root.post("/api/webhooks", json={"url": url})
    assert refused.status_code == 400, refused.text
    assert refused.json()["details"][0]["field"] == "url"
    assert "non-public address" in refused.json()["error"]
    assert (await root.get("/api/webhooks")).json()["webhooks"] == []


async def test_c19_032_dead_letters_listed_and_delivered_again(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C19-032: with loopback allowed, a receiver that fails makes the delivery dead after
    the last attempt; ``?state=dead`` lists it (per subscription and for all); redeliver
    sends it again with the same ``webhook-id``, verified with the secret answered at
    creation; redelivering one that is not dead is a 409, an unknown one a 404."""
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("THREADLOOM_WEBHOOK_ALLOW", "127.0.0.0/8")
    receiver = Receiver(default=500).start()
    try:
        api: Api = await make_api()
        root = api.client("root")
        made = (
            await root.post(
                "/api/webhooks", json={"url": receiver.url, "event_types": ["thread.created"]}
            )
        ).json()
        await api.thread(user="alice")
        path = f"/api/webhooks/{made['id']}/deliveries"
        dead = await _until(root, f"{path}?state=dead")
        assert dead[0]["attempts"] == 2 and dead[0]["last_status"] == 500
        everywhere = (await root.get("/api/webhook-deliveries?state=dead")).json()["deliveries"]
        assert [d["event_id"] for d in everywhere] == [dead[0]["event_id"]]
        assert (await root.get(f"{path}?state=gone")).status_code == 400
        receiver.default = 200
        again = await root.post(f"{path}/{dead[0]['event_id']}/redeliver")
        assert again.status_code == 200 and again.json()["state"] == "pending"
        delivered = await _until(root, f"{path}?state=delivered")
        assert delivered[0]["event_id"] == dead[0]["event_id"]
        assert receiver.ids() == [dead[0]["event_id"]] * 3
        last = receiver.received[-1]
        assert Webhook(made["secret"]).verify(last.body, last.headers)["type"] == "thread.created"
        not_dead = await root.post(f"{path}/{dead[0]['event_id']}/redeliver")
        assert not_dead.status_code == 409
        assert (await root.post(f"{path}/evt_nope/redeliver")).status_code == 404
        assert (await api.client("alice").get(path)).status_code == 403
    finally:
        receiver.stop()


async def _until(client: Any, path: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows: list[dict[str, Any]] = (await client.get(path)).json()["deliveries"]
        if rows:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"nothing at {path}")


async def test_c19_033_the_clients_webhook_calls(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C19-033: the Python client's ``webhooks`` calls (async and sync): create (with the
    secret), list, get, update, deliveries (the dead letters), redeliver, delete; a refused
    target is the client's 400 error."""
    from threadloom.client import AsyncClient, Client
    from threadloom.client.errors import ThreadloomError

    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("THREADLOOM_WEBHOOK_ALLOW", "127.0.0.0/8")
    receiver = Receiver(default=500).start()
    try:
        api: Api = await make_api()
        async with AsyncClient(api.base, token=api.keys["root"]) as client:
            made = await client.webhooks.create(receiver.url, ["thread.created"])
            assert made.secret is not None and made.event_types == ["thread.created"]
            assert [w.id for w in await client.webhooks.list()] == [made.id]
            assert (await client.webhooks.get(made.id)).secret is None
            await api.thread(user="alice")
            dead: list[Any] = []
            for _ in range(200):
                dead = await client.webhooks.deliveries(made.id, state="dead")
                if dead:
                    break
                await asyncio.sleep(0.05)
            assert [d.event_id for d in await client.webhooks.deliveries(state="dead")] == [
                dead[0].event_id
            ]
            receiver.default = 200
            again = await client.webhooks.redeliver(made.id, dead[0].event_id)
            assert again.state == "pending" and again.event_id == dead[0].event_id
            changed = await client.webhooks.update(made.id, enabled=False)
            assert changed.enabled is False
            with pytest.raises(ThreadloomError):
                await client.webhooks.create("http://169.254.169.254/latest/")

        def sync_calls() -> None:
            with Client(api.base, token=api.keys["root"]) as client:
                assert [w.id for w in client.webhooks.list()] == [made.id]
                client.webhooks.delete(made.id)
                assert client.webhooks.list() == []

        await asyncio.to_thread(sync_calls)
    finally:
        receiver.stop()
