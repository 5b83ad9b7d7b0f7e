"""``threadloom`` — the command line.

- ``threadloom init DIR`` writes a small working project (``cli/init.py``);
- ``threadloom run DIR`` chats with an agent of a project in the terminal (``cli/chat.py``);
- ``threadloom serve DIR`` serves the web UI, the REST API and the streams;
- ``threadloom users …`` / ``threadloom keys …`` create credentials (``cli/auth.py``);
- ``threadloom backup`` / ``threadloom restore`` copy an SQLite store (``cli/backup.py``);
- ``threadloom migrate [--check]`` lists or applies schema migrations (``cli/migrate.py``).

The Typer application and its commands are ``cli/commands.py``. This module is the console
script's entry point: ``threadloom --version`` answers here, before the commands (and
through them the runtime and the server) are imported.
"""

from __future__ import annotations

import sys


def entrypoint() -> None:
    """The ``threadloom`` console script (and ``python -m threadloom.cli``)."""
    if sys.argv[1:] == ["--version"]:
        from threadloom import __version__

        print(f"threadloom {__version__}")
        return
    from threadloom.cli.commands import app

    app(prog_name="threadloom")
