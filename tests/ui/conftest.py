"""Fixtures of the browser tests: Debian's chromium driven by Playwright (one browser per
session, a fresh context — cookies, storage — per page), and real ``threadloom serve``
processes of the test project (``ui_harness.Server``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_harness import CHROMIUM, CHROMIUM_ARGS, PROJECT, Server, chromium_or_skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium_or_skip()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=15000)  # a loaded CI machine is slower than a laptop
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server in local development mode (no credential exists): no login."""
    folder = tmp_path_factory.mktemp("ui-local")
    gates = folder / "gates"
    gates.mkdir()
    server = Server(folder / "ui.db", gates).start()
    yield server
    server.stop()


class Visit:
    """A page in a fresh browser context, recording every request it makes."""

    def __init__(self, browser: Any, base: str) -> None:
        self.base = base
        self.context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=base)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15000)
        self.requests: list[str] = []
        self.sockets: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("websocket", lambda ws: self.sockets.append(ws.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser: Any) -> Iterator[Any]:
    """``visit(base)`` opens a fresh context on ``base``; all are closed after the test."""
    opened: list[Visit] = []

    def open_visit(base: str) -> Visit:
        v = Visit(browser, base)
        opened.append(v)
        return v

    yield open_visit
    for v in opened:
        assert v.errors == [], f"script errors on the page: {v.errors}"
        v.close()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    """Servers of this test alone (auth mode, restarts); stopped after it."""
    made: list[Server] = []

    def make(project: Path = PROJECT, **env: str) -> Server:
        gates = tmp_path / f"gates{len(made)}"
        gates.mkdir()
        server = Server(tmp_path / f"ui{len(made)}.db", gates, project, **env)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()
