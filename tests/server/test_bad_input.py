"""The bad-input suite (issue 23, "Keep it attacked"; spec 08 §8.1.3 rule 6, §8.1.5).

Every route that reads a body gets each family of bad values — lone UTF-16 surrogates,
NUL characters, NaN and Infinity, integer extremes, wrong types, deep nesting, bodies over
the limit — at every point of a valid sample body (``badinput.SAMPLES``); every route with
an id in its path gets ids holding NUL and the like; every GET route gets out-of-range
integers and NUL in the query string. Each answer must be a 4xx with the ``{error, code}``
body, naming the field where the family has one, and nothing may move: every table of the
store (read on a connection of its own, ``store_probe``) and the thread's event sequence
(read through the API) are the same after the requests as before them. The server runs
with authentication on (login, API keys, users and tickets exist; a local-mode server is
checked too); the routes are enumerated from the app's route table, so a new route without
a sample fails ``test_every_route_is_in_the_tables``. The requests of the attack of issue
23 (items 5 and 6) are kept as tests of their own. One server per store for all families:
the whole module runs in seconds.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from badinput import (
    FAMILIES,
    NO_BODY,
    QUERY_INTEGERS,
    SAMPLES,
    STREAM_TWINS,
    STREAMS,
    Case,
    Ids,
    Mutator,
    Sample,
    encode,
    served_routes,
)

from conftest import USERS, Api
from store_probe import StoreProbe, probe
from threadloom.server.settings import ServerSettings

UPLOADS = 1024 * 1024
VOLATILE_COLUMNS = {"last_used_at_us"}
VOLATILE_TABLES = {"nodes"}
SEARCH_INDEX = "messages_fts"
"""SQLite's message-search index: the FTS5 table, its shadow tables and its backlog
(``messages_fts_backlog``), storage derived from ``messages`` that the store's background
pass and any search bring up to date at any moment (spec 08 §8.14.1) — not a change a
request made."""


class Snapshots:
    """Every row of every table but heartbeats, last-use times and the search index, read
    on one connection of the probe's own (opened once: a connection per read would be most
    of the suite's time on PostgreSQL)."""

    def __init__(self, store: StoreProbe) -> None:
        self.tables = [
            t for t in store.tables() if t not in VOLATILE_TABLES and not t.startswith(SEARCH_INDEX)
        ]
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
    scheduled = await root.post(
        "/api/schedules",
        json={"id": "bad-input-schedule", "message": "m", "interval_s": 86400, "agent": "echo"},
    )
    assert scheduled.status_code == 201, scheduled.text
    triggered = await root.post("/api/triggers", json={"id": "bad-input-trigger", "agent": "echo"})
    assert triggered.status_code == 201, triggered.text
    ids = Ids(
        thread=thread,
        message=created.json()["initialMessageIds"][0],
        user=USERS["bob"].id,
        key=keys[0]["id"],
    )
    return World(api, ids)


def check_answer(sample: Sample, case: Case, response: httpx.Response) -> str | None:
    """What is wrong with the answer to ``case`` (None: it is right)."""
    where = f"{sample.method} {sample.path} [{case.label}]"
    if response.status_code not in case.status:
        return f"{where}: {response.status_code} {response.text[:300]}"
    try:
        body = response.json()
    except ValueError:
        return f"{where}: not JSON: {response.text[:200]}"
    if not (isinstance(body.get("error"), str) and isinstance(body.get("code"), str)):
        return f"{where}: not an error body: {body}"
    if case.code is not None and body["code"] != case.code:
        return f"{where}: code {body['code']} ({body['error']})"
    if case.field is None:
        return None
    fields = [d.get("field", "") for d in body.get("details") or []]
    if case.exact:
        ok = case.field in fields
    else:
        ok = any(_related(case.field, f) for f in fields) or (
            bool(sample.form) and "body" in fields
        )
    return None if ok else f"{where}: names {fields}, not {case.field!r} ({body['error']})"


def _related(expected: str, named: str) -> bool:
    """``named`` is ``expected``, one of its parents or one of its children."""
    if expected == named:
        return True
    shorter, longer = sorted((expected, named), key=len)
    return bool(shorter) and longer.startswith(shorter) and longer[len(shorter)] in ".["


async def send(world: World, sample: Sample, case: Case) -> httpx.Response:
    client = world.client(sample.user)
    url = world.ids.url(sample.path, sample.url_path)
    return await client.request(
        sample.method, url, content=case.body, headers={"Content-Type": case.content_type}
    )


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


