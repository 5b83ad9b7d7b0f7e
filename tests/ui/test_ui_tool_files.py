"""A file a tool returned, in the web UI (spec 04 §4.5.4, spec 07 §7.6): Debian's chromium,
driven by Playwright, against ``threadloom serve`` of the test project, whose
``draw_chart`` tool returns a PNG ``Attachment``."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from test_ui_browser import last_assistant, new_thread, send
from ui_harness import Server


def test_c07_031_the_ui_shows_a_tool_image_in_its_call(local_server: Server, visit: Any) -> None:
    """C07-031: a run whose tool returns a PNG attachment → the call's fold shows the
    result text and the image, a link to the file's route whose bytes the browser loads
    (24×16)."""
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "chart")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Here is the chart.")
    call = page.locator("details.tool").first
    expect(call).to_have_attribute("data-status", "success")
    call.locator("summary").click()
    expect(call.locator(".tool-body")).to_contain_text("Chart drawn.")
    link = call.locator(".tool-body .attachments a.attachment.image")
    expect(link).to_have_attribute("title", "chart.png")
    href = link.get_attribute("href") or ""
    assert href.startswith(f"/api/threads/{thread}/fs/attachments/") and href.endswith(".png")
    image = link.locator("img")
    expect(image).to_have_attribute("alt", "chart.png")
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [24, 16]
