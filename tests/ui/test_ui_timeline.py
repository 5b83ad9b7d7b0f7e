"""The run timeline (docs/ui.md): Debian's chromium, driven by Playwright, against
``threadloom serve`` of the test project. Three runs: ``order 42`` (a model call that calls
``lookup_order``, then the answer), ``notes gate-…`` (a sub-prompt's call between the two
of the run) and ``help me`` (a subagent call and its child thread)."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect
from test_ui_browser import UNLABELLED, last_assistant, new_thread, send
from ui_harness import Server

DURATION = re.compile(r"^\d+(\.\d+)? (ms|s)$")


def test_the_timeline_shows_each_run_as_a_waterfall_linked_to_messages_and_logs(
    local_server: Server, visit: Any
) -> None:
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="light")
    thread = new_thread(v)
    send(v, "order 42")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Order 42 has shipped.")
    send(v, "notes plans")
    expect(last_assistant(v).locator(".msg-text")).to_contain_text("The notes say:")
    send(v, "help me")
    expect(last_assistant(v).locator(".msg-text")).to_contain_text("The helper said:")
    expect(page.locator("#run-status")).to_contain_text("idle")
    # the tab, from the keyboard: Conversation → Logs & cost → Timeline
    page.get_by_role("tab", name="Conversation").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Timeline")).to_have_attribute("aria-selected", "true")
    box = page.locator("#timeline")
    expect(box).to_have_attribute("data-runs", "3")
    assert page.evaluate(UNLABELLED) == []
    logs = httpx.get(f"{local_server.base}/api/threads/{thread}/logs?timing=true").json()["logs"]
    llm = [row for row in logs if row["kind"] is None]
    runs = box.locator("section.run")
    # run 1: model (calls the tool) → tool (which logs an application row) → model (answers)
    first = runs.nth(0)
    expect(first.locator(".run-head")).to_contain_text("user: order 42")
    expect(first.locator(".run-head")).to_contain_text("2 model calls")
    kinds = first.locator(".waterfall > li .step-kind").all_text_contents()
    assert kinds == ["model", "tool", "app", "model"]
    expect(first.locator("li.step-app")).to_contain_text("orders.lookup looked up 42")
    expect(first.locator(".run-head")).to_contain_text("$0.001")  # the tool's cost counts
    tool = first.locator("li.step-tool")
    expect(tool.locator(".step-name")).to_have_text("lookup_order")
    expect(tool).to_have_class(re.compile(r"\btool-success\b"))
    for duration in first.locator(".step-duration").all_text_contents():
        assert DURATION.match(duration), duration
    # each model step is a log row of the thread, with its tokens
    ids = first.locator("li.step-llm").evaluate_all("ns => ns.map(n => n.dataset.logId)")
    rows = {row["id"]: row for row in llm}
    assert all(i in rows for i in ids)
    answer_step = first.locator("li.step-llm").nth(1)
    row = rows[ids[1]]
    expect(answer_step.locator(".step-facts")).to_contain_text(
        f"{row['input_tokens']} → {row['output_tokens']} tok"
    )
    # run 2: the sub-prompt's call, marked, between the run's two calls
    second = runs.nth(1)
    kinds = second.locator(".waterfall > li .step-kind").all_text_contents()
    assert kinds == ["model", "tool", "sub-prompt", "model"], kinds
    expect(second.locator("li.step-subprompt .step-name")).to_have_text("notes_prompt")
    # run 3: the subagent call links its child thread
    third = runs.nth(2)
    child = third.locator("li.step-tool").get_by_role("link", name="child thread")
    expect(child).to_have_attribute("href", re.compile(r"^/threads/[0-9a-f-]{36}$"))
    # the dark scheme
    bar = first.locator("li.step-llm .bar").first
    light = bar.evaluate("n => getComputedStyle(n).backgroundColor")
    page.emulate_media(color_scheme="dark")
    expect(bar).not_to_have_css("background-color", light)
    # a step's message, in the conversation; then its log row's details
    answer_step.get_by_role("button", name=re.compile("^Show the message")).press("Enter")
    expect(page.get_by_role("tab", name="Conversation")).to_have_attribute("aria-selected", "true")
    message = answer_step.get_attribute("data-message-id")
    shown = page.locator(f"#m-{message}")
    expect(shown).to_contain_text("Order 42 has shipped.")
    expect(shown).to_be_in_viewport()
    page.get_by_role("tab", name="Timeline").click()
    expect(box).to_have_attribute("data-runs", "3")
    first.locator("li.step-llm").nth(1).get_by_role("button", name=re.compile("^Log row")).press(
        "Enter"
    )
    expect(page.get_by_role("tab", name="Logs & cost")).to_have_attribute("aria-selected", "true")
    expect(
        page.locator(f'#logs-body tr.log-row[data-log-id="{ids[1]}"] + tr.log-detail')
    ).to_be_visible()
