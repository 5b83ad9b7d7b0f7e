"""Authentication of stream, log and event sockets and SSE requests (spec 10 §10.9).

The stream routes (``server/stream/stream.py``, ``server/stream/list_events.py``) call
:func:`authenticate_stream` before accepting, and :func:`recheck` at least every 60 s while
the socket is open, and at once when ``ctx.revocations`` signals a revocation::

    try:
        auth = await authenticate_stream(websocket)
    except ApiError as exc:
        ...  # refuse the upgrade with exc.status (401, 403 or 429)
    ...
    await ctx.revocations.wait(60)
    if await recheck(ctx, auth) is None:
        await websocket.close(4001, "Credentials expired")

Credentials are taken, in order, from ``?ticket=``, the ``Authorization`` header, the
``threadloom_session`` cookie and ``?token=``; the first present is used and must be valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from threadloom.server import deps
from threadloom.server.auth.principal import Principal, digest
from threadloom.server.auth.tickets import credential_principal, take_ticket
from threadloom.server.deps import (
    SESSION_COOKIE,
    UNAUTHORIZED,
    ServerContext,
    same_or_allowed_origin,
)
from threadloom.server.errors import ApiError
from threadloom.server.pipeline import LOCAL_CROSS_ORIGIN_TEXT, origin_guard_fails


@dataclass(frozen=True)
class StreamAuth:
    """Who opened a socket and with what: ``auth_type`` and ``credential_digest`` name the
    credential to re-check (for a ticket, the credential it was minted with)."""

    principal: Principal
    auth_type: str
    credential_digest: str | None
    via: str
    """``ticket``, ``header``, ``cookie``, ``token`` or ``local``."""


def _last(conn: HTTPConnection, name: str) -> str | None:
    values = conn.query_params.getlist(name)
    return values[-1] if values else None


async def _from_token(conn: HTTPConnection, token: str, via: str) -> StreamAuth:
    who = await deps.token_principal(conn, token, counted=via != "cookie")
    return StreamAuth(who, who.auth_type, digest(token), via)


async def authenticate_stream(conn: HTTPConnection) -> StreamAuth:
    """Authenticate a socket upgrade or SSE request; ``ApiError`` 401/403 otherwise."""
    ctx = deps.context(conn)
    settings = ctx.settings
    if origin_guard_fails(conn.scope, settings):  # the pipeline applies it to HTTP only
        raise ApiError(
            403,
            "cross_origin_forbidden",
            LOCAL_CROSS_ORIGIN_TEXT,
            headers={"Cache-Control": "no-store"},
        )
    ticket = _last(conn, "ticket")
    if ticket is not None:
        taken = await take_ticket(ctx, ticket, conn.url.path)
        if taken is None:
            raise UNAUTHORIZED
        who, row = taken
        return StreamAuth(who, row.auth_type, row.credential_digest, "ticket")
    token = deps.bearer(conn)
    if token is not None:
        return await _from_token(conn, token, "header")
    cookie = conn.cookies.get(SESSION_COOKIE)
    if cookie:
        if not same_or_allowed_origin(conn, settings, required=True):
            raise ApiError(403, "forbidden", "Cross-origin request refused")
        return await _from_token(conn, cookie, "cookie")
    query_token = _last(conn, "token")
    if query_token is not None:
        if not settings.allow_query_token:
            raise UNAUTHORIZED
        return await _from_token(conn, query_token, "token")
    return StreamAuth(await deps.local_principal(conn), "local", None, "local")


async def recheck(ctx: ServerContext, auth: StreamAuth) -> Principal | None:
    """The socket's principal as it is now, or None when its credential was revoked, has
    expired or its user was deleted (close 4001). Thread access is the caller's check
    (``principal.may_access(thread.user_id)``, close 4003)."""
    return await credential_principal(ctx, auth.auth_type, auth.credential_digest)