# -- the route table ------------------------------------------------------------------------


def test_every_route_is_in_the_tables() -> None:
    http, sockets = served_routes()
    gets = {("GET", path) for path in QUERY_INTEGERS}
    known = set(SAMPLES) | NO_BODY | gets
    assert sorted(http - known) == [], "a route without a bad-input sample: add it to badinput.py"
    assert sorted(known - http) == [], "a table row names a route the app no longer serves"
    assert sockets <= set(STREAM_TWINS), "a WebSocket route without its GET twin"


# -- bodies ---------------------------------------------------------------------------------


async def test_bad_bodies_are_refused_and_change_nothing(world: World) -> None:
    """Every family at every route, on one server (a server per family would be most of
    the time): the problems of all of them are reported together."""
    problems: list[str] = []
    sent = 0
    after = await world.state()
    for family, mutate in FAMILIES.items():
        for samples in SAMPLES.values():
            for sample in samples:
                mutator = Mutator(sample, sample.body(world.ids))
                mutate(mutator)
                before = after
                for case in mutator.cases:
                    response = await send(world, sample, case)
                    sent += 1
                    problem = check_answer(sample, case, response)
                    if problem is not None:
                        problems.append(f"{family}: {problem}")
                after = await world.state()
                if after != before:
                    moved = [t for t in before[1] if before[1][t] != after[1].get(t)]
                    problems.append(
                        f"{family}: {sample.method} {sample.path}: state moved (seq "
                        f"{before[0]} → {after[0]}, tables {moved})"
                    )
    assert sent > 1000
    assert problems == [], "\n".join(problems[:60]) + f"\n({len(problems)} problems)"


# -- path parameters ------------------------------------------------------------------------

BAD_IDS = ("%00", "a%00b", "%ED%A0%80", "x" * 5000, "%20", "9" * 40)


async def test_bad_path_parameters_are_refused_and_change_nothing(world: World) -> None:
    """Every route with an id in its path, each id in turn replaced: 4xx, nothing moves."""
    http, _ = served_routes()
    problems: list[str] = []
    before = await world.state()
    for method, path in sorted(http):
        params = [
            p for p in ("{id}", "{message_id}", "{log_id}", "{key_id}", "{user_id}") if p in path
        ]
        samples = SAMPLES.get((method, path))
        body = encode(samples[0].body(world.ids)) if samples else None
        user = samples[0].user if samples else "root"
        for param in params:
            for bad in BAD_IDS:
                url = world.ids.url(path.replace(param, bad))
                response = await world.client(user).request(
                    method, url, content=body, headers={"Content-Type": "application/json"}
                )
                where = f"{method} {path} with {param}={bad[:12]}"
                if not 400 <= response.status_code < 500:
                    problems.append(f"{where}: {response.status_code} {response.text[:200]}")
                elif not isinstance(response.json().get("code"), str):
                    problems.append(f"{where}: {response.text[:200]}")
    assert await world.state() == before
    assert problems == [], "\n".join(problems)


# -- query parameters -----------------------------------------------------------------------

NOT_INTEGERS = ("-1", "1.5", "1e3", " 1", "0x10", "١", "9" * 30, str(2**63), "", "+1")
STRING_PARAMETERS = (  # every name a route reads (grep q.raw/q.enum/q.bool/… in server/)
    "agent_id", "all", "find", "format", "grep", "ids", "includeSilent", "include_children",
    "kind", "logs", "messageIds", "order", "parent", "path", "q", "reasoning", "scope",
    "search", "sort", "status", "terminated", "executing", "type", "user_id", "token",
    "ticket", "includeWorkblocks", "includeDescendants",
)  # fmt: skip
EXTREME_INTEGERS = (str(2**63 - 1), "9200000000000", "9223372036854", "0")


async def _get(world: World, path: str, query: str) -> httpx.Response:
    url = world.ids.url(path)
    client = world.client("root")
    if path not in STREAMS:
        return await client.get(f"{url}?{query}")
    headers = {"Accept": "text/event-stream"}
    async with client.stream("GET", f"{url}?{query}", headers=headers) as response:
        if response.status_code < 400:
            return httpx.Response(response.status_code, json={})
        await response.aread()
        return response


def _error_body(response: httpx.Response) -> bool:
    body = response.json()
    return isinstance(body.get("error"), str) and isinstance(body.get("code"), str)


