"""A real node killed mid-delivery (issue 37's fault tests; spec 19 §19.4 rule 5): a
``threadloom serve`` process is SIGKILLed while its webhook worker waits on a receiver that
holds the request, then a node starts again on the same store — on PostgreSQL under a new
node id, as ``threadloom serve`` does, or a second node already running takes over. The
event is sent once more, with the same ``webhook-id`` and body, and its signature verifies
with the subscription's secret.

The kill comes once the receiver has the request (no sleep decides it); the lease is short
(``THREADLOOM_WEBHOOK_LEASE_S``) so the restart need not wait the default 30 s.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from pg_support import NODE_TIMINGS
from server.test_serve import spawn_server
from store_probe import StoreProbe
from webhook_receiver import Received, Receiver

PROJECT = Path(__file__).resolve().parents[1] / "attack" / "project"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")

LEASE_S = 2.0
SETTINGS = {
    **NODE_TIMINGS,
    "THREADLOOM_WEBHOOK_ALLOW_PRIVATE": "1",
    "THREADLOOM_WEBHOOK_POLL_S": "0.1",
    "THREADLOOM_WEBHOOK_TIMEOUT_S": "30",
    "THREADLOOM_WEBHOOK_LEASE_S": str(LEASE_S),
}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Nodes:
    """The ``threadloom serve`` processes of one test, each stopped (or killed) once."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.outputs: list[str] = []

    def start(self, node_id: str) -> str:
        proc, base = spawn_server(PROJECT, self.url, **SETTINGS, THREADLOOM_NODE_ID=node_id)
        self.procs[node_id] = proc
        return base

    def kill(self, node_id: str) -> None:
        proc = self.procs[node_id]
        assert proc.poll() is None, "the node died early"
        proc.send_signal(signal.SIGKILL)
        self.outputs.append(proc.communicate(timeout=30)[0].decode(errors="replace"))

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                output = proc.communicate(timeout=30)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                output = proc.communicate(timeout=30)[0]
            self.outputs.append(output.decode(errors="replace"))


@pytest.fixture
def nodes(db_url: str) -> Iterator[Nodes]:
    made = Nodes(db_url)
    yield made
    made.stop_all()
    for output in made.outputs:
        assert "Traceback" not in output, output


@pytest.fixture
def holding() -> Iterator[Receiver]:
    """A receiver that holds the first request 20 s (the node is killed meanwhile), then
    answers 200."""
    r = Receiver(answers=[("hang", 20.0)]).start()
    yield r
    r.stop()


def subscribe(base: str, receiver: Receiver) -> dict[str, Any]:
    made = httpx.post(
        f"{base}/api/webhooks",
        json={"url": receiver.url, "event_types": ["thread.created"]},
        timeout=20,
    )
    assert made.status_code == 201, made.text
    found: dict[str, Any] = made.json()
    return found


def held_delivery(
    base: str, receiver: Receiver, probe: StoreProbe
) -> tuple[dict[str, Any], str, str, int]:
    """Subscribe, create a thread (its ``thread.created`` event) and wait until the receiver
    holds a node's request; the subscription, the thread's id, the node holding it and the
    end of its lease (µs)."""
    hook = subscribe(base, receiver)
    created = httpx.post(f"{base}/api/threads", json={"agent_id": "plain"}, timeout=20)
    assert created.status_code == 200, created.text
    wait_for(lambda: receiver.received, "the receiver to get the request")
    [(state, attempts, lease_node, lease_until)] = probe.rows(
        "SELECT state, attempts, lease_node, lease_until_us FROM webhook_outbox"
        " WHERE subscription_id = ?",
        (hook["id"],),
    )
    assert (state, attempts) == ("pending", 1) and lease_node is not None
    thread: str = created.json()["threadId"]
    return hook, thread, str(lease_node), int(lease_until)


def sent_at_us(got: Received) -> int:
    """When the receiver got ``got``, on the wall clock the store's lease is written in (the
    receiver stamps arrivals with the monotonic clock)."""
    return int((time.time() - (time.monotonic() - got.at)) * 1_000_000)


def check_delivered_again(
    hook: dict[str, Any], thread: str, receiver: Receiver, probe: StoreProbe
) -> None:
    """The row is delivered by the second attempt; the receiver got the event twice, the
    same id and body, each signed with the subscription's secret."""

    def delivered() -> list[tuple[Any, ...]]:
        rows = probe.rows(
            "SELECT event_id, state, attempts, last_status FROM webhook_outbox"
            " WHERE subscription_id = ?",
            (hook["id"],),
        )
        return [r for r in rows if r[1] == "delivered"]

    [(event_id, _, attempts, status)] = wait_for(delivered, "the delivery after the restart")
    assert (attempts, status) == (2, 200)
    assert receiver.ids() == [event_id, event_id]
    first, second = receiver.received
    assert first.body == second.body
    verifier = Webhook(hook["secret"])
    for got in receiver.received:
        payload = verifier.verify(got.body, got.headers)
        assert payload["type"] == "thread.created"
        assert payload["data"]["thread_id"] == thread


def test_c19_041_a_node_killed_mid_delivery_sends_it_again_after_a_restart(
    db_url: str, nodes: Nodes, holding: Receiver
) -> None:
    """C19-041: ``threadloom serve`` SIGKILLed while the receiver holds its webhook request;
    a node started again on the store sends the event once more (after the dead node's lease)
    with the same ``webhook-id``, the signature verifies, and the row is delivered after two
    attempts — the killed one counted."""
    probe = StoreProbe(db_url)
    base = nodes.start("node-a")
    hook, thread, holder, lease_until = held_delivery(base, holding, probe)
    assert holder == "node-a"
    nodes.kill("node-a")
    assert len(holding.received) == 1  # nothing was sent again by the dead node
    nodes.start("node-a-again")
    check_delivered_again(hook, thread, holding, probe)
    # not before the killed node's lease ran out (50 ms: the two clocks' reading apart)
    assert sent_at_us(holding.received[1]) >= lease_until - 50_000


@pytest.mark.postgres_only
def test_c19_042_a_second_node_takes_over_a_killed_nodes_delivery(
    db_url: str, nodes: Nodes, holding: Receiver
) -> None:
    """C19-042: two nodes on one PostgreSQL store; the one whose request the receiver holds
    (whichever claimed the row) is SIGKILLed, and the other — running all along, never
    restarted — sends the event once its lease ran out, with the same ``webhook-id``,
    signed."""
    probe = StoreProbe(db_url)
    base = nodes.start("node-a")
    nodes.start("node-b")
    hook, thread, holder, lease_until = held_delivery(base, holding, probe)
    survivor = "node-b" if holder == "node-a" else "node-a"
    nodes.kill(holder)
    check_delivered_again(hook, thread, holding, probe)
    assert sent_at_us(holding.received[1]) >= lease_until - 50_000
    # the survivor's worker took it over: no node restarted, the holder is dead
    assert nodes.procs[holder].poll() is not None and nodes.procs[survivor].poll() is None
