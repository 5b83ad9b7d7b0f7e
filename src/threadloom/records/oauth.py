"""The OAuth authorization server's records (spec 10 §10.15): registered clients, issued
authorization codes and the grants' tokens. Secrets are never held here: codes and tokens
are kept as the SHA-256 digests of their values, a client secret likewise."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """A client registered with RFC 7591 dynamic registration. ``metadata`` is the client
    metadata as registered (JSON text: redirect URIs, name, grant types, auth method…);
    ``secret_digest`` is None for a public client (``token_endpoint_auth_method: none``)."""

    client_id: str
    metadata: str
    created_at_us: int
    secret_digest: str | None = None


@dataclass(frozen=True, slots=True)
class OAuthCode:
    """An authorization code issued to ``client_id`` for ``user_id`` (single use, bound to
    its redirect URI, PKCE challenge and resource indicator)."""

    code_digest: str
    client_id: str
    user_id: str
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    code_challenge_method: str
    expires_at_us: int
    used: bool = False


@dataclass(frozen=True, slots=True)
class OAuthToken:
    """An access token with its refresh token: one row of a grant. ``grant_id`` is the
    digest of the authorization code the grant began with, kept across refreshes, so a
    reused code can revoke what it issued."""

    access_digest: str
    refresh_digest: str
    grant_id: str
    client_id: str
    user_id: str
    scope: str
    resource: str
    issued_at_us: int
    expires_at_us: int
    refresh_expires_at_us: int
