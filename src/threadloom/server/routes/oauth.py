"""The OAuth routes MCP hosts use (spec 10 §10.15): the metadata documents of RFC 9728 and
RFC 8414, dynamic registration, the authorization endpoint with its consent page, the token
and revocation endpoints. The protocol is authlib's (``server/auth/oauth.py``); these
handlers read the request, ask who is signed in, and render the consent page.

They are OAuth's own endpoints, described by the metadata documents, not by
``/openapi.json``: bodies are form-encoded (RFC 6749) or RFC 7591's JSON, errors are
OAuth's ``{"error", "error_description"}``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlsplit

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from threadloom.server import deps
from threadloom.server.auth import oauth
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.server.settings import JSON_BODY_LIMIT
from threadloom.server.ui import pages
from threadloom.wire.auth import OAuthGrant, OAuthGrantList, Success

router = Router(include_in_schema=False)
grants = Router(prefix="/api/oauth/grants", tags=["auth"])

NO_STORE: Final = {"Cache-Control": "no-store", "Pragma": "no-cache"}
AUTHORIZE_PARAMS: Final = (
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
)


def urls(request: Request) -> oauth.Urls:
    """The server's URLs: ``THREADLOOM_PUBLIC_URL`` when set, else the request's origin."""
    ctx = deps.context(request)
    base = ctx.settings.public_url or deps.server_origin(request, ctx.settings)
    return oauth.Urls(base.rstrip("/"))


class Insecure(Exception):
    """The server's URL is plain http on a host that is not loopback."""


INSECURE_TEXT: Final = (
    "OAuth needs https: serve over TLS, or behind a TLS proxy with THREADLOOM_PUBLIC_URL set"
)


def secure_urls(request: Request) -> oauth.Urls:
    """The server's URLs when OAuth may run on them (``Insecure`` otherwise)."""
    where = urls(request)
    if not where.secure:
        raise Insecure
    return where


def _unavailable() -> ApiError:
    return ApiError(
        404, "not_found", "OAuth needs the authlib package: pip install 'threadloom[oauth]'"
    )


def _server(request: Request) -> oauth.OAuthServer:
    if not oauth.available():
        raise _unavailable()
    ctx = deps.context(request)
    return oauth.OAuthServer(
        ctx.runtime.store, secure_urls(request), asyncio.get_running_loop(), clock=ctx.clock
    )


def _answer(result: tuple[int, Any, list[tuple[str, str]]]) -> Response:
    status, body, headers = result
    headers_map = dict(headers)
    if status in (301, 302, 303, 307):
        return RedirectResponse(headers_map["Location"], status_code=302, headers=NO_STORE)
    headers_map.update(NO_STORE)
    headers_map.pop("Content-Type", None)
    return JSONResponse(body, status_code=status, headers=headers_map)


def _oauth_error(status: int, error: str, description: str) -> JSONResponse:
    body = {"error": error, "error_description": description}
    return JSONResponse(body, status_code=status, headers=NO_STORE)


async def insecure(request: Request, exc: Exception) -> Response:
    """Every OAuth route on a plain-http, non-loopback URL: OAuth's ``insecure_transport``."""
    return _oauth_error(400, "insecure_transport", INSECURE_TEXT)


# -- metadata ---------------------------------------------------------------------------------


@router.get("/.well-known/oauth-protected-resource/mcp")
async def mcp_resource_metadata(request: Request) -> JSONResponse:
    """RFC 9728 metadata of ``/mcp`` (the URL its 401 names)."""
    if not oauth.available():
        raise _unavailable()
    where = secure_urls(request)
    return JSONResponse(where.protected_resource_metadata(where.mcp))


@router.get("/.well-known/oauth-protected-resource")
async def resource_metadata(request: Request) -> JSONResponse:
    """RFC 9728 metadata of the whole server (its API accepts the same tokens)."""
    if not oauth.available():
        raise _unavailable()
    where = secure_urls(request)
    return JSONResponse(where.protected_resource_metadata(where.base))


@router.get("/.well-known/oauth-authorization-server")
async def authorization_server_metadata(request: Request) -> JSONResponse:
    """RFC 8414 metadata."""
    if not oauth.available():
        raise _unavailable()
    return JSONResponse(secure_urls(request).authorization_server_metadata())


# -- registration, token, revocation ----------------------------------------------------------


