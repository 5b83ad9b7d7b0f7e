"""Who a request is (spec 10 §10.2) and how a bearer credential becomes a principal.

``Credentials`` is the seam between the HTTP layer and wherever users and keys live. This
module ships ``StaticCredentials``: the static admin token of ``THREADLOOM_ADMIN_TOKEN`` plus
API keys given in code or configuration, held only as SHA-256 digests and compared in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

Role = Literal["admin", "user", "api"]
AuthType = Literal["session", "api_key", "admin_token", "local"]


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

    def configured(self) -> bool:
        """Whether any credential exists (spec 10 §10.1: decides local development mode)."""
        ...


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_api_key() -> str:
    """``tlk_`` + 64 lowercase hex characters from the CSPRNG (spec 10 §10.3)."""
    return "tlk_" + secrets.token_hex(32)


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
        if self.admin_token is not None and hmac.compare_digest(
            token.encode("utf-8"), self.admin_token.encode("utf-8")
        ):
            return ADMIN_TOKEN_PRINCIPAL
        return self._keys.get(digest(token))

    def configured(self) -> bool:
        return self.admin_token is not None or bool(self._keys)
