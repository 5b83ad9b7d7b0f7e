"""Schedules over HTTP (spec 18 §18.7) on a real server and Runtime (``api``: the ``echo``
agent on the scripted model, users alice and bob, admin root), both stores."""

from __future__ import annotations

import asyncio
import time

from conftest import USERS, Api


async def test_c18_080_admins_create_read_change_and_delete_schedules(api: Api) -> None:
    """C18-080: POST /api/schedules → 201 with the schedule and its next fire time; GET
    lists and reads it; PATCH changes the fields sent (``enabled: false`` clears the next
    time); DELETE removes it (then 404 ``schedule_not_found``); a taken id → 409
    ``schedule_exists``; a non-admin → 403 on every route."""
    root = api.client("root")
    body = {
        "id": "daily",
        "message": "report",
        "cron": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "agent": "echo",
        "arguments": {"team": "ops"},
        "user_id": USERS["alice"].id,
    }
    before = time.time() * 1_000_000
    created = await root.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    schedule = created.json()["schedule"]
    assert {k: schedule[k] for k in body} == body
    assert schedule["overlap"] == "skip" and schedule["catchup"] == "once"
    assert schedule["enabled"] is True and schedule["source"] == "api"
    assert schedule["fire_count"] == 0 and schedule["last_status"] is None
    assert before < schedule["next_fire_at"] <= before + 25 * 3600 * 1_000_000
    again = await root.post("/api/schedules", json=body)
    assert (again.status_code, again.json()["code"]) == (409, "schedule_exists")
    listed = (await root.get("/api/schedules")).json()["schedules"]
    assert [s["id"] for s in listed] == ["daily"]
    assert (await root.get("/api/schedules/daily")).json()["schedule"] == schedule
    off = await root.patch("/api/schedules/daily", json={"enabled": False, "message": "new"})
    assert off.status_code == 200, off.text
    assert off.json()["schedule"]["next_fire_at"] is None
    assert off.json()["schedule"]["message"] == "new"
    alice = api.client("alice")
    for method, path in (
        ("GET", "/api/schedules"),
        ("POST", "/api/schedules"),
        ("GET", "/api/schedules/daily"),
        ("PATCH", "/api/schedules/daily"),
        ("DELETE", "/api/schedules/daily"),
        ("POST", "/api/schedules/daily/fire"),
    ):
        refused = await alice.request(method, path, json={"enabled": True})
        assert (refused.status_code, refused.json()["code"]) == (403, "admin_required")
    deleted = await root.delete("/api/schedules/daily")
    assert deleted.json() == {"success": True}
    for method, path in (
        ("GET", "/api/schedules/daily"),
        ("PATCH", "/api/schedules/daily"),
        ("DELETE", "/api/schedules/daily"),
        ("POST", "/api/schedules/daily/fire"),
    ):
        missing = await root.request(method, path, json={"enabled": True})
        assert (missing.status_code, missing.json()["code"]) == (404, "schedule_not_found")


