"""Inbound triggers on the wire (spec 22 §22.3, §22.5): the bodies that create and change a
trigger (admins), the trigger as answered (its secret only when it is made or changed), and
the answer to a call of its URL."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field, model_validator

from threadloom.records import Trigger, TriggerRow
from threadloom.records.trigger import MAX_TEMPLATE_CHARS, TRIGGER_ID, trigger_problem
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import UUID
from threadloom.wire.problems import boolean_value, check, refuse
from threadloom.wire.webhooks import SECRET_PATTERN

MAX_NAME = 256
MAX_BODY_BYTES = 256 * 1024
"""The largest body a call of a trigger may carry (a larger one: 413)."""
MAX_KEY_CHARS = 255
"""The longest idempotency key (``Idempotency-Key`` or ``webhook-id``)."""


def _id(value: Any) -> str:
    if not isinstance(value, str) or not TRIGGER_ID.match(value):
        raise refuse("must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit")
    return value


def _text_or_null(most: int) -> Any:
    def rule(value: Any) -> str | None:
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= most):
            raise refuse(f"must be a string of 1 to {most} characters or null")
        return value

    return rule


def _text(most: int) -> Any:
    def rule(value: Any) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= most:
            raise refuse(f"must be a string of 1 to {most} characters")
        return value

    return rule


def _thread_id(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and len(value) == 36):
        raise refuse("must be a thread id (a UUID) or null")
    return value


def _thread_value(value: Any) -> str:
    if not (isinstance(value, str) and len(value) == 36):
        raise refuse("must be a thread id (a UUID)")
    return value


def _arguments(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise refuse("must be an object or null")
    return value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise refuse("must be an object")
    return value


_SECRET_PROBLEM = "must be whsec_ followed by the base64 of 24 to 65 bytes"


def _secret(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not re.match(SECRET_PATTERN, value)):
        raise refuse(_SECRET_PROBLEM)
    return value


def _secret_value(value: Any) -> str:
    if value is None:
        raise refuse(_SECRET_PROBLEM)
    checked = _secret(value)
    assert checked is not None
    return checked


_Name = Annotated[str | None, check(_text_or_null(MAX_NAME))]
_Template = Annotated[str | None, check(_text_or_null(MAX_TEMPLATE_CHARS))]


class CreateTrigger(Body):
    """A new trigger: exactly one of ``agent`` (a new thread per call, with ``arguments``
    and ``user_id``) and ``thread_id`` (each call continues it); ``message`` the template
    of the user message (``{body}``: the request's body; null: the body is the message);
    ``secret`` made when not given."""

    model_config = examples(
        {"id": "payments", "agent": "billing", "message": "A payment event arrived:\n{body}"},
        {"id": "inbox", "thread_id": "1b4e28ba-2fa1-4d2b-883f-0016d3cca427"},
    )

    id: Annotated[str, check(_id)] = Field(pattern=TRIGGER_ID.pattern)
    thread_id: Annotated[str | None, check(_thread_id)] = Field(None, pattern=UUID)
    agent: _Name = Field(None, min_length=1, max_length=MAX_NAME)
    arguments: Annotated[dict[str, Any] | None, check(_arguments)] = None
    user_id: _Name = Field(None, min_length=1, max_length=MAX_NAME)
    message: _Template = Field(None, min_length=1, max_length=MAX_TEMPLATE_CHARS)
    enabled: Annotated[bool, check(boolean_value)] = True
    secret: Annotated[str | None, check(_secret)] = Field(None, pattern=SECRET_PATTERN)

    @model_validator(mode="after")
    def _rules(self) -> CreateTrigger:
        found = trigger_problem(self.model_dump(include=set(Trigger.model_fields)))
        if found is not None:
            field, problem = found
            raise refuse(problem, f"{field} {problem}", at=field)
        return self

    def trigger(self) -> Trigger:
        return Trigger.model_validate(self.model_dump(include=set(Trigger.model_fields)))


class PatchTrigger(Body):
    """The fields of a trigger to change (only those present; ``id`` stays). ``thread_id``
    replaces ``agent`` (with ``arguments`` and ``user_id``) and the reverse; ``message:
    null`` makes the body the message; ``secret`` sets a new secret (answered once)."""

    model_config = examples({"enabled": False}, {"message": "Ticket update: {body}"})

    thread_id: Annotated[
        Annotated[str, Field(pattern=UUID, min_length=36, max_length=36)] | Absent,
        check(_thread_value),
    ] = None
    agent: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | Absent, check(_text(MAX_NAME))
    ] = None
    arguments: Annotated[dict[str, Any] | Absent, check(_object)] = None
    user_id: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_NAME)] | Absent, check(_text(MAX_NAME))
    ] = None
    message: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_TEMPLATE_CHARS)] | None,
        check(_text_or_null(MAX_TEMPLATE_CHARS)),
    ] = None
    enabled: Annotated[bool | Absent, check(boolean_value)] = None
    secret: Annotated[
        Annotated[str, Field(pattern=SECRET_PATTERN)] | Absent, check(_secret_value)
    ] = None

    def changes(self) -> dict[str, Any]:
        """The trigger's fields the body sets (the secret apart)."""
        known = set(Trigger.model_fields)
        return {name: getattr(self, name) for name in self.model_fields_set if name in known}


class TriggerOut(Answer):
    """A trigger with its calls; times in µs since the epoch. ``secret`` only in the
    answer of the request that made or changed it."""

    id: str
    thread_id: str | None
    agent: str | None
    arguments: dict[str, Any] | None
    user_id: str | None
    message: str | None
    enabled: bool
    url: str
    """The path its callers POST to."""
    fire_count: int
    last_fire_at: int | None
    last_thread_id: str | None
    created_at: int
    updated_at: int
    secret: str | None = None


def fire_path(trigger_id: str) -> str:
    return f"/api/triggers/{trigger_id}/fire"


def trigger_out(row: TriggerRow, *, with_secret: bool = False) -> TriggerOut:
    return TriggerOut(
        **row.trigger.model_dump(),
        url=fire_path(row.id),
        fire_count=row.fire_count,
        last_fire_at=row.last_fire_us,
        last_thread_id=row.last_thread_id,
        created_at=row.created_at_us,
        updated_at=row.updated_at_us,
        secret=row.secret if with_secret else None,
    )


class TriggerAnswer(Answer):
    trigger: TriggerOut


class TriggerList(Answer):
    triggers: list[TriggerOut]


class TriggerFired(Answer):
    """A call accepted (202): the thread it went to; ``replayed``: the idempotency key was
    seen before and this call started nothing."""

    trigger_id: str
    thread_id: str
    idempotency_key: str | None
    replayed: bool
