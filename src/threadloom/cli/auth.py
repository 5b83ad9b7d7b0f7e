"""``threadloom users …`` and ``threadloom keys …``: credentials from the command line
(spec 10 §10.13).

``users create|list|delete|set-roles|quota`` and ``keys create|list|revoke``: a user is named by
its username, the first argument wherever one is needed (``keys create USERNAME``; the
older ``keys create --user USERNAME`` still works); a key by the id ``keys list`` shows, or
by the key itself. They write to the same store as the server (``--store``, default
``THREADLOOM_DATABASE_URL``, ``THREADLOOM_STORE`` or ``sqlite:///./threadloom.db``), beside a
running server (they take no lock), so a fresh deployment gets its first admin and key
before ``threadloom serve`` listens on a public address (``serve`` itself refuses to start
without one: ``server/startup.py``, exit code 2). Exit codes: 2 for input refused before
the store is touched, 1 for what the store refuses (a user that does not exist, the last
admin).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console

from threadloom.cli.options import StoreOption
from threadloom.errors import LastAdmin, StoreError, UsernameTaken
from threadloom.store import DEFAULT_STORE

if TYPE_CHECKING:
    from threadloom.records import Spend, UserQuota
    from threadloom.store.base import ApiKeyRow, Store, UserRow

# The store, the records and the server's account code are imported by the commands that
# use them, not here: ``threadloom --help`` lists these commands without loading them.

T = TypeVar("T")

users_app = typer.Typer(
    add_completion=False, rich_markup_mode=None, help="Users who sign in to the server."
)
keys_app = typer.Typer(
    add_completion=False, rich_markup_mode=None, help="API keys for programs that use the server."
)
err = Console(stderr=True, highlight=False, soft_wrap=True)

Username = Annotated[str, typer.Argument(metavar="USERNAME", help="The user's username")]


def register(app: typer.Typer) -> None:
    """Add the ``users`` and ``keys`` command groups to the ``threadloom`` app."""
    app.add_typer(users_app, name="users")
    app.add_typer(keys_app, name="keys")


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def _with_store(url: str, work: Callable[[Store], Awaitable[T]]) -> T:
    from threadloom.store import open_store

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
    from threadloom.wire.users import APP_ROLE

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


def _when(us: int | None) -> str:
    """A stored time as a reader wants it: UTC to the minute, ``-`` for none."""
    if us is None:
        return "-"
    return datetime.fromtimestamp(us / 1_000_000, UTC).strftime("%Y-%m-%d %H:%M")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell, one row a line (nothing but the header when
    there are no rows)."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        typer.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


async def _user(s: Store, username: str) -> UserRow:
    user = await s.get_user_by_name(username)
    if user is None:
        raise _fail(f"no user {username!r}")
    return user


def _shown_key(key: ApiKeyRow) -> str:
    return f"{key.key_prefix}…{key.last_five}"


# -- users -----------------------------------------------------------------------------------


@users_app.command("create")
def users_create(
    username: Annotated[
        str, typer.Argument(metavar="USERNAME", help="Unique handle, [A-Za-z0-9._-]{1,64}")
    ],
    role: Annotated[str, typer.Option(metavar="ROLE", help="admin, user or api")] = "user",
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input")
    ] = False,
    roles: Annotated[
        str | None, typer.Option(metavar="ROLES", help="Application roles, comma-separated")
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create a user.

    Without --password-stdin the user cannot sign in and uses API keys only."""
    from threadloom.server.auth.accounts import ROLES, new_user
    from threadloom.server.auth.passwords import hash_password
    from threadloom.wire.users import MIN_PASSWORD_LENGTH, USERNAME

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


@users_app.command("list")
def users_list(store: StoreOption = DEFAULT_STORE) -> None:
    """List the users.

    One line each: username, role, whether they can sign in with a password, their
    application roles, when they were created (UTC) and their id."""
    users = _with_store(store, lambda s: s.list_users())
    rows = [
        (
            u.username,
            u.role,
            "yes" if u.password_hash else "no",
            ",".join(u.roles) or "-",
            _when(u.created_at_us),
            u.id,
        )
        for u in users
    ]
    _table(("USERNAME", "ROLE", "PASSWORD", "ROLES", "CREATED", "ID"), rows)


