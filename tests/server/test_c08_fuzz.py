"""C08-125: a property-based fuzzer (schemathesis) drives every operation of
``/openapi.json`` against a real server: no response is a 5xx."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from test_serve import ROOT, spawn_server

from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings

TOKEN = "fuzz-admin-token-" + "x" * 32
SCHEMA = schemathesis.openapi.from_dict(_build(ServerSettings()).openapi())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    proc, base = spawn_server(
        ROOT / "examples", db, log_level="error", THREADLOOM_ADMIN_TOKEN=TOKEN
    )
    try:
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
        assert b"Traceback" not in output, output.decode(errors="replace")[-4000:]


SHARED: dict[str, str] = {}


def live_thread(base: str, fresh: bool) -> str:
    """A thread for the ``{id}`` of the operation: a fresh one for deletes, else a shared
    one (recreated when a fuzzed request deleted or terminated it)."""
    if not fresh and "id" in SHARED:
        return SHARED["id"]
    response = httpx.post(
        f"{base}/api/threads",
        json={"agent_id": "support", "initial_messages": [{"role": "user", "content": "hi"}]},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200, response.text
    thread: str = response.json()["threadId"]
    if not fresh:
        SHARED["id"] = thread
    return thread


@SCHEMA.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_c08_125_fuzzed_requests_never_get_a_5xx(case: schemathesis.Case, server: str) -> None:
    if "id" in (case.path_parameters or {}):
        destructive = case.method in ("DELETE", "POST") and case.path.endswith(
            ("/{id}", "/terminate")
        )
        case.path_parameters["id"] = live_thread(server, fresh=destructive)
    response = case.call(base_url=server, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code < 500, (case.as_curl_command(), response.text)
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("error"), str) and isinstance(body.get("code"), str)
        assert "detail" not in body and response.status_code != 422
