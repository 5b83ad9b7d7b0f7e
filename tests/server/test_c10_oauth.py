"""OAuth for MCP hosts (spec 10 §10.15): the whole flow with httpx against a real server on
SQLite and PostgreSQL — discovery from the /mcp 401, dynamic registration, the signed-in
user's consent, the code with PKCE, tokens, refresh, a tool call with the token — and what
must be refused."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from conftest import USERS, Api, last_user_text
from threadloom import Agent, Side
from threadloom.cli.commands import app
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.server.auth.accounts import now_us
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.store.base import UserPatch

PASSWORD = "correct horse battery staple"
REDIRECT = "http://localhost:33418/callback"
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def summarizer() -> tuple[Any, ...]:
    provider = ScriptedProvider(lambda r: Reply.text(f"summary of: {last_user_text(r)}"))
    return (
        Model(name="sum_model", provider=provider, model="scripted-summary"),
        Prompt(name="sum_prompt", model="sum_model", system="You summarise."),
        Agent(
            name="summarizer",
            expose_as_tool=True,
            tool_description="Summarises a text",
            side_a=Side(prompt="sum_prompt"),
            side_b=Side(label="Caller"),
        ),
    )


class Hidden(HTMLParser):
    """The consent form's hidden inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.values[str(found["name"])] = found.get("value") or ""


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


@dataclass
class Host:
    """An MCP host as the TypeScript SDK behaves: registered, with its PKCE pair."""

    api: Api
    client_id: str
    verifier: str
    challenge: str
    redirect_uri: str = REDIRECT

    def authorize_params(self, **override: str) -> dict[str, str]:
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "state": "st-" + secrets.token_hex(4),
            "scope": "threadloom",
            "resource": f"{self.api.base}/mcp",
        }
        params.update(override)
        return {k: v for k, v in params.items() if v != ""}

    async def token(self, **form: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.api.base) as http:
            return await http.post("/oauth/token", data={"client_id": self.client_id, **form})

    async def exchange(self, code: str, verifier: str | None = None) -> httpx.Response:
        return await self.token(
            grant_type="authorization_code",
            code=code,
            redirect_uri=self.redirect_uri,
            code_verifier=verifier or self.verifier,
            resource=f"{self.api.base}/mcp",
        )


async def register(api: Api, **metadata: Any) -> httpx.Response:
    body = {
        "client_name": "Test host",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        **metadata,
    }
    async with httpx.AsyncClient(base_url=api.base) as http:
        return await http.post("/oauth/register", json=body)


async def new_host(api: Api) -> Host:
    registered = await register(api)
    assert registered.status_code == 201, registered.text
    verifier, challenge = pkce()
    return Host(api, registered.json()["client_id"], verifier, challenge)


async def signed_in(api: Api, user: str = "alice") -> httpx.AsyncClient:
    """A browser of ``user``: the session cookie of a password login."""
    await api.set_password(user, PASSWORD)
    browser = httpx.AsyncClient(base_url=api.base, timeout=30)
    api.clients.append(browser)
    login = await browser.post("/api/auth/login", json={"username": user, "password": PASSWORD})
    assert login.status_code == 200, login.text
    return browser


async def consent(
    browser: httpx.AsyncClient, host: Host, decision: str = "allow", **override: str
) -> httpx.Response:
    """Open the authorization URL as the signed-in user and answer the consent page."""
    page = await browser.get("/oauth/authorize", params=host.authorize_params(**override))
    assert page.status_code == 200, page.text
    form = Hidden()
    form.feed(page.text)
    return await browser.post("/oauth/authorize", data={**form.values, "decision": decision})


