"""The tool playground (spec 08 §8.10.7, C08-233) and the approvals inbox (spec 14 §14.9,
C14-055, C14-056) in Debian's chromium driven by Playwright against a real ``threadloom
serve`` of the test project (local mode: the viewer is an admin). ``lookup_order`` writes
``/orders/<id>.json``; ``pay`` needs a person's approval and writes ``/payments/<to>.txt``
when it really runs; "pay-two" makes the model call it twice (5 to bo, 700 to eve)."""

from __future__ import annotations

import json
import time
from typing import Any

from playwright.sync_api import expect
from test_ui_browser import login
from ui_harness import Server

DARK_PANEL = "rgb(29, 32, 38)"
"""``--panel`` of the dark scheme."""


def _exists(server: Server, thread: str, path: str) -> str | None:
    found = server.api("GET", f"/api/threads/{thread}/fs/{path}")
    assert found.status_code in (200, 404), found.text
    return found.text if found.status_code == 200 else None


def _parked(server: Server, key: str | None = None) -> str:
    """A thread of ``chat`` parked on two calls of ``pay`` (bo, eve)."""
    made = server.api("POST", "/api/threads", key=key, json={"agent_id": "chat"})
    assert made.status_code == 200, made.text
    thread: str = made.json()["threadId"]
    sent = server.api(
        "POST", f"/api/threads/{thread}/messages", key=key, json={"content": "pay-two"}
    )
    assert sent.status_code in (200, 201, 202), sent.text
    for _ in range(200):
        status = server.api("GET", f"/api/threads/{thread}", key=key).json()["status"]
        if status["reason"] == "awaiting_approval":
            return thread
        time.sleep(0.05)
    raise AssertionError("the thread did not park")


def test_c08_233_playground_form_result_log_row_and_approval(
    local_server: Server, visit: Any
) -> None:
    """C08-233: the playground lists the project's tools; ``lookup_order``'s form has its
    schema's field (required); Call with it empty says so and calls nothing; typed and
    sent from the keyboard (Enter) → the result (success, the tool's text), the log row
    (``playground:lookup_order``) and a link to the scratch thread, tagged ``playground``,
    where the tool wrote its file; ``pay`` (needs approval) → "Needs approval", nothing
    ran; the result box follows the dark scheme."""
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="light")
    page.goto("/playground")
    picker = page.get_by_label("Tool", exact=True)
    expect(picker.locator('option[value="lookup_order"]')).to_have_count(1)
    expect(picker.locator('option[value="pay"]')).to_have_count(1)
    picker.focus()
    picker.select_option("lookup_order")
    field = page.locator("#arg-order_id")
    expect(field).to_have_attribute("aria-required", "true")
    page.get_by_role("button", name="Call").click()
    expect(page.locator("#arg-order_id-error")).to_have_text("order_id is required")
    expect(field).to_be_focused()
    expect(page.locator("#tool-result .play-outcome")).to_have_count(0)
    field.fill("A-7")
    field.press("Enter")
    outcome = page.locator(".play-outcome")
    expect(outcome).to_have_attribute("data-status", "success")
    assert json.loads(outcome.locator(".play-value").inner_text()) == {
        "order_id": "A-7",
        "status": "shipped",
    }
    log = page.get_by_role("region", name="Log row")
    row = json.loads(log.locator("pre").inner_text())
    assert (row["kind"], row["model"], row["app_status"]) == (
        "app",
        "playground:lookup_order",
        "success",
    )
    assert row["app_request"] == {"order_id": "A-7"}  # the JSON text shown as JSON
    assert json.loads(row["app_response"]) == {"order_id": "A-7", "status": "shipped"}
    assert "input_tokens" not in row  # empty columns are left out
    href = outcome.get_by_role("link", name="the scratch thread").get_attribute("href")
    assert href is not None
    thread = href.rsplit("/", 1)[1]
    assert (
        "playground" in local_server.api("GET", f"/api/threads/{thread}").json()["thread"]["tags"]
    )
    assert _exists(local_server, thread, "orders/A-7.json") is not None
    # the dark scheme
    page.emulate_media(color_scheme="dark")
    expect(outcome).to_have_css("background-color", DARK_PANEL)
    # a tool that needs approval is refused, not run
    picker.select_option("pay")
    page.locator("#arg-amount").fill("5")
    page.locator("#arg-to").fill("zed")
    page.get_by_role("button", name="Call").click()
    refused = page.locator('.play-outcome[data-code="approval_required"]')
    expect(refused).to_contain_text("Needs approval")
    listed = local_server.api("GET", "/api/threads", params={"tag": "tool:pay"}).json()
    assert listed["threads"] == []