async def test_c18_081_bad_schedules_are_a_400_naming_the_field(api: Api) -> None:
    """C18-081: a body breaking a rule → 400 ``invalid_request`` naming the field: both or
    neither of cron and interval_s (``cron``), of agent and thread_id (``agent``), a cron
    expression cronsim refuses, an unknown time zone, new_thread with a thread target
    (``overlap``); a PATCH whose result breaks one likewise; an unknown agent → 404
    ``agent_not_found``; an unknown thread → 404 ``thread_not_found``. Nothing is stored."""
    root = api.client("root")
    base = {"id": "s", "message": "m", "agent": "echo"}
    thread = await api.thread()
    cases = [
        ({**base, "cron": "* * * * *", "interval_s": 60}, "cron"),
        (base, "cron"),
        ({"id": "s", "message": "m", "interval_s": 60}, "agent"),
        ({**base, "cron": "61 * * * *"}, "cron"),
        ({**base, "cron": "0 9 * * *", "timezone": "Europe/Nowhere"}, "timezone"),
        (
            {
                "id": "s",
                "message": "m",
                "interval_s": 60,
                "thread_id": thread,
                "overlap": "new_thread",
            },
            "overlap",
        ),
        ({**base, "interval_s": 0}, "interval_s"),
        ({**base, "interval_s": 60, "id": "has space"}, "id"),
    ]
    for body, field in cases:
        answer = await root.post("/api/schedules", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["code"] == "invalid_request"
        assert field in [d["field"] for d in answer.json()["details"]], (body, answer.text)
    ghost = await root.post("/api/schedules", json={**base, "agent": "ghost", "interval_s": 60})
    assert (ghost.status_code, ghost.json()["code"]) == (404, "agent_not_found")
    nothread = await root.post(
        "/api/schedules",
        json={
            "id": "s",
            "message": "m",
            "interval_s": 60,
            "thread_id": "00000000-0000-4000-8000-000000000000",
        },
    )
    assert (nothread.status_code, nothread.json()["code"]) == (404, "thread_not_found")
    assert (await root.get("/api/schedules")).json() == {"schedules": []}
    ok = await root.post(
        "/api/schedules", json={**base, "interval_s": 3600, "overlap": "new_thread"}
    )
    assert ok.status_code == 201
    to_thread = await root.patch("/api/schedules/s", json={"thread_id": thread})
    assert to_thread.status_code == 400 and to_thread.json()["details"][0]["field"] == "overlap"
    for nulled in ("cron", "message", "enabled", "agent"):
        refused = await root.patch("/api/schedules/s", json={nulled: None})
        assert refused.status_code == 400 and refused.json()["details"][0]["field"] == nulled
    unchanged = (await root.get("/api/schedules/s")).json()["schedule"]
    assert (unchanged["interval_s"], unchanged["agent"]) == (3600, "echo")


async def test_c18_084_a_change_of_time_rule_or_target_replaces_the_other(api: Api) -> None:
    """C18-084: PATCH with ``cron`` on an interval schedule replaces ``interval_s`` (and the
    reverse); with ``thread_id`` on an agent schedule replaces ``agent``, ``arguments`` and
    ``user_id``; the next fire time follows the new rule."""
    root = api.client("root")
    thread = await api.thread()
    await root.post(
        "/api/schedules",
        json={
            "id": "s",
            "message": "m",
            "interval_s": 60,
            "agent": "echo",
            "arguments": {"a": 1},
            "user_id": USERS["bob"].id,
        },
    )
    to_cron = (await root.patch("/api/schedules/s", json={"cron": "0 9 * * *"})).json()
    assert (to_cron["schedule"]["cron"], to_cron["schedule"]["interval_s"]) == ("0 9 * * *", None)
    to_thread = (await root.patch("/api/schedules/s", json={"thread_id": thread})).json()
    schedule = to_thread["schedule"]
    assert schedule["thread_id"] == thread
    assert (schedule["agent"], schedule["arguments"], schedule["user_id"]) == (None, None, None)
    back = (await root.patch("/api/schedules/s", json={"interval_s": 120})).json()["schedule"]
    assert (back["cron"], back["interval_s"]) == (None, 120)


async def test_c18_082_fire_now_sends_the_message_and_the_row_records_it(api: Api) -> None:
    """C18-082: POST /api/schedules/{id}/fire → 200 with the fire (status ``fired``, the
    new thread); the thread of the agent gets the message and its run answers; the
    schedule's count, last fire and last thread follow; its next fire time stays."""
    root = api.client("root")
    created = await root.post(
        "/api/schedules",
        json={"id": "now", "message": "hello", "interval_s": 86400, "agent": "echo"},
    )
    next_fire = created.json()["schedule"]["next_fire_at"]
    fired = await root.post("/api/schedules/now/fire")
    assert fired.status_code == 200, fired.text
    fire = fired.json()["fire"]
    assert fire["status"] == "fired" and fire["schedule_id"] == "now" and fire["error"] is None
    await api.settle(fire["thread_id"])
    page = await root.get(f"/api/threads/{fire['thread_id']}/messages", params={"order": "asc"})
    assert [(m["role"], m["content"]) for m in page.json()["messages"]] == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
    ]
    schedule = (await root.get("/api/schedules/now")).json()["schedule"]
    assert schedule["fire_count"] == 1 and schedule["last_status"] == "fired"
    assert schedule["last_thread_id"] == fire["thread_id"]
    assert schedule["last_fire_at"] == fire["due_at"] and schedule["next_fire_at"] == next_fire


async def test_c18_083_the_server_runtime_fires_due_schedules_by_itself(api: Api) -> None:
    """C18-083: a served runtime ticks on its own (every second by default): a schedule of
    a 1-second interval created over HTTP has fired within a few seconds, each fire a
    thread whose run answered."""
    root = api.client("root")
    created = await root.post(
        "/api/schedules",
        json={"id": "fast", "message": "tick", "interval_s": 1, "agent": "echo"},
    )
    assert created.status_code == 201
    for _ in range(100):
        schedule = (await root.get("/api/schedules/fast")).json()["schedule"]
        if schedule["fire_count"] >= 2:
            break
        await asyncio.sleep(0.1)
    await root.patch("/api/schedules/fast", json={"enabled": False})
    assert schedule["fire_count"] >= 2 and schedule["last_status"] == "fired", schedule
    await api.settle(schedule["last_thread_id"])
    record = await api.runtime.get_thread_record(schedule["last_thread_id"])
    assert record.agent_id == "echo" and "schedule:fast" in record.tags
