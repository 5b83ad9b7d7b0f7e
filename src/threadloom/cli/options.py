"""The command line's shared options: the store every command that opens one takes."""

from __future__ import annotations

from typing import Annotated

import typer

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        "--db",
        envvar=["THREADLOOM_DATABASE_URL", "THREADLOOM_STORE"],
        metavar="URL",
        help="Where threads are kept: sqlite:///file.db (or a path) or postgresql://user@host/db"
        " (default: THREADLOOM_DATABASE_URL)",
    ),
]
"""``--store``/``--db URL``, read from ``THREADLOOM_DATABASE_URL`` (or
``THREADLOOM_STORE``) when not given; each command gives its default."""