@users_app.command("delete")
def users_delete(username: Username, store: StoreOption = DEFAULT_STORE) -> None:
    """Delete a user.

    Their sessions and API keys go with them; their threads are kept. The last admin
    cannot be deleted."""

    async def work(s: Store) -> None:
        await s.delete_user((await _user(s, username)).id)

    try:
        _with_store(store, work)
    except LastAdmin:
        raise _fail(f"{username} is the last admin: create another admin first") from None
    typer.echo(f"deleted user {username}")


@users_app.command("revoke-oauth")
def users_revoke_oauth(username: Username, store: StoreOption = DEFAULT_STORE) -> None:
    """End every OAuth grant of a user: the MCP hosts they allowed.

    Their tokens are refused from the next request on; the hosts must ask again."""

    async def work(s: Store) -> int:
        user = await _user(s, username)
        grants = {token.grant_id for token, _ in await s.list_oauth_grants(user.id)}
        return sum([await s.revoke_oauth_grant(user.id, grant) for grant in sorted(grants)])

    count = _with_store(store, work)
    typer.echo(f"revoked {count} OAuth grant{'' if count == 1 else 's'} of {username}")


@users_app.command("set-roles")
def users_set_roles(
    username: Username,
    roles: Annotated[
        list[str] | None,
        typer.Argument(metavar="ROLE...", help="Application roles (none: clear them)"),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Replace a user's application roles.

    The roles say what the user may do in your agents' code (ThreadState.user())."""
    from threadloom.store.base import UserPatch

    wanted = _roles(roles or [])

    async def work(s: Store) -> None:
        await s.update_user((await _user(s, username)).id, UserPatch(roles=wanted))

    _with_store(store, work)
    typer.echo(f"{username}: roles {', '.join(wanted) or '(none)'}")


@users_app.command("quota")
def users_quota(
    username: Username,
    usd: Annotated[
        float | None, typer.Option(metavar="USD", help="USD of known cost per window")
    ] = None,
    tokens: Annotated[int | None, typer.Option(metavar="N", help="Tokens per window")] = None,
    requests: Annotated[
        int | None, typer.Option(metavar="N", help="Model requests per window")
    ] = None,
    window: Annotated[
        str, typer.Option(metavar="WINDOW", help="hour, day, week or month (30 days)")
    ] = "day",
    warn_at: Annotated[
        float, typer.Option(metavar="SHARE", help="Share of a limit that sends a warning")
    ] = 0.8,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the quota")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Show, set or remove a user's quota of model spend.

    Without a limit option, shows the quota and what the user's threads spent in its
    window; with one, sets the quota; with --remove, removes it. A run of the user that
    reaches the quota stops before its next model request."""
    from pydantic import ValidationError

    from threadloom.records import UserQuota
    from threadloom.records.budget import WINDOW_SECONDS

    setting = usd is not None or tokens is not None or requests is not None
    quota: UserQuota | None = None
    if setting and not remove:
        try:
            quota = UserQuota(
                user_id="-",
                usd=usd,
                tokens=tokens,
                requests=requests,
                window=window,
                warn_at=warn_at,
            )
        except ValueError as exc:
            first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise _fail(f"invalid quota: {first.removeprefix('Value error, ')}", 2) from None

    async def work(s: Store) -> tuple[UserQuota | None, Spend | None]:
        user_id = (await _user(s, username)).id
        if remove:
            await s.set_user_quota(user_id, None)
            return None, None
        found = quota.model_copy(update={"user_id": user_id}) if quota is not None else None
        if found is not None:
            await s.set_user_quota(user_id, found)
        else:
            found = await s.get_user_quota(user_id)
        if found is None:
            return None, None
        since = time.time_ns() // 1000 - WINDOW_SECONDS[found.window] * 1_000_000
        return found, await s.user_spend(user_id, since)

    found, spent = _with_store(store, work)
    if found is None:
        typer.echo(f"{username}: no quota")
        return
    limits = ", ".join(
        f"{name} {getattr(found, name)}"
        for name in ("usd", "tokens", "requests")
        if getattr(found, name) is not None
    )
    typer.echo(f"{username}: {limits} per {found.window} (warning at {found.warn_at:.0%})")
    if spent is not None:
        unknown = f", {spent.unknown_cost} of unknown cost" if spent.unknown_cost else ""
        typer.echo(
            f"spent in the window: ${spent.usd:.6g}, {spent.tokens} tokens,"
            f" {spent.requests} model requests{unknown}"
        )


# -- API keys --------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    username: Annotated[
        str | None,
        typer.Argument(metavar="USERNAME", help="The key's owner", show_default=False),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", hidden=True, help="The key's owner (older spelling)")
    ] = None,
    name: Annotated[str, typer.Option(metavar="NAME", help="A label for the key")] = "cli",
    expires_days: Annotated[
        int | None,
        typer.Option("--expires-days", metavar="DAYS", min=1, max=3650, help="Lifetime in days"),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Create an API key for USERNAME.

    The key is printed on standard output: the only time it is shown."""
    from threadloom.server.auth.accounts import issue_api_key

    if username is not None and user is not None and username != user:
        raise _fail(f"two owners given: {username!r} and --user {user!r}", 2)
    owner = username or user
    if owner is None:
        raise _fail("name the key's owner: threadloom keys create USERNAME", 2)
    if not 1 <= len(name) <= 100:
        raise _fail("name must be 1-100 characters", 2)

    async def work(s: Store) -> str:
        row = await _user(s, owner)
        return (await issue_api_key(s, row.id, name, expires_days)).key

    key = _with_store(store, work)
    err.print(f"API key {name!r} for {owner} (shown once, keep it secret):", markup=False)
    typer.echo(key)


@keys_app.command("list")
def keys_list(
    username: Annotated[
        str | None,
        typer.Argument(metavar="USERNAME", help="Only this user's keys", show_default=False),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """List the API keys.

    One line each (never the key itself): id, name, owner, the key's first and last
    characters, when it was created, last used and expires (UTC)."""

    async def work(s: Store) -> tuple[list[ApiKeyRow], dict[str, str]]:
        owner = await _user(s, username) if username is not None else None
        keys = await s.list_api_keys(owner.id if owner is not None else None)
        names = {u.id: u.username for u in await s.list_users()}
        return keys, names

    keys, names = _with_store(store, work)
    rows = [
        (
            k.id,
            k.name,
            names.get(k.user_id, k.user_id),
            _shown_key(k),
            _when(k.created_at_us),
            _when(k.last_used_at_us),
            _when(k.expires_at_us),
        )
        for k in keys
    ]
    _table(("ID", "NAME", "USER", "KEY", "CREATED", "LAST USED", "EXPIRES"), rows)


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[
        str,
        typer.Argument(
            metavar="KEY", help="The key's id (threadloom keys list), or the key itself (tlk_…)"
        ),
    ],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Revoke an API key.

    The server refuses it from its next request on."""
    from threadloom.server.auth.principal import digest

    by_text = key.startswith("tlk_")
    if not by_text:
        try:
            uuid.UUID(key)
        except ValueError:
            raise _fail(
                f"{key!r} is neither a key id (threadloom keys list) nor a key (tlk_…)", 2
            ) from None

    async def work(s: Store) -> str | None:
        if by_text:
            found = await s.api_key_by_digest(digest(key))
            row, owner = found if found is not None else (None, None)
        else:
            row = await s.get_api_key(key)
            owner = await s.get_user(row.user_id) if row is not None else None
        if row is None or not await s.delete_api_key(row.id):
            return None
        whose = owner.username if owner is not None else row.user_id
        return f"revoked key {row.name!r} ({_shown_key(row)}) of {whose}, id {row.id}"

    done = _with_store(store, work)
    if done is None:
        raise _fail("no such API key" if by_text else f"no API key with id {key}")
    typer.echo(done)