def redirected(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 302, response.text
    location = urlsplit(response.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {k: v[0] for k, v in parse_qs(location.query).items()}


async def code_for(browser: httpx.AsyncClient, host: Host) -> str:
    return redirected(await consent(browser, host))["code"]


async def tokens(api: Api, user: str = "alice") -> tuple[Host, dict[str, Any]]:
    host = await new_host(api)
    browser = await signed_in(api, user)
    answer = await host.exchange(await code_for(browser, host))
    assert answer.status_code == 200, answer.text
    return host, answer.json()


@asynccontextmanager
async def mcp_client(api: Api, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{api.base}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def me(api: Api, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=api.base) as http:
        return await http.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})


async def test_c10_049_the_mcp_401_leads_to_the_metadata(make_api: Any) -> None:
    api: Api = await make_api(extra=summarizer())
    async with httpx.AsyncClient(base_url=api.base) as http:
        refused = await http.post("/mcp", json=LIST_TOOLS, headers=MCP_ACCEPT)
        wrong = await http.post(
            "/mcp", json=LIST_TOOLS, headers={**MCP_ACCEPT, "Authorization": "Bearer tlo_x"}
        )
        prm_url = f"{api.base}/.well-known/oauth-protected-resource/mcp"
        prm = await http.get(prm_url)
        root_prm = await http.get("/.well-known/oauth-protected-resource")
        asm = await http.get("/.well-known/oauth-authorization-server")
        untrusted = await http.get(  # no trusted proxy: the header counts for nothing
            "/.well-known/oauth-authorization-server", headers={"X-Forwarded-Proto": "https"}
        )
    assert untrusted.json()["issuer"] == api.base
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and f'resource_metadata="{prm_url}"' in challenge
    assert "invalid_token" not in challenge
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert prm.status_code == 200
    assert prm.json()["resource"] == f"{api.base}/mcp"
    assert prm.json()["authorization_servers"] == [api.base]
    assert root_prm.json()["resource"] == api.base
    metadata = asm.json()
    assert metadata["issuer"] == api.base
    assert metadata["authorization_endpoint"] == f"{api.base}/oauth/authorize"
    assert metadata["token_endpoint"] == f"{api.base}/oauth/token"
    assert metadata["registration_endpoint"] == f"{api.base}/oauth/register"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]


async def test_c10_049_the_public_url_names_the_issuer(make_api: Any) -> None:
    public = await make_api(ServerSettings(auth="required", public_url="https://tl.example/x"))
    async with httpx.AsyncClient(base_url=public.base) as http:
        refused = await http.post("/mcp", json=LIST_TOOLS, headers=MCP_ACCEPT)
        asm = await http.get("/.well-known/oauth-authorization-server")
    expected = "https://tl.example/.well-known/oauth-protected-resource/x/mcp"
    assert f'resource_metadata="{expected}"' in refused.headers["www-authenticate"]
    assert asm.json()["issuer"] == "https://tl.example/x"
    assert asm.json()["token_endpoint"] == "https://tl.example/x/oauth/token"


async def test_c10_049_behind_a_trusted_proxy_the_issuer_is_its_https_origin(
    make_api: Any,
) -> None:
    api = await make_api(ServerSettings(auth="required", trusted_proxies=("127.0.0.1",)))
    proxied = {"Host": "tl.example", "X-Forwarded-Proto": "https"}
    async with httpx.AsyncClient(base_url=api.base) as http:
        asm = await http.get("/.well-known/oauth-authorization-server", headers=proxied)
        refused = await http.post("/mcp", json=LIST_TOOLS, headers={**MCP_ACCEPT, **proxied})
    assert asm.json()["issuer"] == "https://tl.example"
    expected = "https://tl.example/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{expected}"' in refused.headers["www-authenticate"]


async def test_c10_049_oauth_needs_https_off_loopback(make_api: Any) -> None:
    plain = await make_api(ServerSettings(auth="required", public_url="http://tl.example"))
    async with httpx.AsyncClient(base_url=plain.base) as http:
        refused = await http.post("/mcp", json=LIST_TOOLS, headers=MCP_ACCEPT)
        asm = await http.get("/.well-known/oauth-authorization-server")
        registered = await http.post("/oauth/register", json={"redirect_uris": [REDIRECT]})
    assert (
        refused.status_code == 401
        and "resource_metadata" not in refused.headers["www-authenticate"]
    )
    for answer in (asm, registered):
        assert answer.status_code == 400 and answer.json()["error"] == "insecure_transport"


