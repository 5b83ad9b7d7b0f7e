"""The accounts part of the Store protocol (spec 10): users, API keys, sessions and
tickets, kept by value digests, never the secrets. ``threadloom.store.base.Store`` is an
``AccountStore``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from threadloom.records import OAuthClient, OAuthCode, OAuthToken
from threadloom.store.shapes import ApiKeyRow, SessionRow, TicketRow, UserPatch, UserRow


class AccountStore(Protocol):
    """Users and their credentials (spec 10)."""

    # -- users and credentials (spec 10) ---------------------------------------------
    async def create_user(self, user: UserRow) -> UserRow:
        """Insert a user. A taken username → ``UsernameTaken`` (nothing stored)."""
        ...

    async def get_user(self, user_id: str) -> UserRow | None: ...

    async def get_user_by_name(self, username: str) -> UserRow | None: ...

    async def list_users(self) -> list[UserRow]:
        """Every user, ordered by username."""
        ...

    async def update_user(self, user_id: str, patch: UserPatch) -> UserRow | None:
        """Apply ``patch`` (None for an unknown user). Demoting the last admin →
        ``LastAdmin``; a password change deletes the user's sessions in the same
        transaction."""
        ...

    async def rehash_password(self, user_id: str, old: str, new: str) -> bool:
        """Replace the password hash ``old`` by ``new``, a new hash of the same password
        (a login upgrading an old scheme), only while it is still ``old``: a password
        changed meanwhile wins. Sessions are kept. Whether it was replaced."""
        ...

    async def delete_user(self, user_id: str) -> bool:
        """Delete a user with their sessions and API keys (their threads keep ``user_id``).
        False for an unknown user; deleting the last admin → ``LastAdmin``."""
        ...

    async def has_credentials(self) -> bool:
        """Whether any user row or API key exists (spec 10 §10.1)."""
        ...

    async def create_api_key(self, key: ApiKeyRow, key_digest: str) -> ApiKeyRow: ...

    async def list_api_keys(self, user_id: str | None) -> list[ApiKeyRow]:
        """Keys of ``user_id`` (every key when None), oldest first."""
        ...

    async def get_api_key(self, key_id: str) -> ApiKeyRow | None: ...

    async def delete_api_key(self, key_id: str) -> bool: ...

    async def api_key_by_digest(self, key_digest: str) -> tuple[ApiKeyRow, UserRow] | None:
        """The key and its user by the key's digest (expiry is the caller's check)."""
        ...

    async def delete_api_key_by_digest(self, key_digest: str) -> bool: ...

    async def touch_api_key(self, key_id: str, used_at_us: int) -> None:
        """Record a use of the key (callers write at most once a minute per key)."""
        ...

    async def create_session(self, token_digest: str, session: SessionRow) -> None: ...

    async def session_by_digest(self, token_digest: str) -> tuple[SessionRow, UserRow] | None:
        """The session and its user by the token's digest (expiry is the caller's check)."""
        ...

    async def delete_session(self, token_digest: str) -> bool: ...

    async def create_ticket(self, ticket_digest: str, ticket: TicketRow) -> None:
        """Store a ticket; tickets expired for a while are pruned in the same transaction."""
        ...

    async def take_ticket(self, ticket_digest: str) -> TicketRow | None:
        """Delete the ticket and return it (None when unknown): a ticket is used once."""
        ...

    # -- the OAuth authorization server (spec 10 §10.15) ---------------------------------
    async def create_oauth_client(self, client: OAuthClient) -> None:
        """Store a client registered with RFC 7591."""
        ...

    async def get_oauth_client(self, client_id: str) -> OAuthClient | None: ...

    async def create_oauth_code(self, code: OAuthCode) -> None:
        """Store an authorization code (codes long expired are pruned meanwhile)."""
        ...

    async def take_oauth_code(self, code_digest: str) -> OAuthCode | None:
        """Mark the code used and return it (None when unknown). A code used before comes
        back with ``used`` set, and the tokens its grant issued are deleted."""
        ...

    async def create_oauth_token(self, token: OAuthToken) -> bool:
        """Store a grant's token; False (nothing stored) when its user no longer exists."""
        ...

    async def take_oauth_refresh(self, refresh_digest: str) -> OAuthToken | None:
        """Delete and return the row of this refresh token (a refresh rotates it)."""
        ...

    async def get_oauth_refresh(self, refresh_digest: str) -> OAuthToken | None: ...

    async def revoke_oauth_token(self, token_digest: str) -> OAuthToken | None:
        """Delete the row whose access or refresh token has this digest; it, or None."""
        ...

    async def oauth_token_by_digest(self, access_digest: str) -> tuple[OAuthToken, UserRow] | None:
        """The token and its user by the access token's digest (expiry is the caller's
        check)."""
        ...

    async def list_oauth_grants(self, user_id: str) -> list[tuple[OAuthToken, OAuthClient | None]]:
        """The user's live grants (a token row each), newest first, with their clients."""
        ...

    async def revoke_oauth_grant(self, user_id: str, grant_id: str) -> bool:
        """End the grant ``grant_id`` of ``user_id``; False when they have no such grant."""
        ...

    # -- login attempts (spec 10 §10.11) -----------------------------------------------
    async def take_attempt(self, attempt_id: str, windows: Sequence[tuple[str, int, int]]) -> int:
        """Count the attempt ``attempt_id`` under each ``(key digest, limit, window µs)`` of
        ``windows`` — in all, or in none when one already holds ``limit`` attempts of its
        last ``window`` µs (as every node sees them). 0 when counted, else the µs until the
        fullest window has room. Windows are an hour at most."""
        ...

    async def give_back_attempt(self, attempt_id: str) -> None:
        """Uncount the attempt ``attempt_id`` (a no-op once it left its windows)."""
        ...
