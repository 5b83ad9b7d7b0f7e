"""``threadloom retention``: one retention pass from the command line (spec 17 §17.2).

The rules come from the same ``THREADLOOM_RETENTION_*`` variables as the server's, and
each has an option that overrides its variable. ``--dry-run`` says what a pass would
delete, per rule, and deletes nothing; it reads beside a running server. A real pass on an
SQLite file takes the file's runner lock: refused while a server runs the file (its own
sweeper applies the rules). On PostgreSQL it takes the cluster's retention lock, so it
never runs together with a node's pass. Exit codes: 2 for a setting refused, 1 for what
the store refuses or a lock held elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from threadloom.cli.options import StoreOption
from threadloom.errors import InvalidArgument, StoreLocked, ThreadloomError
from threadloom.store import DEFAULT_STORE

if TYPE_CHECKING:
    from threadloom.engine.run.retention import RetentionPolicy, RetentionReport

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``retention`` command to the ``threadloom`` app."""
    app.command(name="retention")(retention)


def retention(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
    ids: Annotated[
        bool, typer.Option("--ids", help="List the ids of the root threads, per rule.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    inactive_days: Annotated[
        float | None,
        typer.Option(
            "--inactive-days",
            metavar="DAYS",
            help="Delete root threads with no activity for DAYS"
            " (THREADLOOM_RETENTION_INACTIVE_DAYS).",
        ),
    ] = None,
    terminated_days: Annotated[
        float | None,
        typer.Option(
            "--terminated-days",
            metavar="DAYS",
            help="Delete root threads terminated DAYS ago (THREADLOOM_RETENTION_TERMINATED_DAYS).",
        ),
    ] = None,
    threads_per_user: Annotated[
        int | None,
        typer.Option(
            "--threads-per-user",
            metavar="N",
            help="Keep the newest N root threads of each user"
            " (THREADLOOM_RETENTION_THREADS_PER_USER).",
        ),
    ] = None,
    log_body_days: Annotated[
        float | None,
        typer.Option(
            "--log-body-days",
            metavar="DAYS",
            help="Delete log bodies older than DAYS (THREADLOOM_RETENTION_LOG_BODY_DAYS).",
        ),
    ] = None,
    webhook_delivered_days: Annotated[
        float | None,
        typer.Option(
            "--webhook-delivered-days",
            metavar="DAYS",
            help="Delete webhook outbox rows delivered DAYS ago"
            " (THREADLOOM_RETENTION_WEBHOOK_DELIVERED_DAYS).",
        ),
    ] = None,
    webhook_dead_days: Annotated[
        float | None,
        typer.Option(
            "--webhook-dead-days",
            metavar="DAYS",
            help="Delete dead webhook deliveries whose last attempt was DAYS ago"
            " (THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS).",
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Delete what the retention rules name, or say what would go."""
    from threadloom.engine.run.retention import RetentionPolicy

    overrides: dict[str, Any] = {
        "inactive_days": inactive_days,
        "terminated_days": terminated_days,
        "threads_per_user": threads_per_user,
        "log_body_days": log_body_days,
        "webhook_delivered_days": webhook_delivered_days,
        "webhook_dead_days": webhook_dead_days,
    }
    try:
        policy = RetentionPolicy.from_env(os.environ)
        policy = replace(policy, **{k: v for k, v in overrides.items() if v is not None})
    except InvalidArgument as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from None
    if not policy.enabled:
        err.print(
            "error: no retention rule is set: give --inactive-days, --terminated-days,"
            " --threads-per-user, --log-body-days, --webhook-delivered-days or"
            " --webhook-dead-days (or their THREADLOOM_RETENTION_*"
            " variables); nothing is deleted that no rule names",
            markup=False,
        )
        raise typer.Exit(2)
    try:
        report = asyncio.run(_run(store, policy, dry_run))
    except StoreLocked:
        err.print(
            "error: a server runs this store; its sweeper applies the retention rules"
            " (THREADLOOM_RETENTION_*). Stop it to run a pass from here, or use --dry-run.",
            markup=False,
        )
        raise typer.Exit(1) from None
    except ThreadloomError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(1) from None
    if as_json:
        out.print(json.dumps(report.to_dict(), indent=2), markup=False, soft_wrap=True)
    else:
        _print(report, ids)
    if not report.ran:
        raise typer.Exit(1)


async def _run(url: str, policy: RetentionPolicy, dry_run: bool) -> RetentionReport:
    from threadloom.engine.run.retention import apply_retention
    from threadloom.node.cluster import open_cluster
    from threadloom.store import open_store
    from threadloom.store.base import system_clock_us

    opened = await open_store(url)
    cluster = open_cluster(opened)
    try:
        if not dry_run:  # on an SQLite file: refused while a server runs it
            await opened.claim_runner()
        return await apply_retention(opened, cluster, policy, system_clock_us, dry_run=dry_run)
    finally:
        await cluster.close()
        await opened.close()


def _print(report: RetentionReport, ids: bool) -> None:
    from threadloom.engine.run.retention import counted

    title = "retention dry run (nothing deleted)" if report.dry_run else "retention pass"
    out.print(f"{title}:", markup=False)
    for outcome, line in zip(report.outcomes, report.lines(), strict=False):
        out.print(f"  {line}", markup=False)
        if ids and outcome.ids:
            for thread_id in outcome.ids:
                out.print(f"    {thread_id}", markup=False)
    if not report.outcomes or not report.ran:
        out.print(f"  {report.lines()[0]}", markup=False)
    else:
        verb = "would delete" if report.dry_run else "deleted"
        out.print(f"  total: {verb} {counted(report.threads, 'thread')}", markup=False)
    if report.memory_items:
        memory = counted(report.memory_items, "expired memory item")
        out.print(f"  memory: deleted {memory}", markup=False)
