"""Spec 08 §8.1: conventions, the error shape and the request pipeline."""

from __future__ import annotations

import uuid

from conftest import Api


async def test_c08_001_no_credentials_is_401(api: Api) -> None:
    response = await api.client(None).get("/api/threads")
    assert response.status_code == 401
    assert response.json() == {"error": "Unauthorized", "code": "unauthorized"}


async def test_c08_002_unknown_api_path_is_json_404(api: Api) -> None:
    response = await api.client().get("/api/nope")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert response.headers["content-type"].startswith("application/json")


async def test_c08_003_wrong_method_is_405_with_allow(api: Api) -> None:
    thread = await api.thread()
    response = await api.client().put(f"/api/threads/{thread}")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "PATCH", "DELETE"} <= allowed


async def test_c08_004_wrong_content_type_is_415_and_creates_nothing(api: Api) -> None:
    client = api.client()
    response = await client.post(
        "/api/threads", content=b'{"agent_id":"echo"}', headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"
    assert (await client.get("/api/threads")).json()["total"] == 0


async def test_c08_005_malformed_json_is_400_invalid_json(api: Api) -> None:
    response = await api.client().post(
        "/api/threads", content=b'{"agent_id":', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Invalid JSON in request body", "code": "invalid_json"}


async def test_c08_006_json_that_is_not_an_object_is_400(api: Api) -> None:
    response = await api.client().post("/api/threads", json=[1])
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


async def test_c08_007_validation_failures_are_400_with_details(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    failures = [
        await client.post("/api/threads", json={"agent_id": 5}),
        await client.get("/api/threads?limit=abc"),
        await client.post(f"/api/threads/{thread}/messages", json={"content": "x", "role": 1}),
        await client.patch(f"/api/threads/{thread}", json={"tags": "x"}),
    ]
    for response in failures:
        assert response.status_code == 400, response.text
        body = response.json()
        assert "detail" not in body
        assert isinstance(body["details"], list) and body["details"]


async def test_c08_034_unknown_thread_is_404(api: Api) -> None:
    unknown = str(uuid.uuid4())
    response = await api.client().get(f"/api/threads/{unknown}")
    assert response.status_code == 404
    assert response.json() == {"error": f"Thread not found: {unknown}", "code": "thread_not_found"}


async def test_c08_035_malformed_thread_id_is_404(api: Api) -> None:
    response = await api.client().get("/api/threads/not-a-uuid")
    assert response.status_code == 404
    assert response.json()["code"] == "thread_not_found"


async def test_c08_036_foreign_thread_is_403(api: Api) -> None:
    thread = await api.thread(user="alice")
    response = await api.client("bob").get(f"/api/threads/{thread}")
    assert response.status_code == 403
    assert response.json() == {
        "error": "Forbidden: You don't have access to this thread",
        "code": "forbidden",
    }


async def test_c08_037_forbidden_precedes_validation(api: Api) -> None:
    thread = await api.thread(user="alice")
    response = await api.client("bob").post(f"/api/threads/{thread}/messages", json={})
    assert response.status_code == 403


async def test_c08_038_admin_sees_every_thread(api: Api) -> None:
    thread = await api.thread(user="alice")
    response = await api.client("root").get(f"/api/threads/{thread}")
    assert response.status_code == 200
    assert response.json()["thread"]["id"] == thread


async def test_c08_124_reference_routes_not_served_are_404(api: Api) -> None:
    thread = await api.thread()
    client = api.client()
    for path in ("kv", "effects"):
        response = await client.get(f"/api/threads/{thread}/{path}")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


async def test_every_response_carries_request_id_and_fixed_headers(api: Api) -> None:
    """Spec 08 §8.1.1 rule 7: nosniff, the node, the request id (echoed when well-formed)
    and no-store on thread routes."""
    client = api.client()
    mine = await client.get("/api/threads", headers={"X-Request-Id": "req-1.a_b"})
    assert mine.headers["x-request-id"] == "req-1.a_b"
    assert mine.headers["x-content-type-options"] == "nosniff"
    assert mine.headers["x-threadloom-node"] == api.app.settings.node_id
    assert mine.headers["cache-control"] == "no-store"
    bad = await client.get("/api/threads", headers={"X-Request-Id": "no spaces allowed"})
    assert uuid.UUID(bad.headers["x-request-id"]).version == 4
    assert (await client.get("/api/nope")).headers["x-request-id"]
