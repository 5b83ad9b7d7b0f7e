"""Delivering outbound webhooks (spec 19 §19.4-§19.5): a node's background worker.

Every ``poll_s`` the worker claims due outbox rows with a lease (``Store.claim_webhooks``:
one node at a time per row, whatever the number of nodes), sends each one signed after the
Standard Webhooks specification with the ``standardwebhooks`` package (headers
``webhook-id`` — the event's stable id —, ``webhook-timestamp`` and ``webhook-signature``),
and records the attempt: a 2xx answer delivers it; anything else (another status, a refused
or timed-out connection, a target the policy refuses) makes it due again after an
exponential backoff with full jitter, and after ``max_attempts`` attempts dead, where the
API lists it and can deliver it again. A node that dies mid-delivery leaves its lease to
run out; another node then sends the same event again with the same id (at least once).

The worker runs beside the runs, never on their path: a settlement only writes the outbox
row, and a slow or hanging receiver costs one of the worker's connections until the
timeout (``timeout_s``), never a run's time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpcore
from standardwebhooks.webhooks import Webhook

from threadloom.metrics import Metrics
from threadloom.node.webhook_targets import PinnedBackend, TargetPolicy, TargetRefused, split_url
from threadloom.records import WebhookDelivery, WebhookSubscription
from threadloom.store.base import Store

log = logging.getLogger(__name__)

USER_AGENT = "threadloom-webhooks"


@dataclass(frozen=True)
class WebhookOptions:
    """The worker's settings (``from_env``: the ``THREADLOOM_WEBHOOK_*`` variables)."""

    poll_s: float = 1.0
    timeout_s: float = 10.0
    """A whole attempt's limit: connecting, sending and reading the answer."""
    max_attempts: int = 8
    backoff_s: float = 2.0
    """The first retry's delay; each further one doubles it, up to ``backoff_max_s``."""
    backoff_max_s: float = 3600.0
    batch: int = 32
    """Rows claimed at once (and sent concurrently)."""
    lease_s: float | None = None
    """A claim's lease (``THREADLOOM_WEBHOOK_LEASE_S``); default ``timeout_s`` + 30 s. Past
    it another node may send the row again: shorter than ``timeout_s`` it may do so while a
    live node still waits for its answer (at least once allows it; it is seldom wanted)."""
    policy: TargetPolicy = field(default_factory=TargetPolicy)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebhookOptions:
        env = os.environ if env is None else env

        def num(name: str, default: float) -> float:
            text = env.get(f"THREADLOOM_WEBHOOK_{name}")
            return float(text) if text else default

        return cls(
            poll_s=num("POLL_S", cls.poll_s),
            timeout_s=num("TIMEOUT_S", cls.timeout_s),
            max_attempts=int(num("MAX_ATTEMPTS", cls.max_attempts)),
            backoff_s=num("BACKOFF_S", cls.backoff_s),
            backoff_max_s=num("BACKOFF_MAX_S", cls.backoff_max_s),
            lease_s=num("LEASE_S", 0.0) or None,
            policy=TargetPolicy.from_env(env),
        )

    @property
    def lease_us(self) -> int:
        lease = self.lease_s if self.lease_s is not None else self.timeout_s + 30.0
        return int(lease * 1_000_000)

    def backoff_us(self, attempts: int) -> int:
        """The delay after the ``attempts``-th failed attempt: full jitter over an
        exponential cap (``backoff_s * 2**(attempts-1)``, at most ``backoff_max_s``)."""
        cap = min(self.backoff_max_s, self.backoff_s * 2 ** max(0, attempts - 1))
        return int(random.uniform(cap / 2, cap) * 1_000_000)


