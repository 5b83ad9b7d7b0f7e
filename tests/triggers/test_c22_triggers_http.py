"""Inbound triggers over HTTP (spec 22) on a real server and Runtime (the ``echo`` agent on
the scripted model, users alice and bob, admin root), both stores: managing them, calling
them with the secret (bearer or a Standard Webhooks signature), idempotency by the
caller's key — replayed and raced —, and the 4xx of bad calls."""

from __future__ import annotations

import asyncio
import base64
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from server.conftest import USERS, Api
from threadloom.records import new_webhook_secret


async def make_trigger(api: Api, **body: Any) -> dict[str, Any]:
    made = await api.client("root").post("/api/triggers", json={"id": "t", "agent": "echo", **body})
    assert made.status_code == 201, made.text
    trigger: dict[str, Any] = made.json()["trigger"]
    return trigger


def caller(api: Api, secret: str | None = None, **headers: str) -> httpx.AsyncClient:
    """An HTTP client with no principal: the trigger's secret as bearer, when given."""
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    client = httpx.AsyncClient(base_url=api.base, headers=headers, timeout=30)
    api.clients.append(client)
    return client


def signed(secret: str, body: bytes, msg_id: str, at: datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers for ``body``, made by the ``standardwebhooks`` package."""
    when = at or datetime.now(UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body.decode()),
        "content-type": "application/json",
    }


async def thread_texts(api: Api, thread_id: str) -> list[tuple[str, str]]:
    await api.settle(thread_id)
    page = await api.client("root").get(
        f"/api/threads/{thread_id}/messages", params={"order": "asc"}
    )
    assert page.status_code == 200, page.text
    return [(m["role"], m["content"]) for m in page.json()["messages"]]


async def thread_count(api: Api) -> int:
    _, total = await api.runtime.store.list_threads(limit=1)
    return total


async def test_c22_001_admins_create_read_change_and_delete_triggers(api: Api) -> None:
    """C22-001: POST /api/triggers → 201 with the trigger, its URL and its secret (only
    there); GET lists and reads it without the secret; PATCH changes the fields sent and
    answers a new secret once; DELETE removes it (then 404 ``trigger_not_found``); a taken
    id → 409 ``trigger_exists``; a non-admin → 403 on every admin route."""
    root = api.client("root")
    body = {
        "id": "payments",
        "agent": "echo",
        "arguments": {"team": "ops"},
        "user_id": USERS["alice"].id,
        "message": "A payment event:\n{body}",
    }
    created = await root.post("/api/triggers", json=body)
    assert created.status_code == 201, created.text
    trigger = created.json()["trigger"]
    assert {k: trigger[k] for k in body} == body
    assert trigger["url"] == "/api/triggers/payments/fire" and trigger["enabled"] is True
    assert trigger["secret"].startswith("whsec_") and trigger["fire_count"] == 0
    again = await root.post("/api/triggers", json=body)
    assert (again.status_code, again.json()["code"]) == (409, "trigger_exists")
    listed = (await root.get("/api/triggers")).json()["triggers"]
    assert [t["id"] for t in listed] == ["payments"] and listed[0]["secret"] is None
    got = (await root.get("/api/triggers/payments")).json()["trigger"]
    assert got == {**trigger, "secret": None}
    off = await root.patch("/api/triggers/payments", json={"enabled": False, "message": None})
    assert off.status_code == 200, off.text
    assert off.json()["trigger"]["enabled"] is False and off.json()["trigger"]["message"] is None
    assert off.json()["trigger"]["secret"] is None
    secret = new_webhook_secret()
    rotated = await root.patch("/api/triggers/payments", json={"secret": secret})
    assert rotated.json()["trigger"]["secret"] == secret
    moved = await root.patch("/api/triggers/payments", json={"thread_id": await api.thread()})
    assert moved.status_code == 200, moved.text
    assert moved.json()["trigger"]["agent"] is None
    assert moved.json()["trigger"]["arguments"] is None
    alice = api.client("alice")
    for method, path in (
        ("GET", "/api/triggers"),
        ("POST", "/api/triggers"),
        ("GET", "/api/triggers/payments"),
        ("PATCH", "/api/triggers/payments"),
        ("DELETE", "/api/triggers/payments"),
    ):
        refused = await alice.request(method, path, json={"enabled": True})
        assert (refused.status_code, refused.json()["code"]) == (403, "admin_required")
    assert (await root.delete("/api/triggers/payments")).json() == {"success": True}
    for method, path in (
        ("GET", "/api/triggers/payments"),
        ("PATCH", "/api/triggers/payments"),
        ("DELETE", "/api/triggers/payments"),
        ("POST", "/api/triggers/payments/fire"),
    ):
        missing = await root.request(method, path, json={"enabled": True})
        assert (missing.status_code, missing.json()["code"]) == (404, "trigger_not_found")


async def test_c22_002_bad_triggers_are_a_400_naming_the_field(api: Api) -> None:
    """C22-002: both or neither of agent and thread_id → 400 naming ``agent``; arguments or
    user_id with a thread target, a bad id, a bad secret, an empty template → 400 naming
    it; an unknown agent → 404 ``agent_not_found``, thread → 404 ``thread_not_found``; a
    PATCH with null where no null is allowed → 400. Nothing is stored."""
    root = api.client("root")
    thread = await api.thread()
    cases = [
        ({"id": "t"}, "agent"),
        ({"id": "t", "agent": "echo", "thread_id": thread}, "agent"),
        ({"id": "t", "thread_id": thread, "arguments": {"a": 1}}, "arguments"),
        ({"id": "t", "thread_id": thread, "user_id": "u"}, "user_id"),
        ({"id": "-bad", "agent": "echo"}, "id"),
        ({"id": "t", "agent": "echo", "secret": "nope"}, "secret"),
        ({"id": "t", "agent": "echo", "message": ""}, "message"),
        ({"id": "t", "agent": "echo", "enabled": "yes"}, "enabled"),
    ]
    for body, field in cases:
        refused = await root.post("/api/triggers", json=body)
        assert refused.status_code == 400, (body, refused.text)
        assert field in [d["field"] for d in refused.json()["details"]], (body, refused.json())
    unknown = await root.post("/api/triggers", json={"id": "t", "agent": "nobody"})
    assert (unknown.status_code, unknown.json()["code"]) == (404, "agent_not_found")
    gone = await root.post(
        "/api/triggers", json={"id": "t", "thread_id": "00000000-0000-4000-8000-000000000000"}
    )
    assert (gone.status_code, gone.json()["code"]) == (404, "thread_not_found")
    assert (await root.get("/api/triggers")).json()["triggers"] == []
    await make_trigger(api)
    for patch, field in (({"enabled": None}, "enabled"), ({"thread_id": "x"}, "thread_id")):
        refused = await root.patch("/api/triggers/t", json=patch)
        assert refused.status_code == 400, refused.text
        assert field in [d["field"] for d in refused.json()["details"]]
    crossed = await root.patch("/api/triggers/t", json={"arguments": {"a": 1}, "thread_id": thread})
    assert crossed.status_code == 400 and crossed.json()["details"][0]["field"] == "arguments"


async def test_c22_010_a_call_with_the_bearer_secret_starts_a_thread_of_the_agent(
    api: Api,
) -> None:
    """C22-010: POST the trigger's URL with ``Authorization: Bearer <secret>`` → 202 with
    the new thread's id; the thread is the agent's, tagged ``trigger:ID``, owned by the
    trigger's user, and holds the message made from the template and the body, then the
    agent's answer; the trigger counts the call."""
    trigger = await make_trigger(
        api, message="Payment: {body}", user_id=USERS["alice"].id, id="pay"
    )
    answer = await caller(api, trigger["secret"]).post(trigger["url"], content=b'{"amount": 5}')
    assert answer.status_code == 202, answer.text
    fired = answer.json()
    assert fired["trigger_id"] == "pay" and fired["replayed"] is False
    assert fired["idempotency_key"] is None
    thread_id = fired["thread_id"]
    assert await thread_texts(api, thread_id) == [
        ("user", 'Payment: {"amount": 5}'),
        ("assistant", 'echo: Payment: {"amount": 5}'),
    ]
    row = await api.runtime.store.get_thread(thread_id)
    assert row is not None and row.agent_id == "echo" and "trigger:pay" in row.tags
    assert row.user_id == USERS["alice"].id
    got = (await api.client("root").get("/api/triggers/pay")).json()["trigger"]
    assert got["fire_count"] == 1 and got["last_thread_id"] == thread_id
    second = await caller(api, trigger["secret"]).post(trigger["url"], content=b"again")
    assert second.status_code == 202 and second.json()["thread_id"] != thread_id


async def test_c22_011_a_thread_trigger_continues_its_thread_with_the_body(api: Api) -> None:
    """C22-011: a trigger of a thread adds the body (no template: the body itself) as a
    user message to that thread and answers its id."""
    thread = await api.thread()
    trigger = await make_trigger(api, agent=None, thread_id=thread)
    answer = await caller(api, trigger["secret"]).post(
        trigger["url"], content=b"ticket 42 closed", headers={"content-type": "text/plain"}
    )
    assert answer.status_code == 202, answer.text
    assert answer.json()["thread_id"] == thread
    assert await thread_texts(api, thread) == [
        ("user", "ticket 42 closed"),
        ("assistant", "echo: ticket 42 closed"),
    ]


async def test_c22_012_a_standard_webhooks_signature_authenticates_and_keys_the_call(
    api: Api,
) -> None:
    """C22-012: a call signed after Standard Webhooks with the trigger's secret → 202, its
    ``webhook-id`` the idempotency key: the same delivery sent again answers the same
    thread, ``replayed``, and starts nothing. Signed with another secret, over another
    body, or with a timestamp an hour old → 401 ``trigger_unauthorized``."""
    trigger = await make_trigger(api)
    body = b'{"type": "invoice.paid", "id": "in_1"}'
    headers = signed(trigger["secret"], body, "msg_1")
    client = caller(api)
    first = await client.post(trigger["url"], content=body, headers=headers)
    assert first.status_code == 202, first.text
    assert first.json()["idempotency_key"] == "msg_1" and first.json()["replayed"] is False
    before = await thread_count(api)
    again = await client.post(trigger["url"], content=body, headers=headers)
    assert again.status_code == 202
    assert again.json()["thread_id"] == first.json()["thread_id"]
    assert again.json()["replayed"] is True
    assert await thread_count(api) == before
    assert await thread_texts(api, first.json()["thread_id"]) == [
        ("user", body.decode()),
        ("assistant", f"echo: {body.decode()}"),
    ]
    old = datetime.fromtimestamp(time.time() - 3600, UTC)
    for headers in (
        signed(new_webhook_secret(), body, "msg_2"),
        {**signed(trigger["secret"], body, "msg_3"), "webhook-id": "msg_4"},
        signed(trigger["secret"], body, "msg_5", at=old),
    ):
        refused = await client.post(trigger["url"], content=body, headers=headers)
        assert (refused.status_code, refused.json()["code"]) == (401, "trigger_unauthorized")
    tampered = await client.post(
        trigger["url"], content=body + b" ", headers=signed(trigger["secret"], body, "msg_6")
    )
    assert tampered.status_code == 401
    assert await thread_count(api) == before


async def test_c22_013_a_call_without_the_secret_is_refused_and_starts_nothing(
    api: Api,
) -> None:
    """C22-013: no credential, another secret as bearer, or an admin's API key (a principal
    is not the trigger's secret) → 401 ``trigger_unauthorized``; no thread is created."""
    trigger = await make_trigger(api)
    before = await thread_count(api)
    for client in (
        caller(api),
        caller(api, new_webhook_secret()),
        caller(api, api.keys["root"]),
        caller(api, Authorization=f"Basic {base64.b64encode(b'root:x').decode()}"),
    ):
        refused = await client.post(trigger["url"], content=b"hello")
        assert (refused.status_code, refused.json()["code"]) == (401, "trigger_unauthorized")
    assert await thread_count(api) == before


async def test_c22_014_the_same_idempotency_key_replayed_answers_the_same_thread(
    api: Api,
) -> None:
    """C22-014: calls with one ``Idempotency-Key`` answer the same thread; the first starts
    it (``replayed`` false), the others start nothing (one thread, one user message, one
    call counted); another key is another thread."""
    trigger = await make_trigger(api)
    client = caller(api, trigger["secret"])
    answers = []
    for _ in range(3):
        sent = await client.post(trigger["url"], content=b"once", headers={"Idempotency-Key": "k1"})
        assert sent.status_code == 202, sent.text
        answers.append(sent.json())
    assert len({a["thread_id"] for a in answers}) == 1
    assert [a["replayed"] for a in answers] == [False, True, True]
    assert all(a["idempotency_key"] == "k1" for a in answers)
    assert await thread_texts(api, answers[0]["thread_id"]) == [
        ("user", "once"),
        ("assistant", "echo: once"),
    ]
    other = await client.post(trigger["url"], content=b"once", headers={"Idempotency-Key": "k2"})
    assert other.json()["thread_id"] != answers[0]["thread_id"]
    got = (await api.client("root").get("/api/triggers/t")).json()["trigger"]
    assert got["fire_count"] == 2


async def test_c22_015_racing_replays_of_one_key_start_one_thread(api: Api) -> None:
    """C22-015: eight calls with one key sent at once (each on its own connection) all
    answer 202 with the same thread id; exactly one is not ``replayed``; the store holds
    one thread of the trigger with one user message."""
    trigger = await make_trigger(api)
    clients = [caller(api, trigger["secret"]) for _ in range(8)]
    before = await thread_count(api)
    answers = await asyncio.gather(
        *(
            c.post(trigger["url"], content=b"race", headers={"Idempotency-Key": "same"})
            for c in clients
        )
    )
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    bodies = [a.json() for a in answers]
    assert len({b["thread_id"] for b in bodies}) == 1
    assert sorted(b["replayed"] for b in bodies) == [False] + [True] * 7
    assert await thread_count(api) == before + 1
    texts = await thread_texts(api, bodies[0]["thread_id"])
    assert [t for t in texts if t[0] == "user"] == [("user", "race")]


async def test_c22_016_bad_calls_are_a_clear_4xx(api: Api) -> None:
    """C22-016: a body over 256 KiB → 413; a body that is not UTF-8, or holds NUL → 400
    naming ``body``; an empty body where the body is the message → 400; a key over 255
    characters → 400 naming ``Idempotency-Key``; a disabled trigger → 409
    ``trigger_disabled``; a thread target that is gone → 404 ``thread_not_found``, and
    its key may be used again. Nothing is started by any of them."""
    trigger = await make_trigger(api)
    client = caller(api, trigger["secret"])
    before = await thread_count(api)
    big = await client.post(trigger["url"], content=b"x" * (256 * 1024 + 1))
    assert (big.status_code, big.json()["code"]) == (413, "payload_too_large")
    for content, field in ((b"\xff\xfe", "body"), (b"a\x00b", "body"), (b"  ", "body")):
        refused = await client.post(trigger["url"], content=content)
        assert refused.status_code == 400, refused.text
        assert refused.json()["details"][0]["field"] == field
    long_key = await client.post(
        trigger["url"], content=b"x", headers={"Idempotency-Key": "k" * 256}
    )
    assert long_key.status_code == 400
    assert long_key.json()["details"][0]["field"] == "Idempotency-Key"
    assert await thread_count(api) == before
    await api.client("root").patch("/api/triggers/t", json={"enabled": False})
    off = await client.post(trigger["url"], content=b"x")
    assert (off.status_code, off.json()["code"]) == (409, "trigger_disabled")
    thread = await api.thread()
    fixed = await make_trigger(api, id="fixed", agent=None, thread_id=thread)
    await api.runtime.delete_thread(thread)
    gone = await caller(api, fixed["secret"]).post(
        fixed["url"], content=b"x", headers={"Idempotency-Key": "k"}
    )
    assert (gone.status_code, gone.json()["code"]) == (404, "thread_not_found")
    claim = await api.runtime.store.claim_trigger_fire("fixed", "k", thread, 1_000_000)
    assert claim.replayed is False  # the failed call left the key free


async def test_c22_017_a_template_without_body_needs_none(api: Api) -> None:
    """C22-017: a template without ``{body}`` sends itself whatever the body, an empty
    body included (a bare ping)."""
    trigger = await make_trigger(api, message="Run the nightly check")
    answer = await caller(api, trigger["secret"]).post(trigger["url"])
    assert answer.status_code == 202, answer.text
    texts = await thread_texts(api, answer.json()["thread_id"])
    assert texts[0] == ("user", "Run the nightly check")
