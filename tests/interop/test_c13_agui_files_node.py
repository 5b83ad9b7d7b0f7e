"""Files through real clients and a real ``threadloom serve`` (spec 04 §4.5.4, spec 07
§7.6, spec 13 §13.2.3, §13.4.4), on SQLite and PostgreSQL: a plain tool and an MCP server
(``mcp_servers/media.py``) returning images, read back over the REST API and the file
route, and seen by the project's model in its next request; the AG-UI TypeScript client
(``@ag-ui/client`` HttpAgent, its verifier on, installed from ``agui_node/``'s lock file)
sending a picture. Without ``node`` and ``npm`` the client's tests are skipped with the
reason; under ``CI=true`` that is a failure."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import MessagesSnapshotEvent
from node_clients import serving
from test_c13_agui_node import HERE, TOKEN, agui_client

from threadloom.testing import png

__all__ = ["agui_client"]  # the fixture, from the AG-UI client's own tests

MEDIA = Path(__file__).resolve().parent / "mcp_servers" / "media.py"


PNG = png(2, 2)
PNG_B64 = base64.b64encode(PNG).decode()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


PROJECT = {
    "models/models.py": """
        import base64
        import hashlib

        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider
        from threadloom.providers.types import ImagePart

        def seen(images):
            return ", ".join(
                f"{i.media_type} {hashlib.sha256(base64.b64decode(i.data)).hexdigest()[:16]}"
                for i in images
            ) or "none"

        def look(request):
            last = request.messages[-1]
            if last.role == "tool":
                return Reply.text("tool images: " + seen(last.images))
            if last.text == "draw":
                return Reply.tool_calls(Call("draw", {}))
            if last.text == "chart":
                return Reply.tool_calls(Call("chart", {}))
            parts = last.content if isinstance(last.content, list) else []
            images = [p for p in parts if isinstance(p, ImagePart)]
            return Reply.text("user images: " + seen(images))

        eyes = Model(name="eyes", provider=ScriptedProvider(look), model="eyes")
    """,
    "tools/draw.py": f"""
        import base64

        from threadloom.define import Attachment, ToolResult, tool

        PNG = base64.b64decode({PNG_B64!r})

        @tool
        def draw() -> ToolResult:
            \"\"\"Draw a picture.\"\"\"
            picture = Attachment(data=PNG, name="picture.png", mime_type="image/png")
            return ToolResult(result="Drawn.", attachments=[picture])
    """,
    "tools/media.py": f"""
        import sys

        from threadloom import MCPServer

        media = MCPServer(name="media", command=sys.executable, args=[{str(MEDIA)!r}])
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        look_prompt = Prompt(
            name="look_prompt", model="eyes", system="Look.", tools=["draw", "media:chart"]
        )
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        looker = Agent(name="looker", side_a=Side(prompt="look_prompt"), side_b=Side(label="U"))
    """,
}


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    """``threadloom serve`` on the project above (credentials required: the admin token)."""
    with serving(PROJECT, db_url, TOKEN, tmp_path / "project") as base:
        yield base


def api(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


def turn(client: httpx.Client, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new thread of ``looker``, one message, the run awaited: its messages, oldest first."""
    created = client.post("/api/threads", json={"agent_id": "looker"})
    assert created.status_code in (200, 201), created.text
    thread = created.json()["threadId"]
    sent = client.post(f"/api/threads/{thread}/messages", json={"content": text})
    assert sent.status_code in (200, 201, 202), sent.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = client.get(f"/api/threads/{thread}").json()["status"]
        if status["state"] != "running":
            break
        time.sleep(0.05)
    got = client.get(f"/api/threads/{thread}/messages?order=asc")
    assert got.status_code == 200, got.text
    return thread, got.json()["messages"]


