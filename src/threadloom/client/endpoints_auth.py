"""One declarative definition per route of spec 10 (auth, API keys, users), as ``endpoints.py``
does for spec 08. Retries follow spec 11 §11.2.5: only GETs and PATCH repeat after a transport
error; login (429 included), logout, tickets, creations and deletions never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

import httpx

from threadloom.client.calls import (
    UNSET,
    Call,
    Unset,
    json_body,
    list_of,
    model_of,
    query_params,
)
from threadloom.client.models import (
    ApiKey,
    AuthConfig,
    CreatedApiKey,
    LoginResult,
    Me,
    User,
    UserQuota,
    WebSocketTicket,
)

ApiKeys = list[ApiKey]
Users = list[User]
Role = Literal["admin", "user", "api"]


def _done(response: httpx.Response) -> None:
    """``{"success": true}`` / ``{"revoked": true}``: nothing to return."""
    return None


class AuthEndpoints:
    def me(self) -> Call[Me]:
        return Call("GET", "/api/auth/me", model_of(Me))

    def config(self) -> Call[AuthConfig]:
        return Call("GET", "/api/auth/config", model_of(AuthConfig))

    def login(self, username: str, password: str) -> Call[LoginResult]:
        body = {"username": username, "password": password}
        return Call("POST", "/api/auth/login", model_of(LoginResult), json=body, retry="never")

    def logout(self) -> Call[None]:
        return Call("POST", "/api/auth/logout", _done, json={}, retry="never")

    def websocket_ticket(self, pathname: str) -> Call[WebSocketTicket]:
        body = {"pathname": pathname}
        path = "/api/auth/websocket-ticket"
        return Call("POST", path, model_of(WebSocketTicket), json=body, retry="never")


class ApiKeysEndpoints:
    def list(self, *, all: bool = False) -> Call[ApiKeys]:
        params = query_params(all=True) if all else None
        return Call("GET", "/api/api-keys", list_of(ApiKey, "keys"), params=params)

    def create(
        self, name: str, *, expires_in_days: int | None = None, user_id: str | None = None
    ) -> Call[CreatedApiKey]:
        body: dict[str, object] = {"name": name}
        if expires_in_days is not None:
            body["expires_in_days"] = expires_in_days
        if user_id is not None:
            body["user_id"] = user_id
        return Call("POST", "/api/api-keys", model_of(CreatedApiKey), json=body, retry="never")

    def delete(self, key_id: str) -> Call[None]:
        path = f"/api/api-keys/{quote(key_id, safe='')}"
        return Call("DELETE", path, _done, retry="never")

    def revoke_current(self) -> Call[None]:
        return Call("DELETE", "/api/auth/current-key", _done, retry="never")


def _user_fields(
    password: str | Unset | None,
    role: Role | Unset,
    permissions: Sequence[str] | Unset | None,
    roles: Sequence[str] | Unset,
    display_name: str | Unset | None,
    email: str | Unset | None,
    avatar_url: str | Unset | None,
) -> dict[str, Any]:
    """The body fields a user create and a user update share (unset ones left out)."""
    return json_body(
        password=password,
        role=role,
        permissions=permissions if not isinstance(permissions, Sequence) else list(permissions),
        roles=roles if roles is UNSET else list(roles),
        display_name=display_name,
        email=email,
        avatar_url=avatar_url,
    )


class UsersEndpoints:
    def list(self) -> Call[Users]:
        return Call("GET", "/api/users", list_of(User, "users"))

    def create(
        self,
        username: str,
        *,
        password: str | Unset | None = UNSET,
        role: Role | Unset = UNSET,
        permissions: Sequence[str] | Unset | None = UNSET,
        roles: Sequence[str] | Unset = UNSET,
        display_name: str | Unset | None = UNSET,
        email: str | Unset | None = UNSET,
        avatar_url: str | Unset | None = UNSET,
    ) -> Call[User]:
        fields = _user_fields(password, role, permissions, roles, display_name, email, avatar_url)
        body = {"username": username, **fields}
        return Call("POST", "/api/users", model_of(User, "user"), json=body, retry="never")

    def update(
        self,
        user_id: str,
        *,
        password: str | Unset | None = UNSET,
        role: Role | Unset = UNSET,
        permissions: Sequence[str] | Unset | None = UNSET,
        roles: Sequence[str] | Unset = UNSET,
        display_name: str | Unset | None = UNSET,
        email: str | Unset | None = UNSET,
        avatar_url: str | Unset | None = UNSET,
    ) -> Call[User]:
        body = _user_fields(password, role, permissions, roles, display_name, email, avatar_url)
        path = f"/api/users/{quote(user_id, safe='')}"
        return Call("PATCH", path, model_of(User, "user"), json=body)

    def delete(self, user_id: str) -> Call[None]:
        path = f"/api/users/{quote(user_id, safe='')}"
        return Call("DELETE", path, _done, retry="never")

    def quota(self, user_id: str) -> Call[UserQuota]:
        """The user's quota and its window's spend (spec 15 §15.8)."""
        path = f"/api/users/{quote(user_id, safe='')}/quota"
        return Call("GET", path, model_of(UserQuota))

    def set_quota(
        self,
        user_id: str,
        *,
        usd: float | Unset | None = UNSET,
        tokens: int | Unset | None = UNSET,
        requests: int | Unset | None = UNSET,
        window: Literal["hour", "day", "week", "month"] | Unset = UNSET,
        warn_at: float | Unset = UNSET,
    ) -> Call[UserQuota]:
        body = json_body(usd=usd, tokens=tokens, requests=requests, window=window, warn_at=warn_at)
        path = f"/api/users/{quote(user_id, safe='')}/quota"
        return Call("PUT", path, model_of(UserQuota), json=body)

    def delete_quota(self, user_id: str) -> Call[UserQuota]:
        path = f"/api/users/{quote(user_id, safe='')}/quota"
        return Call("DELETE", path, model_of(UserQuota))
