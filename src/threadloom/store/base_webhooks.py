"""The outbound-webhooks part of the Store protocol (spec 19): subscriptions, and the outbox
of their deliveries that the store writes in the transaction of each event it reports.
``threadloom.store.base.Store`` is a ``WebhookStore``."""

from __future__ import annotations

from typing import Any, Protocol

from threadloom.records import WebhookDelivery, WebhookSubscription


class WebhookStore(Protocol):
    """Subscriptions and the outbox (spec 19)."""

    async def create_webhook(self, sub: WebhookSubscription) -> WebhookSubscription:
        """Insert a subscription (an unknown event type → ``InvalidField``)."""
        ...

    async def get_webhook(self, sub_id: str) -> WebhookSubscription | None: ...

    async def list_webhooks(self) -> list[WebhookSubscription]: ...

    async def update_webhook(
        self, sub_id: str, changes: dict[str, Any]
    ) -> WebhookSubscription | None:
        """Change the named fields; ``None`` when there is no such subscription."""
        ...

    async def delete_webhook(self, sub_id: str) -> bool:
        """Delete a subscription and its outbox rows."""
        ...

    async def emit_webhook(self, event_type: str, data: dict[str, Any]) -> int:
        """Write an event that no other store write carries (a budget warning) into the
        outbox, one transaction; returns the rows written."""
        ...

    async def claim_webhooks(
        self, node_id: str, limit: int, lease_us: int
    ) -> list[tuple[WebhookDelivery, WebhookSubscription]]:
        """Claim due pending deliveries for ``node_id`` with a lease of ``lease_us``, each
        claim counted an attempt."""
        ...

    async def record_webhook_attempt(
        self,
        event_id: str,
        sub_id: str,
        node_id: str,
        state: str,
        next_at_us: int | None,
        status: int | None,
        error: str | None,
    ) -> bool:
        """Record an attempt made under ``node_id``'s lease (``False``: the lease was lost)."""
        ...

    async def list_webhook_deliveries(
        self, state: str | None = None, subscription_id: str | None = None, limit: int = 100
    ) -> list[WebhookDelivery]: ...

    async def get_webhook_delivery(self, event_id: str, sub_id: str) -> WebhookDelivery | None: ...

    async def redeliver_webhook(self, event_id: str, sub_id: str) -> WebhookDelivery | None:
        """A dead delivery pending again (same event id); ``None`` when there is none."""
        ...

    async def count_settled_webhooks(self, state: str, before_us: int) -> int:
        """Outbox rows in ``state`` (``delivered`` or ``dead``) settled before
        ``before_us``: delivered then, or dead with their last attempt due then (retention,
        spec 17 §17.2.3 rule 7)."""
        ...

    async def prune_settled_webhooks(self, state: str, before_us: int, limit: int) -> int:
        """Delete up to ``limit`` of the rows ``count_settled_webhooks`` counts, one
        transaction; how many went (fewer than ``limit``: none is left)."""
        ...
