"""The OAuth consent of an MCP host in a real browser (spec 10 §10.15.3): Chromium opens the
authorization URL, logs in, allows, and the redirect to the host's loopback callback is let
through by the consent page's Content-Security-Policy (``form-action`` applies to the
redirect that follows a form)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

CALLBACK = "http://localhost:33418/callback"


def test_c10_051_a_person_consents_in_a_browser(server_factory: Any, visit: Any) -> None:
    server = server_factory(THREADLOOM_AUTH="required")
    server.cli("users", "create", "ana", "--password-stdin", stdin="ana password 1234\n")
    server.start()
    registered = httpx.post(
        f"{server.base}/oauth/register",
        json={
            "client_name": "Browser test host",
            "redirect_uris": [CALLBACK],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        },
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "state": "browser-state",
        "resource": f"{server.base}/mcp",
    }
    v = visit(server.base)
    page = v.page
    reached: list[str] = []

    def callback(route: Any) -> None:
        reached.append(route.request.url)
        route.fulfill(status=200, content_type="text/plain", body="signed in")

    page.route("http://localhost:33418/**", callback)
    page.goto(f"/oauth/authorize?{urlencode(query)}")
    page.wait_for_url(lambda url: "/login" in url)
    page.get_by_label("Username").fill("ana")
    page.get_by_label("Password").fill("ana password 1234")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Allow Browser test host?").wait_for()
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(lambda url: url.startswith(CALLBACK))
    assert len(reached) == 1
    answer = {k: w[0] for k, w in parse_qs(urlsplit(reached[0]).query).items()}
    assert answer["state"] == "browser-state"
    token = httpx.post(
        f"{server.base}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"],
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert token.status_code == 200, token.text
    me = httpx.get(
        f"{server.base}/api/auth/me",
        headers={"Authorization": f"Bearer {token.json()['access_token']}"},
    )
    assert me.json()["user"]["username"] == "ana" and me.json()["authType"] == "oauth"
