"""The inbound-triggers part of the Store protocol (spec 22): triggers and the claims of
their calls by idempotency key. ``threadloom.store.base.Store`` is a ``TriggerStore``."""

from __future__ import annotations

from typing import Protocol

from threadloom.records import Trigger, TriggerFire, TriggerRow


class TriggerStore(Protocol):
    """Triggers and their calls (spec 22 §22.2, §22.4)."""

    async def create_trigger(self, trigger: Trigger, secret: str) -> TriggerRow | None:
        """Insert a trigger; None (nothing stored) when its id is taken."""
        ...

    async def replace_trigger(self, trigger: Trigger, secret: str | None) -> TriggerRow | None:
        """Change a trigger (its secret too when given); None when there is none."""
        ...

    async def delete_trigger(self, trigger_id: str) -> bool:
        """Delete a trigger and the record of its calls."""
        ...

    async def get_trigger(self, trigger_id: str) -> TriggerRow | None: ...

    async def list_triggers(self) -> list[TriggerRow]: ...

    async def claim_trigger_fire(
        self, trigger_id: str, key: str, thread_id: str, lease_us: int
    ) -> TriggerFire:
        """Claim the call with ``key`` (``replayed``: another call with it has it)."""
        ...

    async def finish_trigger_fire(self, trigger_id: str, key: str) -> bool:
        """Settle a claimed call: counted, ``trigger.fired`` in the outbox, one transaction."""
        ...

    async def release_trigger_fire(self, trigger_id: str, key: str) -> bool:
        """Forget an unsettled claim whose work failed."""
        ...
