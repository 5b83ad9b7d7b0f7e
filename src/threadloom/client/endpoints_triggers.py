"""One declarative definition per admin route of spec 22 §22.5 (inbound triggers), as
``endpoints.py`` does for spec 08. Retries follow spec 11 §11.2.5: GETs and PATCH repeat
after a transport error; creations and deletions never do. A trigger's call
(``POST /api/triggers/{id}/fire``) is the caller's, with the trigger's secret, not the
client's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from threadloom.client.calls import UNSET, Call, Unset, json_body, list_of, model_of
from threadloom.client.models import TriggerInfo


def _done(response: httpx.Response) -> None:
    return None


def _path(trigger_id: str) -> str:
    return f"/api/triggers/{quote(trigger_id, safe='')}"


def _arguments(value: Mapping[str, Any] | Unset | None) -> Any:
    return value if value is UNSET or value is None else dict(value)


class TriggersEndpoints:
    """Inbound triggers (spec 22 §22.5; admins only)."""

    def list(self) -> Call[list[TriggerInfo]]:
        return Call("GET", "/api/triggers", list_of(TriggerInfo, "triggers"))

    def create(
        self,
        trigger_id: str,
        *,
        agent: str | Unset | None = UNSET,
        thread_id: str | Unset | None = UNSET,
        arguments: Mapping[str, Any] | Unset | None = UNSET,
        user_id: str | Unset | None = UNSET,
        message: str | Unset | None = UNSET,
        enabled: bool | Unset = UNSET,
        secret: str | Unset = UNSET,
    ) -> Call[TriggerInfo]:
        """A new trigger: one of ``agent`` and ``thread_id``; the answer carries its
        ``secret`` (only this once)."""
        body = json_body(
            id=trigger_id,
            agent=agent,
            thread_id=thread_id,
            arguments=_arguments(arguments),
            user_id=user_id,
            message=message,
            enabled=enabled,
            secret=secret,
        )
        return Call(
            "POST", "/api/triggers", model_of(TriggerInfo, "trigger"), json=body, retry="never"
        )

    def get(self, trigger_id: str) -> Call[TriggerInfo]:
        return Call("GET", _path(trigger_id), model_of(TriggerInfo, "trigger"))

    def update(
        self,
        trigger_id: str,
        *,
        agent: str | Unset = UNSET,
        thread_id: str | Unset = UNSET,
        arguments: Mapping[str, Any] | Unset = UNSET,
        user_id: str | Unset = UNSET,
        message: str | Unset | None = UNSET,
        enabled: bool | Unset = UNSET,
        secret: str | Unset = UNSET,
    ) -> Call[TriggerInfo]:
        """Change the fields given (the others stay); ``message=None``: the body is the
        message; a new ``secret`` is answered in this answer only."""
        body = json_body(
            agent=agent,
            thread_id=thread_id,
            arguments=_arguments(arguments),
            user_id=user_id,
            message=message,
            enabled=enabled,
            secret=secret,
        )
        return Call("PATCH", _path(trigger_id), model_of(TriggerInfo, "trigger"), json=body)

    def delete(self, trigger_id: str) -> Call[None]:
        return Call("DELETE", _path(trigger_id), _done, retry="never")
