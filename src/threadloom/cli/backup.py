"""``threadloom backup`` and ``threadloom restore``: an SQLite store's file copied with
SQLite's online backup API while a server may write it, and put back in place (spec 17
§17.3; ``store/sqlite/backup.py`` does the work). A PostgreSQL store is refused with the
``pg_dump`` / ``pg_restore`` commands that back it up (docs/deploy.md).

Exit codes: 0 done; 2 refused (a PostgreSQL URL, a file that exists, a store in use, a
backup that fails its checks), with one line that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from threadloom.cli.options import StoreOption
from threadloom.errors import StoreError

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _refuse(command: str, message: str) -> typer.Exit:
    err.print(Text(f"threadloom {command}: {message}", style="red"), soft_wrap=True)
    return typer.Exit(2)


@contextmanager
def _progress(what: str) -> Iterator[Callable[[int, int], None] | None]:
    """Pages done / total as a Rich bar on a terminal (stderr); nothing otherwise."""
    if not err.is_terminal:
        yield None
        return
    columns = (TextColumn(what), BarColumn(), MofNCompleteColumn(), TextColumn("pages"))
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task(what, total=None)

        def step(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield step


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def backup(
    target: Annotated[Path, typer.Argument(metavar="OUT", help="The backup file to write")],
    db: StoreOption = "sqlite:///threadloom.db",
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite OUT when it exists")
    ] = False,
) -> None:
    """Back up an SQLite store into OUT while a server may be using it.

    The copy is consistent (one snapshot), integrity-checked, and written atomically. A
    PostgreSQL store is backed up with pg_dump: the command prints how."""
    from threadloom.store import maintenance

    if maintenance.is_postgres(db):
        raise _refuse("backup", maintenance.pg_dump_advice(db, str(target)))
    try:
        with _progress("backing up") as step:
            copied: Any = maintenance.sqlite_backup(db, target, progress=step, replace=replace)
    except StoreError as exc:
        raise _refuse("backup", str(exc)) from None
    out.print(
        f"backed up {db} to {copied.path}: {copied.threads} threads, schema version"
        f" {copied.schema_version}, {copied.pages} pages ({_size(copied.bytes)}),"
        f" integrity ok, {copied.seconds:.2f} s",
        soft_wrap=True,
    )


def restore(
    source: Annotated[
        Path, typer.Argument(metavar="BACKUP", help="A file threadloom backup wrote")
    ],
    db: StoreOption = "sqlite:///threadloom.db",
) -> None:
    """Restore BACKUP as the SQLite store --db, atomically.

    Refused while a server runs that store, and for a backup that fails its integrity check
    or whose schema this release cannot use. A database already there is kept beside it."""
    from threadloom.store import maintenance

    if maintenance.is_postgres(db):
        raise _refuse(
            "restore",
            "threadloom restore writes SQLite files only; restore a PostgreSQL store with"
            " pg_restore (docs/deploy.md, 'Backup and restore')",
        )
    try:
        with _progress("restoring") as step:
            copied: Any = maintenance.sqlite_restore(source, db, progress=step)
    except StoreError as exc:
        raise _refuse("restore", str(exc)) from None
    kept = f"; the database it replaced is kept as {copied.kept}" if copied.kept else ""
    out.print(
        f"restored {source} to {copied.path}: {copied.threads} threads, schema version"
        f" {copied.schema_version}, integrity ok, {copied.seconds:.2f} s{kept}",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``backup`` and ``restore`` to the ``threadloom`` app."""
    app.command()(backup)
    app.command()(restore)
