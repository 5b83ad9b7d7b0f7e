"""MCP hosts that sign in with OAuth against a real ``threadloom serve`` (spec 10 §10.15,
spec 13 §13.5 rule 8), on SQLite and PostgreSQL:

- the TypeScript MCP SDK's client (``@modelcontextprotocol/sdk``) with an OAuth client
  provider (``mcp_node/run_oauth.mjs``): it meets the 401, discovers, registers,
  asks for authorization; the test performs the signed-in user's consent over HTTP and hands
  the code back; then a tool call succeeds;
- ``mcp-remote`` run as a stdio MCP server without any header, as Claude Desktop runs it,
  driven by the Python ``mcp`` SDK's stdio client. It opens "a browser" through the ``open``
  package's ``xdg-open``, which honours ``BROWSER``: the test points it at a script that
  performs the consent with the user's session and follows the redirect to mcp-remote's
  callback server.

Both packages are installed with ``npm ci`` from ``mcp_node/``'s lock file (the one the other
MCP interop tests use), into a cache folder keyed by its digest. Without ``node`` and ``npm``
the tests are skipped with the reason; under ``CI=true`` that is a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from mcp import Client, StdioServerParameters
from node_clients import installed, serving

MCP_NODE = Path(__file__).resolve().parent / "mcp_node"
TOKEN = "mcp-oauth-node-test-admin-token-" + "x" * 16
PASSWORD = "correct horse battery staple"


PROJECT = {
    "models/models.py": """
        from threadloom.define import Model
        from threadloom.providers.scripted import Reply, ScriptedProvider

        def summary(request):
            return Reply.text("summary of: " + request.messages[-1].text)

        sum_model = Model(name="sum_model", provider=ScriptedProvider(summary), model="sum")
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        sum_prompt = Prompt(name="sum_prompt", model="sum_model", system="You summarise.")
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        summarizer = Agent(
            name="summarizer",
            expose_as_tool=True,
            tool_description="Summarises a text",
            side_a=Side(prompt="sum_prompt"),
            side_b=Side(label="Caller"),
        )
    """,
}

CONSENT_SCRIPT = '''#!{python}
"""A "browser" for xdg-open (BROWSER): the signed-in user consents, then the redirect is
followed to the host's callback. Logs each step to {log}."""
import sys
from html.parser import HTMLParser
import httpx

class Hidden(HTMLParser):
    def __init__(self):
        super().__init__()
        self.values = {{}}
    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.values[found["name"]] = found.get("value") or ""

url = sys.argv[1]
cookies = {{"threadloom_session": {session!r}}}
with open({log!r}, "a") as log, httpx.Client(cookies=cookies) as browser:
    log.write("open " + url + "\\n")
    page = browser.get(url)
    log.write(f"page {{page.status_code}}\\n")
    form = Hidden()
    form.feed(page.text)
    answer = browser.post(url.split("?")[0], data={{**form.values, "decision": "allow"}})
    location = answer.headers.get("location", "")
    log.write(f"consent {{answer.status_code}} {{location.split('?')[0]}}\\n")
    callback = httpx.get(location)
    log.write(f"callback {{callback.status_code}}\\n")
