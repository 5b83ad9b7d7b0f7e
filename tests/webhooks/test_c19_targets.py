"""Where a webhook may go (spec 19 §19.6): no SSRF into private, loopback, link-local or
metadata addresses unless the settings allow it — checked at subscribe time and again at
each connection (a name that resolves elsewhere later reaches nothing refused)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom.node.webhook_targets import TargetPolicy, TargetRefused, check_url
from threadloom.node.webhooks import WebhookOptions, WebhookWorker
from threadloom.providers.script import Reply
from threadloom.records import WebhookSubscription, new_id, new_webhook_secret
from webhook_receiver import Receiver

REFUSED = [
    "http://127.0.0.1/x",
    "http://127.1.2.3:8080/x",
    "http://localhost/x",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://10.0.0.5/x",
    "http://172.16.3.4/x",
    "http://192.168.1.1/x",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]/x",
    "http://100.64.0.1/x",
    "http://0.0.0.0/x",
    "http://[fd00::1]/x",
    "http://224.0.0.1/x",
    "http://2130706433/x",  # 127.0.0.1 as one number, as some resolvers read it
]


@pytest.mark.parametrize("url", REFUSED)
async def test_c19_020_private_loopback_and_metadata_targets_are_refused(url: str) -> None:
    """C19-020: a target resolving to a non-public address is refused by default."""
    with pytest.raises(TargetRefused) as caught:
        await check_url(url, TargetPolicy())
    assert caught.value.field == "url"


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "file:///etc/passwd", "http:///x", "http://u:p@8.8.8.8/x"]
)
async def test_c19_021_only_http_urls_without_credentials(url: str) -> None:
    """C19-021: only ``http``/``https`` URLs with a host and no credentials are targets."""
    with pytest.raises(TargetRefused):
        await check_url(url, TargetPolicy(allow_private=True))


@pytest.mark.parametrize("url", ["http://a..b/x", "http://.../x", "https://\udcff/x"])
async def test_an_invalid_host_name_is_refused_not_a_crash(url: str) -> None:
    """A host name the IDNA codec refuses (an empty or over-long label, a lone surrogate) is
    refused naming ``url`` — never an uncaught ``UnicodeError`` (a 500; the fuzzer found it)
    — while a valid name that does not resolve now is accepted (§19.6 rule 3)."""
    with pytest.raises(TargetRefused, match="is not a valid host name"):
        await check_url(url, TargetPolicy(allow_private=True))
    await check_url("https://no-such-host.invalid/x", TargetPolicy())


async def test_c19_022_the_settings_allow_private_targets() -> None:
    """C19-022: ``THREADLOOM_WEBHOOK_ALLOW_PRIVATE`` allows every address; the allow-list
    ``THREADLOOM_WEBHOOK_ALLOW`` the hosts and networks it names, and no other; a public
    address is always allowed."""
    await check_url("http://8.8.8.8/x", TargetPolicy())
    await check_url(
        "http://127.0.0.1/x", TargetPolicy.from_env({"THREADLOOM_WEBHOOK_ALLOW_PRIVATE": "1"})
    )
    listed = TargetPolicy.from_env({"THREADLOOM_WEBHOOK_ALLOW": "localhost, 10.1.0.0/16"})
    await check_url("http://localhost:9/x", listed)
    await check_url("http://10.1.2.3/x", listed)
    for url in ("http://10.2.0.1/x", "http://127.0.0.1/x", "http://169.254.169.254/"):
        with pytest.raises(TargetRefused):
            await check_url(url, listed)


async def test_c19_023_the_target_is_checked_again_at_connection_time(
    make_runtime: Any, receiver: Receiver
) -> None:
    """C19-023: a subscription to an address allowed when it was made (or stored past the
    check) is refused at connection time by a policy that no longer allows it: the
    receiver gets nothing, the attempt records why, and the retries end dead."""
    runtime = await make_runtime([Reply.text("hi")])
    store = runtime.store
    await runtime.webhooks.stop()
    await check_url(
        receiver.url, TargetPolicy.from_env({"THREADLOOM_WEBHOOK_ALLOW": "127.0.0.0/8"})
    )
    hook = await store.create_webhook(
        WebhookSubscription(
            id=new_id(),
            url=receiver.url.replace("127.0.0.1", "localhost"),
            secret=new_webhook_secret(),
            event_types=("thread.created",),
        )
    )
    await runtime.create_thread("chat")
    worker = WebhookWorker(store, "node-x", WebhookOptions(max_attempts=2, backoff_s=0.01))
    for _ in range(50):
        await worker.run_once()
        rows = await store.list_webhook_deliveries(subscription_id=hook.id)
        if rows[0].state == "dead":
            break
        await asyncio.sleep(0.02)
    await worker.stop()
    [row] = rows
    assert row.state == "dead" and row.attempts == 2 and row.last_status is None
    assert "non-public address" in (row.last_error or "")
    assert receiver.received == []
