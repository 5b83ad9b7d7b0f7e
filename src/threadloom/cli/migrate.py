"""``threadloom migrate``: the schema migrations a start would apply, listed (``--check``)
or applied before the nodes start (spec 17 §17.4; ``store/maintenance.py``).

Exit codes of ``--check``: 0 nothing to apply (also for a newer schema this release can
use), 3 migrations pending (listed), 2 the store cannot be read or its schema is newer than
this release can use. ``threadloom migrate`` applies them: 0 done, 2 refused.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from threadloom.cli.options import StoreOption
from threadloom.errors import StoreError, StoreLocked

if TYPE_CHECKING:
    from threadloom.store.core.upgrades import Plan

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

PENDING = 3
"""``--check``'s exit code when a start would migrate."""


def _describe(plan: Plan) -> list[str]:
    where = "a new database" if plan.current == 0 else f"schema version {plan.current}"
    if plan.newer:
        return [
            f"{plan.backend}: {where}, newer than this Threadloom ({plan.latest}) and compatible"
            f" down to {plan.floor}: a start uses it as it is, nothing to apply"
        ]
    if not plan.pending:
        return [f"{plan.backend}: {where}, up to date with this Threadloom ({plan.latest})"]
    lines = [
        f"{plan.backend}: {where}; a start would apply {len(plan.pending)}"
        f" migration{'s' if len(plan.pending) != 1 else ''} (to {plan.latest}):"
    ]
    lines += [f"  {version:>3}  {name}" for version, name in plan.pending]
    return lines


def migrate(
    db: StoreOption = "sqlite:///threadloom.db",
    check: Annotated[
        bool,
        typer.Option("--check", help="Only say what a start would change (exit 3 when something)"),
    ] = False,
) -> None:
    """Apply the pending schema migrations (--check: list them).

    Run it before rolling new nodes out: the nodes of the previous release keep working on
    the migrated schema (migrations only add; docs/deploy.md, 'Upgrades')."""
    from threadloom.store import maintenance

    try:
        plan = maintenance.migration_plan(db)
    except StoreError as exc:
        err.print(Text(f"threadloom migrate: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    if check:
        for line in _describe(plan):
            out.print(line, soft_wrap=True)
        raise typer.Exit(PENDING if plan.pending else 0)
    if not plan.pending:
        for line in _describe(plan):
            out.print(line, soft_wrap=True)
        return
    try:
        before, version = asyncio.run(maintenance.migrate(db))
    except StoreLocked as exc:
        err.print(Text(f"threadloom migrate: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    except StoreError as exc:
        err.print(Text(f"threadloom migrate: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    for number, name in before.pending:
        out.print(f"applied {number:>3}  {name}", soft_wrap=True)
    out.print(f"{before.backend}: schema version {version}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``migrate`` to the ``threadloom`` app."""
    app.command()(migrate)