async def _form(request: Request) -> dict[str, str] | JSONResponse:
    """The form-encoded body (RFC 6749 §3.2); a parameter given twice is refused."""
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return _oauth_error(
            400, "invalid_request", "The body must be application/x-www-form-urlencoded"
        )
    raw = await deps.read_body(request, JSON_BODY_LIMIT)
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        return _oauth_error(400, "invalid_request", "The body is not a valid form")
    data: dict[str, str] = {}
    for key, value in pairs:
        if key in data:
            return _oauth_error(400, "invalid_request", f"'{key}' is given more than once")
        if "\x00" in value:
            return _oauth_error(400, "invalid_request", f"'{key}' holds a NUL character")
        data[key] = value
    return data


def _uri(request: Request, path: str) -> str:
    return urls(request).base + path


@router.post("/oauth/register")
async def register(request: Request) -> Response:
    """RFC 7591 dynamic client registration (open: a client gets nothing without a
    user's consent)."""
    server = _server(request)
    try:
        body = await deps.json_object(request, required="A JSON body is required.")
    except ApiError as refused:  # as RFC 7591 §3.2.2 says, not the REST API's shape
        return _oauth_error(refused.status, "invalid_client_metadata", refused.error)
    oauth_request = oauth.json_request(_uri(request, "/oauth/register"), body, request.headers)

    def run() -> Any:
        return server.server.create_endpoint_response("client_registration", oauth_request)

    return _answer(await server.call(run))


@router.post("/oauth/token")
async def token(request: Request) -> Response:
    """The token endpoint: ``authorization_code`` (with the PKCE verifier) and
    ``refresh_token`` (rotating)."""
    server = _server(request)
    data = await _form(request)
    if isinstance(data, JSONResponse):
        return data
    oauth_request = oauth.form_request("POST", _uri(request, "/oauth/token"), data, request.headers)
    return _answer(await server.call(lambda: server.server.create_token_response(oauth_request)))


@router.post("/oauth/revoke")
async def revoke(request: Request) -> Response:
    """RFC 7009 revocation: the access or refresh token given ends its grant's row."""
    server = _server(request)
    data = await _form(request)
    if isinstance(data, JSONResponse):
        return data
    oauth_request = oauth.form_request(
        "POST", _uri(request, "/oauth/revoke"), data, request.headers
    )

    def run() -> Any:
        return server.server.create_endpoint_response("revocation", oauth_request)

    answer = _answer(await server.call(run))
    deps.credentials_revoked(request)
    return answer


# -- authorization ----------------------------------------------------------------------------


def consent_token(session_digest: str, params: dict[str, str]) -> str:
    """The consent form's CSRF token: an HMAC of the request's parameters keyed by the
    signed-in session, so only a page this server rendered for this session can post it."""
    message = json.dumps([params.get(k, "") for k in AUTHORIZE_PARAMS]).encode()
    return hmac.new(session_digest.encode(), message, hashlib.sha256).hexdigest()


def _error_page(status: int, title: str, text: str) -> HTMLResponse:
    return pages.render(
        "oauth_error.html", status=status, who=None, page="oauth", title=title, text=text
    )


def _form_action(redirect_uri: str) -> str:
    """The CSP ``form-action`` of the consent page: this server and the client's redirect
    target (browsers apply it to the redirect that follows the form)."""
    parts = urlsplit(redirect_uri)
    if parts.scheme in ("http", "https"):
        return f"'self' {parts.scheme}://{parts.netloc}"
    return f"'self' {parts.scheme}:"


def _params(source: Any) -> dict[str, str]:
    return {k: source[k] for k in AUTHORIZE_PARAMS if source.get(k) is not None}


async def _authorize_request(
    request: Request, server: oauth.OAuthServer, params: dict[str, str], user: Any
) -> Any:
    """authlib's validated grant for these parameters, or the response that refuses them:
    a redirect to the client with the error once its redirect URI is known, else a page."""
    from authlib.oauth2.rfc6749.errors import OAuth2Error

    resource = server.urls.resource_of(params.get("resource"))
    data = dict(params)
    data["resource"] = resource or ""
    oauth_request = oauth.form_request(
        request.method, _uri(request, "/oauth/authorize"), data, request.headers
    )

    def validate() -> Any:
        try:
            grant = server.server.get_consent_grant(oauth_request, end_user=user)
        except OAuth2Error as refused:
            return refused
        if resource is None:
            target = server.server.invalid_target(
                "The resource is not this server.", redirect_uri=grant.redirect_uri
            )
            target.state = params.get("state")
            return target
        if (params.get("code_challenge_method") or "plain") != "S256":
            from authlib.oauth2.rfc6749.errors import InvalidRequestError

            method = InvalidRequestError(
                "code_challenge_method must be S256", redirect_uri=grant.redirect_uri
            )
            method.state = params.get("state")
            return method
        return grant

    result = await server.call(validate)
    if isinstance(result, OAuth2Error):
        if result.redirect_uri:
            return _answer(result())
        text = result.description or result.error
        return _error_page(400, "This sign-in link is not valid", text)
    return result


