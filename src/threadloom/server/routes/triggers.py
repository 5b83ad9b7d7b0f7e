"""Inbound triggers over HTTP (spec 22 §22.3, §22.5): the admins' management under
``/api/triggers``, and ``POST /api/triggers/{trigger_id}/fire`` — the URL a caller (a
payment provider, a CI job) POSTs to, authenticated by the trigger's secret instead of a
principal, answering 202 with the thread its body went to."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom import errors as E
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.auth.triggers import check_call
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routing import Router
from threadloom.wire.auth import Success
from threadloom.wire.triggers import (
    MAX_BODY_BYTES,
    MAX_KEY_CHARS,
    CreateTrigger,
    PatchTrigger,
    TriggerAnswer,
    TriggerFired,
    TriggerList,
    trigger_out,
)

router = Router(prefix="/api/triggers", tags=["triggers"])


def _known(trigger_id: str) -> str:
    """A path id that can name a stored trigger, else 404 (``%00`` and the like)."""
    if not deps.storable(trigger_id):
        raise ApiError(404, "trigger_not_found", f"Trigger not found: {trigger_id}")
    return trigger_id


@router.get("", summary="Every trigger (admin)")
async def list_triggers(request: Request, who: Principal = Depends(deps.admin)) -> dict[str, Any]:
    rows = await deps.runtime(request).triggers.list()
    return TriggerList(triggers=[trigger_out(r) for r in rows]).to_wire()


@router.post("", summary="Create a trigger (admin)")
async def create_trigger(request: Request, who: Principal = Depends(deps.admin)) -> JSONResponse:
    body = await deps.body_of(request, CreateTrigger)
    row = await deps.runtime(request).triggers.create(body.trigger(), body.secret)
    answer = TriggerAnswer(trigger=trigger_out(row, with_secret=True))
    return JSONResponse(answer.to_wire(), status_code=201)


@router.get("/{trigger_id}", summary="A trigger with its calls (admin)")
async def get_trigger(
    trigger_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    row = await deps.runtime(request).triggers.get(_known(trigger_id))
    return TriggerAnswer(trigger=trigger_out(row)).to_wire()


@router.patch("/{trigger_id}", summary="Change a trigger (admin)")
async def patch_trigger(
    trigger_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    body = await deps.body_of(request, PatchTrigger)
    secret = body.secret if "secret" in body.model_fields_set else None
    try:
        row = await deps.runtime(request).triggers.update(
            _known(trigger_id), body.changes(), secret=secret
        )
    except E.InvalidField as exc:
        raise bad_field(exc.field, exc.problem) from None
    return TriggerAnswer(trigger=trigger_out(row, with_secret=secret is not None)).to_wire()


@router.delete("/{trigger_id}", summary="Delete a trigger (admin)")
async def delete_trigger(
    trigger_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    await deps.runtime(request).triggers.delete(_known(trigger_id))
    return Success(success=True).to_wire()


def _key(request: Request) -> str | None:
    """The caller's idempotency key: ``Idempotency-Key``, else a signed call's
    ``webhook-id``; None: none (each call is new)."""
    key = request.headers.get("idempotency-key") or request.headers.get("webhook-id")
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
        raise bad_field("Idempotency-Key", f"must be 1 to {MAX_KEY_CHARS} printable characters")
    return key


def _text(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_field("body", "must be UTF-8 text") from None
    if "\x00" in text:
        raise bad_field("body", "must not contain a NUL character")
    return text


@router.post("/{trigger_id}/fire", summary="Call a trigger: its body becomes a user message")
async def fire_trigger(trigger_id: str, request: Request) -> JSONResponse:
    triggers = deps.runtime(request).triggers
    row = await triggers.get(_known(trigger_id))
    raw = await deps.read_body(request, MAX_BODY_BYTES)
    check_call(row.secret, request.headers, raw)
    if not row.trigger.enabled:
        raise ApiError(409, "trigger_disabled", f"Trigger {trigger_id} is disabled")
    key = _key(request)
    text = _text(raw)
    if row.trigger.needs_body() and not text.strip():
        raise bad_field("body", "must not be empty: it is the message")
    fired = await triggers.fire(row, text, key)
    answer = TriggerFired(
        trigger_id=fired.trigger_id,
        thread_id=fired.thread_id,
        idempotency_key=key,
        replayed=fired.replayed,
    )
    return JSONResponse(answer.to_wire(), status_code=202)