async def test_query_parameters_are_bounded_and_checked(world: World) -> None:
    problems: list[str] = []
    before = await world.state()
    for path, (base, names) in QUERY_INTEGERS.items():
        for name in names:
            for value in NOT_INTEGERS + EXTREME_INTEGERS:
                query = "&".join(q for q in (base, f"{name}={value}") if q)
                response = await _get(world, path, query)
                where = f"GET {path}?{query}"
                if response.status_code >= 500:
                    problems.append(f"{where}: {response.status_code} {response.text[:200]}")
                elif response.status_code >= 400:
                    body = response.json()
                    fields = [d["field"] for d in body.get("details", [])]
                    if body.get("code") != "invalid_request" or name not in fields:
                        problems.append(f"{where}: {response.status_code} {body}")
                elif value in NOT_INTEGERS and value != "":
                    problems.append(f"{where}: accepted ({response.status_code})")
    for path, (base, _) in QUERY_INTEGERS.items():  # NUL in any parameter a route may read
        for name in STRING_PARAMETERS:
            for value in ("a%00", "%ED%A0%80") if name in ("search", "find") else ("a%00",):
                query = "&".join(q for q in (base, f"{name}={value}") if q)
                response = await _get(world, path, query)
                if response.status_code >= 500:
                    problems.append(f"GET {path}?{query[:80]}: {response.status_code}")
                elif response.status_code >= 400 and not _error_body(response):
                    problems.append(f"GET {path}?{query[:80]}: {response.text[:200]}")
    stream = world.ids.url("/api/threads/{id}/stream")
    for last_id in ("9" * 30, str(2**63), str(2**63 - 1), "-1", "1e3"):  # SSE resume header
        headers = {"Accept": "text/event-stream", "Last-Event-ID": last_id}
        async with world.client("root").stream("GET", stream, headers=headers) as response:
            if response.status_code >= 400:
                await response.aread()
                if response.status_code >= 500 or not _error_body(response):
                    problems.append(f"Last-Event-ID {last_id}: {response.status_code}")
    assert await world.state() == before
    assert problems == [], "\n".join(problems)


# -- values that are valid JSON text and stored as given -----------------------------------


async def test_extreme_numbers_in_free_form_values_round_trip(world: World) -> None:
    client = world.api.client("root")
    numbers = [2**63, -(2**63) - 1, 2**64, 10**30, 1e300, -1e-300, 0]
    sent = await client.post(
        "/api/threads",
        content=encode(
            {
                "agent_id": "echo",
                "arguments": {"n": numbers},
                "properties": {"n": numbers},
                "initial_messages": [
                    {"role": "user", "content": "😀 \ud83d\ude00", "metadata": {"n": numbers}}
                ],
            }
        ),
        headers={"Content-Type": "application/json"},
    )
    assert sent.status_code == 200, sent.text
    thread = sent.json()["threadId"]
    detail = (await client.get(f"/api/threads/{thread}")).json()
    assert detail["thread"]["arguments"] == {"n": numbers}
    page = (await client.get(f"/api/threads/{thread}/messages")).json()
    assert page["messages"][0]["metadata"]["n"] == numbers
    assert page["messages"][0]["content"] == "😀 😀"


async def test_local_mode_refuses_surrogates_and_nan_too(make_api: Callable[..., Any]) -> None:
    api: Api = await make_api(ServerSettings(auth="auto"), with_keys=False)
    client = httpx.AsyncClient(base_url=api.base, timeout=30)
    api.clients.append(client)
    thread = (await client.post("/api/threads", json={"agent_id": "echo"})).json()["threadId"]
    for url, body, field in (
        ("/api/threads", {"agent_id": "echo\ud800"}, "agent_id"),
        ("/api/threads", {"agent_id": "echo", "properties": {"p": float("nan")}}, "properties.p"),
        (f"/api/threads/{thread}/messages", {"content": "a\ud800"}, "content"),
        (
            f"/api/threads/{thread}/messages",
            {"content": "a", "metadata": {"x": float("inf")}},
            "metadata.x",
        ),
    ):
        response = await client.post(
            url, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400, (url, body, response.text)
        assert response.json()["details"][0]["field"] == field
    listed = (await client.get("/api/threads")).json()
    assert listed["total"] == 1
    assert (await client.get(f"/api/threads/{thread}")).json()["seq"] == 0


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
