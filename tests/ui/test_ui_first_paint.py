"""What a first, cold visit of a thread page waits on (issue 35, ``make bench-ui``'s goal
of the newest page on screen in under a second): the page names its whole module graph
and its first two reads in its head, so the browser asks for them all while it reads the
document, instead of learning of a module only when the one importing it has arrived;
the modules of the other tabs load when one of them is first shown."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx
from playwright.sync_api import expect
from ui_harness import Server

# what thread.js imports only when a tab of theirs is first shown
ON_DEMAND = ("panels.js", "timeline.js", "timeline_model.js")


def imports(source: str) -> set[str]:
    """The modules a module's source imports statically (``import … from "./x.js"``)."""
    return set(re.findall(r'^import\s[^;]*?from\s*"\./([\w.-]+\.js)"', source, re.M))


def static_graph(base: str, entry: str) -> set[str]:
    """Every module that ``entry`` reaches through static imports, read from the server."""
    found: set[str] = set()
    todo = [entry]
    while todo:
        source = httpx.get(f"{base}/ui/static/js/{todo.pop()}").text
        for name in imports(source) - found:
            found.add(name)
            todo.append(name)
    return found


def test_a_page_names_its_module_graph_in_its_head(local_server: Server) -> None:
    """Each page's head preloads every module its entry reaches through static imports, at
    the URL the import resolves to, and nothing else; the on-demand ones are not in it."""
    base = local_server.base
    pages = {"/threads/0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11": "thread.js", "/agents": "agents.js"}
    for path, entry in pages.items():
        html = httpx.get(base + path).text
        head = html.split("</head>", 1)[0]
        preloaded = re.findall(r'<link rel="modulepreload" href="/ui/static/js/([^"]+)">', head)
        assert len(preloaded) == len(set(preloaded)), preloaded
        assert set(preloaded) == static_graph(base, entry), path
        assert re.search(rf'<script type="module" src="/ui/static/js/{entry}\?v=\w+">', head)
        for name in preloaded:
            assert httpx.get(f"{base}/ui/static/js/{name}").status_code == 200
    thread_head = httpx.get(base + "/threads/0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11").text
    assert not any(f"/{name}" in thread_head for name in ON_DEMAND)
    # both entries of the threads page, their shared modules once
    listing = httpx.get(base + "/").text
    both = static_graph(base, "threads.js") | static_graph(base, "search.js")
    preloaded = re.findall(r'rel="modulepreload" href="/ui/static/js/([^"]+)"', listing)
    assert sorted(preloaded) == sorted(both)


def test_a_cold_thread_page_asks_for_everything_at_once(local_server: Server, visit: Any) -> None:
    """A fresh browser context (nothing cached) opening a thread page: every module, and
    the thread's first two reads, are asked for before the page's own module has arrived
    (none waits on the module that imports it), the reads are made once each (the head's
    preload is the read the page uses), the panels' and the timeline's modules are not
    loaded; then each loads when its tab is first shown, and the tab works."""
    made = local_server.api("POST", "/api/threads", json={"agent_id": "chat"}).json()
    thread = made["threadId"]
    local_server.api("POST", f"/api/threads/{thread}/messages", json={"content": "hello"})
    v = visit(local_server.base)
    page = v.page
    page.goto(f"/threads/{thread}")
    expect(page.locator("li.msg-assistant")).to_have_attribute("data-status", "completed")
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
    entries = page.evaluate(
        "() => performance.getEntriesByType('resource')"
        ".map((r) => ({ url: r.name, start: r.startTime, end: r.responseEnd }))"
    )
    start = {urlsplit(e["url"]).path: e["start"] for e in entries}
    # the page's module in hand: what a chain would ask for only now
    entry = next(e["end"] for e in entries if urlsplit(e["url"]).path.endswith("/thread.js"))
    graph = static_graph(local_server.base, "thread.js")
    for name in graph:
        assert start[f"/ui/static/js/{name}"] <= entry, name
    # the first reads: asked once each, by the head
    paths = [urlsplit(u) for u in v.requests]
    reads = [u for u in paths if u.path == f"/api/threads/{thread}"]
    newest = [u for u in paths if u.path == f"/api/threads/{thread}/messages"]
    assert len(reads) == 1 and len(newest) == 1, v.requests
    assert newest[0].query == "limit=100&order=desc"
    assert start[f"/api/threads/{thread}"] <= entry
    assert start[f"/api/threads/{thread}/messages"] <= entry
    loaded = {p.path.rsplit("/", 1)[1] for p in paths if p.path.startswith("/ui/static/js/")}
    assert not loaded & set(ON_DEMAND), loaded
    # the Logs tab loads its module, then its rows
    page.get_by_role("tab", name="Logs & cost").click()
    expect(page.locator("#logs-body tr.log-row").first).to_be_visible()
    assert any(urlsplit(u).path == "/ui/static/js/panels.js" for u in v.requests)
    # the Timeline tab likewise, and draws the run
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#timeline li.step-llm").first).to_be_visible()
    asked = {urlsplit(u).path for u in v.requests}
    assert {"/ui/static/js/timeline.js", "/ui/static/js/timeline_model.js"} <= asked
    # back to the conversation and to Logs again: the module is not asked for twice
    page.get_by_role("tab", name="Conversation").click()
    page.get_by_role("tab", name="Logs & cost").click()
    expect(page.locator("#logs-body tr.log-row").first).to_be_visible()
    assert [urlsplit(u).path for u in v.requests].count("/ui/static/js/panels.js") == 1


def test_a_thread_page_opened_on_a_tab_shows_it(local_server: Server, visit: Any) -> None:
    """A link to a thread's tab (``#timeline``, ``#logs``) loads that tab's module at once
    and shows the tab, with the conversation read beside it."""
    made = local_server.api("POST", "/api/threads", json={"agent_id": "chat"}).json()
    thread = made["threadId"]
    local_server.api("POST", f"/api/threads/{thread}/messages", json={"content": "hello"})
    v = visit(local_server.base)
    page = v.page
    page.goto(f"/threads/{thread}#timeline")
    expect(page.get_by_role("tab", name="Timeline")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#timeline li.step-llm").first).to_be_visible()
    page.goto(f"/threads/{thread}#logs")
    page.reload()
    expect(page.get_by_role("tab", name="Logs & cost")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#logs-body tr.log-row").first).to_be_visible()
    expect(page.locator("#stream-live")).to_have_attribute("data-state", "live")
