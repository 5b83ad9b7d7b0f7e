"""The schedules part of the Store protocol (spec 18): schedules and the claims of their
fires. ``threadloom.store.base.Store`` is a ``ScheduleStore``."""

from __future__ import annotations

from typing import Protocol

from threadloom.records import Schedule, ScheduleRow


class ScheduleStore(Protocol):
    """Schedules with their firing state (spec 18 §18.2, §18.4)."""

    async def create_schedule(
        self, schedule: Schedule, source: str, next_fire_us: int | None
    ) -> ScheduleRow | None:
        """Insert a schedule; None (nothing stored) when its id is taken."""
        ...

    async def replace_schedule(
        self, schedule: Schedule, source: str, next_fire_us: int | None
    ) -> ScheduleRow | None:
        """Change a schedule's definition and next fire time; None when it does not exist."""
        ...

    async def delete_schedule(self, schedule_id: str) -> bool: ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None: ...

    async def list_schedules(self) -> list[ScheduleRow]:
        """Every schedule, ordered by id."""
        ...

    async def due_schedules(self, now_us: int, limit: int) -> list[ScheduleRow]:
        """The schedules with a fire to claim at ``now_us``: due ones, and unsettled fires
        whose lease ran out."""
        ...

    async def claim_schedule_fire(
        self,
        schedule_id: str,
        due_us: int,
        node: str,
        lease_until_us: int,
        *,
        expect_next_us: int | None = None,
        new_next_us: int | None = None,
        stale_lease_until_us: int | None = None,
    ) -> ScheduleRow | None:
        """Claim one fire (a conditional update: of several claimers, one wins); the row as
        claimed, or None (``store/core/schedules.py``)."""
        ...

    async def finish_schedule_fire(
        self,
        schedule_id: str,
        due_us: int,
        node: str,
        status: str,
        thread_id: str | None,
        error: str | None,
    ) -> bool:
        """Settle ``node``'s claimed fire; False when the claim is no longer its own."""
        ...
