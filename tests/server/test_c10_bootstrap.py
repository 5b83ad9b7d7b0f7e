"""Spec 10 §10.1 rule 2 and §10.13: the start-up check and the bootstrap commands. The
``threadloom serve`` process that refuses to start is C10-028 in ``test_serve.py``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from threadloom.cli.commands import app
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.server.startup import check_startup


def cli(*args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=stdin)


async def test_public_address_without_credentials_is_refused(db_url: str) -> None:
    public = ServerSettings(host="0.0.0.0", store=db_url)
    with pytest.raises(SettingsError) as refused:
        await check_startup(public)
    assert "threadloom users create" in str(refused.value)
    assert "THREADLOOM_ADMIN_TOKEN" in str(refused.value)
    await check_startup(ServerSettings(host="127.0.0.1", store=db_url))
    await check_startup(ServerSettings(host="::1", store=db_url))
    await check_startup(ServerSettings(host="0.0.0.0", store=db_url, admin_token="x" * 32))
    made = await asyncio.to_thread(cli, "users", "create", "ops", "--store", db_url)
    assert made.exit_code == 0, made.output
    await check_startup(public)


async def test_local_auth_mode_on_a_public_address_is_refused(db_url: str) -> None:
    with pytest.raises(SettingsError):
        await check_startup(ServerSettings(host="0.0.0.0", store=db_url, auth="local"))


async def test_cli_bootstraps_an_admin_and_a_key(db_url: str, make_api: Callable[..., Any]) -> None:
    created = await asyncio.to_thread(
        cli,
        "users",
        "create",
        "boss",
        "--role",
        "admin",
        "--password-stdin",
        "--roles",
        "ops:all,billing:read",
        "--store",
        db_url,
        stdin="a long enough password\n",
    )
    assert created.exit_code == 0, created.output
    issued = await asyncio.to_thread(
        cli, "keys", "create", "--user", "boss", "--name", "first", "--store", db_url
    )
    assert issued.exit_code == 0, issued.output
    key = next(line for line in issued.stdout.splitlines() if line.startswith("tlk_"))
    again = await asyncio.to_thread(cli, "users", "create", "boss", "--store", db_url)
    assert again.exit_code == 1
    short = await asyncio.to_thread(
        cli, "users", "create", "x", "--password-stdin", "--store", db_url, stdin="short\n"
    )
    assert short.exit_code == 2
    roles = await asyncio.to_thread(
        cli, "users", "set-roles", "boss", "billing:refund", "--store", db_url
    )
    assert roles.exit_code == 0, roles.output

    api = await make_api(ServerSettings(auth="auto"), with_keys=False)
    me = await api.client(None, Authorization=f"Bearer {key}").get("/api/auth/me")
    assert me.status_code == 200
    user = me.json()["user"]
    assert (user["username"], user["role"], user["roles"]) == ("boss", "admin", ["billing:refund"])
    login = await api.client(None).post(
        "/api/auth/login", json={"username": "boss", "password": "a long enough password"}
    )
    assert login.status_code == 200
    # a credential exists, so the loopback server is not in local development mode
    assert (await api.client(None, Host="localhost").get("/api/threads")).status_code == 401
