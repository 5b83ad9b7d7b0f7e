"""The OAuth authorization server's clients, codes and tokens of both stores (spec 10
§10.15). Codes and tokens are kept as SHA-256 digests. Taking a code or a refresh token is
one conditional write, so of two requests presenting the same one at once, one wins."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from threadloom.records import OAuthClient, OAuthCode, OAuthToken
from threadloom.store.core import auth
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock, UserRow

CODE_COLUMNS = (
    "code_digest, client_id, user_id, redirect_uri, scope, resource, code_challenge,"
    " code_challenge_method, expires_at_us, used"
)
TOKEN_COLUMNS = (
    "access_digest, refresh_digest, grant_id, client_id, user_id, scope, resource,"
    " issued_at_us, expires_at_us, refresh_expires_at_us"
)
USED_CODES_KEPT_US = 3_600_000_000
"""A used or expired code is kept an hour past its expiry, so its reuse is still known."""


def _code(row: tuple[Any, ...]) -> OAuthCode:
    return OAuthCode(
        code_digest=row[0],
        client_id=row[1],
        user_id=row[2],
        redirect_uri=row[3],
        scope=row[4],
        resource=row[5],
        code_challenge=row[6],
        code_challenge_method=row[7],
        expires_at_us=row[8],
        used=bool(row[9]),
    )


def _token(row: tuple[Any, ...]) -> OAuthToken:
    return OAuthToken(*row)


# -- writes (conn, clock, *args) -------------------------------------------------------------


def create_oauth_client(conn: Conn, clock: Clock, client: OAuthClient) -> None:
    conn.execute(
        "INSERT INTO oauth_clients(client_id, metadata, secret_digest, created_at_us)"
        " VALUES (?,?,?,?)",
        (client.client_id, client.metadata, client.secret_digest, client.created_at_us),
    )


def create_oauth_code(conn: Conn, clock: Clock, code: OAuthCode) -> None:
    conn.execute("DELETE FROM oauth_codes WHERE expires_at_us < ?", (clock() - USED_CODES_KEPT_US,))
    conn.execute(
        f"INSERT INTO oauth_codes({CODE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,0)",
        (
            code.code_digest,
            code.client_id,
            code.user_id,
            code.redirect_uri,
            code.scope,
            code.resource,
            code.code_challenge,
            code.code_challenge_method,
            code.expires_at_us,
        ),
    )


def take_oauth_code(conn: Conn, clock: Clock, code_digest: str) -> OAuthCode | None:
    """Mark the code used and return it; None when it is unknown. A code already used is
    returned with ``used`` set, after the tokens its grant issued were deleted (RFC 6749
    §4.1.2: a code used twice revokes what it gave)."""
    row = conn.execute(
        f"UPDATE oauth_codes SET used = 1 WHERE code_digest = ? AND used = 0"
        f" RETURNING {CODE_COLUMNS}",
        (code_digest,),
    ).fetchone()
    if row is not None:
        return replace(_code(row), used=False)  # RETURNING gives the row as updated
    row = conn.execute(
        f"SELECT {CODE_COLUMNS} FROM oauth_codes WHERE code_digest = ?", (code_digest,)
    ).fetchone()
    if row is None:
        return None
    conn.execute("DELETE FROM oauth_tokens WHERE grant_id = ?", (code_digest,))
    return _code(row)


def create_oauth_token(conn: Conn, clock: Clock, token: OAuthToken) -> bool:
    """Store a grant's new token; False (nothing stored) when the user no longer exists or
    the grant was revoked meanwhile (its code reused)."""
    if auth.get_user(conn, token.user_id) is None:
        return False
    conn.execute("DELETE FROM oauth_tokens WHERE refresh_expires_at_us < ?", (clock(),))
    conn.execute("DELETE FROM oauth_spent_refresh WHERE expires_at_us < ?", (clock(),))
    conn.execute(
        f"INSERT INTO oauth_tokens({TOKEN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            token.access_digest,
            token.refresh_digest,
            token.grant_id,
            token.client_id,
            token.user_id,
            token.scope,
            token.resource,
            token.issued_at_us,
            token.expires_at_us,
            token.refresh_expires_at_us,
        ),
    )
    return True


def take_oauth_refresh(conn: Conn, clock: Clock, refresh_digest: str) -> OAuthToken | None:
    """Delete the row of this refresh token (its access token with it) and return it: a
    refresh token is used once (rotation), and remembered as spent until it would have
    expired. None when unknown; a spent one presented again ends the rest of its grant
    (OAuth 2.1 §4.3.1: one of two holders of a refresh token is not the client)."""
    row = conn.execute(
        f"DELETE FROM oauth_tokens WHERE refresh_digest = ? RETURNING {TOKEN_COLUMNS}",
        (refresh_digest,),
    ).fetchone()
    if row is not None:
        token = _token(row)
        conn.execute(
            "INSERT INTO oauth_spent_refresh(refresh_digest, grant_id, expires_at_us)"
            " VALUES (?,?,?) ON CONFLICT DO NOTHING",
            (refresh_digest, token.grant_id, token.refresh_expires_at_us),
        )
        return token
    spent = conn.execute(
        "SELECT grant_id FROM oauth_spent_refresh WHERE refresh_digest = ?", (refresh_digest,)
    ).fetchone()
    if spent is not None:
        conn.execute("DELETE FROM oauth_tokens WHERE grant_id = ?", (spent[0],))
    return None


def revoke_oauth_token(conn: Conn, clock: Clock, token_digest: str) -> OAuthToken | None:
    """Delete the row whose access or refresh token has this digest (RFC 7009: revoking
    either ends both); the row deleted, or None."""
    row = conn.execute(
        f"DELETE FROM oauth_tokens WHERE access_digest = ? OR refresh_digest = ?"
        f" RETURNING {TOKEN_COLUMNS}",
        (token_digest, token_digest),
    ).fetchone()
    return _token(row) if row is not None else None


def revoke_oauth_grant(conn: Conn, clock: Clock, user_id: str, grant_id: str) -> bool:
    """Delete the grant ``grant_id`` of ``user_id`` (its token rows and, if unused, its
    code); False when the user has no such grant."""
    deleted = conn.execute(
        "DELETE FROM oauth_tokens WHERE grant_id = ? AND user_id = ?", (grant_id, user_id)
    ).rowcount
    return deleted > 0


# -- reads (conn, *args) ---------------------------------------------------------------------


def get_oauth_client(conn: Conn, client_id: str) -> OAuthClient | None:
    row = conn.execute(
        "SELECT client_id, metadata, created_at_us, secret_digest FROM oauth_clients"
        " WHERE client_id = ?",
        (client_id,),
    ).fetchone()
    return OAuthClient(*row) if row is not None else None


def get_oauth_refresh(conn: Conn, refresh_digest: str) -> OAuthToken | None:
    row = conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM oauth_tokens WHERE refresh_digest = ?", (refresh_digest,)
    ).fetchone()
    return _token(row) if row is not None else None


def oauth_token_by_digest(conn: Conn, access_digest: str) -> tuple[OAuthToken, UserRow] | None:
    """The token and its user by the access token's digest (expiry is the caller's check)."""
    row = conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM oauth_tokens WHERE access_digest = ?", (access_digest,)
    ).fetchone()
    if row is None:
        return None
    token = _token(row)
    user = auth.get_user(conn, token.user_id)
    return (token, user) if user is not None else None


def list_oauth_grants(conn: Conn, user_id: str) -> list[tuple[OAuthToken, OAuthClient | None]]:
    """The user's live grants (their token rows, a row a grant), newest first, each with its
    client."""
    rows = conn.execute(
        f"SELECT {TOKEN_COLUMNS} FROM oauth_tokens WHERE user_id = ?"
        " ORDER BY issued_at_us DESC, access_digest",
        (user_id,),
    ).fetchall()
    tokens = [_token(r) for r in rows]
    return [(t, get_oauth_client(conn, t.client_id)) for t in tokens]
