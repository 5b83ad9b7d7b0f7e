"""Inbound triggers (spec 22): a call of a trigger's URL starts a new thread of its agent,
or continues its thread, with the request's body as the user message — once per
idempotency key, whatever the number of replays, racing requests or nodes — and the
management of the store's triggers.

A call claims its key in the store (``Store.claim_trigger_fire``): one insert that does
nothing when the key is taken, so of any number of calls with one key one does the work
and the others answer the thread id it recorded. The work itself is idempotent per
(trigger, key): a new thread's id and the message's ``client_message_id`` derive from
them, so a call that takes over a claim whose caller died finds what was stored instead
of sending twice. The settlement counts the call and writes ``trigger.fired`` to the
webhook outbox in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from threadloom.engine.run.schedules import ScheduleHost
from threadloom.errors import (
    AgentNotFound,
    DuplicateMessage,
    InvalidArgument,
    InvalidField,
    ThreadNotFound,
    TriggerExists,
    TriggerNotFound,
)
from threadloom.records import Trigger, TriggerFire, TriggerRow
from threadloom.records.ids import random_hex
from threadloom.records.trigger import trigger_problem
from threadloom.records.webhook import new_webhook_secret
from threadloom.store.base import Clock, Store

_NAMESPACE = uuid.UUID("0b9e7c2d-5a41-4f3e-8d6c-1e2f3a4b5c6d")
"""The UUID namespace of the threads triggers create: the UUID5 of (trigger, its creation,
key), with the version bits of a UUID4."""

CLAIM_LEASE_US = 60_000_000
"""How long a call's claim of its key holds before another call with the key may take the
unsettled work over (its caller died)."""


def message_key(trigger_id: str, key: str) -> str:
    """The ``client_message_id`` of the message a call sends (its idempotency key)."""
    return f"trigger:{trigger_id}:{key}"


class Triggers:
    """A runtime's triggers: their calls and their management."""

    def __init__(
        self,
        store: Store,
        host: ScheduleHost | None,
        clock: Clock,
        known_agent: Callable[[str], bool] | None = None,
    ) -> None:
        self.store = store
        self.host = host
        self.clock = clock
        self.known_agent = known_agent

    # -- calls ---------------------------------------------------------------------------
    def _thread_for(self, row: TriggerRow, key: str) -> str:
        spec = row.trigger
        if spec.thread_id is not None:
            return spec.thread_id
        name = f"{spec.id}:{row.created_at_us}:{key}"
        return str(uuid.UUID(bytes=uuid.uuid5(_NAMESPACE, name).bytes, version=4))

    async def fire(self, row: TriggerRow, body: str, key: str | None = None) -> TriggerFire:
        """One call of the trigger ``row`` with the request's ``body`` and idempotency
        ``key`` (None: a key of its own — every such call is a new one). A key seen before
        answers the thread it went to (``replayed``) and starts nothing. A failed send
        forgets the claim (the caller may try the key again) and raises."""
        spec = row.trigger
        host = self.host
        if host is None:
            raise InvalidArgument("this runtime runs no threads: it cannot call a trigger")
        key = key if key is not None else f"auto:{random_hex()}"
        claim = await self.store.claim_trigger_fire(
            spec.id, key, self._thread_for(row, key), CLAIM_LEASE_US
        )
        if claim.replayed:
            return claim
        target = claim.thread_id
        try:
            if spec.agent is not None and await self.store.get_thread(target) is None:
                await host.create_thread(
                    spec.agent,
                    user_id=spec.user_id,
                    tags=(f"trigger:{spec.id}",),
                    arguments=spec.arguments,
                    thread_id=target,
                )
            metadata = {"client_message_id": message_key(spec.id, key), "trigger_id": spec.id}
            try:
                await host.send_message(target, spec.message_for(body), metadata=metadata)
            except DuplicateMessage:  # a taken-over call whose message was stored
                pass
        except BaseException:
            await self.store.release_trigger_fire(spec.id, key)
            raise
        await self.store.finish_trigger_fire(spec.id, key)
        return claim.model_copy(update={"done": True})

    # -- management (spec 22 §22.5) ------------------------------------------------------
    async def _check_target(self, trigger: Trigger) -> None:
        agent, known = trigger.agent, self.known_agent
        if agent is not None and known is not None and not known(agent):
            raise AgentNotFound(agent)
        if trigger.thread_id is not None and await self.store.get_thread(trigger.thread_id) is None:
            raise ThreadNotFound(trigger.thread_id)

    async def create(self, trigger: Trigger, secret: str | None = None) -> TriggerRow:
        """Store a new trigger with ``secret`` (None: a new one); ``TriggerExists`` when
        its id is taken; an unknown agent or thread refused."""
        found = trigger_problem(trigger.model_dump())
        if found is not None:
            raise InvalidField(*found)
        await self._check_target(trigger)
        row = await self.store.create_trigger(trigger, secret or new_webhook_secret())
        if row is None:
            raise TriggerExists(trigger.id)
        return row

    async def get(self, trigger_id: str) -> TriggerRow:
        row = await self.store.get_trigger(trigger_id)
        if row is None:
            raise TriggerNotFound(trigger_id)
        return row

    async def list(self) -> list[TriggerRow]:
        return await self.store.list_triggers()

    async def update(
        self, trigger_id: str, changes: Mapping[str, Any], *, secret: str | None = None
    ) -> TriggerRow:
        """Change some fields of a trigger (``id`` stays) and its secret when given.
        Giving ``thread_id`` clears ``agent`` with its ``arguments`` and ``user_id``;
        giving ``agent`` clears ``thread_id``."""
        row = await self.get(trigger_id)
        if "id" in changes and changes["id"] != trigger_id:
            raise InvalidArgument("a trigger's id cannot change")
        cleared: dict[str, Any] = {}
        if "thread_id" in changes:
            cleared.update(agent=None, arguments=None, user_id=None)
        if "agent" in changes:
            cleared["thread_id"] = None
        fields = {**row.trigger.model_dump(), **cleared, **changes}
        found = trigger_problem(fields)
        if found is not None:
            raise InvalidField(*found)
        try:
            spec = Trigger.model_validate(fields)
        except ValidationError as exc:
            raise InvalidArgument(str(exc.errors()[0].get("msg", exc))) from None
        await self._check_target(spec)
        updated = await self.store.replace_trigger(spec, secret)
        if updated is None:
            raise TriggerNotFound(trigger_id)
        return updated

    async def delete(self, trigger_id: str) -> None:
        if not await self.store.delete_trigger(trigger_id):
            raise TriggerNotFound(trigger_id)


__all__ = ["CLAIM_LEASE_US", "Triggers", "message_key"]