@router.get("/oauth/authorize")
async def authorize(request: Request) -> Response:
    """The authorization endpoint: a signed-in user sees the consent page; anyone else is
    sent to ``/login`` and back."""
    server = _server(request)
    query = request.query_params
    for name in AUTHORIZE_PARAMS:
        values = query.getlist(name)
        if len(values) > 1 or any("\x00" in v for v in values):
            text = f"'{name}' is given more than once or holds a NUL character."
            return _error_page(400, "This sign-in link is not valid", text)
    params = _params(query)
    who = await pages.viewer(request)
    if who is None:
        target = request.url.path + "?" + request.url.query
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    if not who.has_user_row or who.auth_type != "session":
        return _error_page(
            403,
            "Sign in as a user",
            "An application can be given access only by a signed-in user of this server.",
        )
    user = await deps.runtime(request).store.get_user(who.id)
    grant = await _authorize_request(request, server, params, user)
    if isinstance(grant, Response):
        return grant
    session = request.scope.get("state", {}).get("credential_digest", "")
    client = grant.client.metadata
    redirect_uri = grant.redirect_uri
    response = pages.render(
        "oauth_consent.html",
        who=_who(who),
        page="oauth",
        client_name=str(client.get("client_name") or grant.client.get_client_id()),
        client_uri=str(client.get("client_uri") or ""),
        redirect_host=urlsplit(redirect_uri).netloc or redirect_uri,
        params=params,
        csrf=consent_token(session, params),
        username=who.username,
    )
    response.headers["Content-Security-Policy"] = pages.CSP.replace(
        "form-action 'self'", f"form-action {_form_action(redirect_uri)}"
    )
    return response


def _who(who: Principal) -> dict[str, Any]:
    return {
        "id": who.id,
        "name": who.display_name or who.username,
        "admin": who.is_admin,
        "auth_type": who.auth_type,
        "logs": who.has_permission("logs"),
    }


@router.post("/oauth/authorize")
async def decide(request: Request) -> Response:
    """The consent form's answer: ``decision=allow`` issues a code to the redirect URI,
    anything else answers ``access_denied`` there. Needs the session that saw the page
    (the CSRF token) and a same-origin request (spec 10 §10.3 rule 5)."""
    server = _server(request)
    data = await _form(request)
    if isinstance(data, JSONResponse):
        return _error_page(400, "This form is not valid", "The form could not be read.")
    who = await deps.principal(request)  # a cross-origin post with the cookie: 403
    session = request.scope.get("state", {}).get("credential_digest")
    params = _params(data)
    if (
        who.auth_type != "session"
        or not isinstance(session, str)
        or not hmac.compare_digest(data.get("csrf", ""), consent_token(session, params))
    ):
        return _error_page(403, "This form has expired", "Open the application's link again.")
    user = await deps.runtime(request).store.get_user(who.id)
    grant = await _authorize_request(request, server, params, user)
    if isinstance(grant, Response):
        return grant
    allowed = data.get("decision") == "allow"

    def run() -> Any:
        return server.server.create_authorization_response(
            grant.request, grant_user=user if allowed else None, grant=grant
        )

    return _answer(await server.call(run))


# -- the user's grants (REST) ----------------------------------------------------------------


@grants.get("", summary="The MCP hosts you allowed (OAuth grants)")
async def list_oauth_grants(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    if not who.has_user_row:
        return OAuthGrantList(grants=[]).to_wire()
    rows = await deps.runtime(request).store.list_oauth_grants(who.id)
    listed = []
    for token_row, client in rows:
        name = json.loads(client.metadata).get("client_name") if client is not None else None
        listed.append(
            OAuthGrant(
                id=token_row.grant_id,
                client_id=token_row.client_id,
                client_name=name if isinstance(name, str) else None,
                scope=token_row.scope,
                resource=token_row.resource,
                issued_at=token_row.issued_at_us // 1_000_000,
                expires_at=token_row.refresh_expires_at_us // 1_000_000,
            )
        )
    return OAuthGrantList(grants=listed).to_wire()


@grants.delete("/{grant_id}", summary="Revoke an MCP host's access (an OAuth grant)")
async def revoke_oauth_grant(
    grant_id: str, request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    store = deps.runtime(request).store
    if not who.has_user_row or not deps.storable(grant_id):
        raise ApiError(404, "not_found", "Grant not found")
    if not await store.revoke_oauth_grant(who.id, grant_id):
        raise ApiError(404, "not_found", "Grant not found")
    deps.credentials_revoked(request)
    return Success(success=True).to_wire()
