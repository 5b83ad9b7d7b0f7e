"""Inbound triggers (spec 22): a URL that starts a new thread of an agent, or continues a
thread, with the body of the request that calls it — authenticated by the trigger's secret
(a bearer token, or a Standard Webhooks signature made with it) and idempotent by a key the
caller chooses. Plain typed data, no I/O."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TRIGGER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEMPLATE_CHARS = 32_768
BODY_PLACEHOLDER = "{body}"
"""Where a trigger's ``message`` template takes the request's body."""


class Trigger(BaseModel):
    """A trigger as created over HTTP, the client or the command line.

    Exactly one target: ``thread_id`` (an existing thread: each call adds a user message to
    it) or ``agent`` (each call starts a new thread of that agent, with ``arguments`` and
    owner ``user_id``). ``message``: the user message's template, ``{body}`` standing for
    the request's body; ``None``: the body itself is the message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="The trigger's name: letters, digits, '_', '.', '-'")
    thread_id: str | None = None
    agent: str | None = None
    arguments: dict[str, Any] | None = None
    user_id: str | None = None
    message: str | None = None
    enabled: bool = True

    def message_for(self, body: str) -> str:
        """The user message a call with ``body`` sends."""
        if self.message is None:
            return body
        return self.message.replace(BODY_PLACEHOLDER, body)

    def needs_body(self) -> bool:
        """Whether a call must carry a body (it is the message, or part of it)."""
        return self.message is None or BODY_PLACEHOLDER in self.message


def trigger_problem(fields: dict[str, Any]) -> tuple[str, str] | None:
    """The first rule across a trigger's fields it breaks, as (field, problem); None: none."""
    agent, thread_id = fields.get("agent"), fields.get("thread_id")
    if (agent is None) == (thread_id is None):
        return "agent", "exactly one of agent and thread_id is required"
    if thread_id is not None:
        for name in ("arguments", "user_id"):
            if fields.get(name) is not None:
                return name, "is only for an agent target"
    ident = fields.get("id")
    if not isinstance(ident, str) or not TRIGGER_ID.match(ident):
        return "id", "must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit"
    message = fields.get("message")
    if message is not None and not (
        isinstance(message, str) and 0 < len(message) <= MAX_TEMPLATE_CHARS
    ):
        return "message", f"must be a string of 1 to {MAX_TEMPLATE_CHARS} characters or null"
    return None


class TriggerRow(BaseModel):
    """A stored trigger with its secret and what its calls did."""

    model_config = ConfigDict(frozen=True)

    trigger: Trigger
    secret: str
    """``whsec_`` + base64 of the key: a bearer token, and the Standard Webhooks key."""
    created_at_us: int
    updated_at_us: int
    fire_count: int = 0
    last_fire_us: int | None = None
    last_thread_id: str | None = None

    @property
    def id(self) -> str:
        return self.trigger.id


class TriggerFire(BaseModel):
    """One call of a trigger, by its idempotency key: the thread it went to."""

    model_config = ConfigDict(frozen=True)

    trigger_id: str
    key: str
    thread_id: str
    replayed: bool
    """True: the key was seen before; this call started nothing."""
    done: bool = True
