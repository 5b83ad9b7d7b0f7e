"""The persisted shapes of outbound webhooks (spec 19): a subscription (where to send which
event types, signed with which secret) and a delivery (one event for one subscription, as
the outbox keeps it until it is delivered or dead). Plain typed data, no I/O."""

from __future__ import annotations

import base64
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

WEBHOOK_EVENT_TYPES: tuple[str, ...] = (
    "run.settled",
    "approval.requested",
    "approval.decided",
    "budget.warning",
    "budget.exceeded",
    "thread.created",
    "thread.terminated",
    "schedule.fired",
    "schedule.failed",
    "trigger.fired",
)
"""The event types a subscription may name (spec 19 §19.2)."""

DeliveryState = Literal["pending", "delivered", "dead"]


class WebhookSubscription(BaseModel):
    """Where the events of some types are sent (spec 19 §19.1). ``event_types`` empty: all."""

    model_config = ConfigDict(frozen=True)

    id: str
    url: str
    secret: str
    """The Standard Webhooks secret, ``whsec_`` + base64 of the key bytes."""
    event_types: tuple[str, ...] = ()
    enabled: bool = True
    description: str | None = None
    created_at: int = 0
    updated_at: int = 0

    def wants(self, event_type: str) -> bool:
        return self.enabled and (not self.event_types or event_type in self.event_types)

    def to_wire(self, *, with_secret: bool = False) -> dict[str, Any]:
        out = self.model_dump()
        out["event_types"] = list(self.event_types)
        if not with_secret:
            del out["secret"]
        return out


class WebhookDelivery(BaseModel):
    """One event for one subscription, in the outbox (spec 19 §19.3). ``event_id`` is the
    ``webhook-id`` every attempt sends, so a receiver can deduplicate."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    subscription_id: str
    event_type: str
    payload: dict[str, Any]
    """The body sent: ``{"type", "timestamp", "data"}``."""
    created_at: int
    state: DeliveryState = "pending"
    attempts: int = 0
    next_attempt_at: int = 0
    last_error: str | None = None
    last_status: int | None = None
    delivered_at: int | None = None

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump()


def new_webhook_secret() -> str:
    """A new Standard Webhooks secret: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()
