"""``threadloom triggers …``: inbound triggers from the command line (spec 22 §22.5).

``list``, ``show``, ``create``, ``update`` and ``delete`` act on the same store as the
server (``--store``, default ``THREADLOOM_DATABASE_URL``), beside a running server. ``create``
(and ``update --new-secret``) prints the trigger's secret: the only time it is shown. Exit
codes: 2 for input refused before the store is touched, 1 for what the store refuses (an
unknown or taken id, an unknown thread).
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
    from threadloom.engine.run.triggers import Triggers
    from threadloom.records import Trigger, TriggerRow

T = TypeVar("T")

triggers_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="Inbound triggers: URLs that start or continue a thread with a request's body.",
)

TriggerId = Annotated[str, typer.Argument(metavar="ID", help="The trigger's id")]
AgentOpt = Annotated[
    str | None, typer.Option(metavar="AGENT", help="Start a new thread of this agent each call")
]
ThreadOpt = Annotated[
    str | None, typer.Option("--thread", metavar="ID", help="Add each call to this thread")
]
ArgumentsOpt = Annotated[
    str | None, typer.Option(metavar="JSON", help="The new thread's arguments (a JSON object)")
]
UserOpt = Annotated[
    str | None, typer.Option("--user", metavar="USER_ID", help="The new thread's owner")
]
MessageOpt = Annotated[
    str | None,
    typer.Option(metavar="TEMPLATE", help="The message; {body} stands for the request's body"),
]


def _with_triggers(url: str, work: Callable[[Triggers], Awaitable[T]]) -> T:
    from threadloom.engine.run.triggers import Triggers
    from threadloom.store.base import system_clock_us

    return with_store(url, lambda store: work(Triggers(store, None, system_clock_us)))


def register(app: typer.Typer) -> None:
    """Add the ``triggers`` command group to the ``threadloom`` app."""
    app.add_typer(triggers_app, name="triggers")


def _target(t: Trigger) -> str:
    return f"agent {t.agent}" if t.agent is not None else f"thread {t.thread_id}"


def _fields(
    agent: str | None,
    thread: str | None,
    arguments: str | None,
    user: str | None,
    message: str | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in (
        ("agent", agent),
        ("thread_id", thread),
        ("user_id", user),
        ("message", message),
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


@triggers_app.command("list")
def triggers_list(store: StoreOption = DEFAULT_STORE) -> None:
    """List the triggers: id, target, whether enabled, calls, the last call (UTC)."""
    rows = _with_triggers(store, lambda t: t.list())
    table = [
        (
            r.id,
            _target(r.trigger),
            "yes" if r.trigger.enabled else "no",
            str(r.fire_count),
            when(r.last_fire_us),
        )
        for r in rows
    ]
    header = ("ID", "TARGET", "ENABLED", "CALLS", "LAST (UTC)")
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def fire_path(trigger_id: str) -> str:
    from threadloom.wire.triggers import fire_path as path

    return path(trigger_id)


def _show(row: TriggerRow) -> None:
    t = row.trigger
    for label, value in (
        ("id", t.id),
        ("url", fire_path(t.id)),
        ("target", _target(t)),
        ("message", t.message if t.message is not None else "(the request's body)"),
        ("arguments", json.dumps(t.arguments) if t.arguments else "-"),
        ("owner", t.user_id or "-"),
        ("enabled", "yes" if t.enabled else "no"),
        ("calls", str(row.fire_count)),
        ("last call", when(row.last_fire_us)),
        ("last thread", row.last_thread_id or "-"),
    ):
        typer.echo(f"{label + ':':13}{value}")


@triggers_app.command("show")
def triggers_show(trigger_id: TriggerId, store: StoreOption = DEFAULT_STORE) -> None:
    """Show a trigger with its calls (not its secret)."""
    _show(_with_triggers(store, lambda t: t.get(trigger_id)))


@triggers_app.command("create")
def triggers_create(
    trigger_id: TriggerId,
    agent: AgentOpt = None,
    thread: ThreadOpt = None,
    arguments: ArgumentsOpt = None,
    user: UserOpt = None,
    message: MessageOpt = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it disabled")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create a trigger (--agent or --thread) and print its URL path and secret."""
    from pydantic import ValidationError

    from threadloom.records import Trigger
    from threadloom.records.trigger import trigger_problem

    fields = _fields(agent, thread, arguments, user, message)
    try:
        trigger = Trigger(id=trigger_id, enabled=not disabled, **fields)
    except ValidationError as exc:
        raise fail(f"invalid trigger: {exc.errors()[0]['msg']}", 2) from None
    found = trigger_problem(trigger.model_dump())
    if found is not None:
        raise fail(f"{found[0]} {found[1]}", 2)
    row = _with_triggers(store, lambda t: t.create(trigger))
    typer.echo(f"created trigger {row.id}: POST {fire_path(row.id)}")
    typer.echo(f"secret: {row.secret}")


@triggers_app.command("update")
def triggers_update(
    trigger_id: TriggerId,
    agent: AgentOpt = None,
    thread: ThreadOpt = None,
    arguments: ArgumentsOpt = None,
    user: UserOpt = None,
    message: MessageOpt = None,
    body_message: Annotated[
        bool, typer.Option("--body-as-message", help="Send the request's body as the message")
    ] = False,
    enable: Annotated[
        bool | None, typer.Option("--enable/--disable", help="Enable or disable it")
    ] = None,
    new_secret: Annotated[
        bool, typer.Option("--new-secret", help="Replace the secret (printed once)")
    ] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Change a trigger's fields (the others stay; --thread replaces --agent and the
    reverse)."""
    from threadloom.records.webhook import new_webhook_secret

    fields = _fields(agent, thread, arguments, user, message)
    if body_message:
        if message is not None:
            raise fail("--message and --body-as-message exclude each other", 2)
        fields["message"] = None
    if enable is not None:
        fields["enabled"] = enable
    secret = new_webhook_secret() if new_secret else None
    if not fields and secret is None:
        raise fail("nothing to change: give at least one option", 2)
    row = _with_triggers(store, lambda t: t.update(trigger_id, fields, secret=secret))
    typer.echo(f"updated trigger {row.id}")
    if secret is not None:
        typer.echo(f"secret: {row.secret}")


@triggers_app.command("delete")
def triggers_delete(trigger_id: TriggerId, store: StoreOption = DEFAULT_STORE) -> None:
    """Delete a trigger (the threads it started stay)."""
    _with_triggers(store, lambda t: t.delete(trigger_id))
    typer.echo(f"deleted trigger {trigger_id}")
