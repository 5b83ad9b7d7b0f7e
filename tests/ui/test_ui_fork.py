"""Fork and edit-and-rerun in the web UI (docs/ui.md, spec 08 §8.3.8): Debian's chromium,
driven by Playwright, against ``threadloom serve`` of the test project (its model answers
``echo: <text>``). Each finished message has a Fork action; a person's message has Edit and
rerun; the fork's head says where it came from and the original's lists its forks — from
the keyboard, in both colour schemes."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect
from test_ui_browser import UNLABELLED, new_thread, send
from ui_harness import Server

THREAD_URL = re.compile(r"/threads/([0-9a-f-]{36})$")


def answered(v: Any, text: str) -> None:
    """Send ``text`` and wait for its finished answer."""
    send(v, text)
    reply = v.page.locator("li.msg-assistant").filter(has_text=f"echo: {text}")
    expect(reply).to_have_attribute("data-status", "completed")


def press(page: Any, control: Any, key: str = "Enter") -> None:
    control.focus()
    page.keyboard.press(key)


def test_fork_a_message_and_see_the_lineage_on_both_threads(
    local_server: Server, visit: Any
) -> None:
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="dark")
    original = new_thread(v)
    answered(v, "first")
    answered(v, "second")
    messages = page.locator("li.msg:not([hidden])")
    expect(messages).to_have_count(4)
    assert page.evaluate(UNLABELLED) == []
    # the Fork action of the first answer, from the keyboard
    first_answer = page.locator("li.msg-assistant").first
    point = first_answer.get_attribute("data-id")
    fork = first_answer.get_by_role("button", name="Fork from this message")
    # a person's message offers Edit and rerun, an answer does not
    expect(first_answer.get_by_role("button", name="Edit and rerun")).to_have_count(0)
    expect(
        page.locator("li.msg-user").first.get_by_role("button", name="Edit and rerun")
    ).to_have_count(1)
    press(page, fork)
    page.wait_for_url(lambda url: THREAD_URL.search(url) is not None and original not in url)
    forked = page.url.rsplit("/", 1)[1]
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    expect(page.locator("li.msg:not([hidden]) .msg-text")).to_have_text(["first", "echo: first"])
    origin = page.locator("#thread-fork-of")
    expect(origin).to_be_visible()
    expect(origin).to_contain_text(f"forked from {original[:8]} at message {point[:8]}")
    # the original, reached from the lineage, lists its fork and shows the fork point
    origin.get_by_role("link", name=f"message {point[:8]}").click()
    page.wait_for_url(re.compile(rf"/threads/{original}#m-{point}$"))
    expect(page.locator(f"#m-{point}")).to_have_class(re.compile(r"\bmsg-target\b"))
    forks = page.locator("#thread-forks")
    expect(forks).to_contain_text(f"fork: {forked[:8]}")
    expect(page.locator("#thread-fork-of")).to_be_hidden()
    expect(page.locator("li.msg:not([hidden])")).to_have_count(4)  # the original unchanged
    # both schemes: the lineage and the actions follow the scheme's colours
    dark = forks.evaluate("n => getComputedStyle(n).color")
    page.emulate_media(color_scheme="light")
    light = forks.evaluate("n => getComputedStyle(n).color")
    assert dark != light
    forks.get_by_role("link", name=forked[:8]).click()
    page.wait_for_url(re.compile(rf"/threads/{forked}$"))


def test_edit_and_rerun_forks_with_new_text_and_runs_it(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="light")
    original = new_thread(v)
    answered(v, "alpha")
    answered(v, "beta")
    second = page.locator("li.msg-user").nth(1)
    edit = second.get_by_role("button", name="Edit and rerun")
    press(page, edit)
    box = second.get_by_label("New text of the message")
    expect(box).to_be_focused()
    expect(box).to_have_value("beta")
    assert page.evaluate(UNLABELLED) == []
    # Escape leaves the message as it was, focus back on its button
    page.keyboard.press("Escape")
    expect(second.locator("form.edit-rerun")).to_have_count(0)
    expect(edit).to_be_focused()
    # again, with new text, sent with Ctrl+Enter
    page.keyboard.press("Enter")
    box = second.get_by_label("New text of the message")
    expect(box).to_be_focused()
    box.fill("gamma")
    page.emulate_media(color_scheme="dark")
    background = box.evaluate("n => getComputedStyle(n).backgroundColor")
    assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
    box.press("Control+Enter")
    page.wait_for_url(lambda url: THREAD_URL.search(url) is not None and original not in url)
    expect(page.locator("li.msg-assistant").filter(has_text="echo: gamma")).to_have_attribute(
        "data-status", "completed"
    )
    expect(page.locator("li.msg:not([hidden]) .msg-text")).to_have_text(
        ["alpha", "echo: alpha", "gamma", "echo: gamma"]
    )
    expect(page.locator("#thread-fork-of")).to_contain_text(f"forked from {original[:8]}")
    # the original kept its own second message and answer
    page.goto(f"/threads/{original}")
    expect(page.locator("li.msg:not([hidden]) .msg-text")).to_have_text(
        ["alpha", "echo: alpha", "beta", "echo: beta"]
    )
    expect(page.locator("#thread-forks")).to_contain_text("fork: ")
