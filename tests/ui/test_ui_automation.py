"""The automation page in the web UI (spec 08 §8.15: C08-260 … C08-264), in Debian's
chromium driven by Playwright against a real ``threadloom serve`` of the test project:
schedules (next fire, last outcome, Disable/Enable, Fire now), triggers (the URL to call,
which a caller then calls), webhooks (a subscription, its deliveries, the dead-letter list
and Re-deliver to a local receiver the test starts), both colour schemes, the keyboard,
and a user who is no admin. The page's DOM-free logic has Node unit tests
(``tests/ui/js/automation_model.test.mjs``)."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
from playwright.sync_api import expect
from test_ui_browser import UNLABELLED, login

from webhook_receiver import Receiver

WEBHOOKS = {
    "THREADLOOM_WEBHOOK_ALLOW_PRIVATE": "1",
    "THREADLOOM_WEBHOOK_POLL_S": "0.1",
    "THREADLOOM_WEBHOOK_MAX_ATTEMPTS": "1",
    "THREADLOOM_WEBHOOK_TIMEOUT_S": "2",
}


def made(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    found: dict[str, Any] = response.json()
    return found


def open_page(v: Any) -> Any:
    page = v.page
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Automation").click()
    page.wait_for_url(re.compile(r"/automation$"))
    for box in ("#schedules", "#triggers", "#webhooks", "#dead-letters"):
        expect(page.locator(box)).not_to_have_attribute("aria-busy", "true")
    return page


def test_c08_260_schedules_show_their_next_fire_and_last_outcome_and_fire_now(
    server_factory: Any, visit: Any
) -> None:
    """C08-260: an admin's Automation page lists each schedule — its interval, its target,
    its next fire time, "never fired" — and Fire now sends its message: the last outcome
    becomes "fired" with a link to the thread it made; Disable shows it disabled with no next
    fire (the API agrees), Enable brings the next fire back."""
    server = server_factory().start()
    made(
        server.api(
            "POST",
            "/api/schedules",
            json={"id": "ping", "message": "ping", "interval_s": 3600, "agent": "chat"},
        )
    )
    v = visit(server.base)
    page = open_page(v)
    assert page.evaluate(UNLABELLED) == []
    row = page.locator('tr[data-schedule="ping"]')
    expect(row).to_contain_text("every h")
    expect(row).to_contain_text("new thread of chat")
    expect(row.locator(".next-fire time")).to_have_count(1)
    expect(row.locator(".last-outcome")).to_have_text("never fired")

    row.get_by_role("button", name="Fire ping now").click()
    expect(row.locator(".last-outcome")).to_have_attribute("data-outcome", "ok")
    expect(row.locator(".last-outcome")).to_contain_text("fired")
    stored = made(server.api("GET", "/api/schedules/ping"))["schedule"]
    assert stored["last_status"] == "fired" and stored["fire_count"] == 1
    link = row.locator(".last-outcome a")
    expect(link).to_have_attribute("href", f"/threads/{stored['last_thread_id']}")

    row.get_by_role("button", name="Disable ping").click()
    expect(row).to_have_attribute("data-enabled", "false")
    expect(row.locator(".next-fire")).to_have_text("disabled")
    assert made(server.api("GET", "/api/schedules/ping"))["schedule"]["enabled"] is False
    row.get_by_role("button", name="Enable ping").click()
    expect(row).to_have_attribute("data-enabled", "true")
    expect(row.locator(".next-fire time")).to_have_count(1)


def test_c08_261_a_trigger_shows_the_url_to_call_and_can_be_disabled(
    server_factory: Any, visit: Any
) -> None:
    """C08-261: each trigger shows the absolute URL a caller POSTs to (this server's origin
    and the trigger's path); a call to that URL with the secret is accepted (202) and the
    page then counts it; Disable makes the same URL refuse calls (409), Enable accepts them
    again."""
    server = server_factory().start()
    trigger = made(server.api("POST", "/api/triggers", json={"id": "orders", "agent": "chat"}))
    secret = trigger["trigger"]["secret"]
    v = visit(server.base)
    page = open_page(v)
    item = page.locator('li[data-trigger="orders"]')
    url_box = item.get_by_label("URL to call (POST)")
    expect(url_box).to_have_value(f"{server.base}/api/triggers/orders/fire")
    url = url_box.input_value()

    def call(key: str) -> int:
        return httpx.post(
            url,
            content="an order came in",
            headers={"Authorization": f"Bearer {secret}", "Idempotency-Key": key},
            timeout=20,
        ).status_code

    assert call("k1") == 202
    page.locator('[data-reload="triggers"]').click()
    expect(item).to_contain_text("1 call")
    item.get_by_role("button", name="Disable orders").click()
    expect(item).to_have_attribute("data-enabled", "false")
    assert call("k2") == 409
    item.get_by_role("button", name="Enable orders").click()
    expect(item).to_have_attribute("data-enabled", "true")
    assert call("k3") == 202


def test_c08_262_webhooks_show_deliveries_and_a_dead_letter_is_redelivered(
    server_factory: Any, visit: Any
) -> None:
    """C08-262: a subscription whose receiver answered 503 (one attempt allowed) shows
    "1 dead" and the delivery in its recent list; the dead-letter list shows it with
    Re-deliver; Re-deliver (the receiver now answers 200) delivers it with the same
    ``webhook-id``: the dead-letter list is empty and the subscription counts it
    delivered."""
    receiver = Receiver(answers=[503]).start()
    try:
        server = server_factory(**WEBHOOKS).start()
        hook = made(
            server.api(
                "POST",
                "/api/webhooks",
                json={"url": receiver.url, "event_types": ["thread.created"]},
            )
        )
        made(server.api("POST", "/api/threads", json={"agent_id": "chat"}))

        def dead_rows() -> list[dict[str, Any]]:
            return list(
                made(server.api("GET", "/api/webhook-deliveries", params={"state": "dead"}))[
                    "deliveries"
                ]
            )

        expect_true(lambda: len(dead_rows()) == 1)
        (letter,) = dead_rows()
        v = visit(server.base)
        page = open_page(v)
        item = page.locator(f'li[data-webhook="{hook["id"]}"]')
        expect(item).to_contain_text(receiver.url)
        expect(item.locator(".delivery-counts")).to_contain_text("1 dead")
        item.locator(".recent-deliveries summary").click()
        expect(item.locator(f'tr[data-event="{letter["event_id"]}"]')).to_contain_text(
            "503 (1 attempt)"
        )
        dead_list = page.locator("#dead-letters")
        row = dead_list.locator(f'tr[data-event="{letter["event_id"]}"]')
        row.get_by_role("button", name=f"Re-deliver {letter['event_id']}").click()
        expect_true(lambda: len(receiver.received) == 2)
        assert receiver.ids() == [letter["event_id"]] * 2
        expect_true(lambda: dead_rows() == [])
        page.locator('[data-reload="webhooks"]').click()
        expect(dead_list).to_contain_text("No dead letter.")
        expect(item.locator(".delivery-counts")).to_contain_text("1 delivered")
    finally:
        receiver.stop()


def expect_true(check: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_c08_263_the_keyboard_and_both_colour_schemes(server_factory: Any, visit: Any) -> None:
    """C08-263: Fire now is reached and pressed from the keyboard (focus, Enter) and fires;
    the page follows the light and the dark scheme (the outcome's colours change with
    it)."""
    server = server_factory().start()
    made(
        server.api(
            "POST",
            "/api/schedules",
            json={"id": "tick", "message": "tick", "interval_s": 600, "agent": "chat"},
        )
    )
    v = visit(server.base)
    page = v.page
    page.emulate_media(color_scheme="light")
    page = open_page(v)
    row = page.locator('tr[data-schedule="tick"]')
    fire = row.get_by_role("button", name="Fire tick now")
    fire.focus()
    page.keyboard.press("Enter")
    outcome = row.locator(".last-outcome .outcome")
    expect(outcome).to_have_text("fired")
    light = outcome.evaluate("n => getComputedStyle(n).backgroundColor")
    assert light == "rgb(230, 244, 234)"  # --ok-bg of the light scheme
    page.emulate_media(color_scheme="dark")
    expect(outcome).to_have_css("background-color", "rgb(29, 51, 37)")  # the dark --ok-bg
    # the toggle is a real button: Tab from Fire now's neighbour lands on it
    toggle = row.get_by_role("button", name="Disable tick")
    toggle.focus()
    page.keyboard.press("Tab")
    expect(fire).to_be_focused()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Space")
    expect(row).to_have_attribute("data-enabled", "false")


def test_c08_264_a_user_who_is_no_admin_sees_no_automation(server_factory: Any, visit: Any) -> None:
    """C08-264: a user who is not an admin has no Automation link, and ``/automation``
    tells them admins manage it without calling the admin-only routes."""
    server = server_factory()
    server.cli(
        "users", "create", "bo", "--role", "user", "--password-stdin", stdin="bo password 1234\n"
    )
    server.start()
    v = visit(server.base)
    page = v.page
    page.goto("/automation")
    page.wait_for_url(re.compile(r"/login\?next="))
    login(v, "bo")
    page.wait_for_url(re.compile(r"/automation$"))
    expect(page.locator("#admins-only")).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Automation")).to_have_count(0)
    expect(nav.get_by_role("link", name="Agents")).to_be_visible()
    page.wait_for_load_state("networkidle")
    called = [u for u in v.requests if re.search(r"/api/(schedules|triggers|webhook)", u)]
    assert called == []