@pytest.mark.parametrize(
    ("text", "name", "data", "size"),
    [("draw", "picture.png", PNG, (2, 2)), ("chart", "chart-2.png", None, (4, 3))],
    ids=["tool", "mcp"],
)
def test_c07_030_a_tool_file_over_http(
    served: str, text: str, name: str, data: bytes | None, size: tuple[int, int]
) -> None:
    """C07-030: a plain tool returning an ``Attachment`` / an MCP tool returning an image,
    under ``threadloom serve`` → GET …/messages shows the tool message with its ref (a
    path under /attachments/, the name, image/png, the size and dimensions) and the path
    line; GET …/fs<path> returns the bytes as image/png; the model's next request carried
    the image (its answer names the bytes' digest)."""
    with api(served) as client:
        thread, messages = turn(client, text)
        tool = next(m for m in messages if m["role"] == "tool")
        (ref,) = tool["attachments"]
        assert ref["path"].startswith("/attachments/") and ref["name"] == name
        assert ref["mimeType"] == "image/png" and (ref["width"], ref["height"]) == size
        assert f'Attachment path for "{name}": {ref["path"]}' in tool["content"]
        file = client.get(f"/api/threads/{thread}/fs{ref['path']}")
        assert file.status_code == 200, file.text
        assert file.headers["content-type"].startswith("image/png")
        assert data is None or file.content == data
        assert ref["size"] == len(file.content)
        assert messages[-1]["content"] == f"tool images: image/png {digest(file.content)}"


def node_files(agui_client: tuple[str, Path], **config: Any) -> Any:
    node, folder = agui_client
    shutil.copy(HERE / "agui_files.mjs", folder / "agui_files.mjs")
    done = subprocess.run(
        [node, "agui_files.mjs", json.dumps(config)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    print(f"--- node {config['scenario']} ---\n{done.stdout}\n{done.stderr}")  # shown with -s
    return json.loads(done.stdout)


def snapshot_of(run: dict[str, Any]) -> MessagesSnapshotEvent:
    (event,) = [e for e in run["events"] if e["type"] == "MESSAGES_SNAPSHOT"]
    return MessagesSnapshotEvent.model_validate(event)


def test_c13_103_the_agui_client_sends_a_picture(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C13-103: HttpAgent sends a text part and an image part (data source) → its run
    ends RUN_FINISHED, every event accepted by its verifier; the stored message holds the
    text and the image as an attachment with the bytes; the model saw it; the snapshot (and
    so the client) holds the message under the client's id as a text part and an image
    part with a url source; the second turn sends them all back: nothing stored twice, one
    file in the thread."""
    result = node_files(agui_client, base=served, token=TOKEN, scenario="image", png=PNG_B64)
    first, second = result["first"], result["second"]
    assert first["error"] is None and second["error"] is None, result
    assert [e["type"] for e in first["events"]][-1] == "RUN_FINISHED"
    with api(served) as client:
        thread = result["threadId"]
        rows = client.get(f"/api/threads/{thread}/messages?order=asc").json()["messages"]
        assert [(m["role"], m["content"]) for m in rows] == [
            ("user", "What is this?"),
            ("assistant", f"user images: image/png {digest(PNG)}"),
            ("user", "And now?"),
            ("assistant", "user images: none"),
        ]
        (ref,) = rows[0]["attachments"]
        assert client.get(f"/api/threads/{thread}/fs{ref['path']}").content == PNG
    picture = snapshot_of(second).messages[0]
    assert picture.role == "user" and picture.id == first["messages"][0]["id"]
    held = second["messages"][0]["content"]
    assert held[0] == {"type": "text", "text": "What is this?"}
    assert held[1]["type"] == "image"
    assert held[1]["source"] == {
        "type": "url",
        "value": f"/api/threads/{thread}/fs{ref['path']}",
        "mimeType": "image/png",
    }


def test_c13_104_a_legacy_binary_part_from_the_client(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C13-104: a legacy ``binary`` part added to HttpAgent's messages → the client's
    compatibility boundary upgrades it to an AG-UI 1.0 image part before sending, and the
    server stores it as an attachment (the model sees it)."""
    result = node_files(agui_client, base=served, token=TOKEN, scenario="binary", png=PNG_B64)
    first = result["first"]
    assert first["error"] is None, result
    with api(served) as client:
        rows = client.get(f"/api/threads/{result['threadId']}/messages?order=asc").json()
        user, answer = rows["messages"]
        assert user["content"] == "Old style" and len(user["attachments"]) == 1
        assert answer["content"] == f"user images: image/png {digest(PNG)}"
