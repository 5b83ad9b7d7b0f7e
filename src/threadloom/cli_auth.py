"""``threadloom users …`` and ``threadloom keys …``: bootstrap credentials (spec 10 §10.13).

They write to the same store as the server (``--store``, default ``THREADLOOM_STORE`` or
``sqlite:///./threadloom.db``), so a fresh deployment gets its first admin and key before
``threadloom serve`` listens on a public address (``serve`` itself refuses to start without
one: ``server/startup.py``, exit code 2).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from threadloom.errors import LastAdmin, StoreError, UsernameTaken
from threadloom.server.accounts import APP_ROLE, ROLES, USERNAME, issue_api_key, new_user
from threadloom.server.passwords import MIN_PASSWORD_LENGTH, hash_password
from threadloom.server.settings import DEFAULT_STORE
from threadloom.store import open_store
from threadloom.store.base import Store, UserPatch

T = TypeVar("T")

users_app = typer.Typer(add_completion=False, help="Users who sign in to the server.")
keys_app = typer.Typer(add_completion=False, help="API keys for programs that use the server.")
err = Console(stderr=True, highlight=False)

StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        envvar=["THREADLOOM_DATABASE_URL", "THREADLOOM_STORE"],
        help="Store URL of the server",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``users`` and ``keys`` command groups to the ``threadloom`` app."""
    app.add_typer(users_app, name="users")
    app.add_typer(keys_app, name="keys")


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _with_store(url: str, work: Callable[[Store], Awaitable[T]]) -> T:
    async def run() -> T:
        store = await open_store(url)
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreError as exc:
        raise _fail(str(exc)) from None


def _roles(values: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        for role in value.split(","):
            role = role.strip()
            if not role:
                continue
            if not APP_ROLE.match(role):
                raise _fail(f"invalid role {role!r}: 1-128 characters of [A-Za-z0-9._:/-]", 2)
            if role not in out:
                out.append(role)
    if len(out) > 64:
        raise _fail("at most 64 roles", 2)
    return tuple(out)


@users_app.command("create")
def users_create(
    username: Annotated[str, typer.Argument(help="Unique handle, [A-Za-z0-9._-]{1,64}")],
    role: Annotated[str, typer.Option(help="admin, user or api")] = "user",
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input")
    ] = False,
    roles: Annotated[str | None, typer.Option(help="Application roles, comma-separated")] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create a user (without --password-stdin the user can only use API keys)."""
    if not USERNAME.match(username):
        raise _fail("username must be 1-64 characters of [A-Za-z0-9._-]", 2)
    if role not in ROLES:
        raise _fail("role must be admin, user or api", 2)
    password_hash = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if len(password) < MIN_PASSWORD_LENGTH:
            raise _fail(f"the password must be at least {MIN_PASSWORD_LENGTH} characters", 2)
        password_hash = hash_password(password)
    user = new_user(
        username, role, password_hash=password_hash, roles=_roles([roles] if roles else [])
    )
    try:
        _with_store(store, lambda s: s.create_user(user))
    except UsernameTaken:
        raise _fail(f"user {username!r} already exists") from None
    typer.echo(f"created user {username} ({role}) id {user.id}")


@users_app.command("set-roles")
def users_set_roles(
    username: Annotated[str, typer.Argument(help="The user")],
    roles: Annotated[
        list[str] | None, typer.Argument(help="Application roles (none: clear them)")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Replace a user's application roles (what the user may do in your agents' code)."""
    wanted = _roles(roles or [])

    async def work(s: Store) -> bool:
        user = await s.get_user_by_name(username)
        if user is None:
            return False
        await s.update_user(user.id, UserPatch(roles=wanted))
        return True

    try:
        found = _with_store(store, work)
    except LastAdmin as exc:  # pragma: no cover - roles never change the built-in role
        raise _fail(str(exc)) from None
    if not found:
        raise _fail(f"no user {username!r}")
    typer.echo(f"{username}: roles {', '.join(wanted) or '(none)'}")


@keys_app.command("create")
def keys_create(
    user: Annotated[str, typer.Option("--user", help="Owner of the key")],
    name: Annotated[str, typer.Option(help="A label for the key")] = "cli",
    expires_days: Annotated[
        int | None, typer.Option("--expires-days", min=1, max=3650, help="Lifetime in days")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create an API key for USER and print it (the only time it is shown)."""
    if not 1 <= len(name) <= 100:
        raise _fail("name must be 1-100 characters", 2)

    async def work(s: Store) -> str | None:
        row = await s.get_user_by_name(user)
        if row is None:
            return None
        return (await issue_api_key(s, row.id, name, expires_days)).key

    key = _with_store(store, work)
    if key is None:
        raise _fail(f"no user {user!r}")
    err.print(f"API key {name!r} for {user} (shown once, keep it secret):", markup=False)
    typer.echo(key)
