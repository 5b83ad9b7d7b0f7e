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

import json
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
MAX_MESSAGE_CHARS = 32_768
"""The longest message a schedule sends (its request body stays far under the 1 MiB limit)."""
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
        found = schedule_problem(self.model_dump())
        if found is not None:
            raise ValueError(f"{found[0]} {found[1]}")
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


def schedule_problem(fields: dict[str, Any]) -> tuple[str, str] | None:
    """The first rule of a schedule that ``fields`` (a schedule's values by name) break,
    as (field, problem); None when they keep them all. One place for the rules across
    fields, which the record and the HTTP bodies both apply."""
    schedule_id = fields.get("id")
    if not isinstance(schedule_id, str) or not SCHEDULE_ID.match(schedule_id):
        return ("id", "must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit")
    message = fields.get("message")
    if not isinstance(message, str) or not 0 < len(message) <= MAX_MESSAGE_CHARS:
        return ("message", f"must be a string of 1 to {MAX_MESSAGE_CHARS} characters")
    cron, interval = fields.get("cron"), fields.get("interval_s")
    if (cron is None) == (interval is None):
        return ("cron", "or interval_s: exactly one must be set")
    thread_id, agent = fields.get("thread_id"), fields.get("agent")
    if (thread_id is None) == (agent is None):
        return ("agent", "or thread_id: exactly one must be set")
    zone = fields.get("timezone", "UTC")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        return ("timezone", "must be an IANA time zone name")
    if cron is not None:
        try:
            CronSim(cron, datetime(2000, 1, 1, tzinfo=UTC))
        except (CronSimError, TypeError, ValueError) as exc:
            return ("cron", f"must be a cron expression ({exc})")
    if interval is not None and (not isinstance(interval, int) or interval < MIN_INTERVAL_S):
        return ("interval_s", f"must be an integer of at least {MIN_INTERVAL_S}")
    arguments = fields.get("arguments")
    if arguments is not None:
        try:
            json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError):
            return ("arguments", "must be a JSON object")
    if thread_id is not None and arguments:
        return ("arguments", "must be null with a thread_id target")
    if thread_id is not None and fields.get("user_id") is not None:
        return ("user_id", "must be null with a thread_id target")
    if thread_id is not None and fields.get("overlap") == "new_thread":
        return ("overlap", "must be skip or queue with a thread_id target")
    return None


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
