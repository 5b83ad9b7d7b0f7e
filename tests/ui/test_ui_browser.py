"""The web UI in a real browser (issue 25): Debian's chromium, driven by Playwright,
against real ``threadloom serve`` processes of the test project (``tests/ui/project``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import expect
from ui_harness import Server


def new_thread(v: Any, agent: str = "chat") -> str:
    """Start a thread from the list page's "New thread" button; its id."""
    page = v.page
    page.goto("/")
    page.get_by_label("Start a thread with").select_option(agent)
    page.get_by_role("button", name="New thread").click()
    page.wait_for_url(re.compile(r"/threads/[0-9a-f-]{36}$"))
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    return page.url.rsplit("/", 1)[1]


def send(v: Any, text: str) -> None:
    box = v.page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def last_assistant(v: Any) -> Any:
    return v.page.locator("li.msg-assistant").last


def test_send_message_shows_streamed_reply_and_tool_call(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    new_thread(v)
    # Shift+Enter is a new line, not a send
    box = page.get_by_label("Message", exact=True)
    box.fill("first line")
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "first line\nsecond line"
    expect(page.locator("li.msg")).to_have_count(0)
    box.fill("")
    # a plain message: its reply arrives in chunks while it is generated
    send(v, "hello there")
    expect(page.locator("li.msg-user").first).to_contain_text("hello there")
    generating = page.locator("li.msg-assistant.msg-pending .msg-text")
    expect(generating).to_contain_text("echo")  # partial text, before completion
    expect(last_assistant(v)).to_have_attribute("data-status", "completed")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("echo: hello there")
    expect(last_assistant(v).locator("details.reasoning")).to_contain_text("Reasoning")
    expect(page.locator("#run-status")).to_have_attribute("data-state", "idle")
    # a tool call, folded with its result and status
    send(v, "order A-7")
    call = page.locator("details.tool").first
    expect(call).to_have_attribute("data-status", "success")
    expect(call.locator(".tool-name")).to_have_text("lookup_order")
    call.locator("summary").click()
    expect(call.locator("pre.json")).to_contain_text('"order_id": "A-7"')
    expect(call.locator(".tool-body")).to_contain_text('"status": "shipped"')
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Order A-7 has shipped.")
    # the tool message is shown inside its call, not a second time
    expect(page.locator("li.msg-tool")).to_be_hidden()
    assert page.locator("li.msg-user").count() == 2


def test_stop_a_long_run(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    new_thread(v)
    send(v, "slow")
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-state", "running")
    expect(page.locator("li.msg-assistant.msg-pending .msg-text")).to_contain_text("This reply")
    page.get_by_role("button", name="Stop").click()
    expect(status).to_have_attribute("data-state", "idle")
    expect(status).to_have_attribute("data-reason", "aborted_by_user")
    expect(status).to_contain_text("stopped by user")
    expect(page.locator("li.msg-stopped_by_user")).to_contain_text("Execution stopped by user")
    expect(last_assistant(v)).to_have_attribute("data-status", "failed")
    expect(page.get_by_role("button", name="Stop")).to_be_disabled()
    expect(page.get_by_role("button", name="Continue")).to_be_enabled()


def test_terminate_disables_the_composer(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "hi")
    expect(last_assistant(v)).to_have_attribute("data-status", "completed")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Terminate").click()
    box = page.get_by_label("Message", exact=True)
    expect(box).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    note = page.locator("#composer-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("terminated")
    expect(note).to_contain_text("accepts no new messages")
    # it stays so after a reload: the state comes from the server
    page.reload()
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()
    expect(page.locator("#composer-note")).to_contain_text("terminated")
    response = local_server.api("POST", f"/api/threads/{thread}/messages", json={"content": "x"})
    assert response.status_code == 423


def test_a_second_user_cannot_open_the_first_users_thread(server_factory: Any, visit: Any) -> None:
    server = server_factory()
    for name in ("alice", "bob"):
        password = f"{name} password 1234\n"
        server.cli("users", "create", name, "--role", "user", "--password-stdin", stdin=password)
    server.start()
    alice = visit(server.base)
    alice.page.goto("/")
    alice.page.wait_for_url(re.compile(r"/login\?next="))  # credentials are required
    login(alice, "alice")
    thread = new_thread(alice)
    send(alice, "secret plans")
    expect(last_assistant(alice)).to_have_attribute("data-status", "completed")

    bob = visit(server.base)
    bob.page.goto(f"/threads/{thread}")
    bob.page.wait_for_url(re.compile(r"/login\?next="))
    login(bob, "bob")
    bob.page.wait_for_url(re.compile(rf"/threads/{thread}$"))
    banner = bob.page.locator("#thread-error")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("don't have access to this thread")
    expect(bob.page.locator("li.msg")).to_have_count(0)
    assert "secret plans" not in bob.page.content()
    # bob's list does not show it; alice's does
    bob.page.goto("/")
    expect(bob.page.locator("#threads-count")).to_have_text("0 threads")
    alice.page.goto("/")
    expect(alice.page.locator(f"#t-{thread}")).to_contain_text("secret plans")


def login(v: Any, name: str) -> None:
    page = v.page
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(f"{name} password 1234")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login" not in url)


def test_page_catches_up_after_a_server_restart(server_factory: Any, visit: Any) -> None:
    server = server_factory().start()
    v = visit(server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "before the crash")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("echo: before the crash")
    live = page.locator("#stream-live")

    server.kill()
    expect(live).to_have_attribute("data-state", re.compile("reconnecting|connecting"))
    # while the page cannot reach it, the same store is served on another port and changes
    aside = Server(server.db, server.gate_dir).start()
    try:
        for text in ("while you were away", "and once more"):
            sent = aside.api("POST", f"/api/threads/{thread}/messages", json={"content": text})
            assert sent.status_code == 202
            wait_idle(aside, thread)
    finally:
        aside.stop()
    server.start()  # the page's own origin again

    expect(live).to_have_attribute("data-state", "live", timeout=20000)
    expect(last_assistant(v).locator(".msg-text")).to_have_text("echo: and once more")
    api = server.api("GET", f"/api/threads/{thread}/messages", params={"limit": 100}).json()
    expected = [m["id"] for m in api["messages"]]
    shown = page.locator("li.msg").evaluate_all("nodes => nodes.map(n => n.dataset.id)")
    assert shown == expected  # every message once, in order
    send(v, "after the restart")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("echo: after the restart")


def wait_idle(server: Server, thread: str) -> None:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        info = server.api("GET", f"/api/threads/{thread}").json()
        if info["status"]["state"] == "idle" and info["stats"]["queued_count"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError("the thread did not settle")


def test_logs_panel_shows_an_llm_calls_request_body(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    new_thread(v)
    send(v, "order B-2")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Order B-2 has shipped.")
    page.get_by_role("tab", name="Logs & cost").click()
    rows = page.locator("#logs-body tr.log-row[data-kind=llm]")
    expect(rows).to_have_count(2)
    for row in rows.all():  # model, tokens, latency and cost of every call
        expect(row).to_contain_text("chat-1")
        expect(row.locator("td").nth(3)).to_have_text(re.compile(r"^\d+ / \d+$"))
        expect(row.locator("td").nth(4)).to_have_text(re.compile(r"^\d+ ms$"))
        expect(row.locator("td").nth(5)).to_have_text(re.compile(r"^\$0\.\d+$"))
    expect(page.locator("#logs-body tr.log-row[data-kind=app]")).to_contain_text("orders.lookup")
    rows.last.get_by_role("button", name=re.compile("Details")).click()  # the first call
    request_body = page.locator('pre[data-field="Request body"]')
    expect(request_body).to_contain_text("order B-2")
    expect(request_body).to_contain_text("You are a helpful shop assistant.")
    expect(page.locator('pre[data-field="Response body"]')).to_contain_text("lookup_order")
    expect(page.locator("#cost")).to_contain_text("Total cost")
    expect(page.locator("#cost table[aria-label='Cost per model']")).to_contain_text("chat-1")


def test_every_request_goes_to_the_servers_own_origin(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "order C-3")
    expect(last_assistant(v).locator(".msg-text")).to_have_text("Order C-3 has shipped.")
    for tab in ("Logs & cost", "Subagents", "Files", "Conversation"):
        page.get_by_role("tab", name=tab).click()
    page.get_by_role("tab", name="Files").click()
    page.get_by_role("button", name="orders/").click()
    page.get_by_role("button", name=re.compile("C-3.json")).click()
    expect(page.locator("#file-preview pre")).to_contain_text('"order_id": "C-3"')
    page.goto("/")
    expect(page.locator(f"#t-{thread}")).to_be_visible()
    page.goto("/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("Threadloom", timeout=20000)
    page.goto("/login")  # local mode: straight back to the list
    page.wait_for_url(re.compile(r"/$"))
    own = urlsplit(local_server.base).netloc
    assert v.requests and v.sockets
    foreign = [u for u in v.requests + v.sockets if urlsplit(u).netloc != own]
    assert foreign == [], foreign
    assert {urlsplit(u).scheme for u in v.requests} <= {"http", "data"}


def test_the_list_is_live_and_a_failed_run_stands_out(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    page.goto("/")
    expect(page.locator("#list-live")).to_have_attribute("data-state", "live")
    # another client starts a thread and its run fails: the open list shows both
    created = local_server.api(
        "POST", "/api/threads", json={"agent_id": "chat", "tags": ["name:doomed"]}
    ).json()
    thread = created["threadId"]
    row = page.locator(f"#t-{thread}")
    expect(row).to_contain_text("doomed")
    local_server.api("POST", f"/api/threads/{thread}/messages", json={"content": "fail"})
    expect(row.locator(".status")).to_have_attribute("data-state", "failed")
    expect(row).to_have_class(re.compile(r"\bfailed\b"))
    expect(row.locator(".status-reason")).not_to_be_empty()
    # the status filter, kept in the URL
    page.get_by_label("Status").select_option("failed")
    expect(page).to_have_url(re.compile(r"status=failed"))
    # the list re-reads after the URL changes: wait for the filtered list itself (a
    # snapshot of the rows taken in between still held the other, idle thread)
    statuses = page.locator("#threads-body .status")
    expect(page.locator('#threads-body .status:not([data-state="failed"])')).to_have_count(0)
    expect(statuses.first).to_have_attribute("data-state", "failed")
    # the thread page says why, in its header
    row.locator("a.thread-link").click()
    expect(page.locator("#run-status")).to_have_attribute("data-state", "failed")
    expect(page.locator("li.msg-user")).to_contain_text("fail")
    failure = page.locator("#run-failure")
    expect(failure).to_be_visible()
    expect(failure).to_contain_text(re.compile("failed|unavailable"))
    # with the status's error (spec 08 §8.2.1), the log row that says why is one click away
    status = local_server.api("GET", f"/api/threads/{thread}").json()["status"]
    if status.get("error") and status["error"].get("log_id"):
        expect(failure).to_contain_text("The model is unavailable")
        page.get_by_role("button", name="Show the log row").click()
        log_id = status["error"]["log_id"]
        detail = page.locator(f'#logs-body tr.log-detail[data-log-id="{log_id}"]')
        expect(detail).to_contain_text("The model is unavailable")


def test_subagents_tab_links_the_child_and_the_child_links_back(
    local_server: Server, visit: Any
) -> None:
    v = visit(local_server.base)
    page = v.page
    parent = new_thread(v)
    send(v, "help with the invoice")
    expect(last_assistant(v).locator(".msg-text")).to_contain_text("The helper said")
    page.get_by_role("tab", name="Subagents").click()
    child = page.locator("#subagents-body a").first
    expect(child).to_be_visible()
    expect(page.locator("#subagents-body")).to_contain_text("helper")
    child.click()
    page.wait_for_url(re.compile(r"/threads/[0-9a-f-]{36}$"))
    assert parent not in page.url
    back = page.locator("#thread-parent-link")
    expect(back).to_be_visible()
    expect(back).to_have_attribute("href", f"/threads/{parent}")
    expect(page.locator("li.msg-user").first).to_contain_text("with the invoice")


def tiny_png() -> bytes:
    """A 2×2 red PNG, made here."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def decoded_width(image: Any) -> int:
    """The image's decoded width once it has loaded (the page's CSP forbids
    ``wait_for_function``'s string evaluation, so this polls)."""
    import time

    deadline = time.monotonic() + 15
    width = 0
    while time.monotonic() < deadline:
        width = image.evaluate("img => (img.complete && img.naturalWidth) || 0")
        if width:
            break
        time.sleep(0.1)
    return int(width)


def test_files_tab_uploads_previews_and_downloads(local_server: Server, visit: Any) -> None:
    import base64

    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    # an image attachment of a message is shown in the conversation
    picture = base64.b64encode(tiny_png()).decode()
    attachment = {"name": "red.png", "mimeType": "image/png", "data": picture}
    sent = local_server.api(
        "POST",
        f"/api/threads/{thread}/messages",
        json={"content": "see the picture", "attachments": [attachment]},
    )
    assert sent.status_code == 202
    image = page.locator("li.msg-user .attachment img")
    expect(image).to_be_visible()
    assert decoded_width(image) == 2
    # upload two files into a folder, then preview and download them
    page.get_by_role("tab", name="Files").click()
    page.get_by_label("Folder").fill("/notes")
    page.locator("#upload-input").set_input_files(
        [
            {"name": "hello.txt", "mimeType": "text/plain", "buffer": b"hello from the browser"},
            {"name": "dot.png", "mimeType": "image/png", "buffer": tiny_png()},
        ]
    )
    page.get_by_role("button", name="Upload", exact=True).click()
    page.get_by_role("button", name="notes/").click()
    page.get_by_role("button", name=re.compile("hello.txt")).click()
    expect(page.locator("#file-preview pre")).to_have_text("hello from the browser")
    download = page.locator("#file-preview a", has_text="Download")
    expect(download).to_have_attribute("href", f"/api/threads/{thread}/fs/notes/hello.txt")
    with page.expect_download() as fetched:
        download.click()
    assert Path(fetched.value.path()).read_bytes() == b"hello from the browser"
    page.get_by_role("button", name=re.compile("dot.png")).click()
    preview = page.locator("#file-preview img")
    expect(preview).to_be_visible()
    assert decoded_width(preview) == 2
    listed = local_server.api("GET", f"/api/threads/{thread}/fs/notes").json()
    assert sorted(f["name"] for f in listed["files"]) == ["dot.png", "hello.txt"]


def test_queued_and_silent_messages(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    send(v, "gate-q1")  # the model waits for this gate
    expect(page.locator("#run-status")).to_have_attribute("data-state", "running")
    send(v, "while it runs")
    queued = page.locator("li.msg-user", has_text="while it runs")
    expect(queued.locator(".badge-pending")).to_have_text("queued")
    expect(queued).to_have_attribute("data-status", "pending")
    local_server.open_gate("gate-q1")
    # delivered into the running execution: no longer pending, and answered
    expect(queued).to_have_attribute("data-status", "completed")
    expect(queued.locator(".badge-pending")).to_have_count(0)
    expect(last_assistant(v).locator(".msg-text")).to_have_text("echo: while it runs")
    expect(page.locator("#run-status")).to_have_attribute("data-state", "idle")
    # a silent message is behind the toggle
    silent = {"content": "a note for the record", "role": "system", "silent": True}
    assert local_server.api("POST", f"/api/threads/{thread}/messages", json=silent).is_success
    expect(page.locator("#run-status")).to_have_attribute("data-state", "idle")
    note = page.locator("li.msg", has_text="a note for the record")
    expect(note).to_have_count(0)
    page.get_by_label("Show silent messages").check()
    expect(note).to_be_visible()
    expect(note.locator(".badge", has_text="silent")).to_be_visible()
    page.get_by_label("Show silent messages").uncheck()
    expect(note).to_have_count(0)


def test_a_thread_deleted_while_open_says_so(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    thread = new_thread(v)
    assert local_server.api("DELETE", f"/api/threads/{thread}").is_success
    expect(page.locator("#thread-error")).to_have_text("This thread was deleted.")
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "closed")
    page.reload()  # the page of a thread that is gone: the API's 404 text
    expect(page.locator("#thread-error")).to_contain_text(f"Thread not found: {thread}")


UNLABELLED = """() => [...document.querySelectorAll('button, input, select, textarea')]
  .filter((c) => !c.closest('[hidden]'))
  .filter((c) => !((c.labels && c.labels.length) || c.getAttribute('aria-label')
                   || c.getAttribute('aria-labelledby') || c.textContent.trim()))
  .map((c) => c.outerHTML.slice(0, 80))"""


def test_colour_schemes_and_labelled_controls(local_server: Server, visit: Any) -> None:
    v = visit(local_server.base)
    page = v.page
    new_thread(v)
    for tab in ("Conversation", "Logs & cost", "Subagents", "Files"):
        page.get_by_role("tab", name=tab).click()
        assert page.evaluate(UNLABELLED) == [], tab
    page.goto("/")
    expect(page.locator("#list-live")).to_have_attribute("data-state", "live")
    assert page.evaluate(UNLABELLED) == []
    html = page.locator("html")
    toggle = page.get_by_role("button", name=re.compile("^Colour scheme"))
    expect(toggle).to_have_attribute("aria-label", "Colour scheme: follow the system")
    toggle.click()
    expect(html).to_have_attribute("data-theme", "light")
    toggle.click()
    expect(html).to_have_attribute("data-theme", "dark")
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 23, 27)"
    page.reload()  # remembered
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    page.get_by_role("button", name=re.compile("^Colour scheme")).click()
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile("."))
