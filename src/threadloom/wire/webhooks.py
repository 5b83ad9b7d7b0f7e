"""Outbound webhooks over HTTP (spec 19 §19.7, admin): the bodies that create and change a
subscription, the subscription as answered (its secret only when it is made), and the
deliveries of the outbox (the dead-letter list)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from threadloom.records import WEBHOOK_EVENT_TYPES, WebhookDelivery, WebhookSubscription
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.problems import check, refuse
from threadloom.wire.query import choice, integer

MAX_URL = 2048
MAX_DESCRIPTION = 1024
DELIVERY_STATES = ("pending", "delivered", "dead")
EventType = Literal[
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
]


def _url(value: Any) -> str:
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_URL
        or not value.lower().startswith(("http://", "https://"))
    ):
        raise refuse(f"must be an http or https URL of at most {MAX_URL} characters")
    return value


def _event_types(value: Any) -> list[str]:
    if not isinstance(value, list) or any(t not in WEBHOOK_EVENT_TYPES for t in value):
        raise refuse("must be a list of known event types (" + ", ".join(WEBHOOK_EVENT_TYPES) + ")")
    return value


def _secret(value: Any) -> str | None:
    if value is None:
        return None
    problem = "must be whsec_ followed by the base64 of 24 to 65 bytes"
    if not isinstance(value, str) or not re.match(SECRET_PATTERN, value):
        raise refuse(problem)
    return value


def _enabled(value: Any) -> bool:
    if not isinstance(value, bool):
        raise refuse("must be true or false")
    return value


def _description(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > MAX_DESCRIPTION):
        raise refuse(f"must be a string of at most {MAX_DESCRIPTION} characters or null")
    return value


URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://"
SECRET_PATTERN = "^whsec_(?:[A-Za-z0-9+/]{4}){8,21}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
"""``whsec_`` and the base64 of 24 to 65 bytes (a 32-byte key is 44 characters)."""
EventTypes = Annotated[list[EventType], check(_event_types)]
Enabled = Annotated[bool | Absent, check(_enabled)]
Description = Annotated[
    Annotated[str, Field(max_length=MAX_DESCRIPTION)] | None, check(_description)
]


class CreateWebhook(Body):
    model_config = examples(
        {"url": "https://hooks.example.com/threadloom", "event_types": ["run.settled"]}
    )

    url: Annotated[str, check(_url)] = Field(max_length=MAX_URL, pattern=URL_PATTERN)
    event_types: EventTypes = Field(default_factory=list)
    """Empty: every event type."""
    secret: Annotated[str | None, check(_secret)] = Field(None, pattern=SECRET_PATTERN)
    """Left out: a new one is made (answered once)."""
    enabled: Enabled = None
    description: Description = None


class PatchWebhook(Body):
    # only the fields present change (model_fields_set)
    model_config = examples({"enabled": False}, {"event_types": ["run.settled"]})

    url: Annotated[
        Annotated[str, Field(max_length=MAX_URL, pattern=URL_PATTERN)] | Absent, check(_url)
    ] = None
    event_types: Annotated[list[EventType] | Absent, check(_event_types)] = None
    secret: Annotated[Annotated[str, Field(pattern=SECRET_PATTERN)] | Absent, check(_secret)] = None
    enabled: Enabled = None
    description: Description = None

    def changes(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.model_fields_set}
        if "event_types" in out:
            out["event_types"] = tuple(out["event_types"])
        return {k: v for k, v in out.items() if k in type(self).model_fields}


class Webhook(Answer):
    id: str
    url: str
    event_types: list[str]
    enabled: bool
    description: str | None = None
    created_at: int
    updated_at: int
    secret: str | None = None
    """Only in the answer that created it (or changed the secret)."""


class WebhookList(Answer):
    webhooks: list[Webhook]


class Delivery(Answer):
    event_id: str
    """The ``webhook-id`` every attempt sends."""
    subscription_id: str
    event_type: str
    payload: dict[str, Any]
    created_at: int
    state: Literal["pending", "delivered", "dead"]
    attempts: int
    next_attempt_at: int
    last_error: str | None = None
    last_status: int | None = None
    delivered_at: int | None = None


class DeliveryList(Answer):
    deliveries: list[Delivery]


def webhook_answer(sub: WebhookSubscription, *, with_secret: bool = False) -> Webhook:
    return Webhook.model_validate(sub.to_wire(with_secret=with_secret))


def delivery_answer(delivery: WebhookDelivery) -> Delivery:
    return Delivery.model_validate(delivery.to_wire())


DELIVERIES_QUERY = (
    choice("state", DELIVERY_STATES, "Only the deliveries in this state (dead: the dead letters)"),
    integer("limit", "At most this many (default 100, at most 1000)", maximum=1000),
)
