"""Schedules (spec 18): fire each due schedule once per due time, whatever the number of
nodes, and manage the schedules of a store.

Every runtime that runs its store's threads ticks (``Scheduler``, every
``ScheduleOptions.tick_s`` seconds): it reads the due schedules, and claims each fire
with one conditional update of the schedule's row (``Store.claim_schedule_fire``: the
next fire time it read moves on, so of the nodes that read the same due schedule one
claims it), then fires and settles it. The new next fire time is the first one after
*now*, so a downtime that missed several fire times gives one fire, or none
(``catchup``), never a burst. A node that dies between its claim and the fire's
settlement leaves the claim's lease to run out; another node takes the fire over for the
same due time, and the fire is idempotent per (schedule, due time): a new thread's id and
the message's ``client_message_id`` derive from them, so the retry finds what the first
attempt stored instead of sending twice.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from threadloom.errors import (
    AgentNotFound,
    DuplicateMessage,
    InvalidArgument,
    InvalidField,
    ScheduleExists,
    ScheduleNotFound,
    StoreUnavailable,
    ThreadNotFound,
)
from threadloom.metrics import Metrics
from threadloom.records import Schedule, ScheduleRow
from threadloom.records.schedule import schedule_problem
from threadloom.store.base import Clock, Store

log = logging.getLogger("threadloom.schedules")

_NAMESPACE = uuid.UUID("6f1c2a5e-3b1d-4c8e-9a57-2f0d3c4b5a69")
"""The UUID namespace of the threads schedules create: their ids are the UUID5 of the fire's
key (schedule id and due time) with the version bits of a UUID4."""


@dataclass(frozen=True)
class ScheduleOptions:
    """How a runtime fires schedules (``THREADLOOM_SCHEDULE_*``)."""

    tick_s: float | None = 1.0
    """Seconds between two looks for due schedules; None: no background ticks (tests,
    tools; ``Scheduler.tick`` fires what is due when called)
    (``THREADLOOM_SCHEDULE_TICK_SECONDS``, ``off``: none)."""
    lease_s: float = 60.0
    """How long a node's claim of a fire holds before another node may take it over
    (``THREADLOOM_SCHEDULE_LEASE_SECONDS``)."""
    misfire_grace_s: float = 60.0
    """A fire found later than this after its due time was missed (a downtime): the
    schedule's ``catchup`` decides (``THREADLOOM_SCHEDULE_MISFIRE_GRACE_SECONDS``)."""
    batch: int = 100
    """Due schedules read per look."""

    def __post_init__(self) -> None:
        for name in ("lease_s", "misfire_grace_s"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise InvalidArgument(f"schedule {name} must be a positive number of seconds")
        if self.tick_s is not None and not (self.tick_s > 0 and math.isfinite(self.tick_s)):
            raise InvalidArgument("schedule tick_s must be a positive number of seconds")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ScheduleOptions:
        values: dict[str, Any] = {}
        for name, key in (
            ("tick_s", "THREADLOOM_SCHEDULE_TICK_SECONDS"),
            ("lease_s", "THREADLOOM_SCHEDULE_LEASE_SECONDS"),
            ("misfire_grace_s", "THREADLOOM_SCHEDULE_MISFIRE_GRACE_SECONDS"),
        ):
            raw = (env.get(key) or "").strip()
            if not raw:
                continue
            if name == "tick_s" and raw.lower() == "off":
                values[name] = None
                continue
            try:
                values[name] = float(raw)
            except ValueError:
                raise InvalidArgument(f"{key} must be a number of seconds, not {raw!r}") from None
        return cls(**values)


@dataclass(frozen=True)
class Fire:
    """One fire a tick claimed and settled."""

    schedule_id: str
    due_us: int
    status: str
    """``fired``, ``skipped`` (overlap), ``missed`` (catch-up ``skip``) or ``failed``."""
    thread_id: str | None = None
    error: str | None = None


class ScheduleHost(Protocol):
    """What firing needs of the runtime: a new thread, a send."""

    async def create_thread(
        self,
        agent_id: str,
        *,
        user_id: str | None = ...,
        tags: Sequence[str] = ...,
        arguments: Mapping[str, Any] | None = ...,
        thread_id: str | None = ...,
    ) -> Any: ...

    async def send_message(
        self, thread_id: str, content: str, *, metadata: Mapping[str, Any] | None = ...
    ) -> Any: ...


def first_fire(schedule: Schedule, now_us: int) -> int | None:
    """The first fire time of a schedule created or changed at ``now_us`` (None while it
    is disabled)."""
    return schedule.next_after(now_us) if schedule.enabled else None


def fire_key(schedule_id: str, due_us: int) -> str:
    """The ``client_message_id`` of the message a fire sends (its idempotency key)."""
    return f"schedule:{schedule_id}:{due_us}"


class Scheduler:
    """A runtime's schedules: the ticks that fire them and their management."""

    def __init__(
        self,
        store: Store,
        host: ScheduleHost | None,
        clock: Clock,
        options: ScheduleOptions | None = None,
        known_agent: Callable[[str], bool] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.host = host
        self.clock = clock
        self.options = options or ScheduleOptions()
        self.node = store.node_id or "local"
        self.known_agent = known_agent
        self.fires = 0
        self._task: asyncio.Task[None] | None = None
        self.on_fire: Callable[[Fire], Awaitable[None]] | None = None
        """Told each settled fire (the outbound events of spec 18 §18.6 hang here)."""

    # -- the background ticks ------------------------------------------------------------
    def start(self) -> None:
        tick = self.options.tick_s
        if tick is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(tick), name="threadloom-schedules"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():  # done: its event loop ended already
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self, tick: float) -> None:
        while True:
            await asyncio.sleep(tick * random.uniform(0.9, 1.1))
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except StoreUnavailable as exc:  # the database is away: said, not a traceback
                log.warning("schedule tick: the store is unavailable: %s", exc)
            except Exception:  # a failed look is tried again at the next tick
                log.exception("schedule tick failed")

    # -- firing --------------------------------------------------------------------------
    async def tick(self) -> list[Fire]:
        """Claim and fire what is due now; the fires this node settled."""
        now = self.clock()
        lease_until = now + round(self.options.lease_s * 1_000_000)
        done: list[Fire] = []
        for row in await self.store.due_schedules(now, self.options.batch):
            if row.fire_due_us is not None:  # a claim whose node died: take it over
                claimed = await self.store.claim_schedule_fire(
                    row.id,
                    row.fire_due_us,
                    self.node,
                    lease_until,
                    stale_lease_until_us=row.fire_lease_until_us,
                )
                if claimed is not None:
                    done.append(await self._fire(claimed, row.fire_due_us))
                continue
            due = row.next_fire_us
            assert due is not None
            spec = row.schedule
            new_next = spec.next_after(now, anchor_us=due if spec.interval_s else None)
            claimed = await self.store.claim_schedule_fire(
                row.id,
                due,
                self.node,
                lease_until,
                expect_next_us=due,
                new_next_us=new_next,
            )
            if claimed is None:  # another node claimed it
                continue
            late = now - due > self.options.misfire_grace_s * 1_000_000
            if late and spec.catchup == "skip":
                done.append(await self._settle(Fire(row.id, due, "missed")))
            else:
                done.append(await self._fire(claimed, due))
        return done

    async def _fire(self, row: ScheduleRow, due_us: int) -> Fire:
        spec = row.schedule
        try:
            fire = await self._send(row, due_us)
        except Exception as exc:
            log.warning("schedule %s: the fire at %d failed: %s", spec.id, due_us, exc)
            fire = Fire(spec.id, due_us, "failed", error=f"{type(exc).__name__}: {exc}"[:500])
        return await self._settle(fire)

    async def _settle(self, fire: Fire) -> Fire:
        await self.store.finish_schedule_fire(
            fire.schedule_id, fire.due_us, self.node, fire.status, fire.thread_id, fire.error
        )
        if fire.status == "fired":
            self.fires += 1
        if self.metrics is not None:
            self.metrics.schedule_fires.add((fire.status,))
        if self.on_fire is not None:
            await self.on_fire(fire)
        return fire

    async def _running(self, thread_id: str | None) -> bool:
        if thread_id is None:
            return False
        row = await self.store.get_thread(thread_id)
        return row is not None and row.status.state == "running"

    async def _send(self, row: ScheduleRow, due_us: int) -> Fire:
        """The fire itself (spec 18 §18.5), idempotent per (schedule, due time)."""
        spec = row.schedule
        host = self.host
        if host is None:
            raise InvalidArgument("this scheduler runs no threads: it cannot fire")
        key = fire_key(spec.id, due_us)
        previous = spec.thread_id or row.last_thread_id
        target: str | None = spec.thread_id
        if await self._running(previous):
            if spec.overlap == "skip":
                return Fire(spec.id, due_us, "skipped", thread_id=previous)
            if spec.overlap == "queue":
                target = previous
        if target is None:  # a new thread of the agent, its id derived from the fire
            assert spec.agent is not None
            # a UUID4 in form (decision D6), derived from the fire (a retry finds it)
            target = str(uuid.UUID(bytes=uuid.uuid5(_NAMESPACE, key).bytes, version=4))
            if await self.store.get_thread(target) is None:
                await host.create_thread(
                    spec.agent,
                    user_id=spec.user_id,
                    tags=(f"schedule:{spec.id}",),
                    arguments=spec.arguments,
                    thread_id=target,
                )
        metadata = {"client_message_id": key, "schedule_id": spec.id, "schedule_due_us": due_us}
        try:
            await host.send_message(target, spec.message, metadata=metadata)
        except DuplicateMessage:  # a retry of a fire whose message was stored
            pass
        return Fire(spec.id, due_us, "fired", thread_id=target)

    async def fire_now(self, schedule_id: str) -> Fire:
        """Fire a schedule once now, outside its times (its next fire time stays);
        ``ScheduleNotFound``, or ``InvalidArgument`` while a fire of it is unsettled."""
        now = self.clock()
        lease_until = now + round(self.options.lease_s * 1_000_000)
        claimed = await self.store.claim_schedule_fire(schedule_id, now, self.node, lease_until)
        if claimed is None:
            if await self.store.get_schedule(schedule_id) is None:
                raise ScheduleNotFound(schedule_id)
            raise InvalidArgument(f"schedule {schedule_id} has a fire in progress")
        return await self._fire(claimed, now)

    # -- management (spec 18 §18.7) ------------------------------------------------------
    async def _check_target(self, schedule: Schedule) -> None:
        agent, known = schedule.agent, self.known_agent
        if agent is not None and known is not None and not known(agent):
            raise AgentNotFound(agent)
        thread_id = schedule.thread_id
        if thread_id is not None and await self.store.get_thread(thread_id) is None:
            raise ThreadNotFound(thread_id)

    async def create(self, schedule: Schedule, *, source: str = "api") -> ScheduleRow:
        """Store a new schedule (``ScheduleExists`` when its id is taken; an unknown agent
        or thread refused)."""
        await self._check_target(schedule)
        row = await self.store.create_schedule(schedule, source, first_fire(schedule, self.clock()))
        if row is None:
            raise ScheduleExists(schedule.id)
        return row

    async def get(self, schedule_id: str) -> ScheduleRow:
        row = await self.store.get_schedule(schedule_id)
        if row is None:
            raise ScheduleNotFound(schedule_id)
        return row

    async def list(self) -> list[ScheduleRow]:
        return await self.store.list_schedules()

    async def update(self, schedule_id: str, changes: Mapping[str, Any]) -> ScheduleRow:
        """Change some fields of a schedule (``id`` stays). Giving one of ``cron`` and
        ``interval_s`` clears the other; giving ``thread_id`` clears ``agent`` with its
        ``arguments`` and ``user_id``, giving ``agent`` clears ``thread_id``. Its next fire
        time is computed again when its times, its time zone or ``enabled`` changed."""
        row = await self.get(schedule_id)
        if "id" in changes and changes["id"] != schedule_id:
            raise InvalidArgument("a schedule's id cannot change")
        fields = {**row.schedule.model_dump(), **_replaced(changes), **changes}
        found = schedule_problem(fields)
        if found is not None:
            raise InvalidField(*found)
        try:
            spec = Schedule.model_validate(fields)
        except ValidationError as exc:
            raise InvalidArgument(str(exc.errors()[0].get("msg", exc))) from None
        await self._check_target(spec)
        old = row.schedule
        timing = ("cron", "timezone", "interval_s", "enabled")
        if any(getattr(old, f) != getattr(spec, f) for f in timing) or row.next_fire_us is None:
            next_fire = first_fire(spec, self.clock())
        else:
            next_fire = row.next_fire_us
        updated = await self.store.replace_schedule(spec, row.source, next_fire)
        if updated is None:
            raise ScheduleNotFound(schedule_id)
        return updated

    async def fire_soon(self, schedule_id: str) -> ScheduleRow:
        """Make the schedule due now (enabled, its next fire time now): the runtime that
        runs the store's threads fires it at its next tick (the command line's way, beside
        a running server)."""
        row = await self.get(schedule_id)
        spec = row.schedule.model_copy(update={"enabled": True})
        updated = await self.store.replace_schedule(spec, row.source, self.clock())
        if updated is None:
            raise ScheduleNotFound(schedule_id)
        return updated

    async def delete(self, schedule_id: str) -> None:
        if not await self.store.delete_schedule(schedule_id):
            raise ScheduleNotFound(schedule_id)

    async def sync_project(self, declared: Sequence[Schedule]) -> None:
        """Apply the project's declared schedules (spec 18 §18.1): each is created, or
        changed where its stored definition differs (its next fire time computed again
        when its times changed); a stored ``project`` schedule the project no longer
        declares is deleted. Schedules created over the API are left alone, unless the
        project declares one with the same id (the project's wins)."""
        now = self.clock()
        stored = {row.id: row for row in await self.store.list_schedules()}
        for spec in declared:
            row = stored.pop(spec.id, None)
            if row is None:
                if await self.store.create_schedule(spec, "project", first_fire(spec, now)):
                    continue
                row = await self.store.get_schedule(spec.id)  # another node created it
                if row is None:
                    continue
            if row.schedule == spec and row.source == "project":
                continue
            old = row.schedule
            timing = ("cron", "timezone", "interval_s", "enabled")
            same_times = all(getattr(old, f) == getattr(spec, f) for f in timing)
            next_fire = row.next_fire_us if same_times else first_fire(spec, now)
            await self.store.replace_schedule(spec, "project", next_fire)
        for row in stored.values():
            if row.source == "project":
                await self.store.delete_schedule(row.id)


def _replaced(changes: Mapping[str, Any]) -> dict[str, Any]:
    """What a change clears besides what it sets: the other time rule, the other target."""
    cleared: dict[str, Any] = {}
    if "interval_s" in changes:
        cleared["cron"] = None
    if "cron" in changes:
        cleared["interval_s"] = None
    if "thread_id" in changes:
        cleared.update(agent=None, arguments=None, user_id=None)
    if "agent" in changes:
        cleared["thread_id"] = None
    return {k: v for k, v in cleared.items() if k not in changes}


def options_from_env() -> ScheduleOptions:
    return ScheduleOptions.from_env(os.environ)


__all__ = [
    "Fire",
    "ScheduleHost",
    "ScheduleOptions",
    "Scheduler",
    "fire_key",
    "first_fire",
    "options_from_env",
]
