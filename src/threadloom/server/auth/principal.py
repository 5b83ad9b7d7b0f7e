"""Who a request is (spec 10 §10.2) and how a bearer credential becomes a principal.

``Credentials`` is the seam between the HTTP layer and wherever users and keys live. This
module ships ``StaticCredentials``: the static admin token of ``THREADLOOM_ADMIN_TOKEN`` plus
API keys given in code or configuration, held only as SHA-256 digests and compared in
constant time. The users, keys and sessions of the store are ``server.auth.accounts``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

Role = Literal["admin", "user", "api"]
AuthType = Literal["session", "api_key", "admin_token", "local", "oauth"]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    id: str
    username: str
    role: Role
    auth_type: AuthType
    has_user_row: bool
    permissions: tuple[str, ...] | None = None
    roles: tuple[str, ...] = ()
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def owner_id(self) -> str | None:
        """The ``user_id`` a thread this principal creates gets (system principals: None)."""
        return self.id if self.has_user_row else None

    def may_access(self, user_id: str | None) -> bool:
        """Spec 10 §10.6 rule 3: admins see every thread, others their own."""
        return self.is_admin or (self.has_user_row and user_id == self.id)

    def has_permission(self, name: str) -> bool:
        """Spec 10 §10.4: admin always; an explicit list decides; else ``user`` yes, ``api`` no."""
        if self.is_admin:
            return True
        if self.permissions is not None:
            return name in self.permissions
        return self.role == "user"


LOCAL_PRINCIPAL = Principal(
    id="local", username="local", role="admin", auth_type="local", has_user_row=False
)
ADMIN_TOKEN_PRINCIPAL = Principal(
    id="admin", username="admin", role="admin", auth_type="admin_token", has_user_row=False
)


class Credentials(Protocol):
    """Resolves bearer strings to principals."""

    async def authenticate(self, token: str) -> Principal | None:
        """The principal for ``token``, or None when it is unknown, expired or revoked."""
        ...

    async def authenticate_digest(self, auth_type: str, token_digest: str) -> Principal | None:
        """Re-check a credential known only by its kind and SHA-256 digest (the credential a
        WebSocket ticket was minted with, spec 10 §10.9 rule 2)."""
        ...

    def configured(self) -> bool:
        """Whether any credential exists (spec 10 §10.1: decides local development mode)."""
        ...

    async def refresh(self) -> None:
        """Bring ``configured()`` up to date (a store-backed resolver re-reads at most every
        few seconds); called before each request's local-mode decision."""
        ...


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    """``tlk_`` + 64 lowercase hex characters from the CSPRNG (spec 10 §10.3)."""
    return "tlk_" + secrets.token_hex(32)


def new_oauth_tokens() -> tuple[str, str]:
    """An OAuth access token (``tlo_``) and refresh token (``tlr_``), each 64 lowercase hex
    characters from the CSPRNG (spec 10 §10.15)."""
    return "tlo_" + secrets.token_hex(32), "tlr_" + secrets.token_hex(32)


def new_session_token() -> str:
    """``tls_`` + 64 lowercase hex characters from the CSPRNG (spec 10 §10.3)."""
    return "tls_" + secrets.token_hex(32)


@dataclass
class StaticCredentials:
    """The static admin token and API keys given at start-up."""

    admin_token: str | None = None
    _keys: dict[str, Principal] = field(default_factory=dict)

    def add_key(self, key: str, principal: Principal) -> None:
        """Accept ``key`` as ``principal`` (kept only as its digest)."""
        self._keys[digest(key)] = principal

    @classmethod
    def of(
        cls, admin_token: str | None = None, keys: Iterable[tuple[str, Principal]] = ()
    ) -> StaticCredentials:
        creds = cls(admin_token=admin_token)
        for key, principal in keys:
            creds.add_key(key, principal)
        return creds

    async def authenticate(self, token: str) -> Principal | None:
        if admin_token_matches(self.admin_token, token):
            return ADMIN_TOKEN_PRINCIPAL
        return self._keys.get(digest(token))

    async def authenticate_digest(self, auth_type: str, token_digest: str) -> Principal | None:
        if auth_type == "admin_token":
            return admin_digest_matches(self.admin_token, token_digest)
        if auth_type == "api_key":
            return self._keys.get(token_digest)
        return None

    def configured(self) -> bool:
        return self.admin_token is not None or bool(self._keys)

    async def refresh(self) -> None:
        return None


def admin_token_matches(admin_token: str | None, token: str) -> bool:
    """Constant-time comparison with the static admin token (spec 10 §10.3 rule 1)."""
    return admin_token is not None and hmac.compare_digest(
        token.encode("utf-8"), admin_token.encode("utf-8")
    )


def admin_digest_matches(admin_token: str | None, token_digest: str) -> Principal | None:
    """The admin principal when ``token_digest`` is the digest of the static admin token."""
    if admin_token is not None and hmac.compare_digest(digest(admin_token), token_digest):
        return ADMIN_TOKEN_PRINCIPAL
    return None


class Revocations:
    """How this node's open sockets learn that a credential was revoked or a user's access
    changed here: they re-check at once instead of at their next interval (spec 10 §10.9
    rule 5). Other nodes learn nothing and re-check on their timer."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.generation = 0
        """Counts ``notify()`` calls, so a waiter busy re-checking misses none."""

    def notify(self) -> None:
        """Wake every waiter."""
        self.generation += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float, seen: int | None = None) -> int:
        """Return after ``timeout`` seconds or at the next ``notify()``, whichever comes
        first — at once when ``notify()`` ran since the caller saw generation ``seen`` (a
        revocation during the caller's last re-check). Returns the generation to check at."""
        if seen is not None and seen != self.generation:
            return self.generation
        event = self._event
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
        return self.generation
