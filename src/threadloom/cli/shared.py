"""What the store command groups (``schedules``, ``triggers``, ``webhooks``) share: the
error line and its exit code, running a piece of work on a store, and how a time and a
table are printed. Nothing here imports the runtime: a group's ``--help`` stays cheap
(issue 40)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import typer
from rich.console import Console

from threadloom.errors import InvalidField, ThreadloomError

if TYPE_CHECKING:
    from threadloom.store.base import Store

T = TypeVar("T")

err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit to raise (1: the store refused, 2: the
    input was refused before the store was written)."""
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def with_store(url: str, work: Callable[[Store], Awaitable[T]]) -> T:
    """``work`` on the store at ``url``, opened and closed around it; a refused field exits
    2, anything else Threadloom refuses exits 1, each with its one line."""
    from threadloom.store import open_store

    async def run() -> T:
        store = await open_store(url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except InvalidField as exc:
        raise fail(str(exc), 2) from None
    except ThreadloomError as exc:
        raise fail(str(exc)) from None


def when(us: int | None) -> str:
    """A stored time (µs) as UTC to the second; ``-`` for none."""
    if not us:
        return "-"
    return datetime.fromtimestamp(us / 1_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell, a row a line (the header alone when empty)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
