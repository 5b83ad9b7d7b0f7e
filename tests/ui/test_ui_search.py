"""The threads page's message search (docs/ui.md, spec 08 §8.14): Debian's chromium, driven
by Playwright, against ``threadloom serve`` of the test project — the search box, the hits
with their snippets and links to the message, the filters, paging, the URL, the keyboard
and both colour schemes; and the page logic's Node unit tests."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from test_ui_browser_more import create
from ui_harness import Server

from needs import cannot_run

HERE = Path(__file__).resolve().parent


def history(*texts: str) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(texts)
    ]


def luminance(rgb: str) -> float:
    values = [int(v) / 255 for v in re.findall(r"\d+", rgb)[:3]]
    lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in values]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    a, b = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_c08_220_search_shows_safe_snippets_linking_to_the_message(
    local_server: Server, visit: Any
) -> None:
    word = f"zq{uuid.uuid4().hex[:8]}"
    # the match sits on an old page of a long thread: the link reads back to it
    texts = [f"filler {i}" for i in range(240)]
    texts[11] = f"the <b>{word}</b> & <script>alert(1)</script> part"
    long_thread = create(local_server, initial_messages=history(*texts))
    other = create(local_server, initial_messages=history(f"another {word} here"))
    create(local_server, initial_messages=history("nothing to see"))
    v = visit(local_server.base)
    page = v.page
    page.goto("/")
    box = page.get_by_label("Search messages")
    box.fill(word)
    box.press("Enter")
    hits = page.locator("#search-hits > li.search-hit")
    expect(hits).to_have_count(2)
    expect(page.locator("#search-count")).to_have_text("2 threads found")
    expect(page.locator("#threads-table")).to_be_hidden()
    expect(page).to_have_url(re.compile(rf"[?&]q={word}"))
    hit = page.locator(f"li.search-hit[data-thread-id='{long_thread}']")
    # the matched word marked; the message's markup shown as text, nothing of it run
    expect(hit.locator("mark")).to_have_text(word)
    expect(hit.locator(".snippet")).to_contain_text(f"<b>{word}</b> & <script>alert(1)</script>")
    assert hit.locator(".snippet b, .snippet script").count() == 0
    expect(page.locator(f"li.search-hit[data-thread-id='{other}'] mark")).to_have_text(word)
    # the link opens the thread at the message, read back from an older page
    message_id = hit.get_attribute("data-message-id")
    link = hit.locator("a.hit-link")
    expect(link).to_have_attribute("href", f"/threads/{long_thread}#m-{message_id}")
    link.click()
    page.wait_for_url(re.compile(rf"/threads/{long_thread}#m-"))
    target = page.locator(f"#m-{message_id}")
    expect(target).to_be_in_viewport()
    expect(target).to_contain_text(f"the <b>{word}</b>")
    # back on the list: Escape in the box clears the search, the thread list is back
    page.goto(f"/?q={word}")
    expect(hits).to_have_count(2)
    box.press("Escape")
    expect(page.locator("#search-results")).to_be_hidden()
    expect(page.locator("#threads-table")).to_be_visible()
    expect(page).not_to_have_url(re.compile(r"[?&]q="))


def test_c08_221_filters_narrow_the_search_and_more_pages_it(
    local_server: Server, visit: Any
) -> None:
    word = f"zr{uuid.uuid4().hex[:8]}"
    tag = f"search-{uuid.uuid4().hex[:6]}"
    tagged = {create(local_server, tag, initial_messages=history(f"{word} {i}")) for i in range(3)}
    for i in range(20):
        create(local_server, initial_messages=history(f"{word} plain {i}"))
    v = visit(local_server.base)
    page = v.page
    page.goto(f"/?q={word}")  # the URL's search is run on load
    hits = page.locator("#search-hits > li.search-hit")
    expect(hits).to_have_count(20)
    expect(page.locator("#search-count")).to_have_text("20 of 23 threads found")
    more = page.get_by_role("button", name="More results")
    more.click()
    expect(hits).to_have_count(23)
    expect(more).to_be_hidden()
    expect(page.locator("#search-count")).to_have_text("23 threads found")
    # a filter of the list narrows the search
    page.get_by_label("Tag").fill(tag)
    expect(hits).to_have_count(3)
    assert {h.get_attribute("data-thread-id") for h in hits.all()} == tagged
    page.get_by_label("Status").select_option("running")
    expect(hits).to_have_count(0)
    expect(page.locator("#search-count")).to_have_text("No thread's messages match.")
    page.get_by_label("Status").select_option("idle")
    expect(hits).to_have_count(3)
    # a reload shows the same hits (the URL keeps the text and the filters)
    page.reload()
    expect(hits).to_have_count(3)
    expect(page.get_by_label("Search messages")).to_have_value(word)


def test_c08_222_search_by_keyboard_in_both_colour_schemes(
    local_server: Server, visit: Any
) -> None:
    word = f"zs{uuid.uuid4().hex[:8]}"
    thread = create(local_server, initial_messages=history(f"find {word} by keyboard"))
    v = visit(local_server.base)
    page = v.page
    page.goto("/")
    expect(page.locator("#threads-body tr").first).to_be_visible()
    page.locator("body").press("/")
    box = page.get_by_label("Search messages")
    expect(box).to_be_focused()
    page.keyboard.type(word)
    page.keyboard.press("Enter")
    hit = page.locator("#search-hits > li.search-hit")
    expect(hit).to_have_count(1)
    ratios = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        colours = hit.locator("mark").evaluate(
            "n => [getComputedStyle(n).color, getComputedStyle(n).backgroundColor]"
        )
        text = hit.locator(".snippet").evaluate(
            "n => [getComputedStyle(n).color,"
            " getComputedStyle(n.closest('.search-hit')).backgroundColor]"
        )
        ratios[scheme] = (contrast(*colours), contrast(*text), colours[1])
    for scheme, (marked, plain, _) in ratios.items():
        assert marked >= 4.5 and plain >= 4.5, (scheme, ratios)
    assert ratios["light"][2] != ratios["dark"][2]  # the mark follows the scheme
    # Tab from the box reaches the hit's link; Enter opens it
    link = hit.locator("a.hit-link")
    for _ in range(10):
        page.keyboard.press("Tab")
        if link.evaluate("n => n === document.activeElement"):
            break
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/threads/{thread}#m-"))
    expect(page.locator("li.msg.flash, li.msg").filter(has_text=word).first).to_be_in_viewport()


def test_c08_223_search_view_unit_tests() -> None:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        cannot_run("node is missing; as root: apt-get install -y nodejs", "the UI unit tests")
    done = subprocess.run(
        [node, "--test", str(HERE / "js" / "search_view.test.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout
