"""The agents page (docs/ui.md): Debian's chromium, driven by Playwright, against
``threadloom serve`` of the test project (``chat`` with its tools and the blocking
``helper`` subagent; the local principal is an admin, so the catalog is shown)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect
from test_ui_browser import UNLABELLED
from ui_harness import Server


def test_the_agents_page_shows_prompts_tools_subagents_and_starts_a_thread(
    local_server: Server, visit: Any
) -> None:
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="light")
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents").click()
    page.wait_for_url(re.compile(r"/agents$"))
    expect(page.locator("#agents")).not_to_have_attribute("aria-busy", "true")
    assert page.evaluate(UNLABELLED) == []
    # the primary agent first, then the subagent
    cards = page.locator("section.agent-card")
    expect(cards).to_have_count(2)
    assert cards.evaluate_all("ns => ns.map(n => n.dataset.agent)") == ["chat", "helper"]
    chat = page.get_by_role("region", name="Chat")
    expect(chat.locator(".agent-head .badge")).to_have_text("primary")
    side_a = chat.locator('.side[data-side="a"]')
    expect(side_a.locator("h3")).to_contain_text("Side A · Assistant")
    expect(side_a.locator(".system-text")).to_have_text("You are a helpful shop assistant.")
    expect(side_a.locator(".model")).to_contain_text("chat_model")
    expect(chat.locator('.side[data-side="b"]')).to_contain_text("A person writes this side.")
    # a tool's schema, unfolded from the keyboard
    lookup = side_a.locator('details[data-tool="lookup_order"]')
    expect(lookup).to_have_count(1)
    # the four @tools and the sub-prompt, whose parameters are its required_schema
    expect(side_a.locator("details.agent-tool")).to_have_count(5)
    notes = side_a.locator('details[data-tool="notes_prompt"]')
    expect(notes.locator("summary")).to_contain_text("Writes notes on a text")
    assert '"text"' in (notes.locator("pre.json").text_content() or "")
    lookup.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(lookup).to_have_attribute("open", "")
    schema = lookup.locator("pre.json")
    expect(schema).to_contain_text('"order_id"')
    assert '"type": "object"' in (schema.text_content() or "")
    # the subagent graph: helper, blocking, linked to its card
    tree = chat.locator(".subagent-tree")
    rel = tree.locator('li[data-relationship="helper"]')
    expect(rel).to_contain_text("helper → Helper")
    expect(rel.locator(".badge")).to_have_text("blocking")
    rel.get_by_role("link", name="Helper").click()
    page.wait_for_url(re.compile(r"/agents#agent-helper$"))
    helper = page.get_by_role("region", name="Helper")
    expect(helper.locator(".agent-head .badge")).to_have_text("subagent")
    expect(helper.locator('.side[data-side="b"] .system-text')).to_have_text("Help, then report.")
    expect(helper.locator('details[data-tool="report"]')).to_have_count(2)  # both sides
    # the dark scheme
    light = chat.evaluate("n => getComputedStyle(n).backgroundColor")
    page.emulate_media(color_scheme="dark")
    expect(chat).to_have_css("background-color", "rgb(29, 32, 38)")
    assert light != "rgb(29, 32, 38)"
    # "Start a thread", from the keyboard
    start = chat.get_by_role("button", name="Start a thread")
    start.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/threads/[0-9a-f-]{36}$"))
    thread = page.url.rsplit("/", 1)[1]
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    answer = page.request.get(f"/api/threads/{thread}")
    assert answer.json()["agent"]["id"] == "chat"
