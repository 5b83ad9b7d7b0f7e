"""Budgets and quotas over HTTP (spec 15 §15.8): a new thread's ``budget`` and the admins'
quota routes, on a real server and Runtime (``api``: the ``echo`` agent on the scripted
model, users alice and bob, admin root)."""

from __future__ import annotations

import asyncio
from typing import Any

from typer.testing import CliRunner

from conftest import USERS, Api
from threadloom.cli.commands import app
from threadloom.records import UserQuota


async def _status(api: Api, thread: str, text: str) -> dict[str, object]:
    client = api.client()
    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": text})
    assert sent.status_code == 202, sent.text
    await api.settle(thread)
    status: dict[str, object] = (await client.get(f"/api/threads/{thread}")).json()["status"]
    return status


async def test_c15_012_a_thread_created_with_a_budget(api: Api) -> None:
    thread = await api.thread(budget={"scope": "thread", "requests": 1})
    first = await _status(api, thread, "one")
    assert (first["state"], first["reason"]) == ("idle", "stop_on_response")
    second = await _status(api, thread, "two")
    assert (second["state"], second["reason"]) == ("failed", "budget_exceeded")
    error = second["error"]
    assert isinstance(error, dict)
    assert error["type"] == "BudgetExceeded" and error["retryable"] is False
    assert error["message"] == (
        f"Budget exceeded: the lifetime budget of thread {thread} allows 1 model requests;"
        " 1 model requests spent"
    )
    several = await api.thread(budget=[{"requests": 3}, {"usd": 1.5, "warn_at": 0.5}])
    row = await api.runtime.store.get_thread(several)
    assert row is not None and [b.requests for b in row.budgets] == [3, None]
    client = api.client()
    for bad in ({"scope": "forever", "requests": 1}, {}, 5, [{"tokens": -1}]):
        refused = await client.post("/api/threads", json={"agent_id": "echo", "budget": bad})
        assert refused.status_code == 400, (bad, refused.text)
        body = refused.json()
        assert body["error"].startswith("budget must be a budget or a list of at most 16"), body
        assert body["details"][0]["field"] == "budget"


async def test_c15_013_admins_set_read_and_remove_a_users_quota(api: Api) -> None:
    alice = USERS["alice"].id
    root = api.client("root")
    path = f"/api/users/{alice}/quota"
    assert (await root.get(path)).json() == {"user_id": alice, "quota": None, "spent": None}
    thread = await api.thread(user="alice")
    await _status(api, thread, "spend something")
    put = await root.put(path, json={"requests": 10, "window": "week"})
    assert put.status_code == 200, put.text
    expected = {
        "user_id": alice,
        "quota": {"usd": None, "tokens": None, "requests": 10, "warn_at": 0.8, "window": "week"},
        "spent": {
            "usd": 0.0,
            "tokens": put.json()["spent"]["tokens"],
            "requests": 1,
            "unknown_cost": 1,
        },
    }
    assert put.json() == expected
    assert (await root.get(path)).json() == expected
    assert (await api.client("alice").get(path)).status_code == 403
    assert (await api.client("alice").put(path, json={"requests": 99})).status_code == 403
    unknown = "/api/users/00000000-0000-4000-8000-000000000000/quota"
    for method in ("GET", "PUT", "DELETE"):
        missing = await root.request(method, unknown, json={"requests": 1})
        assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    empty = await root.put(path, json={})
    assert empty.status_code == 400
    assert empty.json()["error"] == "A quota needs at least one of usd, tokens, requests"
    for bad in ({"requests": -1}, {"usd": 1, "window": "year"}, {"tokens": 5, "warn_at": 2}):
        assert (await root.put(path, json=bad)).status_code == 400, bad
    await root.put(path, json={"requests": 1})
    stopped = await _status(api, thread, "over the quota")
    assert (stopped["state"], stopped["reason"]) == ("failed", "budget_exceeded")
    removed = await root.delete(path)
    assert removed.json() == {"user_id": alice, "quota": None, "spent": None}
    assert (await root.get(path)).json()["quota"] is None
    again = await _status(api, thread, "free again")
    assert (again["state"], again["reason"]) == ("idle", "stop_on_response")


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


async def test_c15_013_the_quota_command(db_url: str) -> None:
    """``threadloom users quota`` (spec 15 §15.4 rule 3): set, show, refuse, remove."""
    run = asyncio.to_thread
    assert (await run(cli, "users", "create", "carol", "--store", db_url)).exit_code == 0
    shown = await run(cli, "users", "quota", "carol", "--store", db_url)
    assert (shown.exit_code, shown.output) == (0, "carol: no quota\n")
    made = await run(
        cli,
        "users",
        "quota",
        "carol",
        "--usd",
        "2.5",
        "--requests",
        "9",
        "--window",
        "week",
        "--store",
        db_url,
    )
    assert made.exit_code == 0, made.output
    assert made.output.splitlines() == [
        "carol: usd 2.5, requests 9 per week (warning at 80%)",
        "spent in the window: $0, 0 tokens, 0 model requests",
    ]
    bad = await run(cli, "users", "quota", "carol", "--tokens", "-1", "--store", db_url)
    assert bad.exit_code == 2 and "tokens must be >= 0" in bad.output
    unknown = await run(cli, "users", "quota", "nobody", "--requests", "1", "--store", db_url)
    assert unknown.exit_code == 1 and "no user 'nobody'" in unknown.output
    from threadloom.store import open_store

    store = await open_store(db_url)
    try:
        user = await store.get_user_by_name("carol")
        assert user is not None
        quota = await store.get_user_quota(user.id)
        assert quota == UserQuota(user_id=user.id, usd=2.5, requests=9, window="week")
    finally:
        await store.close()
    gone = await run(cli, "users", "quota", "carol", "--remove", "--store", db_url)
    assert (gone.exit_code, gone.output) == (0, "carol: no quota\n")


async def test_c15_013_the_clients_quota_calls(api: Api) -> None:
    """The Python client's calls of §15.8 (spec 11): ``users.set_quota`` / ``quota`` /
    ``delete_quota`` and ``threads.create(budget=…)``."""
    from threadloom.client import AsyncClient

    alice = USERS["alice"].id
    async with AsyncClient(api.base, token=api.keys["root"]) as client:
        made = await client.users.set_quota(alice, tokens=500, window="hour")
        assert made.user_id == alice and made.quota is not None
        assert (made.quota["tokens"], made.quota["window"]) == (500, "hour")
        read = await client.users.quota(alice)
        assert read.quota == made.quota and read.spent is not None
        removed = await client.users.delete_quota(alice)
        assert (removed.quota, removed.spent) == (None, None)
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        created = await client.threads.create("echo", budget=[{"requests": 2}])
    row = await api.runtime.store.get_thread(created.thread_id)
    assert row is not None and [b.requests for b in row.budgets] == [2]
