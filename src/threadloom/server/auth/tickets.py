"""WebSocket tickets (spec 10 §10.5.6, §10.9 rule 2).

A ticket is 64 lowercase hex characters, stored only as its SHA-256 digest, valid 30 s,
bound to one exact pathname and usable once. It carries the credential it was minted with
(its kind and digest); at use that credential is checked again, so a revoked key or session
makes its tickets worthless.

Sockets and SSE requests redeem tickets through ``stream.auth.authenticate_stream``, which
calls :func:`take_ticket` (the principal and the minting credential, for the socket's
re-checks). Tickets are accepted only on stream, log and event socket upgrades and SSE
requests.
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from threadloom.server.auth.principal import LOCAL_PRINCIPAL, Principal, digest
from threadloom.store.base import TicketRow

if TYPE_CHECKING:
    from threadloom.server.deps import ServerContext

TICKET_SECONDS = 30
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


async def mint_ticket(
    ctx: ServerContext, who: Principal, credential_digest: str | None, pathname: str
) -> str:
    """A new ticket for ``pathname`` carrying ``who`` and the digest of its credential."""
    ticket = secrets.token_hex(32)
    await ctx.runtime.store.create_ticket(
        digest(ticket),
        TicketRow(
            pathname=pathname,
            auth_type=who.auth_type,
            principal_id=who.id,
            credential_digest=credential_digest,
            expires_at_us=ctx.clock() + TICKET_SECONDS * 1_000_000,
        ),
    )
    return ticket


async def take_ticket(
    ctx: ServerContext, ticket: str, pathname: str
) -> tuple[Principal, TicketRow] | None:
    """The principal of ``ticket`` and its row (the minting credential, for the re-checks
    of an open socket) when it is valid for ``pathname`` (the request path, query
    excluded); None otherwise. Presenting a ticket always consumes it."""
    if not _HEX64.match(ticket):
        return None
    row = await ctx.runtime.store.take_ticket(digest(ticket))
    if row is None or row.pathname != pathname or ctx.clock() >= row.expires_at_us:
        return None
    who = await credential_principal(ctx, row.auth_type, row.credential_digest)
    if who is None or who.id != row.principal_id:
        return None
    return who, row


async def credential_principal(
    ctx: ServerContext, auth_type: str, credential_digest: str | None
) -> Principal | None:
    """The principal of a credential known by kind and digest, now (None: revoked, expired,
    or local development mode is off)."""
    if auth_type == "local":
        await ctx.credentials.refresh()
        return LOCAL_PRINCIPAL if ctx.local_mode else None
    if credential_digest is None:
        return None
    return await ctx.credentials.authenticate_digest(auth_type, credential_digest)
