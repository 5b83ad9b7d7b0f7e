"""Schedules on the wire (spec 18 §18.7): the bodies that create and change a schedule, and
the schedule and a fire as answered (``/api/schedules``, admins only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from threadloom.records import Schedule, ScheduleRow
from threadloom.records.schedule import (
    MAX_MESSAGE_CHARS,
    SCHEDULE_ID,
    schedule_problem,
)
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import UUID
from threadloom.wire.problems import boolean_value, check, integer_from, refuse

MAX_INTERVAL_S = 10 * 366 * 86_400
MAX_NAME = 256
MAX_CRON = 200
_interval = integer_from(1, MAX_INTERVAL_S)


def _id(value: Any) -> str:
    if not isinstance(value, str) or not SCHEDULE_ID.match(value):
        raise refuse("must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit")
    return value


def _message(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_MESSAGE_CHARS:
        raise refuse(f"must be a string of 1 to {MAX_MESSAGE_CHARS} characters")
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


def _interval_value(value: Any) -> int:
    checked = _interval(value)
    if checked is None:
        raise refuse(f"must be an integer from 1 to {MAX_INTERVAL_S}")
    return checked


def _thread_value(value: Any) -> str:
    if not (isinstance(value, str) and len(value) == 36):
        raise refuse("must be a thread id (a UUID)")
    return value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise refuse("must be an object")
    return value


def _timezone(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 64:
        raise refuse("must be an IANA time zone name")
    return value


def _thread_id(value: Any) -> str | None:
    if value is not None and not (isinstance(value, str) and len(value) == 36):
        raise refuse("must be a thread id (a UUID) or null")
    return value


def _arguments(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise refuse("must be an object or null")
    return value


def _overlap(value: Any) -> str:
    if value not in ("skip", "queue", "new_thread"):
        raise refuse("must be one of skip, queue, new_thread")
    return str(value)


def _catchup(value: Any) -> str:
    if value not in ("once", "skip"):
        raise refuse("must be one of once, skip")
    return str(value)


def _across(fields: dict[str, Any]) -> None:
    """The rules across fields (``records.schedule.schedule_problem``), as a refusal at the
    field they name."""
    found = schedule_problem(fields)
    if found is not None:
        field, problem = found
        raise refuse(problem, f"{field} {problem}", at=field)


_Cron = Annotated[str | None, check(_text_or_null(MAX_CRON))]
_Name = Annotated[str | None, check(_text_or_null(MAX_NAME))]
_Interval = Annotated[int | None, check(_interval)]
_ThreadId = Annotated[str | None, check(_thread_id)]
_Arguments = Annotated[dict[str, Any] | None, check(_arguments)]
_Overlap = Annotated[Literal["skip", "queue", "new_thread"], check(_overlap)]
_Catchup = Annotated[Literal["once", "skip"], check(_catchup)]


class CreateSchedule(Body):
    """A new schedule: exactly one of ``cron`` (with ``timezone``) and ``interval_s``;
    exactly one of ``thread_id`` and ``agent`` (with ``arguments`` and ``user_id``)."""

    model_config = examples(
        {
            "id": "daily-report",
            "message": "Write the daily report",
            "cron": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "agent": "reporter",
            "overlap": "skip",
        },
        {"id": "ping", "message": "ping", "interval_s": 600, "agent": "reporter"},
    )

    id: Annotated[str, check(_id)] = Field(pattern=SCHEDULE_ID.pattern)
    message: Annotated[str, check(_message)] = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    cron: _Cron = Field(None, min_length=1, max_length=MAX_CRON)
    timezone: Annotated[str, check(_timezone)] = Field("UTC", min_length=1, max_length=64)
    interval_s: _Interval = Field(None, ge=1, le=MAX_INTERVAL_S)
    thread_id: _ThreadId = Field(None, pattern=UUID)
    agent: _Name = Field(None, min_length=1, max_length=MAX_NAME)
    arguments: _Arguments = None
    user_id: _Name = Field(None, min_length=1, max_length=MAX_NAME)
    enabled: Annotated[bool, check(boolean_value)] = True
    overlap: _Overlap = "skip"
    catchup: _Catchup = "once"

    @model_validator(mode="after")
    def _rules(self) -> CreateSchedule:
        _across(self.model_dump(include=set(Schedule.model_fields)))
        return self

    def schedule(self) -> Schedule:
        return Schedule.model_validate(self.model_dump(include=set(Schedule.model_fields)))


class PatchSchedule(Body):
    """The fields of a schedule to change (only those present change; ``id`` stays; null
    is no value here). Giving ``interval_s`` replaces ``cron`` and the reverse; giving
    ``thread_id`` replaces ``agent`` (with its ``arguments`` and ``user_id``) and the
    reverse; ``arguments: {}`` clears the arguments."""

    model_config = examples({"enabled": False}, {"cron": "0 9 * * 1-5", "timezone": "UTC"})

    # The constraints sit on the value's type, not on the field: a field's constraints on
    # a ``… | Absent`` union do not reach its JSON schema (the fuzzer then sends values the
    # server refuses, spec 08 C08-139).
    message: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)] | Absent,
        check(_message),
    ] = None
    cron: Annotated[
        Annotated[str, Field(min_length=1, max_length=MAX_CRON)] | Absent, check(_text(MAX_CRON))
    ] = None
    timezone: Annotated[
        Annotated[str, Field(min_length=1, max_length=64)] | Absent, check(_timezone)
    ] = None
    interval_s: Annotated[
        Annotated[int, Field(ge=1, le=MAX_INTERVAL_S)] | Absent, check(_interval_value)
    ] = None
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
    enabled: Annotated[bool | Absent, check(boolean_value)] = None
    overlap: Annotated[Literal["skip", "queue", "new_thread"] | Absent, check(_overlap)] = None
    catchup: Annotated[Literal["once", "skip"] | Absent, check(_catchup)] = None

    def changes(self) -> dict[str, Any]:
        """The fields the body sets."""
        known = type(self).model_fields
        return {name: getattr(self, name) for name in self.model_fields_set if name in known}


class ScheduleOut(Answer):
    """A schedule with its firing state; times in µs since the epoch."""

    id: str
    message: str
    cron: str | None
    timezone: str
    interval_s: int | None
    thread_id: str | None
    agent: str | None
    arguments: dict[str, Any] | None
    user_id: str | None
    enabled: bool
    overlap: str
    catchup: str
    source: str
    next_fire_at: int | None
    fire_count: int
    last_fire_at: int | None
    last_status: str | None
    last_thread_id: str | None
    last_error: str | None
    created_at: int
    updated_at: int


def schedule_out(row: ScheduleRow) -> ScheduleOut:
    return ScheduleOut(
        **row.schedule.model_dump(),
        source=row.source,
        next_fire_at=row.next_fire_us,
        fire_count=row.fire_count,
        last_fire_at=row.last_fire_us,
        last_status=row.last_status,
        last_thread_id=row.last_thread_id,
        last_error=row.last_error,
        created_at=row.created_at_us,
        updated_at=row.updated_at_us,
    )


class ScheduleAnswer(Answer):
    schedule: ScheduleOut


class ScheduleList(Answer):
    schedules: list[ScheduleOut]


class FireOut(Answer):
    """One fire: ``fired`` (a message sent to ``thread_id``), ``skipped`` (the previous
    fire's thread still ran), ``missed`` or ``failed`` (``error``)."""

    schedule_id: str
    due_at: int
    status: str
    thread_id: str | None
    error: str | None


class FireAnswer(Answer):
    fire: FireOut
