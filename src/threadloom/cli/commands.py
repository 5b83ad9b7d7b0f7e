"""The ``threadloom`` command line's Typer application: ``init``, ``run`` and ``serve`` here,
``users`` and ``keys`` registered from ``cli/auth.py``, ``backup`` and ``restore`` from
``cli/backup.py``, ``migrate`` from ``cli/migrate.py``, ``export`` and ``import`` from
``cli/portable.py`` (the entry point: ``cli/__init__.py``).

A project that does not load gives its findings, one per line with the file each comes
from, and exit code 2 — never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

import threadloom
from threadloom.cli.auth import register as register_auth_commands
from threadloom.cli.backup import register as register_backup_commands
from threadloom.cli.init import InitError, init_project
from threadloom.cli.migrate import register as register_migrate_command
from threadloom.cli.options import StoreOption
from threadloom.cli.portable import register as register_portable
from threadloom.cli.retention import register as register_retention
from threadloom.cli.schedules import register as register_schedules
from threadloom.cli.triggers import register as register_triggers
from threadloom.cli.webhooks import register as register_webhooks
from threadloom.errors import DefinitionError, StoreLocked, ThreadloomError

if TYPE_CHECKING:
    from threadloom.server.serve import ServeInfo

app = typer.Typer(
    add_completion=False,
    help="Threadloom: a durable thread runtime for AI agents.",
    no_args_is_help=True,
    rich_markup_mode=None,  # click's help: flags without a <bool>, sentences wrapped to fit
)
console = Console(highlight=False)
errors = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        console.print(f"threadloom {threadloom.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Threadloom: a durable thread runtime for AI agents."""


def project_problems(exc: DefinitionError) -> None:
    """Print why a project does not load (one line per problem) on stderr."""
    errors.print(Text("The project does not load:", style="bold red"))
    for line in exc.problems or [str(exc)]:
        errors.print(Text(f"  {line}", style="red"), soft_wrap=True)


@app.command()
def init(
    folder: Annotated[
        Path, typer.Argument(metavar="FOLDER", help="Folder to create (it must not hold files)")
    ],
) -> None:
    """Write a small working project to FOLDER.

    The project has a model that answers offline, a prompt, a tool, an agent and a test."""
    try:
        written = init_project(folder)
    except InitError as exc:
        errors.print(Text(f"threadloom init: {exc}", style="red"))
        raise typer.Exit(2) from None
    console.print(f"Created the project {folder}:")
    for path in written:
        console.print(f"  {path.relative_to(folder).as_posix()}")
    console.print()
    console.print("Try it:")
    console.print(f"  threadloom run {folder}")
    console.print(f"  threadloom serve {folder}")
    console.print(f"  python -m pytest {folder}/tests")


