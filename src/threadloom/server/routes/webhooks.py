"""Outbound webhooks (spec 19 §19.7), admin only: subscriptions, their deliveries (the
dead-letter list is ``?state=dead``) and delivering a dead one again."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom.node.webhook_targets import TargetRefused
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError, invalid
from threadloom.server.routing import Router
from threadloom.wire.auth import Success
from threadloom.wire.webhooks import (
    DELIVERY_STATES,
    CreateWebhook,
    DeliveryList,
    PatchWebhook,
    WebhookList,
    delivery_answer,
    webhook_answer,
)

router = Router(prefix="/api/webhooks", tags=["webhooks"])
deliveries = Router(prefix="/api/webhook-deliveries", tags=["webhooks"])

NOT_FOUND = ApiError(404, "not_found", "Webhook not found")


async def _existing(request: Request, webhook_id: str) -> Any:
    if not deps.storable(webhook_id):
        raise NOT_FOUND
    found = await deps.runtime(request).store.get_webhook(webhook_id)
    if found is None:
        raise NOT_FOUND
    return found


@router.get("", summary="The webhook subscriptions (admin)")
async def list_webhooks(request: Request, who: Principal = Depends(deps.admin)) -> dict[str, Any]:
    subs = await deps.runtime(request).store.list_webhooks()
    return WebhookList(webhooks=[webhook_answer(s) for s in subs]).to_wire()


@router.post("", summary="Subscribe a URL to events (admin; the secret is answered once)")
async def create_webhook(request: Request, who: Principal = Depends(deps.admin)) -> JSONResponse:
    body = await deps.body_of(request, CreateWebhook)
    try:
        made = await deps.runtime(request).create_webhook(
            body.url,
            body.event_types,
            secret=body.secret,
            enabled=True if body.enabled is None else body.enabled,
            description=body.description,
        )
    except TargetRefused as exc:  # the URL's field named (spec 19 §19.6)
        raise invalid(str(exc), [("url", str(exc))]) from None
    return JSONResponse(webhook_answer(made, with_secret=True).to_wire(), status_code=201)


@router.get("/{webhook_id}", summary="One webhook subscription (admin)")
async def get_webhook(
    webhook_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    return webhook_answer(await _existing(request, webhook_id)).to_wire()


@router.patch("/{webhook_id}", summary="Change a webhook subscription (admin)")
async def patch_webhook(
    webhook_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    body = await deps.body_of(request, PatchWebhook)
    await _existing(request, webhook_id)
    changes = body.changes()
    try:
        changed = await deps.runtime(request).update_webhook(webhook_id, changes)
    except TargetRefused as exc:
        raise invalid(str(exc), [("url", str(exc))]) from None
    if changed is None:
        raise NOT_FOUND
    return webhook_answer(changed, with_secret="secret" in changes).to_wire()


@router.delete("/{webhook_id}", summary="Delete a webhook subscription and its deliveries")
async def delete_webhook(
    webhook_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    if not deps.storable(webhook_id) or not await deps.runtime(request).store.delete_webhook(
        webhook_id
    ):
        raise NOT_FOUND
    return Success(success=True).to_wire()


async def _deliveries(request: Request, webhook_id: str | None) -> dict[str, Any]:
    query = deps.Query(request)  # the query first: a bad one is a 400 whatever the id
    state = query.enum("state", DELIVERY_STATES)
    limit = query.int("limit", 100, maximum=1000) or 100
    if webhook_id is not None:
        await _existing(request, webhook_id)
    rows = await deps.runtime(request).store.list_webhook_deliveries(state, webhook_id, limit)
    return DeliveryList(deliveries=[delivery_answer(r) for r in rows]).to_wire()


@router.get("/{webhook_id}/deliveries", summary="A subscription's deliveries (admin)")
async def list_webhook_deliveries(
    webhook_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    return await _deliveries(request, webhook_id)


@deliveries.get("", summary="Every subscription's deliveries; ?state=dead: the dead letters")
async def list_all_webhook_deliveries(
    request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    return await _deliveries(request, None)


@router.post(
    "/{webhook_id}/deliveries/{event_id}/redeliver",
    summary="Deliver a dead delivery again, with the same webhook-id (admin)",
)
async def redeliver_webhook(
    webhook_id: str, event_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    await _existing(request, webhook_id)
    store = deps.runtime(request).store
    if not deps.storable(event_id):
        raise ApiError(404, "not_found", "Delivery not found")
    again = await store.redeliver_webhook(event_id, webhook_id)
    if again is not None:
        return delivery_answer(again).to_wire()
    if await store.get_webhook_delivery(event_id, webhook_id) is not None:
        raise ApiError(409, "not_dead", "Only a dead delivery is delivered again")
    raise ApiError(404, "not_found", "Delivery not found")
