"""``threadloom users …`` and ``threadloom keys …`` (spec 10 §10.13, C10-045 … C10-048): the
real commands (typer's runner on the app ``threadloom`` runs) on the real store of each
backend; a key's revocation is checked against the real server app on the same store."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from typer.testing import CliRunner

from threadloom import Runtime
from threadloom.cli.commands import app
from threadloom.server.app import create_app
from threadloom.server.settings import ServerSettings
from threadloom.store import open_store

PASSWORD = "a long enough password\n"


def cli(db_url: str, *args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, [*args, "--store", db_url], input=stdin)


async def acli(db_url: str, *args: str, stdin: str | None = None) -> Any:
    return await asyncio.to_thread(cli, db_url, *args, stdin=stdin)


def table(output: str) -> list[list[str]]:
    """The rows of a listing (its header first), split on runs of blanks."""
    return [line.split() for line in output.splitlines()]


def test_c10_045_users_list_and_delete(db_url: str) -> None:
    """Users are created, listed (never a password hash) and deleted by username; a deleted
    user's keys go with them."""
    assert cli(db_url, "users", "create", "boss", "--role", "admin", "--password-stdin",
               "--roles", "ops,billing:read", stdin=PASSWORD).exit_code == 0  # fmt: skip
    assert cli(db_url, "users", "create", "ci-bot", "--role", "api").exit_code == 0
    key = cli(db_url, "keys", "create", "ci-bot").stdout.strip()

    listed = cli(db_url, "users", "list")
    assert listed.exit_code == 0, listed.output
    rows = table(listed.stdout)
    assert rows[0] == ["USERNAME", "ROLE", "PASSWORD", "ROLES", "CREATED", "ID"]
    assert [row[:4] for row in rows[1:]] == [
        ["boss", "admin", "yes", "ops,billing:read"],
        ["ci-bot", "api", "no", "-"],
    ]
    assert "$argon2" not in listed.output

    deleted = cli(db_url, "users", "delete", "ci-bot")
    assert (deleted.exit_code, deleted.stdout) == (0, "deleted user ci-bot\n")
    assert [row[0] for row in table(cli(db_url, "users", "list").stdout)[1:]] == ["boss"]
    assert table(cli(db_url, "keys", "list").stdout)[1:] == []
    assert key.startswith("tlk_")

    missing = cli(db_url, "users", "delete", "ci-bot")
    assert missing.exit_code == 1
    assert missing.stderr == "error: no user 'ci-bot'\n"


def test_c10_046_the_last_admin_cannot_be_deleted(db_url: str) -> None:
    assert cli(db_url, "users", "create", "boss", "--role", "admin").exit_code == 0
    refused = cli(db_url, "users", "delete", "boss")
    assert refused.exit_code == 1
    assert refused.stderr == "error: boss is the last admin: create another admin first\n"
    assert [row[0] for row in table(cli(db_url, "users", "list").stdout)[1:]] == ["boss"]
    assert cli(db_url, "users", "create", "second", "--role", "admin").exit_code == 0
    assert cli(db_url, "users", "delete", "boss").exit_code == 0


def test_c10_047_keys_are_created_for_a_username_and_listed_without_their_text(
    db_url: str,
) -> None:
    """``keys create USERNAME`` as ``users create USERNAME`` (``--user`` still works); the
    listing names the owner and shows ``tlk_…`` and the last five characters only."""
    for name in ("ana", "ben"):
        assert cli(db_url, "users", "create", name).exit_code == 0
    first = cli(db_url, "keys", "create", "ana", "--name", "laptop")
    assert first.exit_code == 0, first.output
    assert first.stderr == "API key 'laptop' for ana (shown once, keep it secret):\n"
    older = cli(db_url, "keys", "create", "--user", "ben", "--name", "ci", "--expires-days", "7")
    assert older.exit_code == 0, older.output
    ana_key, ben_key = first.stdout.strip(), older.stdout.strip()
    assert ana_key.startswith("tlk_") and ben_key.startswith("tlk_")

    listed = cli(db_url, "keys", "list")
    assert listed.exit_code == 0, listed.output
    header, *rows = table(listed.stdout)
    assert header == ["ID", "NAME", "USER", "KEY", "CREATED", "LAST", "USED", "EXPIRES"]
    assert [row[1:4] for row in rows] == [
        ["laptop", "ana", f"tlk_…{ana_key[-5:]}"],
        ["ci", "ben", f"tlk_…{ben_key[-5:]}"],
    ]
    assert rows[0][-1] == "-" and rows[1][-1] != "-"  # only ben's key expires
    assert ana_key not in listed.output and ben_key not in listed.output
    assert [row[1] for row in table(cli(db_url, "keys", "list", "ben").stdout)[1:]] == ["ci"]

    for args, says, code in [
        (("keys", "create"), "error: name the key's owner: threadloom keys create USERNAME", 2),
        (("keys", "create", "ana", "--user", "ben"), "two owners given", 2),
        (("keys", "create", "nobody"), "error: no user 'nobody'", 1),
        (("keys", "list", "nobody"), "error: no user 'nobody'", 1),
    ]:
        done = cli(db_url, *args)
        assert (done.exit_code, says in done.stderr) == (code, True), (args, done.output)


async def test_c10_048_a_revoked_key_is_refused_at_the_next_request(db_url: str) -> None:
    """``keys revoke`` takes the id ``keys list`` shows, or the key itself; a server on the
    same store refuses the key from its next request on (the command runs beside it)."""
    assert (await acli(db_url, "users", "create", "ana")).exit_code == 0
    by_id = (await acli(db_url, "keys", "create", "ana", "--name", "one")).stdout.strip()
    by_text = (await acli(db_url, "keys", "create", "ana", "--name", "two")).stdout.strip()
    key_id = table((await acli(db_url, "keys", "list")).stdout)[1][0]

    runtime = await Runtime.open(db_url, exclusive=False)
    try:
        served = create_app(runtime, ServerSettings(auth="required", store=db_url))
        transport = httpx.ASGITransport(app=served)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:

            async def me(key: str) -> int:
                answer = await http.get("/api/auth/me", headers={"Authorization": f"Bearer {key}"})
                return answer.status_code

            assert (await me(by_id), await me(by_text)) == (200, 200)
            revoked = await acli(db_url, "keys", "revoke", key_id)
            assert revoked.exit_code == 0, revoked.output
            assert revoked.stdout == (
                f"revoked key 'one' (tlk_…{by_id[-5:]}) of ana, id {key_id}\n"
            )
            assert (await me(by_id), await me(by_text)) == (401, 200)
            revoked = await acli(db_url, "keys", "revoke", by_text)
            assert revoked.exit_code == 0, revoked.output
            assert revoked.stdout.startswith(f"revoked key 'two' (tlk_…{by_text[-5:]}) of ana")
            assert await me(by_text) == 401
    finally:
        await runtime.close()

    again = await acli(db_url, "keys", "revoke", key_id)
    assert (again.exit_code, again.stderr) == (1, f"error: no API key with id {key_id}\n")
    again = await acli(db_url, "keys", "revoke", by_text)
    assert (again.exit_code, again.stderr) == (1, "error: no such API key\n")
    malformed = await acli(db_url, "keys", "revoke", "laptop")
    assert malformed.exit_code == 2
    assert "neither a key id (threadloom keys list) nor a key (tlk_…)" in malformed.stderr
    store = await open_store(db_url)
    try:
        assert await store.list_api_keys(None) == []
    finally:
        await store.close()
