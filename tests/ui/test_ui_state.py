"""The thread's shared state in the web UI (spec 02 §2.20, spec 09 §9.9.8): the thread page's
State tab, in Debian's chromium driven by Playwright against a real ``threadloom serve``."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect
from test_ui_browser import new_thread
from ui_harness import Server


def test_c02_108_the_state_tab_shows_the_state_and_follows_its_changes(
    local_server: Server, visit: Any
) -> None:
    """C02-108: the State tab of a thread whose state was never written shows ``{}`` and
    "never written"; a PUT of the state (another client) reaches the open page as a
    ``state_updated`` frame: the formatted JSON and its version."""
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    page.get_by_role("tab", name="State").click()
    shown = page.get_by_label("Shared state")
    expect(shown).to_have_text("{}")
    expect(page.locator("#state-version")).to_have_text("never written")
    state = {"todos": [{"text": "milk", "done": False}], "filter": "all"}
    put = local_server.api("PUT", f"/api/threads/{thread}/state", json={"state": state})
    assert put.status_code == 200, put.text
    expect(page.locator("#state-version")).to_have_text("version 1")
    assert json.loads(shown.inner_text()) == state
    assert '\n  "todos"' in shown.inner_text()  # formatted, one key a line
