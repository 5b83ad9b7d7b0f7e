"""Tool-call approvals in the web UI (spec 14, "Surfaces": C14-050, C14-051), in Debian's
chromium driven by Playwright against a real ``threadloom serve`` of the test project: its
``pay`` tool needs a person's approval, and "pay-two" makes the model call it twice in one
step (5 to bo, 700 to eve). ``pay`` writes ``/payments/<to>.txt`` when it really runs."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect
from test_ui_browser import last_assistant, new_thread, send
from ui_harness import Server


def approvals(server: Server, thread: str) -> dict[str, dict[str, Any]]:
    """The thread's approvals by who is paid."""
    listed = server.api("GET", f"/api/threads/{thread}/approvals").json()
    return {a["arguments"]["to"]: a for a in listed["approvals"]}


def paid(server: Server, thread: str, to: str) -> bool:
    """Whether ``pay`` ran for ``to`` (its file exists)."""
    found = server.api("GET", f"/api/threads/{thread}/fs/payments/{to}.txt")
    assert found.status_code in (200, 404), found.text
    return found.status_code == 200


def card(page: Any, to: str) -> Any:
    return page.locator("li.approval").filter(has_text=f'"to": "{to}"')


def test_c14_050_approve_one_call_and_reject_another_from_the_page(
    local_server: Server, visit: Any
) -> None:
    """C14-050: a parked thread shows each pending approval — the tool, its arguments as
    formatted JSON, the hash the decision names, a reason field, Approve and Reject — and
    its calls say "awaiting approval"; rejecting eve's call with a reason removes its card
    (the thread stays parked on bo's); approving bo's lets the run go on: bo's call ran
    (its result, its file), eve's did not (an error with the reason, no file)."""
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "pay-two")
    box = page.locator("#approvals")
    expect(box).to_be_visible()
    expect(page.locator("li.approval")).to_have_count(2)
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-reason", "awaiting_approval")
    expect(status).to_contain_text("awaiting approval")
    expect(page.locator('details.tool[data-status="approval"]')).to_have_count(2)
    shown = approvals(local_server, thread)
    for to, approval in shown.items():
        one = card(page, to)
        expect(one.locator(".tool-name")).to_have_text("pay")
        arguments = one.locator("pre.approval-arguments").inner_text()
        assert json.loads(arguments) == approval["arguments"]
        assert '\n  "amount"' in arguments  # formatted, one key a line
        expect(one.locator(".approval-hash")).to_have_text(approval["arguments_hash"])
        expect(one.get_by_role("button", name="Approve")).to_be_enabled()

    eve = card(page, "eve")
    eve.get_by_label("Reason").fill("too much")
    eve.get_by_role("button", name="Reject").click()
    expect(page.locator("li.approval")).to_have_count(1)
    expect(card(page, "bo")).to_be_visible()
    expect(status).to_have_attribute("data-reason", "awaiting_approval")
    assert approvals(local_server, thread)["eve"]["state"] == "rejected"

    card(page, "bo").get_by_role("button", name="Approve").click()
    expect(box).to_be_hidden()
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Payments handled.")
    expect(status).to_have_attribute("data-reason", "stop_on_response")
    calls = {c.get_attribute("data-call-id"): c for c in page.locator("details.tool").all()}
    decided = approvals(local_server, thread)
    bo_call = calls[decided["bo"]["tool_call_id"]]
    eve_call = calls[decided["eve"]["tool_call_id"]]
    expect(bo_call).to_have_attribute("data-status", "success")
    expect(eve_call).to_have_attribute("data-status", "error")
    expect(eve_call.locator("summary")).to_contain_text("rejected")
    expect(eve_call.locator("summary")).to_contain_text("too much")
    bo_call.locator("summary").click()
    expect(bo_call.locator(".tool-body")).to_contain_text("paid 5 to bo")
    eve_call.locator("summary").click()
    expect(eve_call.locator(".tool-body")).to_contain_text("too much")
    assert decided["bo"]["state"] == "approved" and decided["bo"]["decided_by"]
    assert paid(local_server, thread, "bo") and not paid(local_server, thread, "eve")


def test_c14_051_decisions_made_elsewhere_update_the_page_live(
    local_server: Server, visit: Any
) -> None:
    """C14-051: a page opened on a parked thread shows its pending approvals from the
    thread read; decisions made through the API meanwhile reach it over the stream: the
    cards go, the calls show their results, and a reload shows no card."""
    seeded = local_server.api("POST", "/api/threads", json={"agent_id": "chat"}).json()
    thread = seeded["threadId"]
    local_server.api("POST", f"/api/threads/{thread}/messages", json={"content": "pay-two"})
    v = visit(local_server.base)
    page = v.page
    for _ in range(100):
        if len(approvals(local_server, thread)) == 2:
            break
        page.wait_for_timeout(100)
    page.goto(f"/threads/{thread}")
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    expect(page.locator("li.approval")).to_have_count(2)
    shown = approvals(local_server, thread)
    url = f"/api/threads/{thread}/approvals"
    bo = local_server.api(
        "POST",
        f"{url}/{shown['bo']['tool_call_id']}",
        json={"approve": True, "arguments_hash": shown["bo"]["arguments_hash"]},
    )
    assert bo.status_code == 200, bo.text
    expect(page.locator("li.approval")).to_have_count(1)
    eve = local_server.api("POST", f"{url}/{shown['eve']['tool_call_id']}", json={"approve": False})
    assert eve.status_code == 200, eve.text
    expect(page.locator("#approvals")).to_be_hidden()
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Payments handled.")
    expect(page.locator('details.tool[data-status="success"]')).to_have_count(1)
    expect(page.locator('details.tool[data-status="error"]')).to_have_count(1)
    page.reload()
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    expect(page.locator("#approvals")).to_be_hidden()
    expect(page.locator("li.approval")).to_have_count(0)
