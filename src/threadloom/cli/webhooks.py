"""``threadloom webhooks …``: outbound-webhook subscriptions and their dead letters from the
command line (spec 19 §19.8).

``list``, ``add``, ``remove``, ``dead`` and ``redeliver`` act on the same store as the
server (``--store``, default ``THREADLOOM_DATABASE_URL``), beside a running server: its
delivery worker sends what they make due. ``add`` checks the target against the same
policy as the server (``THREADLOOM_WEBHOOK_ALLOW_PRIVATE``, ``THREADLOOM_WEBHOOK_ALLOW``)
and prints the secret once. Exit codes: 2 for input refused before the store is written
(an unknown event type, a refused target), 1 for what the store refuses (an unknown
subscription, a delivery that is not dead).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from threadloom.cli.options import StoreOption
from threadloom.cli.shared import fail, table, when, with_store
from threadloom.errors import ThreadloomError
from threadloom.store import DEFAULT_STORE

if TYPE_CHECKING:
    from threadloom.records import WebhookSubscription
    from threadloom.store.base import Store

T = TypeVar("T")

webhooks_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="Outbound webhooks: subscriptions, dead letters, re-delivery.",
)

WebhookId = Annotated[str, typer.Argument(metavar="ID", help="The subscription's id")]


class Refused(ThreadloomError):
    """What the store refuses (exit 1)."""


def register(app: typer.Typer) -> None:
    """Add the ``webhooks`` command group to the ``threadloom`` app."""
    app.add_typer(webhooks_app, name="webhooks")


@webhooks_app.command("list")
def webhooks_list(store: StoreOption = DEFAULT_STORE) -> None:
    """List the subscriptions: id, whether enabled, the event types (all: *), the URL."""
    subs = with_store(store, lambda s: s.list_webhooks())
    rows = [
        (w.id, "yes" if w.enabled else "no", ",".join(w.event_types) or "*", w.url) for w in subs
    ]
    table(("ID", "ENABLED", "EVENTS", "URL"), rows)


@webhooks_app.command("add")
def webhooks_add(
    url: Annotated[str, typer.Argument(metavar="URL", help="Where the events are POSTed")],
    event: Annotated[
        list[str] | None,
        typer.Option("--event", metavar="TYPE", help="An event type to send (repeat; none: all)"),
    ] = None,
    description: Annotated[
        str | None, typer.Option(metavar="TEXT", help="What the subscription is for")
    ] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it disabled")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Subscribe URL to some event types; prints its id and secret (shown only here)."""
    from threadloom.node.webhook_targets import TargetPolicy, check_url
    from threadloom.records import WEBHOOK_EVENT_TYPES, WebhookSubscription, new_id
    from threadloom.records.webhook import new_webhook_secret

    types = tuple(dict.fromkeys(event or ()))
    unknown = [t for t in types if t not in WEBHOOK_EVENT_TYPES]
    if unknown:
        known = ", ".join(WEBHOOK_EVENT_TYPES)
        raise fail(f"unknown event type {unknown[0]!r} (known: {known})", 2)
    if description is not None and len(description) > 1024:
        raise fail("--description must be at most 1024 characters", 2)

    async def add(s: Store) -> WebhookSubscription:
        await check_url(url, TargetPolicy.from_env())
        sub = WebhookSubscription(
            id=new_id(),
            url=url,
            secret=new_webhook_secret(),
            event_types=types,
            enabled=not disabled,
            description=description,
        )
        return await s.create_webhook(sub)

    made = with_store(store, add)
    typer.echo(f"added webhook {made.id}")
    typer.echo(f"secret: {made.secret}")


@webhooks_app.command("remove")
def webhooks_remove(webhook_id: WebhookId, store: StoreOption = DEFAULT_STORE) -> None:
    """Remove a subscription and what its outbox still held for it."""

    async def remove(s: Store) -> None:
        if not await s.delete_webhook(webhook_id):
            raise Refused(f"Webhook not found: {webhook_id}")

    with_store(store, remove)
    typer.echo(f"removed webhook {webhook_id}")


@webhooks_app.command("dead")
def webhooks_dead(
    webhook: Annotated[
        str | None, typer.Option("--webhook", metavar="ID", help="One subscription's only")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many")] = 100,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List the dead letters: deliveries that failed every attempt."""
    dead = with_store(
        store,
        lambda s: s.list_webhook_deliveries(state="dead", subscription_id=webhook, limit=limit),
    )
    rows = [
        (
            d.event_id,
            d.subscription_id,
            d.event_type,
            str(d.attempts),
            when(d.created_at),
            (d.last_error or (str(d.last_status) if d.last_status else "-"))[:60],
        )
        for d in dead
    ]
    table(("EVENT", "WEBHOOK", "TYPE", "ATTEMPTS", "CREATED (UTC)", "LAST ERROR"), rows)


@webhooks_app.command("redeliver")
def webhooks_redeliver(
    webhook_id: WebhookId,
    event_id: Annotated[str, typer.Argument(metavar="EVENT_ID", help="The dead event's id")],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Make a dead delivery pending again (same event id): the server sends it next."""

    async def redeliver(s: Store) -> None:
        found = await s.get_webhook_delivery(event_id, webhook_id)
        if found is None:
            raise Refused(f"No delivery {event_id} of webhook {webhook_id}")
        if found.state != "dead":
            raise Refused(f"Delivery {event_id} is {found.state}, not dead")
        if await s.redeliver_webhook(event_id, webhook_id) is None:
            raise Refused(f"Delivery {event_id} is no longer dead")

    with_store(store, redeliver)
    typer.echo(f"delivery {event_id} is pending again; the server sends it next")
