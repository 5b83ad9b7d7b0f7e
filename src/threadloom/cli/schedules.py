"""``threadloom schedules …``: schedules from the command line (spec 18 §18.8).

``list``, ``show``, ``create``, ``update``, ``delete`` and ``fire`` act on the same store as
the server (``--store``, default ``THREADLOOM_DATABASE_URL``), beside a running server
(they take no lock). ``fire`` makes a schedule due now: the server that runs the store's
threads fires it at its next look (within about a second). Exit codes: 2 for input refused
before the store is touched, 1 for what the store refuses (an unknown or taken id, an
unknown thread).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from threadloom.cli.options import StoreOption
from threadloom.cli.shared import fail, when, with_store
from threadloom.store import DEFAULT_STORE

if TYPE_CHECKING:
    from threadloom.engine.run.schedules import Scheduler
    from threadloom.records import Schedule, ScheduleRow

T = TypeVar("T")

schedules_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="Schedules: messages sent to threads at cron times or intervals.",
)

ScheduleId = Annotated[str, typer.Argument(metavar="ID", help="The schedule's id")]
Cron = Annotated[
    str | None, typer.Option(metavar="EXPR", help='A cron expression, e.g. "30 2 * * *"')
]
TimeZone = Annotated[
    str | None, typer.Option(metavar="TZ", help="The IANA time zone of --cron (default UTC)")
]
Every = Annotated[
    int | None, typer.Option("--every", metavar="SECONDS", help="An interval instead of --cron")
]
AgentOpt = Annotated[
    str | None, typer.Option(metavar="AGENT", help="Start a new thread of this agent each fire")
]
ThreadOpt = Annotated[
    str | None, typer.Option("--thread", metavar="ID", help="Send to this existing thread")
]
ArgumentsOpt = Annotated[
    str | None, typer.Option(metavar="JSON", help="The new thread's arguments (a JSON object)")
]
UserOpt = Annotated[
    str | None, typer.Option("--user", metavar="USER_ID", help="The new thread's owner")
]
Overlap = Annotated[
    str | None,
    typer.Option(metavar="RULE", help="While the previous fire runs: skip, queue or new_thread"),
]
Catchup = Annotated[
    str | None, typer.Option(metavar="RULE", help="After a downtime: once (fire once) or skip")
]


def _with_scheduler(url: str, work: Callable[[Scheduler], Awaitable[T]]) -> T:
    from threadloom.engine.run.schedules import Scheduler
    from threadloom.store.base import system_clock_us

    return with_store(url, lambda store: work(Scheduler(store, None, system_clock_us)))


def register(app: typer.Typer) -> None:
    """Add the ``schedules`` command group to the ``threadloom`` app."""
    app.add_typer(schedules_app, name="schedules")


def _rule(s: Schedule) -> str:
    return f"{s.cron} ({s.timezone})" if s.cron is not None else f"every {s.interval_s}s"


def _target(s: Schedule) -> str:
    return f"agent {s.agent}" if s.agent is not None else f"thread {s.thread_id}"


def _fields(
    message: str | None,
    cron: str | None,
    timezone: str | None,
    every: int | None,
    agent: str | None,
    thread: str | None,
    arguments: str | None,
    user: str | None,
    overlap: str | None,
    catchup: str | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in (
        ("message", message),
        ("cron", cron),
        ("timezone", timezone),
        ("interval_s", every),
        ("agent", agent),
        ("thread_id", thread),
        ("user_id", user),
        ("overlap", overlap),
        ("catchup", catchup),
    ):
        if value is not None:
            fields[name] = value
    if arguments is not None:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise fail("--arguments must be a JSON object", 2)
        fields["arguments"] = parsed
    return fields


def _show(row: ScheduleRow) -> None:
    s = row.schedule
    for label, value in (
        ("id", s.id),
        ("when", _rule(s)),
        ("target", _target(s)),
        ("message", s.message),
        ("arguments", json.dumps(s.arguments) if s.arguments else "-"),
        ("owner", s.user_id or "-"),
        ("overlap", s.overlap),
        ("catchup", s.catchup),
        ("enabled", "yes" if s.enabled else "no"),
        ("source", row.source),
        ("next fire", when(row.next_fire_us)),
        ("fires", str(row.fire_count)),
        ("last fire", f"{when(row.last_fire_us)} {row.last_status or ''}".rstrip()),
        ("last thread", row.last_thread_id or "-"),
        ("last error", row.last_error or "-"),
    ):
        typer.echo(f"{label + ':':13}{value}")


@schedules_app.command("list")
def schedules_list(store: StoreOption = DEFAULT_STORE) -> None:
    """List the schedules.

    One line each: id, when it fires, its target, whether it is enabled, its next fire
    (UTC), its last fire's status and how many fires sent a message."""
    rows = _with_scheduler(store, lambda s: s.list())
    table = [
        (
            r.id,
            _rule(r.schedule),
            _target(r.schedule),
            "yes" if r.schedule.enabled else "no",
            when(r.next_fire_us),
            r.last_status or "-",
            str(r.fire_count),
        )
        for r in rows
    ]
    header = ("ID", "WHEN", "TARGET", "ENABLED", "NEXT (UTC)", "LAST", "FIRES")
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


