"""Who may call a trigger (spec 22 §22.3): the holder of its secret — as a bearer token
(``Authorization: Bearer whsec_…``, compared in constant time) or as the key of a
Standard Webhooks signature over the body (``webhook-id``, ``webhook-timestamp``,
``webhook-signature``, verified by the ``standardwebhooks`` package: the signature and a
timestamp within its tolerance of five minutes)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from threadloom.server.errors import ApiError

SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "trigger_unauthorized", message)


def check_call(secret: str, headers: Mapping[str, str], body: bytes) -> str:
    """How the call proved it holds ``secret`` (``signature`` or ``bearer``), else 401.
    A call with any signature header is judged by its signature alone."""
    if any(headers.get(name) for name in SIGNATURE_HEADERS):
        try:
            Webhook(secret).verify(body, dict(headers.items()), json_parse=False)
        except WebhookVerificationError as exc:
            raise unauthorized(f"The webhook signature does not verify: {exc}") from None
        return "signature"
    given = headers.get("authorization") or ""
    scheme, _, token = given.partition(" ")
    if scheme.lower() == "bearer" and token:
        if hmac.compare_digest(token.strip().encode(), secret.encode()):
            return "bearer"
        raise unauthorized("The bearer secret is not the trigger's")
    raise unauthorized(
        "A trigger call needs its secret: Authorization: Bearer <secret>, or a Standard"
        " Webhooks signature made with it"
    )
