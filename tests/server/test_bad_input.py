"""Bad input is a 400 naming the field, never a 5xx, and changes nothing (issue 23;
spec 08 §8.1.3 rule 6, §8.1.5): the requests the attack of issue 23 answered with 500.
Nothing may move: every table of the store (read on a connection of its own,
``store_probe``) and the thread's event sequence (read through the API) are the same after
the requests as before them. The server runs with authentication on (login, API keys,
users and tickets exist).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from conftest import USERS, Api
from store_probe import StoreProbe, probe
from threadloom.server.settings import ServerSettings

UPLOADS = 1024 * 1024
VOLATILE_COLUMNS = {"last_used_at_us"}
VOLATILE_TABLES = {"nodes"}


@dataclass(frozen=True)
class Ids:
    """What the URLs and bodies of the samples refer to."""

    thread: str
    message: str
    user: str
    key: str

    def url(self, template: str, path: str = "a.txt") -> str:
        return (
            template.replace("{id}", self.thread)
            .replace("{message_id}", self.message)
            .replace("{user_id}", self.user)
            .replace("{key_id}", self.key)
            .replace("{path:fspath}", path)
        )


class Snapshots:
    """Every row of every table but heartbeats and last-use times, read on one connection
    of the probe's own (opened once: a connection per read would be most of the suite's
    time on PostgreSQL)."""

    def __init__(self, store: StoreProbe) -> None:
        self.tables = [t for t in store.tables() if t not in VOLATILE_TABLES]
        self.conn: Any
        if store.backend == "sqlite":
            import sqlite3

            from threadloom.store.sqlite.store import path_from_url

            self.conn = sqlite3.connect(
                path_from_url(store.url), isolation_level=None, check_same_thread=False
            )
        else:
            import psycopg

            self.conn = psycopg.connect(store.url, autocommit=True)

    def take(self) -> dict[str, list[tuple[Any, ...]]]:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in self.tables:
            cur = self.conn.execute(f"SELECT * FROM {table}")
            out[table] = _rows(cur.description, cur.fetchall())
        return out

    def close(self) -> None:
        self.conn.close()


def _rows(description: Any, rows: list[Any]) -> list[tuple[Any, ...]]:
    keep = [i for i, d in enumerate(description) if d[0] not in VOLATILE_COLUMNS]
    return sorted((tuple(repr(r[i]) for i in keep) for r in rows), key=repr)


class World:
    """A server with authentication on, a thread with one message and one file, and the
    fixture users; ``root`` (an admin) sends everything but logins."""

    def __init__(self, api: Api, ids: Ids) -> None:
        self.api = api
        self.ids = ids
        self.snapshots = Snapshots(probe(api.runtime))
        self._clients: dict[str | None, httpx.AsyncClient] = {}

    def client(self, user: str | None) -> httpx.AsyncClient:
        """One client per user, kept (a new client per request is slow)."""
        if user not in self._clients:
            self._clients[user] = self.api.client(user)
        return self._clients[user]

    async def seq(self) -> int:
        response = await self.client("root").get(f"/api/threads/{self.ids.thread}")
        assert response.status_code == 200, response.text
        value: int = response.json()["seq"]
        return value

    async def state(self) -> tuple[int, dict[str, list[tuple[Any, ...]]]]:
        return await self.seq(), await asyncio.to_thread(self.snapshots.take)


@pytest.fixture
async def world(make_api: Callable[..., Any]) -> AsyncIterator[World]:
    made = await make_world(make_api)
    yield made
    made.snapshots.close()


async def make_world(make_api: Callable[..., Any]) -> World:
    api: Api = await make_api(ServerSettings(auth="required", max_upload_bytes=UPLOADS))
    root = api.client("root")
    created = await root.post(
        "/api/threads",
        json={"agent_id": "echo", "initial_messages": [{"role": "user", "content": "hi"}]},
    )
    assert created.status_code == 200, created.text
    thread = created.json()["threadId"]
    wrote = await root.post(f"/api/threads/{thread}/fs/a.txt", json={"data": "aGk="})
    assert wrote.status_code == 201, wrote.text
    keys = (await root.get("/api/api-keys", params={"all": "true"})).json()["keys"]
    ids = Ids(
        thread=thread,
        message=created.json()["initialMessageIds"][0],
        user=USERS["bob"].id,
        key=keys[0]["id"],
    )
    return World(api, ids)


# -- the fields of issue 23 ----------------------------------------------------------------

S = "\ud800"


def issue_23_requests(ids: Ids) -> list[tuple[str, str, dict[str, Any], str, str | None]]:
    """The requests that answered 500 in the attack of issue 23 (a lone surrogate in 14
    fields, NaN in ``properties``): method, URL, body, the field to name, the user."""
    thread, messages = f"/api/threads/{ids.thread}", f"/api/threads/{ids.thread}/messages"
    upload = {"name": f"a{S}.txt", "mimeType": "text/plain", "data": "aGk="}
    return [
        ("POST", messages, {"content": f"hi {S}"}, "content", "root"),
        ("POST", messages, {"content": "hi", "metadata": {"k": S}}, "metadata.k", "root"),
        (
            "POST",
            messages,
            {"content": "hi", "attachments": [upload]},
            "attachments[0].name",
            "root",
        ),
        ("PATCH", f"{messages}/{ids.message}", {"content": S}, "content", "root"),
        ("POST", "/api/threads", {"agent_id": "echo", "tags": [S]}, "tags[0]", "root"),
        ("POST", "/api/threads", {"agent_id": f"echo{S}"}, "agent_id", "root"),
        (
            "POST",
            "/api/threads",
            {"agent_id": "echo", "initial_messages": [{"role": "user", "content": S}]},
            "initial_messages[0].content",
            "root",
        ),
        ("POST", "/api/threads", {"agent_id": "echo", "env": {"K": S}}, "env.K", "root"),
        (
            "POST",
            "/api/threads",
            {"agent_id": "echo", "arguments": {"a": S}},
            "arguments.a",
            "root",
        ),
        ("POST", "/api/api-keys", {"name": f"key {S}"}, "name", "root"),
        (
            "POST",
            "/api/auth/websocket-ticket",
            {"pathname": f"{thread}/stream{S}"},
            "pathname",
            "root",
        ),
        ("PATCH", f"/api/users/{ids.user}", {"display_name": S}, "display_name", "root"),
        ("POST", "/api/auth/login", {"username": S, "password": "a password"}, "username", None),
        ("POST", "/api/auth/login", {"username": "alice", "password": S}, "password", None),
        (
            "POST",
            "/api/threads",
            {"agent_id": "echo", "properties": {"p": float("nan")}},
            "properties.p",
            "root",
        ),
    ]


async def test_issue_23_surrogates_and_nan_are_a_400_naming_the_field(world: World) -> None:
    before = await world.state()
    for method, url, body, field, user in issue_23_requests(world.ids):
        response = await world.client(user).request(
            method,
            url,
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 400, (method, url, response.text)
        answer = response.json()
        assert answer["code"] == "invalid_request"
        assert answer["details"][0]["field"] == field, (url, answer)
        assert answer["error"].startswith(f"{field} must "), answer
    assert await world.state() == before


async def test_issue_23_dates_past_the_stores_range_are_a_400(world: World) -> None:
    client = world.client("root")
    for name in ("startDate", "endDate"):  # seconds whose µs no longer fit 64 bits
        for value in ("9223372036854", str(2**63 - 1)):
            response = await client.get(f"/api/threads?{name}={value}")
            assert response.status_code == 400, response.text
            assert response.json()["details"][0]["field"] == name
    listed = await client.get("/api/threads?startDate=0&endDate=9223372036853")
    assert listed.status_code == 200 and listed.json()["total"] == 1


# -- a refused send writes nothing (issue 23 item 6) ----------------------------------------


def upload(name: str, data: bytes = b"hi") -> dict[str, Any]:
    return {"name": name, "mimeType": "text/plain", "data": base64.b64encode(data).decode()}


async def test_issue_23_a_refused_send_writes_no_attachment(world: World) -> None:
    """The second item is refused only after the first would have been written: nothing
    is written, no file event is committed (seq stays)."""
    messages = f"/api/threads/{world.ids.thread}/messages"
    client = world.client("root")
    before = await world.state()
    for second, field in (
        (upload("   "), "attachments[1].name"),
        (upload(f"b{S}.txt"), "attachments[1].name"),
        ({**upload("b.png"), "mimeType": "image/png"} | {"width": 0}, "attachments[1].width"),
    ):
        body = {"content": "two files", "attachments": [upload("a.txt"), second]}
        response = await client.post(
            messages,
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 400, response.text
        assert response.json()["details"][0]["field"] == field
    assert await world.state() == before


async def test_issue_23_sizes_and_quota_are_checked_before_any_write(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(max_file_size=64, max_thread_file_bytes=100)
    client = api.client("alice")
    thread = await api.thread()
    assert (await client.post(f"/api/threads/{thread}/fs/a.txt", json={"data": "aGk="})).is_success
    snapshots = Snapshots(probe(api.runtime))
    try:
        before = snapshots.take()
        messages = f"/api/threads/{thread}/messages"
        over_size = {"content": "x", "attachments": [upload("a.txt"), upload("b.txt", b"x" * 65)]}
        response = await client.post(messages, json=over_size)
        assert response.status_code == 413, response.text
        assert response.json()["details"][0]["field"] == "attachments[1].data"
        over_quota = {
            "content": "x",
            "attachments": [upload("a", b"x" * 60), upload("b", b"y" * 60)],
        }
        response = await client.post(messages, json=over_quota)
        assert response.status_code == 413, response.text
        assert response.json()["code"] == "payload_too_large"
        created = {
            "agent_id": "echo",
            "initial_messages": [
                {"role": "user", "content": "a", "attachments": [upload("a.txt")]},
                {"role": "user", "content": "b", "attachments": [upload("b", b"x" * 65)]},
            ],
        }
        response = await client.post("/api/threads", json=created)
        assert response.status_code == 413, response.text
        assert response.json()["details"][0]["field"] == "initial_messages[1].attachments[0].data"
        assert snapshots.take() == before
        fits = {"content": "x", "attachments": [upload("a", b"x" * 40), upload("b", b"y" * 40)]}
        assert (await client.post(messages, json=fits)).status_code == 202
    finally:
        snapshots.close()


def file_rows(tables: dict[str, list[tuple[Any, ...]]]) -> list[Any]:
    """The rows of the file tables and the ``file`` events."""
    events = [r for r in tables["thread_events"] if "'file'" in r]
    return [tables["files"], tables["file_chunks"], events]


async def test_issue_23_a_rejected_send_while_running_writes_nothing(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api()
    client = api.client("alice")
    thread = await api.thread("gate", overlap="reject")
    assert (await client.post(f"/api/threads/{thread}/messages", json={"content": "go"})).is_success
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    snapshots = Snapshots(probe(api.runtime))
    try:
        before = file_rows(snapshots.take())  # the run itself writes its log meanwhile
        body = {"content": "more", "attachments": [upload("a.txt"), upload("b.txt")]}
        response = await client.post(f"/api/threads/{thread}/messages", json=body)
        assert response.status_code == 409, response.text
        assert response.json()["code"] == "thread_running"
        assert file_rows(snapshots.take()) == before
    finally:
        snapshots.close()
        api.gate.open()
