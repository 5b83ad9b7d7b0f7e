"""The UI's pages over plain HTTP (no browser): what ``threadloom serve`` answers at ``/``,
``/threads/{id}``, ``/login``, ``/ui/static/…`` and ``/docs`` (whose Swagger UI files come
from an installed package, not a CDN)."""

from __future__ import annotations

import re
from typing import Any

import httpx
from ui_harness import Server


def test_pages_are_served_with_a_same_origin_policy(local_server: Server) -> None:
    for path in ("/", "/threads/0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11", "/agents"):
        page = httpx.get(local_server.base + path)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp
        assert "connect-src 'self'" in csp
        assert page.headers["cache-control"] == "no-store"
        # every script and style is our own, by path, with a content hash
        for url in re.findall(r'(?:src|href)="([^"]+)"', page.text):
            assert url.startswith(("/", "#")), url
            if url.startswith("/ui/static/"):
                assert httpx.get(local_server.base + url).status_code == 200


def test_static_modules_are_served(local_server: Server) -> None:
    for name in ("ui.css", "js/api.js", "js/thread.js", "js/threads.js", "js/socket.js"):
        answer = httpx.get(f"{local_server.base}/ui/static/{name}")
        assert answer.status_code == 200, name
    js = httpx.get(f"{local_server.base}/ui/static/js/thread.js")
    assert "javascript" in js.headers["content-type"]
    assert httpx.get(f"{local_server.base}/ui/static/nope.js").status_code == 404


def test_docs_load_swagger_ui_from_this_server(local_server: Server) -> None:
    docs = httpx.get(local_server.base + "/docs")
    assert docs.status_code == 200
    assert "cdn." not in docs.text and "https://" not in docs.text
    urls = re.findall(r"(?:src|href)=['\"]([^'\"]+)['\"]", docs.text)
    assert urls and all(u.startswith("/docs/assets/") for u in urls), urls
    for url in urls:
        asset = httpx.get(local_server.base + url)
        assert asset.status_code == 200 and len(asset.content) > 100
    assert httpx.get(local_server.base + "/openapi.json").json()["openapi"].startswith("3.1")


def test_api_errors_stay_json(local_server: Server) -> None:
    answer = httpx.get(local_server.base + "/api/nope")
    assert answer.status_code == 404
    assert answer.json()["code"] == "not_found"
    assert httpx.get(local_server.base + "/nope").json()["code"] == "not_found"


def test_pages_ask_for_a_login_when_credentials_are_required(server_factory: Any) -> None:
    server = server_factory(THREADLOOM_AUTH="required")
    server.cli("users", "create", "ana", "--password-stdin", stdin="ana password 1234\n")
    server.start()
    first = httpx.get(f"{server.base}/threads/abc?x=1")
    assert first.status_code == 303
    assert first.headers["location"] == "/login?next=%2Fthreads%2Fabc%3Fx%3D1"
    agents = httpx.get(f"{server.base}/agents")
    assert agents.status_code == 303 and agents.headers["location"] == "/login?next=%2Fagents"
    form = httpx.get(server.base + "/login")
    assert form.status_code == 200 and 'id="login-form"' in form.text
    assert 'type="password"' in form.text
    with httpx.Client(base_url=server.base) as client:
        login = client.post(
            "/api/auth/login", json={"username": "ana", "password": "ana password 1234"}
        )
        assert login.status_code == 200
        assert client.get("/").status_code == 200
        # a logged-in visitor is sent on; only a path of this server is followed
        again = client.get("/login?next=/threads/abc")
        assert again.status_code == 303 and again.headers["location"] == "/threads/abc"
        away = client.get("/login?next=//evil.example/x")
        assert away.headers["location"] == "/"
    stale = httpx.get(server.base + "/", cookies={"threadloom_session": "tls_" + "0" * 64})
    assert stale.status_code == 303