@app.command()
def run(
    project: Annotated[
        Path, typer.Argument(metavar="PROJECT", help="Project folder (models/, prompts/, …)")
    ],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            metavar="NAME",
            help="Agent to chat with (default: the project's only one)",
        ),
    ] = None,
    store: StoreOption = "sqlite:///threadloom.db",
    thread: Annotated[str | None, typer.Option(metavar="ID", help="Resume this thread id")] = None,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", metavar="TEXT", help="Send one message and exit"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Threadloom's log, tracebacks included")
    ] = False,
) -> None:
    """Chat with an agent of PROJECT in the terminal.

    Exits with 1 when the last run failed (its cause is printed), with 2 when the project
    does not load or its store cannot be used."""
    from threadloom.cli.chat import chat  # the runtime: imported when a chat starts

    configure_logging(
        "debug" if verbose else "warning", hide_run_failures=not verbose, tracebacks=verbose
    )
    if not project.is_dir():
        errors.print(Text(f"threadloom run: project folder not found: {project}", style="red"))
        raise typer.Exit(2)
    try:
        failure = asyncio.run(chat(project, agent, store, thread, message, console, errors))
    except DefinitionError as exc:
        project_problems(exc)
        raise typer.Exit(2) from None
    except StoreLocked as exc:  # refused before anything ran, as ``serve`` refuses it
        errors.print(Text(f"threadloom run: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    except ThreadloomError as exc:
        errors.print(Text(f"threadloom run: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if failure is not None:
        raise typer.Exit(1)


def banner(info: ServeInfo) -> None:
    """What ``threadloom serve`` says before it listens."""
    console.print(Text(f"Threadloom {info.version}", style="bold"))
    count = len(info.agents)
    agents = f"{count} agent{'' if count == 1 else 's'}: {', '.join(info.agents) or 'none'}"
    rows = [
        ("project", f"{info.project} ({agents})"),
        ("store", info.store),
        ("auth", info.auth),
        ("web UI", info.ui_url),
        ("API docs", info.docs_url or "off (THREADLOOM_PUBLIC_DOCS)"),
    ]
    for label, value in rows:
        console.print(f"  {label:<9} {value}", soft_wrap=True)
    console.print()


@app.command()
def serve(
    project: Annotated[
        Path | None,
        typer.Argument(metavar="PROJECT", help="Project folder (models/, prompts/, …)"),
    ] = None,
    host: Annotated[str, typer.Option(metavar="ADDRESS", help="Address to listen on")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to listen on")] = 8000,
    store: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Where threads are kept: sqlite:///file.db or postgresql://user@host:5432/db"
            " (default THREADLOOM_DATABASE_URL, THREADLOOM_STORE, sqlite:///./threadloom.db)",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option(metavar="LEVEL", help="Log level: debug, info, warning")
    ] = "info",
) -> None:
    """Serve PROJECT's agents over HTTP.

    The web UI at /, the REST API (its docs at /docs) and the live streams."""
    from threadloom.server.serve import ServeError, run_server

    configure_logging(log_level)
    try:
        run_server(project, host=host, port=port, store=store, log_level=log_level, on_ready=banner)
    except ServeError as exc:  # refused before listening
        errors.print(Text(f"threadloom serve: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(2) from None
    except DefinitionError as exc:
        project_problems(exc)
        raise typer.Exit(2) from None


class _NotRunFailures(logging.Filter):
    """Leaves out the records of failed runs (the chat shows them itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "threadloom_run_failed", False)


class _OneLine(logging.Formatter):
    """A record on one line: an exception it carries is named by where it was raised
    (``at tools/orders.py:12``), its traceback left to ``--verbose``."""

    def format(self, record: logging.LogRecord) -> str:
        exc_info = record.exc_info
        if not exc_info or exc_info[2] is None:
            return super().format(record)
        frame = traceback.extract_tb(exc_info[2])[-1]
        path = os.path.relpath(frame.filename)
        where = frame.filename if path.startswith("..") else path
        record.exc_info, record.exc_text = None, None
        try:
            line = super().format(record)
        finally:
            record.exc_info = exc_info
        return f"{line} (at {where}:{frame.lineno}; --verbose shows the traceback)"


LOG_FORMAT = "%(levelname)s:     %(name)s: %(message)s"


def configure_logging(
    level: str, *, hide_run_failures: bool = False, tracebacks: bool = True
) -> None:
    """Show the ``threadloom.*`` loggers on stderr at ``level`` (warnings: missing
    credentials, tool exceptions, failed runs), unless the application configured logging
    itself; without ``tracebacks`` a record that carries an exception stays on one line."""
    root = logging.getLogger()
    package = logging.getLogger("threadloom")
    if root.handlers or package.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT) if tracebacks else _OneLine(LOG_FORMAT))
    if hide_run_failures:
        handler.addFilter(_NotRunFailures())
    package.addHandler(handler)
    name = level.upper()
    package.setLevel(name if name in logging.getLevelNamesMapping() else "INFO")


# -- users and keys, backup and restore, migrate: their own modules -------------------------
register_auth_commands(app)
register_retention(app)  # threadloom retention: cli/retention.py
register_portable(app)  # threadloom export | import: cli/portable.py
register_backup_commands(app)
register_migrate_command(app)
register_schedules(app)  # threadloom schedules: cli/schedules.py
register_triggers(app)  # threadloom triggers: cli/triggers.py
register_webhooks(app)  # threadloom webhooks: cli/webhooks.py