'''


@pytest.fixture(scope="module")
def node_clients() -> tuple[str, Path]:
    """``node`` and the folder of ``mcp_node/``'s lock file installed (the TypeScript SDK and
    mcp-remote, as the other MCP interop tests use them), with ``run_oauth.mjs``."""
    return installed(MCP_NODE, "the MCP OAuth interop tests", ["run_oauth.mjs"])


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    """``threadloom serve`` on the project above, credentials required, with the user
    ``alice`` (a password) made through the admin token."""
    with serving(PROJECT, db_url, TOKEN, tmp_path / "project") as base:
        made = httpx.post(
            f"{base}/api/users",
            json={"username": "alice", "password": PASSWORD},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert made.status_code == 201, made.text
        yield base


def session_of(base: str) -> str:
    """alice's session token (the cookie a browser would hold after the login page)."""
    login = httpx.post(f"{base}/api/auth/login", json={"username": "alice", "password": PASSWORD})
    assert login.status_code == 200, login.text
    token: str = login.json()["token"]
    return token


class Hidden(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.values[str(found["name"])] = found.get("value") or ""


def consent(session: str, url: str) -> str:
    """The signed-in user opens ``url``, allows, and the code the redirect carries."""
    with httpx.Client(cookies={"threadloom_session": session}) as browser:
        page = browser.get(url)
        assert page.status_code == 200, page.text
        form = Hidden()
        form.feed(page.text)
        target = urljoin(url, "/oauth/authorize")
        answer = browser.post(target, data={**form.values, "decision": "allow"})
    assert answer.status_code == 302, answer.text
    return parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]


def test_c13_090_the_typescript_sdk_signs_in_with_oauth_and_calls_a_tool(
    node_clients: tuple[str, Path], served: str
) -> None:
    node, folder = node_clients
    session = session_of(served)
    proc = subprocess.Popen(
        [node, "run_oauth.mjs", f"{served}/mcp", "summarizer", "a long story"],
        cwd=folder,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[dict[str, Any]] = []
    try:
        for raw in proc.stdout:
            line = json.loads(raw)
            lines.append(line)
            if "authorize" in line:
                url = urlsplit(line["authorize"])
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                assert query["code_challenge_method"] == "S256"
                assert query["resource"] == f"{served}/mcp"
                proc.stdin.write(json.dumps({"code": consent(session, line["authorize"])}) + "\n")
                proc.stdin.flush()
            if "result" in line or "error" in line:
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    print("--- the TypeScript SDK ---\n" + "\n".join(json.dumps(x) for x in lines))
    assert proc.returncode == 0, (lines, proc.stderr.read() if proc.stderr else "")
    http = [x["http"] for x in lines if "http" in x]
    assert http[0] == "POST /mcp 401"
    assert "GET /.well-known/oauth-protected-resource/mcp 200" in http
    assert "GET /.well-known/oauth-authorization-server 200" in http
    assert "POST /oauth/register 201" in http
    assert "POST /oauth/token 200" in http
    result = next(x["result"] for x in lines if "result" in x)
    assert result["tools"] == ["summarizer"]
    assert result["isError"] is False and result["text"] == "summary of: a long story"
    assert result["tokenType"].lower() == "bearer" and result["accessPrefix"] == "tlo_"
    assert result["hasRefresh"] is True
    thread = httpx.get(
        f"{served}/api/threads/{result['thread']['threadId']}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    users = httpx.get(f"{served}/api/users", headers={"Authorization": f"Bearer {TOKEN}"})
    alice = next(u["id"] for u in users.json()["users"] if u["username"] == "alice")
    assert alice in json.dumps(thread.json())  # the thread is alice's


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_c13_091_mcp_remote_without_a_header_signs_in_through_the_browser(
    node_clients: tuple[str, Path], served: str, tmp_path: Path
) -> None:
    node, folder = node_clients
    session = session_of(served)
    log = tmp_path / "browser.log"
    browser = tmp_path / "browser.py"
    browser.write_text(CONSENT_SCRIPT.format(python=sys.executable, log=str(log), session=session))
    browser.chmod(0o755)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "BROWSER": str(browser),
        "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "mcp-auth"),
    }
    proxy = folder / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
    server = StdioServerParameters(
        command=node, args=[str(proxy), f"{served}/mcp", str(free_port())], env=env
    )
    async with Client(server, read_timeout_seconds=60) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        said = await client.call_tool("summarizer", {"message": "from mcp-remote"})
    steps = log.read_text().splitlines()
    print("--- mcp-remote's browser ---\n" + "\n".join(steps))
    assert steps[0].startswith(f"open {served}/oauth/authorize?")
    assert steps[1] == "page 200"
    assert steps[2].startswith("consent 302 http://localhost:") and steps[3] == "callback 200"
    assert listed == ["summarizer"]
    assert not said.is_error
    assert [c.text for c in said.content] == ["summary of: from mcp-remote"]  # type: ignore[union-attr]
