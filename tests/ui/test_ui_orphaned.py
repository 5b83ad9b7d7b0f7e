"""The web UI shows an orphaned thread (spec 08 §8.1.9) in a real browser: a thread another
project wrote to the same SQLite file, whose agent the served project does not have."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from ui_harness import Server

from threadloom import Runtime

GONE = "support_bot"


async def write_orphan(db: Path) -> str:
    """What ``threadloom run`` of another project leaves in a shared ``threadloom.db``: a
    thread of its agent ``support_bot``, with a message."""
    runtime = await Runtime.open(f"sqlite:///{db}")
    try:
        state = await runtime.create_thread(GONE, tags=("name:Old support",))
        await state.inject_message(role="user", content="where is my order?")
        return state.thread_id
    finally:
        await runtime.close()


def test_an_orphaned_thread_is_marked_in_the_list_and_cannot_be_sent_to(
    server_factory: Any, visit: Any
) -> None:
    server: Server = server_factory()
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        orphan = pool.submit(asyncio.run, write_orphan(server.db)).result()
    server.start()
    created = server.api("POST", "/api/threads", json={"agent_id": "chat", "tags": ["name:Fine"]})
    assert created.status_code == 200, created.text
    served = created.json()["threadId"]

    v = visit(server.base)
    page = v.page
    page.goto("/")
    row = page.locator(f"#t-{orphan}")
    badge = row.locator(".badge-orphaned")
    expect(badge).to_have_text("orphaned")
    expect(badge).to_have_attribute(
        "title",
        f'Agent "{GONE}" is not in the project this server serves: this thread cannot run here.',
    )
    expect(row).to_have_class("orphaned")
    expect(page.locator(f"#t-{served}")).to_be_visible()
    expect(page.locator(f"#t-{served} .badge-orphaned")).to_have_count(0)

    row.get_by_role("link", name="Old support", exact=True).click()
    page.wait_for_url(f"**/threads/{orphan}")
    expect(page.locator("li.msg-user").last).to_contain_text("where is my order?")
    expect(page.locator("#thread-agent .badge-orphaned")).to_have_text("orphaned")
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.get_by_role("button", name="Continue")).to_be_disabled()
    expect(page.get_by_role("button", name="Attach files…")).to_be_disabled()
    note = page.locator("#composer-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text(f'Agent "{GONE}" is not in the project this server serves')
    expect(page.locator("#composer")).to_have_attribute("data-disabled", "orphaned")
    # the stream's status frames keep it so
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()

    refused = server.api("POST", f"/api/threads/{orphan}/messages", json={"content": "x"})
    assert refused.status_code == 409 and refused.json()["agent_id"] == GONE
    page.goto(f"/threads/{served}")
    expect(page.get_by_label("Message", exact=True)).to_be_enabled()
    expect(page.locator("#thread-agent .badge-orphaned")).to_have_count(0)
