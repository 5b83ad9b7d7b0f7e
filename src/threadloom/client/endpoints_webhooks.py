"""One declarative definition per route of spec 19 §19.7 (outbound webhooks, admin), as
``endpoints.py`` does for spec 08. Retries follow spec 11 §11.2.5: GETs and PATCH repeat
after a transport error; creations, deletions and re-deliveries never do."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import httpx

from threadloom.client.calls import UNSET, Call, Unset, json_body, list_of, model_of
from threadloom.client.models import Webhook, WebhookDelivery

DeliveryState = str
Webhooks = list[Webhook]
Deliveries = list[WebhookDelivery]


def _done(response: httpx.Response) -> None:
    return None


def _path(webhook_id: str) -> str:
    return f"/api/webhooks/{quote(webhook_id, safe='')}"


def _query(state: str | None, limit: int | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if state is not None:
        params["state"] = state
    if limit is not None:
        params["limit"] = str(limit)
    return params


class WebhooksEndpoints:
    def list(self) -> Call[Webhooks]:
        return Call("GET", "/api/webhooks", list_of(Webhook, "webhooks"))

    def create(
        self,
        url: str,
        event_types: Sequence[str] = (),
        *,
        secret: str | Unset = UNSET,
        enabled: bool | Unset = UNSET,
        description: str | Unset | None = UNSET,
    ) -> Call[Webhook]:
        """Subscribe ``url``; the answer carries the ``secret`` (only this once)."""
        body = json_body(
            url=url,
            event_types=list(event_types),
            secret=secret,
            enabled=enabled,
            description=description,
        )
        return Call("POST", "/api/webhooks", model_of(Webhook), json=body, retry="never")

    def get(self, webhook_id: str) -> Call[Webhook]:
        return Call("GET", _path(webhook_id), model_of(Webhook))

    def update(
        self,
        webhook_id: str,
        *,
        url: str | Unset = UNSET,
        event_types: Sequence[str] | Unset = UNSET,
        secret: str | Unset = UNSET,
        enabled: bool | Unset = UNSET,
        description: str | Unset | None = UNSET,
    ) -> Call[Webhook]:
        types = list(event_types) if not isinstance(event_types, Unset) else event_types
        body = json_body(
            url=url, event_types=types, secret=secret, enabled=enabled, description=description
        )
        return Call("PATCH", _path(webhook_id), model_of(Webhook), json=body)

    def delete(self, webhook_id: str) -> Call[None]:
        return Call("DELETE", _path(webhook_id), _done, retry="never")

    def deliveries(
        self,
        webhook_id: str | None = None,
        *,
        state: DeliveryState | None = None,
        limit: int | None = None,
    ) -> Call[Deliveries]:
        """A subscription's deliveries (``None``: every subscription's); ``state="dead"``:
        the dead letters."""
        path = (
            "/api/webhook-deliveries" if webhook_id is None else f"{_path(webhook_id)}/deliveries"
        )
        return Call(
            "GET", path, list_of(WebhookDelivery, "deliveries"), params=_query(state, limit)
        )

    def redeliver(self, webhook_id: str, event_id: str) -> Call[WebhookDelivery]:
        """Deliver a dead delivery again, with the same ``webhook-id``."""
        path = f"{_path(webhook_id)}/deliveries/{quote(event_id, safe='')}/redeliver"
        return Call("POST", path, model_of(WebhookDelivery), retry="never")
