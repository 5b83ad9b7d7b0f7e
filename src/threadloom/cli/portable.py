"""``threadloom export`` and ``threadloom import`` (spec 21 §21.7): a thread with its child
threads written to a portable file, and such a file stored in a store as history, against
a database URL like the other store commands. Exit codes: 1 for what the store refuses
(an unknown or running thread, an id already stored), 2 for a file that is not one this
version reads."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from threadloom.cli.options import StoreOption
from threadloom.errors import PortableFormatError, ThreadloomError
from threadloom.store import DEFAULT_STORE

if TYPE_CHECKING:
    from threadloom.records.portable import ThreadExport

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``export`` and ``import`` commands to the ``threadloom`` app."""
    app.command(name="export")(export)
    app.command(name="import")(import_)


def export(
    thread_id: Annotated[str, typer.Argument(help="The thread to export (with its children).")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the file here (default: standard output)."),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Write a thread, its child threads and everything they carry as a portable file."""
    from threadloom.store import open_store
    from threadloom.store.portable import export_thread

    async def run() -> bytes:
        opened = await open_store(store)
        try:
            return (await export_thread(opened, thread_id)).dump()
        finally:
            await opened.close()

    try:
        data = asyncio.run(run())
    except ThreadloomError as exc:
        err.print(f"error: {exc}")
        raise typer.Exit(1) from None
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        output.write_bytes(data)


def import_(
    file: Annotated[str, typer.Argument(help="The thread file (- for standard input).")],
    new_ids: Annotated[
        bool,
        typer.Option(
            "--new-ids",
            help="Give every thread, message and log row a new id (default: keep the file's;"
            " an id already stored refuses the import).",
        ),
    ] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Store a thread file's threads as history: no run starts."""
    from threadloom.records.portable import parse_export
    from threadloom.store import open_store
    from threadloom.store.portable import import_thread

    try:
        raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        err.print(f"error: cannot read {file}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    try:
        doc = parse_export(raw)
    except PortableFormatError as exc:
        err.print(f"error: {file}: {exc}")
        raise typer.Exit(2) from None

    async def run() -> ThreadExport:
        opened = await open_store(store)
        try:
            return await import_thread(opened, doc, "new" if new_ids else "keep")
        finally:
            await opened.close()

    try:
        stored = asyncio.run(run())
    except ThreadloomError as exc:
        err.print(f"error: {exc}")
        raise typer.Exit(1) from None
    out.print(f"imported {len(stored.threads)} thread(s); root {stored.root}", soft_wrap=True)