async def test_c10_050_dynamic_registration(make_api: Any) -> None:
    api: Api = await make_api()
    public = await register(api)
    assert public.status_code == 201, public.text
    body = public.json()
    assert body["client_id"].startswith("tlc_") and "client_secret" not in body
    assert body["redirect_uris"] == [REDIRECT] and body["token_endpoint_auth_method"] == "none"
    confidential = await register(
        api, token_endpoint_auth_method="client_secret_post", redirect_uris=["https://h.example/cb"]
    )
    assert confidential.status_code == 201 and confidential.json()["client_secret"]
    stored = await api.runtime.store.get_oauth_client(confidential.json()["client_id"])
    assert stored is not None and confidential.json()["client_secret"] not in stored.metadata
    for bad in (
        {"redirect_uris": ["http://h.example/cb"]},
        {"redirect_uris": []},
        {"redirect_uris": ["javascript:alert(1)"]},
    ):
        refused = await register(api, **bad)
        assert refused.status_code == 400, bad
        assert refused.json()["error"] == "invalid_redirect_uri"


async def test_c10_051_authorization_needs_a_signed_in_user_and_consent(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    async with httpx.AsyncClient(base_url=api.base) as anonymous:
        params = host.authorize_params()
        away = await anonymous.get("/oauth/authorize", params=params)
        with_key = await anonymous.get(
            "/oauth/authorize",
            params=params,
            headers={"Authorization": f"Bearer {api.keys['alice']}"},
        )
    assert away.status_code == 303
    location = urlsplit(away.headers["location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == [f"/oauth/authorize?{urlencode(params)}"]
    assert with_key.status_code == 403  # an API key is not a person at a browser

    browser = await signed_in(api)
    page = await browser.get("/oauth/authorize", params=host.authorize_params())
    assert page.status_code == 200 and "Test host" in page.text and "alice" in page.text
    assert "form-action 'self' http://localhost:33418" in page.headers["content-security-policy"]
    params = host.authorize_params()
    page = await browser.get("/oauth/authorize", params=params)
    form = Hidden()
    form.feed(page.text)
    allowed = redirected(
        await browser.post("/oauth/authorize", data={**form.values, "decision": "allow"})
    )
    assert allowed["state"] == params["state"] and allowed["code"]
    denied = redirected(await consent(browser, host, decision="deny"))
    assert denied["error"] == "access_denied" and "code" not in denied


async def test_c10_052_the_consent_form_is_csrf_safe(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    browser = await signed_in(api)
    page = await browser.get("/oauth/authorize", params=host.authorize_params())
    form = Hidden()
    form.feed(page.text)
    forged = await browser.post(
        "/oauth/authorize", data={**form.values, "csrf": "0" * 64, "decision": "allow"}
    )
    assert forged.status_code == 403 and "location" not in forged.headers
    cross = await browser.post(
        "/oauth/authorize",
        data={**form.values, "decision": "allow"},
        headers={"Origin": "https://evil.example"},
    )
    assert cross.status_code == 403 and "location" not in cross.headers
    other = await signed_in(api, "bob")  # another session cannot replay alice's form
    replayed = await other.post("/oauth/authorize", data={**form.values, "decision": "allow"})
    assert replayed.status_code == 403
    ok = await browser.post("/oauth/authorize", data={**form.values, "decision": "allow"})
    assert "code" in redirected(ok)


async def test_c10_053_a_token_calls_mcp_and_the_api_as_its_user(make_api: Any) -> None:
    api: Api = await make_api(extra=summarizer())
    _, issued = await tokens(api)
    assert issued["token_type"] == "Bearer" and issued["expires_in"] == 3600
    assert issued["access_token"].startswith("tlo_")
    assert issued["refresh_token"].startswith("tlr_")
    assert issued["scope"] == "threadloom"
    async with mcp_client(api, issued["access_token"]) as client:
        said = await client.call_tool("summarizer", {"message": "a long story"})
    assert not said.is_error
    assert said.meta is not None
    row = await api.runtime.store.get_thread(said.meta["threadloom"]["threadId"])
    assert row is not None and row.user_id == USERS["alice"].id
    who = await me(api, issued["access_token"])
    assert who.status_code == 200
    assert who.json()["authType"] == "oauth" and who.json()["user"]["id"] == USERS["alice"].id
    # stored as digests only
    assert await api.runtime.store.oauth_token_by_digest(issued["access_token"]) is None


async def test_c10_054_a_wrong_verifier_or_a_reused_code_is_refused(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    browser = await signed_in(api)
    code = await code_for(browser, host)
    wrong = await host.exchange(code, verifier=pkce()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    again = await host.exchange(code)  # the failed attempt used the code
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

    code = await code_for(browser, host)
    first = await host.exchange(code)
    assert first.status_code == 200
    reused = await host.exchange(code)
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert (await me(api, first.json()["access_token"])).status_code == 401  # revoked
    refresh = await host.token(
        grant_type="refresh_token", refresh_token=first.json()["refresh_token"]
    )
    assert refresh.status_code == 400

    other = await new_host(api)  # a code is bound to its client
    code = await code_for(browser, host)
    stolen = await other.exchange(code, verifier=host.verifier)
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


async def test_c10_055_refresh_rotates(make_api: Any) -> None:
    api: Api = await make_api()
    host, issued = await tokens(api)
    fresh = await host.token(grant_type="refresh_token", refresh_token=issued["refresh_token"])
    assert fresh.status_code == 200, fresh.text
    renewed = fresh.json()
    assert renewed["access_token"] != issued["access_token"]
    assert renewed["refresh_token"] != issued["refresh_token"]
    assert (await me(api, renewed["access_token"])).status_code == 200
    assert (await me(api, issued["access_token"])).status_code == 401
    old = await host.token(grant_type="refresh_token", refresh_token=issued["refresh_token"])
    assert old.status_code == 400 and old.json()["error"] == "invalid_grant"
    # a rotated refresh token presented again: one of its two holders is not the client,
    # so the grant ends (OAuth 2.1 §4.3.1)
    assert (await me(api, renewed["access_token"])).status_code == 401
    later = await host.token(grant_type="refresh_token", refresh_token=renewed["refresh_token"])
    assert later.status_code == 400 and later.json()["error"] == "invalid_grant"


async def test_c10_056_an_expired_token_is_refused_and_refresh_renews_it(make_api: Any) -> None:
    api: Api = await make_api(extra=summarizer())
    host, issued = await tokens(api)
    credentials: Any = api.app.context.credentials
    credentials.clock = lambda: now_us() + 3601 * 1_000_000
    expired = await me(api, issued["access_token"])
    assert expired.status_code == 401
    async with httpx.AsyncClient(base_url=api.base) as http:
        mcp = await http.post(
            "/mcp",
            json=LIST_TOOLS,
            headers={**MCP_ACCEPT, "Authorization": f"Bearer {issued['access_token']}"},
        )
    assert mcp.status_code == 401 and 'error="invalid_token"' in mcp.headers["www-authenticate"]
    api.app.context.clock = credentials.clock
    fresh = await host.token(grant_type="refresh_token", refresh_token=issued["refresh_token"])
    assert fresh.status_code == 200
    assert (await me(api, fresh.json()["access_token"])).status_code == 200


async def test_c10_057_another_users_token_is_refused(make_api: Any) -> None:
    api: Api = await make_api()
    thread = await api.thread(user="alice")
    _, bobs = await tokens(api, "bob")
    async with httpx.AsyncClient(base_url=api.base) as http:
        auth = {"Authorization": f"Bearer {bobs['access_token']}"}
        read = await http.get(f"/api/threads/{thread}", headers=auth)
        own = await http.get("/api/threads", headers=auth)
    assert read.status_code == 403
    assert own.status_code == 200 and own.json()["threads"] == []
    other = await new_host(api)
    taken = await other.token(grant_type="refresh_token", refresh_token=bobs["refresh_token"])
    assert taken.status_code == 400 and taken.json()["error"] == "invalid_grant"


async def test_c10_058_revocation_ends_tokens(make_api: Any) -> None:
    api: Api = await make_api()
    host, issued = await tokens(api)
    async with httpx.AsyncClient(base_url=api.base) as http:
        revoked = await http.post(
            "/oauth/revoke", data={"token": issued["refresh_token"], "client_id": host.client_id}
        )
    assert revoked.status_code == 200
    assert (await me(api, issued["access_token"])).status_code == 401

    _, issued = await tokens(api)
    await api.runtime.store.update_user(
        USERS["alice"].id, UserPatch(set_password=True, password_hash=None)
    )
    assert (await me(api, issued["access_token"])).status_code == 401

    _, issued = await tokens(api, "bob")
    assert (await me(api, issued["access_token"])).status_code == 200
    assert await api.runtime.store.delete_user(USERS["bob"].id)
    assert (await me(api, issued["access_token"])).status_code == 401


async def test_c10_059_the_resource_must_be_this_server(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    browser = await signed_in(api)
    page = await browser.get(
        "/oauth/authorize", params=host.authorize_params(resource="https://other.example/mcp")
    )
    assert redirected(page)["error"] == "invalid_target"
    code = await code_for(browser, host)
    moved = await host.token(
        grant_type="authorization_code",
        code=code,
        redirect_uri=host.redirect_uri,
        code_verifier=host.verifier,
        resource="https://other.example/mcp",
    )
    assert moved.status_code == 400 and moved.json()["error"] == "invalid_target"
    whole = redirected(await consent(browser, host, resource=api.base + "/"))
    assert (await host.exchange(whole["code"])).status_code == 400  # granted for the base
    plain = await host.token(
        grant_type="authorization_code",
        code=redirected(await consent(browser, host, resource=api.base))["code"],
        redirect_uri=host.redirect_uri,
        code_verifier=host.verifier,
    )
    assert plain.status_code == 200


async def test_c10_060_pkce_s256_is_required(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    browser = await signed_in(api)
    missing = await browser.get("/oauth/authorize", params=host.authorize_params(code_challenge=""))
    assert redirected(missing)["error"] == "invalid_request"
    plain = await browser.get(
        "/oauth/authorize", params=host.authorize_params(code_challenge_method="plain")
    )
    assert redirected(plain)["error"] == "invalid_request"
    unknown = await browser.get(
        "/oauth/authorize", params=host.authorize_params(client_id="tlc_nobody")
    )
    assert unknown.status_code == 400 and "location" not in unknown.headers
    elsewhere = await browser.get(
        "/oauth/authorize", params=host.authorize_params(redirect_uri="https://evil.example/cb")
    )
    assert elsewhere.status_code == 400 and "location" not in elsewhere.headers


async def test_c10_061_a_loopback_redirect_uri_matches_any_port(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    host.redirect_uri = "http://localhost:50123/callback"
    browser = await signed_in(api)
    answer = await consent(browser, host)
    assert answer.status_code == 302
    assert answer.headers["location"].startswith("http://localhost:50123/callback?code=")
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    assert (await host.exchange(code)).status_code == 200


async def test_c10_062_hostile_input_is_refused_with_oauths_errors(make_api: Any) -> None:
    api: Api = await make_api()
    host = await new_host(api)
    browser = await signed_in(api)
    nul = await browser.get("/oauth/authorize", params=host.authorize_params(client_id="a\x00b"))
    assert nul.status_code == 400
    twice = await browser.get(
        "/oauth/authorize?" + urlencode(host.authorize_params()) + "&client_id=tlc_other"
    )
    assert twice.status_code == 400 and "location" not in twice.headers
    async with httpx.AsyncClient(base_url=api.base) as http:
        as_json = await http.post("/oauth/token", json={"grant_type": "authorization_code"})
        repeated = await http.post(
            "/oauth/token",
            content="grant_type=refresh_token&grant_type=refresh_token",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        nul_code = await http.post(
            "/oauth/token",
            data={"grant_type": "authorization_code", "code": "a\x00", "client_id": host.client_id},
        )
        unknown = await http.post("/oauth/token", data={"grant_type": "password"})
        not_list = await http.post("/oauth/register", json={"redirect_uris": REDIRECT})
        not_json = await http.post("/oauth/register", content=b"redirect_uris=x")
    for answer in (as_json, repeated, nul_code):
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_request"
        assert answer.headers["cache-control"] == "no-store"
    assert unknown.status_code == 400 and unknown.json()["error"] == "unsupported_grant_type"
    assert not_list.status_code == 400 and not_list.json()["error"] == "invalid_redirect_uri"
    assert not_json.status_code == 400
    assert not_json.json()["error"] == "invalid_client_metadata"
    for bad in ("ftp://x", "https://x?y=1", "relative/path"):
        with pytest.raises(SettingsError):
            ServerSettings.from_env({"THREADLOOM_PUBLIC_URL": bad})
    assert (
        ServerSettings.from_env({"THREADLOOM_PUBLIC_URL": "https://x/"}).public_url == "https://x"
    )


async def test_c10_063_a_user_lists_and_revokes_the_hosts_they_allowed(make_api: Any) -> None:
    api: Api = await make_api()
    host, issued = await tokens(api)
    alice, bob = api.client("alice"), api.client("bob")
    listed = await alice.get("/api/oauth/grants")
    assert listed.status_code == 200 and listed.headers["cache-control"] == "no-store"
    [grant] = listed.json()["grants"]
    assert grant["client_id"] == host.client_id and grant["client_name"] == "Test host"
    assert grant["scope"] == "threadloom" and grant["resource"] == f"{api.base}/mcp"
    assert "access_token" not in grant and issued["access_token"] not in listed.text
    assert (await bob.get("/api/oauth/grants")).json()["grants"] == []
    assert (await bob.delete(f"/api/oauth/grants/{grant['id']}")).status_code == 404
    assert (await me(api, issued["access_token"])).status_code == 200
    revoked = await alice.delete(f"/api/oauth/grants/{grant['id']}")
    assert revoked.status_code == 200 and revoked.json() == {"success": True}
    assert (await me(api, issued["access_token"])).status_code == 401
    refresh = await host.token(grant_type="refresh_token", refresh_token=issued["refresh_token"])
    assert refresh.status_code == 400
    assert (await alice.get("/api/oauth/grants")).json()["grants"] == []
    assert (await alice.delete(f"/api/oauth/grants/{grant['id']}")).status_code == 404


async def test_c10_064_an_admin_ends_a_users_grants_from_the_command_line(
    make_api: Any, db_url: str
) -> None:
    api: Api = await make_api()
    _, issued = await tokens(api)
    _, bobs = await tokens(api, "bob")
    runner = CliRunner()
    done = await asyncio.to_thread(
        runner.invoke, app, ["users", "revoke-oauth", "alice", "--store", db_url]
    )
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "revoked 1 OAuth grant of alice"
    assert (await me(api, issued["access_token"])).status_code == 401
    assert (await me(api, bobs["access_token"])).status_code == 200
    unknown = await asyncio.to_thread(
        runner.invoke, app, ["users", "revoke-oauth", "nobody", "--store", db_url]
    )
    assert unknown.exit_code == 1