@schedules_app.command("show")
def schedules_show(schedule_id: ScheduleId, store: StoreOption = DEFAULT_STORE) -> None:
    """Show a schedule with its firing state."""
    _show(_with_scheduler(store, lambda s: s.get(schedule_id)))


@schedules_app.command("create")
def schedules_create(
    schedule_id: ScheduleId,
    message: Annotated[str, typer.Option(metavar="TEXT", help="The message sent at each fire")],
    cron: Cron = None,
    timezone: TimeZone = None,
    every: Every = None,
    agent: AgentOpt = None,
    thread: ThreadOpt = None,
    arguments: ArgumentsOpt = None,
    user: UserOpt = None,
    overlap: Overlap = None,
    catchup: Catchup = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it disabled")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create a schedule: --cron (with --timezone) or --every, and --agent or --thread."""
    from pydantic import ValidationError

    from threadloom.records import Schedule

    fields = _fields(
        message, cron, timezone, every, agent, thread, arguments, user, overlap, catchup
    )
    try:
        schedule = Schedule(id=schedule_id, enabled=not disabled, **fields)
    except ValidationError as exc:
        first = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise fail(f"invalid schedule: {first}", 2) from None
    row = _with_scheduler(store, lambda s: s.create(schedule))
    typer.echo(f"created schedule {row.id}; next fire {when(row.next_fire_us)} UTC")


@schedules_app.command("update")
def schedules_update(
    schedule_id: ScheduleId,
    message: Annotated[
        str | None, typer.Option(metavar="TEXT", help="The message sent at each fire")
    ] = None,
    cron: Cron = None,
    timezone: TimeZone = None,
    every: Every = None,
    agent: AgentOpt = None,
    thread: ThreadOpt = None,
    arguments: ArgumentsOpt = None,
    user: UserOpt = None,
    overlap: Overlap = None,
    catchup: Catchup = None,
    enable: Annotated[
        bool | None, typer.Option("--enable/--disable", help="Enable or disable it")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Change a schedule's fields (the others stay; --every replaces --cron and the
    reverse, --thread replaces --agent and the reverse)."""
    fields = _fields(
        message, cron, timezone, every, agent, thread, arguments, user, overlap, catchup
    )
    if enable is not None:
        fields["enabled"] = enable
    if not fields:
        raise fail("nothing to change: give at least one option", 2)
    row = _with_scheduler(store, lambda s: s.update(schedule_id, fields))
    typer.echo(f"updated schedule {row.id}; next fire {when(row.next_fire_us)} UTC")


@schedules_app.command("delete")
def schedules_delete(schedule_id: ScheduleId, store: StoreOption = DEFAULT_STORE) -> None:
    """Delete a schedule (the threads it started stay)."""
    _with_scheduler(store, lambda s: s.delete(schedule_id))
    typer.echo(f"deleted schedule {schedule_id}")


@schedules_app.command("fire")
def schedules_fire(schedule_id: ScheduleId, store: StoreOption = DEFAULT_STORE) -> None:
    """Make a schedule due now (and enabled): the server fires it at its next look."""
    row = _with_scheduler(store, lambda s: s.fire_soon(schedule_id))
    typer.echo(f"schedule {row.id} is due now; the server fires it within a second or so")