def test_c14_055_the_inbox_approves_with_edited_arguments_and_rejects(
    local_server: Server, visit: Any
) -> None:
    """C14-055: a thread parked on two ``pay`` calls → the inbox lists both with tool,
    agent, a link to the thread, the arguments (formatted JSON, editable) and the hash;
    bo's amount edited to 6 and approved from the keyboard → its card goes and ``pay``
    ran with 6; eve's rejected with a reason → the inbox is empty, the run goes on and
    eve was never paid; "Approved" lists bo's call, decided; both colour schemes."""
    thread = _parked(local_server)
    v = visit(local_server.base)
    page = v.page
    page.emulate_media(color_scheme="dark")
    page.goto("/approvals")
    items = page.locator("li.inbox-item")
    mine = items.filter(has=page.locator(f'a[href="/threads/{thread}"]'))
    expect(mine).to_have_count(2)
    expect(mine.first).to_have_css("background-color", DARK_PANEL)
    page.emulate_media(color_scheme="light")
    expect(mine.first).not_to_have_css("background-color", DARK_PANEL)
    listed = local_server.api("GET", f"/api/threads/{thread}/approvals").json()["approvals"]
    by_to = {a["arguments"]["to"]: a for a in listed}
    bo = mine.filter(has_text='"to": "bo"')
    expect(bo.locator(".tool-name")).to_have_text("pay")
    expect(bo.locator(".approval-hash")).to_have_text(by_to["bo"]["arguments_hash"])
    expect(bo).to_contain_text("chat")
    arguments = bo.locator("textarea.inbox-arguments")
    assert json.loads(arguments.input_value()) == {"amount": 5, "to": "bo"}
    arguments.fill(json.dumps({"amount": 6, "to": "bo"}, indent=2))
    approve = bo.get_by_role("button", name="Approve")
    approve.focus()
    page.keyboard.press("Enter")
    expect(mine).to_have_count(1)
    eve = mine.filter(has_text='"to": "eve"')
    eve.get_by_label("Reason").fill("too much")
    eve.get_by_role("button", name="Reject").click()
    expect(mine).to_have_count(0)
    for _ in range(200):
        if local_server.api("GET", f"/api/threads/{thread}").json()["status"]["reason"] == (
            "stop_on_response"
        ):
            break
        time.sleep(0.05)
    assert _exists(local_server, thread, "payments/bo.txt") == "6 to bo"
    assert _exists(local_server, thread, "payments/eve.txt") is None
    page.get_by_label("Show").select_option("approved")
    decided = page.locator("li.inbox-item").filter(has=page.locator(f'a[href="/threads/{thread}"]'))
    expect(decided).to_have_count(1)
    expect(decided).to_have_attribute("data-state", "approved")
    expect(decided.locator("button")).to_have_count(0)


def test_c14_056_the_inbox_shows_budgets_with_what_is_spent(
    server_factory: Any, visit: Any
) -> None:
    """C14-056: an admin's inbox has a Budgets table: a user with a quota (USD 5, 1000
    tokens, daily) has a row with each limit beside what was spent and the window; the
    page takes a decision made elsewhere off the list when it refreshes."""
    server = server_factory(THREADLOOM_AUTH="required")
    for name, role in (("root", "admin"), ("budgeted", "user")):
        password = f"{name} password 1234\n"
        server.cli("users", "create", name, "--role", role, "--password-stdin", stdin=password)
    server.start()
    token = server.api(
        "POST", "/api/auth/login", json={"username": "root", "password": "root password 1234"}
    ).json()["token"]
    users = server.api("GET", "/api/users", key=token).json()["users"]
    user = next(u["id"] for u in users if u["username"] == "budgeted")
    quota = server.api(
        "PUT",
        f"/api/users/{user}/quota",
        key=token,
        json={"usd": 5, "tokens": 1000, "window": "day"},
    )
    assert quota.status_code == 200, quota.text
    thread = _parked(server, token)
    v = visit(server.base)
    page = v.page
    page.goto("/approvals")
    login(v, "root")
    page.wait_for_url(lambda url: url.endswith("/approvals"))
    row = page.locator(f'#budget-rows tr[data-user="{user}"]')
    expect(row).to_contain_text("budgeted")
    expect(row.locator("td").nth(0)).to_have_text("$0 of $5")
    expect(row.locator("td").nth(1)).to_have_text("0 of 1000")
    expect(row.locator("td").nth(3)).to_have_text("day")
    mine = page.locator("li.inbox-item").filter(has=page.locator(f'a[href="/threads/{thread}"]'))
    expect(mine).to_have_count(2)
    listed = server.api("GET", f"/api/threads/{thread}/approvals", key=token).json()
    for a in listed["approvals"]:
        decided = server.api(
            "POST",
            f"/api/threads/{thread}/approvals/{a['tool_call_id']}",
            key=token,
            json={"approve": False, "reason": "elsewhere"},
        )
        assert decided.status_code == 200, decided.text
    expect(mine).to_have_count(0, timeout=12000)
