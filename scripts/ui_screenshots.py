"""Screenshots of the web UI's main views, for docs/ui.md (``make ui-screenshots``).

Starts ``threadloom serve`` on the browser tests' project (``tests/ui/project``: a
scripted model with a tool, a subagent, a failing and a slow request) and a fresh SQLite
file, makes a few threads through the API, and photographs each view with Debian's
chromium (Playwright, launched as the browser tests launch it) into ``docs/ui/``.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "ui" / "project"
CHROMIUM = os.environ.get("THREADLOOM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chart_png() -> bytes:
    """A small bar chart as a PNG, made here (an attachment in the screenshots)."""
    import struct
    import zlib

    width, height = 96, 64
    bars = [20, 44, 32, 58, 40, 50]
    rows = []
    for y in range(height):
        line = bytearray(b"\x00")
        for x in range(width):
            bar = x // 16
            inside = x % 16 >= 3 and height - y <= bars[bar]
            line += bytes((59, 91, 219) if inside else (247, 247, 249))
        rows.append(bytes(line))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


CHART = base64.b64encode(chart_png()).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(db: Path, **settings: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("THREADLOOM_")
    }
    env["THREADLOOM_DRAIN_SECONDS"] = "1"  # the slow run is not waited for at the end
    env.update(settings)
    env["THREADLOOM_NODE_ID"] = f"screenshots-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "threadloom.cli", "serve", str(PROJECT), "--port", str(port)]
    command += ["--store", f"sqlite:///{db}", "--log-level", "warning"]
    proc = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not become ready")


def settle(client: httpx.Client, thread: str) -> None:
    for _ in range(300):
        info = client.get(f"/api/threads/{thread}").json()
        if info["status"]["state"] != "running" and info["stats"]["queued_count"] == 0:
            return
        time.sleep(0.1)
    raise SystemExit(f"thread {thread} did not settle")


def thread(client: httpx.Client, name: str, *messages: str, wait: bool = True) -> str:
    tags = [f"name:{name}", "team:support"]
    created = client.post("/api/threads", json={"agent_id": "chat", "tags": tags})
    created.raise_for_status()
    tid: str = created.json()["threadId"]
    for text in messages:
        client.post(f"/api/threads/{tid}/messages", json={"content": text}).raise_for_status()
        if wait:
            settle(client, tid)
    return tid


def seed(base: str) -> dict[str, str]:
    with httpx.Client(base_url=base, timeout=30) as client:
        threads = {
            "terminated": thread(client, "Closed ticket", "hello", "order Z-9"),
            "subagent": thread(client, "Invoice question", "help with the invoice of May"),
            "failed": thread(client, "Model outage", "fail"),
            "main": thread(client, "Order A-1001", "hello there", "order A-1001"),
            "notes": thread(client, "Release notes", "notes the release of May"),
            "markdown": thread(client, "Release notes in Markdown", "markdown"),
        }
        picture = {"name": "chart.png", "mimeType": "image/png", "data": CHART}
        client.post(
            f"/api/threads/{threads['notes']}/messages",
            json={"content": "and this chart", "attachments": [picture]},
        ).raise_for_status()
        settle(client, threads["notes"])
        client.post(f"/api/threads/{threads['terminated']}/terminate").raise_for_status()
        # a fork of the main thread at its first message, edited and rerun (spec 08 §8.3.8)
        page = client.get(f"/api/threads/{threads['main']}/messages", params={"order": "asc"})
        first = page.json()["messages"][0]["id"]
        edit = {"message_id": first, "content": "hello there, in French please"}
        made = client.post(f"/api/threads/{threads['main']}/fork", json=edit)
        made.raise_for_status()
        threads["fork"] = made.json()["threadId"]
        client.post(f"/api/threads/{threads['fork']}/continue", json={}).raise_for_status()
        settle(client, threads["fork"])
        threads["running"] = thread(client, "Long answer", "slow", wait=False)
        threads["approval"] = thread(client, "Refunds", "pay-two")  # parks for approval
        return threads


def shoot(base: str, auth_base: str, threads: dict[str, str], out: Path) -> list[Path]:
    from playwright.sync_api import FilePayload, expect, sync_playwright

    made: list[Path] = []

    def save(page: Any, name: str, full: bool = False) -> None:
        path = out / f"{name}.png"
        page.screenshot(path=str(path), full_page=full)
        made.append(path)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for scheme in ("light", "dark"):
            context = browser.new_context(
                viewport={"width": 1280, "height": 800}, base_url=base, color_scheme=scheme
            )
            page = context.new_page()
            page.goto("/")
            expect(page.locator("#list-live")).to_have_attribute("data-state", "live")
            expect(page.locator(f"#t-{threads['failed']} .status-failed")).to_be_visible()
            suffix = "" if scheme == "light" else "-dark"
            save(page, f"threads{suffix}")
            page.goto(f"/threads/{threads['main']}")
            expect(page.locator("li.msg-assistant").last).to_have_attribute(
                "data-status", "completed"
            )
            page.locator("details.tool summary").first.click()
            save(page, f"thread{suffix}")
            if scheme == "dark":
                context.close()
                continue
            page.get_by_role("tab", name="Logs & cost").click()
            page.locator("#logs-body tr.log-row[data-kind=llm]").last.get_by_role("button").click()
            expect(page.locator('pre[data-field="Request body"]')).to_be_visible()
            save(page, "logs")
            page.get_by_role("tab", name="Files").click()
            page.get_by_role("button", name="orders/").click()
            page.get_by_role("button", name=re.compile("A-1001.json")).click()
            expect(page.locator("#file-preview pre")).to_be_visible()
            save(page, "files")
            page.get_by_role("tab", name="Timeline").click()
            expect(page.locator("#timeline")).to_have_attribute("data-runs", "2")
            save(page, "timeline")
            page.goto(f"/threads/{threads['markdown']}")
            expect(page.locator("li.msg-assistant .msg-text.md .code-block")).to_be_visible()
            save(page, "markdown")
            page.goto("/agents")
            expect(page.locator("#agents")).not_to_have_attribute("aria-busy", "true")
            page.locator('#agent-chat details[data-tool="lookup_order"] summary').click()
            save(page, "agents", full=True)  # the subagents are below the fold
            page.goto(f"/threads/{threads['fork']}")
            expect(page.locator("#thread-fork-of")).to_be_visible()
            expect(page.locator("li.msg-assistant").last).to_have_attribute(
                "data-status", "completed"
            )
            page.locator("li.msg-user").first.get_by_role("button", name="Edit and rerun").click()
            page.get_by_label("New text of the message").fill("hello there, in German please")
            save(page, "fork")
            page.goto(f"/threads/{threads['notes']}")
            page.get_by_label("Show sub-prompt messages").check()
            expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
            page.locator("#messages > li.msg-assistant details.tool summary").first.click()
            expect(page.locator("details.subprompt li.msg-assistant")).to_be_visible()
            draft: FilePayload = {"name": "draft.txt", "mimeType": "text/plain", "buffer": b"draft"}
            page.locator("#composer-file-input").set_input_files([draft])
            page.get_by_label("Message", exact=True).fill("Thanks, and here is my draft")
            save(page, "subprompt")
            page.goto(f"/threads/{threads['subagent']}#subagents")
            expect(page.locator("#subagents-body a").first).to_be_visible()
            save(page, "subagents")
            page.goto(f"/threads/{threads['running']}")
            expect(page.locator("#run-status")).to_have_attribute("data-state", "running")
            expect(page.locator("li.msg-pending .msg-text")).to_contain_text("streams slowly")
            save(page, "streaming")
            page.goto(f"/threads/{threads['terminated']}")
            expect(page.locator("#composer-note")).to_be_visible()
            save(page, "terminated")
            page.goto("/approvals")  # the inbox across threads (spec 14 §14.9)
            expect(page.locator("li.inbox-item")).to_have_count(2)
            save(page, "inbox")
            page.goto("/playground?tool=lookup_order")  # the tool playground (§8.10.7)
            page.locator("#arg-order_id").fill("A-1001")
            page.get_by_role("button", name="Call").click()
            expect(page.get_by_role("region", name="Log row")).to_be_visible()
            save(page, "playground", full=True)
            page.goto(f"/threads/{threads['approval']}")
            expect(page.locator("li.approval")).to_have_count(2)
            eve = page.locator("li.approval").filter(has_text='"to": "eve"')
            eve.get_by_label("Reason").fill("Over the refund limit")
            save(page, "approval")
            context.close()
        context = browser.new_context(viewport={"width": 1280, "height": 600}, base_url=auth_base)
        page = context.new_page()
        page.goto("/")
        page.wait_for_url("**/login?next=*")
        save(page, "login")
        context.close()
        browser.close()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium (as root)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ui-shots-") as folder:
        proc, base = serve(Path(folder) / "ui.db")
        auth_proc, auth_base = serve(Path(folder) / "auth.db", THREADLOOM_AUTH="required")
        try:
            threads = seed(base)
            for path in shoot(base, auth_base, threads, args.out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        finally:
            for p in (proc, auth_proc):
                p.terminate()
                p.wait(timeout=30)


if __name__ == "__main__":
    main()
