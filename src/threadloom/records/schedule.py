"""Schedules (spec 18): a message sent to a thread at the times a cron expression (in an IANA
time zone) or an interval names, and the stored state of its firing.

The cron expression is read and stepped by ``cronsim`` (a maintained cron library; no parser
of ours): five fields, the ``L``/``W``/``#`` forms it knows included. Across a change of the
clock of the schedule's time zone it behaves as Debian's cron does (spec 18 §18.3): a time
skipped by a spring-forward fires once at the first instant after the gap (02:30 in
Europe/Berlin on the last Sunday of March fires at 03:00 CEST); a time repeated by a
fall-back fires once, at its first occurrence; an expression whose hour is ``*`` fires at
both occurrences of the repeated hour's minutes, since each is a distinct instant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, model_validator

ScheduleOverlap = Literal["skip", "queue", "new_thread"]
ScheduleCatchup = Literal["once", "skip"]
SCHEDULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MIN_INTERVAL_S = 1
MAX_MESSAGE_CHARS = 100_000
_US = 1_000_000


class Schedule(BaseModel):
    """A schedule as declared (``Schedule(...)`` in ``Definitions``) or sent over HTTP.

    Exactly one of ``cron`` (five fields, read in ``timezone``) and ``interval_s`` (whole
    seconds, the first fire one interval after the schedule is created or changed); exactly
    one target: ``thread_id`` (an existing thread) or ``agent`` (a new thread of that agent,
    with ``arguments`` and owner ``user_id``, at each fire). ``overlap``: what a fire does
    while the thread of the schedule's previous fire is still running — ``skip`` it,
    ``queue`` the message in that thread, or start a ``new_thread`` of the agent.
    ``catchup``: what the first fire after a downtime that missed fire times does — fire
    ``once`` (never once per missed time), or ``skip`` the missed times."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="The schedule's name: letters, digits, '_', '.', '-'")
    message: str = Field(description="The text sent as a user message at each fire")
    cron: str | None = None
    timezone: str = "UTC"
    interval_s: int | None = None
    thread_id: str | None = None
    agent: str | None = None
    arguments: dict[str, Any] | None = None
    user_id: str | None = None
    enabled: bool = True
    overlap: ScheduleOverlap = "skip"
    catchup: ScheduleCatchup = "once"

    @model_validator(mode="after")
    def _check(self) -> Schedule:
        if not SCHEDULE_ID.match(self.id):
            raise ValueError(
                "id must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or"
                " digit"
            )
        if not self.message or len(self.message) > MAX_MESSAGE_CHARS:
            raise ValueError(f"message must be 1 to {MAX_MESSAGE_CHARS} characters")
        if (self.cron is None) == (self.interval_s is None):
            raise ValueError("exactly one of cron and interval_s must be set")
        if (self.thread_id is None) == (self.agent is None):
            raise ValueError("exactly one of thread_id and agent must be set")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {self.timezone!r} is not an IANA time zone") from None
        if self.cron is not None:
            try:
                CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC))
            except CronSimError as exc:
                raise ValueError(f"cron {self.cron!r} is not a cron expression: {exc}") from None
        if self.interval_s is not None and self.interval_s < MIN_INTERVAL_S:
            raise ValueError(f"interval_s must be at least {MIN_INTERVAL_S}")
        if self.thread_id is not None and (self.arguments or self.user_id):
            raise ValueError("arguments and user_id belong to an agent target")
        if self.thread_id is not None and self.overlap == "new_thread":
            raise ValueError("overlap 'new_thread' needs an agent target")
        return self

    def next_after(self, after_us: int, anchor_us: int | None = None) -> int:
        """The first fire time (µs since the epoch) strictly after ``after_us``. An
        interval schedule counts whole intervals from ``anchor_us`` (default:
        ``after_us``, so the first fire is one interval later)."""
        if self.interval_s is not None:
            step = self.interval_s * _US
            start = after_us if anchor_us is None else anchor_us
            if start > after_us:
                return start
            return start + ((after_us - start) // step + 1) * step
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        local = datetime.fromtimestamp(after_us / _US, UTC).astimezone(zone)
        it = CronSim(self.cron, local)
        nxt = next(it)
        while True:  # cronsim steps in local whole seconds; keep strictly after
            at = round(nxt.astimezone(UTC).timestamp() * _US)
            if at > after_us:
                return at
            nxt = next(it)


ScheduleSource = Literal["project", "api"]
FireStatus = Literal["fired", "skipped", "missed", "failed"]


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A stored schedule with its firing state (spec 18 §18.2)."""

    schedule: Schedule
    source: ScheduleSource
    """``project``: declared in the project's definitions (re-applied at each start);
    ``api``: created at run time."""
    next_fire_us: int | None
    """The next due time; None while disabled."""
    created_at_us: int
    updated_at_us: int
    fire_count: int = 0
    """Fires that sent a message."""
    last_fire_us: int | None = None
    """The due time of the last fire settled (fired, skipped, missed or failed)."""
    last_status: FireStatus | None = None
    last_thread_id: str | None = None
    """The thread the last fire sent to (the one ``overlap`` looks at)."""
    last_error: str | None = None
    fire_due_us: int | None = None
    """A fire claimed and not yet settled: its due time."""
    fire_node: str | None = None
    fire_lease_until_us: int | None = None

    @property
    def id(self) -> str:
        return self.schedule.id
