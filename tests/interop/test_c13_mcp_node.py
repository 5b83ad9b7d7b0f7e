"""The real MCP TypeScript clients against a real ``threadloom serve`` (spec 13 §13.5,
C13-080…C13-087).

``@modelcontextprotocol/sdk`` (its ``Client`` over ``StreamableHTTPClientTransport``) and
``mcp-remote`` (the stdio ↔ Streamable HTTP proxy hosts put in front of a remote server) are
installed with ``npm ci`` from the lock file kept beside this test (``mcp_node/``, through
``node_clients.installed``) and driven by Node.js (``mcp_node/run_mcp.mjs``) against
``threadloom serve`` on a project written here, on SQLite and PostgreSQL. Without ``node``
and ``npm`` the tests are skipped with the reason; under ``CI=true`` that is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_project import SLOW_TEXT, TOKEN, serve
from node_clients import installed, node_run

HERE = Path(__file__).resolve().parent / "mcp_node"
CLIENT_TIMEOUT_MS = 2000
"""The request timeout the slow call is made with: the run takes more than twice as long."""


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    yield from serve(tmp_path / "project", db_url)


@pytest.fixture(scope="module")
def mcp_clients() -> tuple[str, Path]:
    """``node`` and a folder with ``@modelcontextprotocol/sdk`` and ``mcp-remote``."""
    return installed(HERE, "the MCP TypeScript clients", ["run_mcp.mjs"])


def api(base: str, path: str) -> Any:
    got = httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
    assert got.status_code == 200, got.text
    return got.json()


def version() -> str:
    from threadloom.version import __version__

    return __version__


def test_c13_080_c13_084_the_sdk_client_gets_the_answer_and_the_version(
    mcp_clients: tuple[str, Path], served: str
) -> None:
    """C13-080, C13-084: the tool's outputSchema wraps a string; the call's structured
    content is ``{result: answer}`` (the SDK validates it against the schema), its text the
    answer, its ``_meta.threadloom`` the thread; serverInfo names Threadloom's version."""
    out = node_run(mcp_clients, "run_mcp.mjs", base=served, token=TOKEN, scenario="plain")
    assert out["server"]["name"] == "threadloom" and out["server"]["version"] == version()
    tools = {tool["name"]: tool for tool in out["tools"]}
    assert sorted(tools) == ["holder", "slow", "summarizer"]
    schema = tools["summarizer"]["outputSchema"]
    assert schema["properties"]["result"]["type"] == "string" and schema["required"] == ["result"]
    result = out["result"]
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "summary of: a long story"}]
    assert result["structuredContent"] == {"result": "summary of: a long story"}
    meta = result["meta"]["threadloom"]
    assert (meta["success"], meta["reason"]) == (True, "stop_on_response")
    thread = api(served, f"/api/threads/{meta['threadId']}")["thread"]
    assert thread["agent_id"] == "summarizer" and "mcp" in thread["tags"]
    assert out["errors"] == []
    assert out["sessionId"]  # issued with initialize, sent back with every request (§13.5.6)


def test_c13_082_a_call_longer_than_the_request_timeout_lives_on_progress(
    mcp_clients: tuple[str, Path], served: str
) -> None:
    """C13-082: the SDK's request timeout is 2 s, the agent takes about 5 s without
    committing a message; with ``resetTimeoutOnProgress`` the steady progress keeps the call
    alive and it answers. Progress numbers increase; each has a message."""
    out = node_run(
        mcp_clients,
        "run_mcp.mjs",
        base=served,
        token=TOKEN,
        scenario="slow",
        timeoutMs=CLIENT_TIMEOUT_MS,
    )
    assert out["error"] is None, out
    assert out["result"]["structuredContent"] == {"result": SLOW_TEXT}
    assert out["tookMs"] > 2 * CLIENT_TIMEOUT_MS
    progress = out["progress"]
    assert len(progress) >= 3
    numbers = [p["progress"] for p in progress]
    assert numbers == sorted(set(numbers))
    assert all(p["message"] for p in progress)
    assert progress[0]["message"].startswith("running for")
    assert progress[-1]["message"] == "the agent answered"


def test_c13_083_a_cancelled_call_stops_its_thread(
    mcp_clients: tuple[str, Path], served: str
) -> None:
    """C13-083: the client aborts (AbortSignal → ``notifications/cancelled``) once progress
    says the agent is calling ``hold``; the thread settles stopped (``aborted_by_user``),
    its tool call was cut short and no other model request was made."""
    out = node_run(mcp_clients, "run_mcp.mjs", base=served, token=TOKEN, scenario="cancel")
    assert out["result"] is None and "the user gave up" in out["error"]["message"], out
    assert [p["message"] for p in out["progress"]][-1] == "calling hold"
    # stopped by the notification, while the call's own connection was still open
    assert out["statusBeforeClose"] == "idle", out
    # no progress after the cancel (the 2025 wire's stream still ends with an answer, which
    # the client drops as one for an unknown id)
    assert not [e for e in out["errors"] if "progress notification" in e], out["errors"]
    threads = [t for t in api(served, "/api/threads")["threads"] if t["agent_id"] == "holder"]
    assert len(threads) == 1
    thread_id = threads[0]["id"]
    status = api(served, f"/api/threads/{thread_id}")["status"]
    assert (status["state"], status["reason"]) == ("idle", "aborted_by_user"), status
    logs = api(served, f"/api/threads/{thread_id}/logs")
    assert len(logs["logs"]) == 1, logs  # the request that called hold, no other
    messages = api(served, f"/api/threads/{thread_id}/messages?order=asc")["messages"]
    assert "held" not in [m["content"] for m in messages]


def test_c13_085_mcp_remote_with_an_authorization_header(
    mcp_clients: tuple[str, Path], served: str, tmp_path: Path
) -> None:
    """C13-085: ``mcp-remote`` given the API key with ``--header``, spoken to over stdio by
    the SDK's stdio client: it lists the tools and one call answers."""
    out = node_run(
        mcp_clients,
        "run_mcp.mjs",
        base=served,
        token=TOKEN,
        scenario="remote",
        configDir=str(tmp_path / "mcp-auth"),
    )
    assert sorted(out["tools"]) == ["holder", "slow", "summarizer"], out
    assert out["server"]["version"] == version()
    assert out["result"]["structuredContent"] == {"result": "summary of: via the proxy"}
    assert out["result"]["content"][0]["text"] == "summary of: via the proxy"
