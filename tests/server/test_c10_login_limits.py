"""Spec 10 §10.11: the login limits hold under concurrency (issue 23 item 4).

A login's place in the address and username windows is taken before its first ``await``,
so a burst of concurrent wrong passwords gets exactly the limit's worth of password checks
(each answered 401) and a 429 with ``Retry-After`` for every other request.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from conftest import Api

PASSWORD = "correct horse battery"
LOGIN_FAILURES_PER_ADDRESS = 10  # per 5 minutes
LOGIN_FAILURES_PER_USERNAME = 25  # per 15 minutes


def assert_limited(response: httpx.Response, window_s: int) -> None:
    assert response.status_code == 429
    assert response.json() == {
        "error": "Too many authentication attempts. Try again later.",
        "code": "rate_limited",
        "retryAfter": int(response.headers["retry-after"]),
    }
    assert 1 <= int(response.headers["retry-after"]) <= window_s


async def test_c10_007_concurrent_wrong_logins_check_exactly_the_limit(api: Api) -> None:
    client = api.client(None)

    async def attempt(n: int) -> httpx.Response:
        body = {"username": f"user{n}", "password": "wrong password"}
        return await client.post("/api/auth/login", json=body)

    answers = await asyncio.gather(*(attempt(n) for n in range(60)))
    counts = Counter(response.status_code for response in answers)
    assert counts == {401: LOGIN_FAILURES_PER_ADDRESS, 429: 60 - LOGIN_FAILURES_PER_ADDRESS}
    for response in answers:
        if response.status_code == 429:
            assert_limited(response, 300)
    after = await attempt(99)  # the window stays full
    assert_limited(after, 300)


async def test_concurrent_wrong_logins_for_one_username_check_exactly_its_limit(
    api: Api,
) -> None:
    """40 addresses (one attempt each, under their own limit) guess one username at once."""
    await api.set_password("alice", PASSWORD)
    clients = [
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api.app, client=(f"198.51.100.{n}", 40000)),
            base_url="http://127.0.0.1",
        )
        for n in range(40)
    ]
    try:
        body = {"username": "alice", "password": "wrong password"}
        answers = await asyncio.gather(
            *(client.post("/api/auth/login", json=body) for client in clients)
        )
        counts = Counter(response.status_code for response in answers)
        assert counts == {401: LOGIN_FAILURES_PER_USERNAME, 429: 40 - LOGIN_FAILURES_PER_USERNAME}
        for response in answers:
            if response.status_code == 429:
                assert_limited(response, 900)
        # Even the right password from a fresh address is refused while the window is full.
        right = await clients[0].post(
            "/api/auth/login", json={"username": "alice", "password": PASSWORD}
        )
        assert_limited(right, 900)
    finally:
        for client in clients:
            await client.aclose()


async def test_successful_logins_are_not_counted(api: Api) -> None:
    await api.set_password("alice", PASSWORD)
    client = api.client(None)
    good = {"username": "alice", "password": PASSWORD}
    answers = await asyncio.gather(*(client.post("/api/auth/login", json=good) for _ in range(5)))
    assert [response.status_code for response in answers] == [200] * 5
    for _ in range(LOGIN_FAILURES_PER_ADDRESS + 2):
        assert (await client.post("/api/auth/login", json=good)).status_code == 200
    wrong = {"username": "alice", "password": "wrong password"}
    for _ in range(LOGIN_FAILURES_PER_ADDRESS):
        assert (await client.post("/api/auth/login", json=wrong)).status_code == 401
    assert_limited(await client.post("/api/auth/login", json=wrong), 300)


async def test_refused_bodies_are_not_counted(api: Api) -> None:
    """A 400 (no password, no username) does no password work and takes no slot."""
    client = api.client(None)
    for _ in range(LOGIN_FAILURES_PER_ADDRESS + 5):
        assert (await client.post("/api/auth/login", json={"password": "x"})).status_code == 400
    wrong = {"username": "nobody", "password": "wrong password"}
    for _ in range(LOGIN_FAILURES_PER_ADDRESS):
        assert (await client.post("/api/auth/login", json=wrong)).status_code == 401
    assert_limited(await client.post("/api/auth/login", json=wrong), 300)