def signed_headers(
    sub: WebhookSubscription, delivery: WebhookDelivery, body: str
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt of ``delivery``: its event id, now, and
    the signature of ``id.timestamp.body`` with the subscription's secret."""
    now = datetime.now(UTC)
    signature = Webhook(sub.secret).sign(delivery.event_id, now, body)
    return {
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


def body_of(delivery: WebhookDelivery) -> str:
    """The body of each attempt: the outbox row's payload as compact JSON."""
    return json.dumps(delivery.payload, separators=(",", ":"))


class WebhookWorker:
    """A node's delivery worker (start / stop, or ``run_once`` for one round)."""

    def __init__(
        self,
        store: Store,
        node_id: str,
        options: WebhookOptions | None = None,
        clock: Callable[[], int] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.metrics = metrics
        self.options = options or WebhookOptions.from_env()
        self.clock = clock
        self._pool: httpcore.AsyncConnectionPool | None = None
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self.rounds = 0

    def _connections(self) -> httpcore.AsyncConnectionPool:
        if self._pool is None:
            self._pool = httpcore.AsyncConnectionPool(
                network_backend=PinnedBackend(self.options.policy),
                max_connections=max(4, self.options.batch),
                keepalive_expiry=30.0,
            )
        return self._pool

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="threadloom-webhooks"
            )

    async def stop(self) -> None:
        """Stop claiming and abandon the attempts in flight (unrecorded: their leases run
        out and any node sends them again, with the same ids)."""
        task, self._task = self._task, None
        # a task already done (its event loop ended: a runtime closed from another loop,
        # as asyncio.run does it) is neither cancelled nor awaited
        tasks = [t for t in (task, *self._inflight) if t is not None and not t.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()

    async def _run(self) -> None:
        """Claim as many due rows as there are free places (``batch`` in flight at most) and
        send each in a task of its own: one slow receiver holds one place until its timeout,
        never the others' deliveries."""
        while True:
            free = self.options.batch - len(self._inflight)
            claimed = 0
            if free > 0:
                try:
                    rows = await self.store.claim_webhooks(
                        self.node_id, free, self.options.lease_us
                    )
                except asyncio.CancelledError:
                    raise
                except Exception:  # the store went away for a moment: the next round retries
                    log.exception("claiming webhook deliveries failed")
                    rows = []
                claimed = len(rows)
                for delivery, sub in rows:
                    task = asyncio.get_running_loop().create_task(self._attempt(delivery, sub))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
                self.rounds += 1
            if claimed == 0 or claimed < free:
                await asyncio.sleep(self.options.poll_s * random.uniform(0.8, 1.2))

    async def _attempt(self, delivery: WebhookDelivery, sub: WebhookSubscription) -> None:
        try:
            await self.deliver(delivery, sub)
        except asyncio.CancelledError:
            raise
        except Exception:  # recording failed: the lease runs out and the row is sent again
            log.exception("webhook %s: recording the attempt failed", delivery.event_id)

    async def run_once(self) -> int:
        """Claim the due deliveries and send them, concurrently, waiting for each; returns
        how many were claimed."""
        claimed = await self.store.claim_webhooks(
            self.node_id, self.options.batch, self.options.lease_us
        )
        if claimed:
            await asyncio.gather(*(self.deliver(d, s) for d, s in claimed))
        self.rounds += 1
        return len(claimed)

    async def deliver(self, delivery: WebhookDelivery, sub: WebhookSubscription) -> str:
        """Send one claimed delivery and record the attempt; returns the state recorded."""
        status, error = await self.send(delivery, sub)
        if status is not None and 200 <= status < 300:
            state, next_at = "delivered", None
        elif delivery.attempts >= self.options.max_attempts:
            state, next_at = "dead", None
        else:
            state = "pending"
            now = self.clock() if self.clock is not None else _now_us()
            next_at = now + self.options.backoff_us(delivery.attempts)
        if state != "delivered":
            log.info(
                "webhook %s to %s: attempt %d failed (%s)%s",
                delivery.event_id,
                sub.id,
                delivery.attempts,
                error or status,
                ", dead" if state == "dead" else "",
            )
        await self.store.record_webhook_attempt(
            delivery.event_id, sub.id, self.node_id, state, next_at, status, error
        )
        if self.metrics is not None:
            self.metrics.webhook_attempts.add((state,))
        return state

    async def send(
        self, delivery: WebhookDelivery, sub: WebhookSubscription
    ) -> tuple[int | None, str | None]:
        """One attempt: ``(status, None)`` when the receiver answered, ``(None, why)`` when
        not (refused target, connection error, timeout)."""
        body = body_of(delivery)
        timeout = self.options.timeout_s
        try:
            split_url(sub.url)
            headers = signed_headers(sub, delivery, body)
            async with asyncio.timeout(timeout):
                response = await self._connections().request(
                    "POST",
                    sub.url,
                    headers=list(headers.items()),
                    content=body.encode(),
                    extensions={
                        "timeout": {
                            "connect": timeout,
                            "read": timeout,
                            "write": timeout,
                            "pool": timeout,
                        }
                    },
                )
            return response.status, None
        except TargetRefused as exc:
            return None, str(exc)
        except (TimeoutError, httpcore.TimeoutException):
            return None, f"timed out after {timeout:g} s"
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:300]
        except Exception as exc:  # a receiver's odd answer never stops the worker
            return None, f"{type(exc).__name__}: {exc}"[:300]


def _now_us() -> int:
    return int(datetime.now(UTC).timestamp() * 1_000_000)
