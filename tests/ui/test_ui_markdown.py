"""A model's Markdown in the web UI (docs/ui.md, spec 08 §8.10.6): Debian's chromium,
driven by Playwright, against ``threadloom serve`` of the test project, whose model
answers ``markdown`` with a heading, bold, a list, a code block, two links (one
``javascript:``) and raw HTML."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from test_ui_browser import last_assistant, new_thread, send
from ui_harness import Server

CODE = 'print("hello < world")\n'


def test_markdown_is_rendered_safely_with_a_copy_button_in_both_schemes(
    local_server: Server, visit: Any
) -> None:
    v = visit(local_server.base)
    page = v.page
    v.context.grant_permissions(["clipboard-read", "clipboard-write"])
    new_thread(v)
    send(v, "markdown")
    text = last_assistant(v).locator(".msg-text")
    expect(text).to_have_class("msg-text md")  # rendered once complete
    expect(text.locator("h2")).to_have_text("Release notes")
    expect(text.locator("strong")).to_have_text("bold")
    expect(text.locator("li")).to_have_text(["first item", "second item"])
    code = text.locator(".code-block pre code")
    expect(code).to_have_text(CODE)
    expect(code).to_have_class("language-python")
    # links: the safe one opens apart, the javascript: one is no link at all
    safe = text.get_by_role("link", name="safe link")
    expect(safe).to_have_attribute("href", "https://example.com/notes")
    expect(safe).to_have_attribute("target", "_blank")
    expect(safe).to_have_attribute("rel", "noopener noreferrer nofollow")
    assert text.locator("a").count() == 1
    expect(text).to_contain_text("[bad one](javascript:alert(1))")  # as text
    # raw HTML is shown as text: no image, no handler
    expect(text).to_contain_text('<img src=x onerror="alert(2)"> stays text.')
    assert text.locator("img").count() == 0
    # the Copy button, from the keyboard
    copy = text.get_by_role("button", name="Copy code")
    copy.focus()
    page.keyboard.press("Enter")
    expect(copy).to_have_text("Copied")
    assert page.evaluate("() => navigator.clipboard.readText()") == CODE
    # read again (a reload renders from the API's messages): the same, in the light scheme
    page.emulate_media(color_scheme="light")
    page.reload()
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    block = last_assistant(v).locator(".msg-text.md .code-block pre")
    expect(block).to_be_visible()
    light = block.evaluate("n => [getComputedStyle(n).backgroundColor, getComputedStyle(n).color]")
    page.emulate_media(color_scheme="dark")
    dark = block.evaluate("n => [getComputedStyle(n).backgroundColor, getComputedStyle(n).color]")
    assert light != dark
    link_colour = (
        last_assistant(v)
        .get_by_role("link", name="safe link")
        .evaluate("n => getComputedStyle(n).color")
    )
    assert link_colour != dark[0]
    # a user's own text is not Markdown
    send(v, "**not bold**")
    mine = page.locator("li.msg-user").last.locator(".msg-text")
    expect(mine).to_have_text("**not bold**")
    assert mine.locator("strong").count() == 0
