"""The auth routes (spec 10 §10.5.2–10.5.6): login, logout, me, config, WebSocket tickets
and revoking the presented API key."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom.server import deps
from threadloom.server.auth.accounts import SESSION_LIFETIME_S, open_session
from threadloom.server.auth.passwords import (
    hash_password_async,
    needs_rehash,
    verify_password_async,
)
from threadloom.server.auth.principal import Principal
from threadloom.server.auth.tickets import TICKET_SECONDS, mint_ticket
from threadloom.server.deps import SESSION_COOKIE, client_address, same_or_allowed_origin
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.wire.auth import (
    AuthConfig,
    Caller,
    LoggedIn,
    Login,
    LoginUser,
    Me,
    Revoked,
    Success,
    Ticket,
    TicketRequest,
)

router = Router(prefix="/api/auth", tags=["auth"])

NO_STORE = {"Cache-Control": "no-store"}
INVALID_LOGIN = ApiError(401, "unauthorized", "Invalid username or password")


def session_cookie(request: Request, token: str, max_age: int) -> str:
    cookie = f"{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}"
    secure = deps.is_https(request, deps.context(request).settings)
    return cookie + "; Secure" if secure else cookie


@router.post("/login", summary="Log in with a username and password (public)")
async def login(request: Request) -> JSONResponse:
    ctx = deps.context(request)
    if not ctx.settings.password_login:
        raise ApiError(404, "not_found", "Not found")
    body = await deps.body_of(request, Login)
    password, username = body.password, body.username
    # Counted before the password is checked, in one store transaction with the check: a
    # burst of concurrent guesses through any node cannot all pass the check while none is
    # counted yet (spec 10 §10.11); a success gives its slot back.
    attempt = await ctx.limits.begin_login(client_address(request), username)
    store = ctx.runtime.store
    user = await store.get_user_by_name(username)
    ok = await verify_password_async(password, user.password_hash if user else None)
    if user is None or not ok:
        raise INVALID_LOGIN
    await attempt.succeeded()
    stored = user.password_hash
    if stored is not None and needs_rehash(stored):  # an older scheme: upgraded now
        await store.rehash_password(user.id, stored, await hash_password_async(password))
    token, _ = await open_session(store, user.id)
    answer = LoggedIn(
        token=token, user=LoginUser(id=user.id, username=user.username, role=user.role)
    )
    return JSONResponse(
        answer.to_wire(),
        headers={
            **NO_STORE,
            "Set-Cookie": session_cookie(request, token, SESSION_LIFETIME_S),
        },
    )


@router.post("/logout", summary="End the presented session")
async def logout(request: Request) -> JSONResponse:
    if not same_or_allowed_origin(request, deps.context(request).settings):
        raise ApiError(403, "forbidden", "Cross-origin logout refused")
    who = await deps.principal(request)
    state = request.scope.get("state", {})
    token_digest = state.get("credential_digest")
    if who.auth_type == "session" and isinstance(token_digest, str):
        await deps.runtime(request).store.delete_session(token_digest)
        deps.credentials_revoked(request)
    return JSONResponse(
        Success(success=True).to_wire(),
        headers={**NO_STORE, "Set-Cookie": session_cookie(request, "", 0)},
    )


def caller(who: Principal) -> Caller:
    return Caller(
        id=who.id,
        username=who.username,
        role=who.role,
        permissions=list(who.permissions) if who.permissions is not None else None,
        roles=list(who.roles),
        display_name=who.display_name,
        email=who.email,
        avatar_url=who.avatar_url,
    )


@router.get("/me", summary="The caller")
async def me(who: Principal = Depends(deps.principal)) -> dict[str, Any]:
    return Me(user=caller(who), authType=who.auth_type).to_wire()


@router.get("/config", summary="How this server authenticates (public)")
async def config(request: Request) -> dict[str, Any]:
    ctx = deps.context(request)
    await ctx.credentials.refresh()
    has_credential = "authorization" in request.headers or SESSION_COOKIE in request.cookies
    local = ctx.local_mode and not has_credential and deps.is_local_request(request, ctx.settings)
    return AuthConfig(
        localPassword=ctx.settings.password_login,
        authRequired=not ctx.local_mode,
        localMode=local,
        hosted=False,
        github=False,
        google=False,
        platformConnected=False,
    ).to_wire()


@router.post("/websocket-ticket", summary="A 30-second ticket for one stream upgrade")
async def websocket_ticket(
    request: Request, who: Principal = Depends(deps.principal)
) -> JSONResponse:
    ctx = deps.context(request)
    body = await deps.json_object(request, required="A JSON body is required.")
    pathname = deps.parse(TicketRequest, body).pathname
    ctx.limits.tickets.take(f"{who.auth_type}:{who.id}")
    credential = request.scope.get("state", {}).get("credential_digest")
    ticket = await mint_ticket(
        ctx, who, credential if isinstance(credential, str) else None, pathname
    )
    answer = Ticket(ticket=ticket, expires_in=TICKET_SECONDS)
    return JSONResponse(answer.to_wire(), headers=NO_STORE)


@router.delete("/current-key", summary="Revoke the API key of this request")
async def revoke_current_key(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    token_digest = request.scope.get("state", {}).get("credential_digest")
    if who.auth_type != "api_key" or not isinstance(token_digest, str):
        raise ApiError(403, "forbidden", "Only an API key can revoke itself")
    await deps.runtime(request).store.delete_api_key_by_digest(token_digest)
    deps.credentials_revoked(request)
    return Revoked(revoked=True).to_wire()
