"""Users, API keys and sessions kept in the store (spec 10 §10.3, §10.5).

``StoreCredentials`` is the ``Credentials`` of a real deployment: it resolves API keys and
session tokens by their SHA-256 digest on every request (an indexed lookup), honours the
static admin token, and records a key's use at most once a minute. The helpers below are
shared by the HTTP routes and the ``threadloom users`` / ``keys`` commands.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from threadloom.server.auth.principal import (
    ADMIN_TOKEN_PRINCIPAL,
    AuthType,
    Principal,
    Role,
    admin_digest_matches,
    admin_token_matches,
    digest,
    new_api_key,
    new_session_token,
)
from threadloom.store.base import ApiKeyRow, SessionRow, Store, UserRow

SESSION_LIFETIME_S = 30 * 24 * 3600
TOUCH_INTERVAL_US = 60_000_000
CONFIGURED_TTL_S = 5.0
ROLES: tuple[Role, ...] = ("admin", "user", "api")


def now_us() -> int:
    return time.time_ns() // 1000


def principal_for(user: UserRow, auth_type: AuthType) -> Principal:
    """The principal a user row authenticates as (its values at request time)."""
    role: Role = user.role if user.role in ROLES else "user"
    return Principal(
        id=user.id,
        username=user.username,
        role=role,
        auth_type=auth_type,
        has_user_row=True,
        permissions=user.permissions,
        roles=user.roles,
        display_name=user.display_name,
        email=user.email,
        avatar_url=user.avatar_url,
    )


class StoreCredentials:
    """Credentials backed by the store's users, API keys and sessions (plus the static admin
    token, which is never stored)."""

    def __init__(
        self,
        store: Store,
        admin_token: str | None = None,
        clock: Callable[[], int] = now_us,
    ) -> None:
        self.store = store
        self.admin_token = admin_token
        self.clock = clock
        self._configured: bool | None = None
        self._checked_at = 0.0

    async def authenticate(self, token: str) -> Principal | None:
        if admin_token_matches(self.admin_token, token):
            return ADMIN_TOKEN_PRINCIPAL
        if token.startswith("tlk_"):
            return await self.authenticate_digest("api_key", digest(token))
        if token.startswith("tls_"):
            return await self.authenticate_digest("session", digest(token))
        if token.startswith("tlo_"):
            return await self.authenticate_digest("oauth", digest(token))
        return None

    async def authenticate_digest(self, auth_type: str, token_digest: str) -> Principal | None:
        now = self.clock()
        if auth_type == "admin_token":
            return admin_digest_matches(self.admin_token, token_digest)
        if auth_type == "api_key":
            found = await self.store.api_key_by_digest(token_digest)
            if found is None:
                return None
            key, user = found
            if key.expires_at_us is not None and now >= key.expires_at_us:
                return None
            if key.last_used_at_us is None or now - key.last_used_at_us >= TOUCH_INTERVAL_US:
                await self.store.touch_api_key(key.id, now)
            return principal_for(user, "api_key")
        if auth_type == "session":
            session = await self.store.session_by_digest(token_digest)
            if session is None or now >= session[0].expires_at_us:
                return None
            return principal_for(session[1], "session")
        if auth_type == "oauth":
            grant = await self.store.oauth_token_by_digest(token_digest)
            if grant is None or now >= grant[0].expires_at_us:
                return None
            return principal_for(grant[1], "oauth")
        return None

    def configured(self) -> bool:
        """Fails closed: until the first ``refresh()`` the answer is True."""
        return self.admin_token is not None or self._configured is not False

    async def refresh(self) -> None:
        if self.admin_token is not None:
            return
        fresh = time.monotonic() - self._checked_at < CONFIGURED_TTL_S
        if self._configured is not None and fresh:
            return
        self._configured = await self.store.has_credentials()
        self._checked_at = time.monotonic()

    def invalidate(self) -> None:
        """Re-read ``configured()`` at the next request (a user or key was just created)."""
        self._configured = None


# -- shared by the routes and the CLI ------------------------------------------------------


@dataclass(frozen=True)
class IssuedKey:
    key: str
    row: ApiKeyRow


async def issue_api_key(
    store: Store, user_id: str, name: str, expires_in_days: int | None = None
) -> IssuedKey:
    """Create an API key for ``user_id``; the key text exists only in the answer."""
    key = new_api_key()
    created = now_us()
    row = ApiKeyRow(
        id=str(uuid.uuid4()),
        user_id=user_id,
        name=name,
        key_prefix="tlk_",
        last_five=key[-5:],
        created_at_us=created,
        expires_at_us=(
            created + expires_in_days * 86_400_000_000 if expires_in_days is not None else None
        ),
    )
    await store.create_api_key(row, digest(key))
    return IssuedKey(key, row)


async def open_session(store: Store, user_id: str) -> tuple[str, SessionRow]:
    """A new session token for ``user_id`` (stored only as its digest)."""
    token = new_session_token()
    created = now_us()
    session = SessionRow(
        user_id=user_id,
        created_at_us=created,
        expires_at_us=created + SESSION_LIFETIME_S * 1_000_000,
    )
    await store.create_session(digest(token), session)
    return token, session


def new_user(
    username: str,
    role: str = "user",
    *,
    password_hash: str | None = None,
    permissions: tuple[str, ...] | None = None,
    roles: tuple[str, ...] = (),
    display_name: str | None = None,
    email: str | None = None,
    avatar_url: str | None = None,
    user_id: str | None = None,
) -> UserRow:
    return UserRow(
        id=user_id or str(uuid.uuid4()),
        username=username,
        role=role,
        created_at_us=now_us(),
        password_hash=password_hash,
        permissions=permissions,
        roles=roles,
        display_name=display_name,
        email=email,
        avatar_url=avatar_url,
    )


def seconds(us: int | None) -> int | None:
    return None if us is None else us // 1_000_000


def user_json(user: UserRow) -> dict[str, object]:
    """The ``User`` shape of spec 10 §10.5.8 (never the password hash)."""
    return {
        "id": user.id,
        "username": user.username,
        "role": user.role,
        "permissions": list(user.permissions) if user.permissions is not None else None,
        "roles": list(user.roles),
        "display_name": user.display_name,
        "email": user.email,
        "avatar_url": user.avatar_url,
        "created_at": seconds(user.created_at_us),
    }


def key_json(key: ApiKeyRow) -> dict[str, object]:
    """An API key as listed (spec 10 §10.5.7): never the key itself."""
    return {
        "id": key.id,
        "name": key.name,
        "key_prefix": key.key_prefix,
        "last_five": key.last_five,
        "user_id": key.user_id,
        "created_at": seconds(key.created_at_us),
        "last_used_at": seconds(key.last_used_at_us),
        "expires_at": seconds(key.expires_at_us),
    }
