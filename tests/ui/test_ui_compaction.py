"""A compaction in the web UI (spec 23 §23.6, C23-030), in Debian's chromium driven by
Playwright against a real ``threadloom serve`` of the test project."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from test_ui_browser import new_thread, send
from ui_harness import Server


def test_c23_030_the_thread_page_shows_the_compaction_and_undoes_it(
    local_server: Server, visit: Any
) -> None:
    """C23-030: a thread with an active compaction shows a marker above the composer — how
    many messages the summary stands for, the summary — with Undo; every message is still on
    the page; Undo removes the marker and the API lists the compaction undone."""
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    for n, text in enumerate(("first question", "second question", "third question"), 1):
        send(v, text)
        # this reply, not the status the previous one left (a loaded machine saw it first)
        replies = page.locator("li.msg-assistant[data-status=completed]")
        expect(replies).to_have_count(n)
        expect(page.locator("#run-status")).to_have_attribute("data-reason", "stop_on_response")
    made = local_server.api("POST", f"/api/threads/{thread}/compact", json={"keep_messages": 2})
    assert made.status_code == 201, made.text
    record = made.json()
    page.reload()
    box = page.locator("#compactions")
    expect(box).to_be_visible()
    marker = page.locator("li.compaction")
    expect(marker).to_have_attribute("data-compaction-id", record["id"])
    expect(marker.locator(".compaction-range")).to_contain_text(
        f"{record['message_count']} messages summarised"
    )
    expect(marker.locator(".compaction-summary")).to_have_text(record["summary"])
    expect(page.get_by_text("first question", exact=True)).to_have_count(1)
    marker.get_by_role("button", name="Undo").click()
    expect(box).to_be_hidden()
    listed = local_server.api("GET", f"/api/threads/{thread}/compactions").json()
    assert listed["active"] is None and listed["compactions"][0]["undone_at"] is not None


def test_c23_036_the_marker_follows_the_stream_without_a_reload(
    local_server: Server, visit: Any
) -> None:
    """C23-036: on an open thread page, a compaction made over the API shows its marker
    without a reload (the stream's ``compaction_created``), and its undo over the API hides
    it (``compaction_undone``)."""
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    for text in ("first question", "second question", "third question"):
        send(v, text)
        expect(page.locator("#run-status")).to_have_attribute("data-reason", "stop_on_response")
    box = page.locator("#compactions")
    expect(box).to_be_hidden()
    made = local_server.api("POST", f"/api/threads/{thread}/compact", json={"keep_messages": 2})
    assert made.status_code == 201, made.text
    record = made.json()
    marker = page.locator("li.compaction")
    expect(marker).to_have_attribute("data-compaction-id", record["id"])
    expect(box).to_be_visible()
    undone = local_server.api("DELETE", f"/api/threads/{thread}/compactions/{record['id']}")
    assert undone.status_code == 200, undone.text
    expect(box).to_be_hidden()
