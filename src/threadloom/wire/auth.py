"""Signing in, the caller, stream tickets and API keys (spec 10 §10.5)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.patterns import API_PATH, NOT_BLANK, normalized_api_path
from threadloom.wire.problems import check, integer_from, refuse
from threadloom.wire.query import boolean

KEYS_QUERY = (boolean("all", "Admins: every user's keys"),)

# -- bodies ----------------------------------------------------------------------------------


def _password(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise refuse("is required", "Password is required")
    return value


def _username(value: Any) -> str:
    """Trimmed; anything but a text that is not blank is "required"."""
    name = value.strip() if isinstance(value, str) else ""
    if not name:
        raise refuse("is required", "Username is required")
    return name


class Login(Body):
    # spec 10 §10.5.2: the password is checked first, one problem answered
    one_problem: ClassVar[bool] = True

    password: Annotated[str, check(_password)] = Field(min_length=1)
    username: Annotated[str, check(_username)] = Field(pattern=NOT_BLANK, description="trimmed")


def _api_path(value: Any) -> str:
    if not normalized_api_path(value):
        raise refuse(
            "must be a normalized /api/* path", "pathname must be a normalized /api/* path."
        )
    return str(value)


class TicketRequest(Body):
    model_config = examples({"pathname": "/api/events"})

    pathname: Annotated[str, check(_api_path)] = Field(
        pattern=API_PATH, description="the normalized /api/* path the ticket opens"
    )


def _key_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise refuse("must be a string of 1 to 100 characters")
    return value


def _user_id(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse("must be a string")
    return value


class CreateApiKey(Body):
    model_config = examples({"name": "ci", "expires_in_days": 30})

    name: Annotated[str, check(_key_name)] = Field(
        min_length=1, max_length=100, pattern=NOT_BLANK, description="trimmed"
    )
    expires_in_days: Annotated[int | None, check(integer_from(1, 3650))] = Field(
        None, ge=1, le=3650
    )
    user_id: Annotated[str | None, check(_user_id)] = None


# -- answers ---------------------------------------------------------------------------------


class LoginUser(Answer):
    id: str
    username: str
    role: str


class LoggedIn(Answer):
    token: str
    user: LoginUser


class Success(Answer):
    success: bool


class Caller(Answer):
    id: str | None
    username: str | None
    role: str
    permissions: list[str] | None
    roles: list[str]
    display_name: str | None
    email: str | None
    avatar_url: str | None


class Me(Answer):
    user: Caller
    authType: str


class AuthConfig(Answer):
    localPassword: bool
    authRequired: bool
    localMode: bool
    hosted: bool
    github: bool
    google: bool
    platformConnected: bool


class Ticket(Answer):
    ticket: str
    expires_in: int


class Revoked(Answer):
    revoked: bool


class ApiKey(Answer):
    """An API key as listed: never the key itself."""

    id: str
    name: str
    key_prefix: str
    last_five: str
    user_id: str
    created_at: int | None
    last_used_at: int | None
    expires_at: int | None


class OAuthGrant(Answer):
    """An MCP host the user allowed (spec 10 §10.15.5): never its tokens."""

    id: str
    client_id: str
    client_name: str | None
    scope: str
    resource: str
    issued_at: int
    expires_at: int


class OAuthGrantList(Answer):
    grants: list[OAuthGrant]


class ApiKeyList(Answer):
    keys: list[ApiKey]


class ApiKeyCreated(Answer):
    """The new key, shown this once."""

    key: str
    id: str
    name: str
    key_prefix: str
    last_five: str
    user_id: str
    created_at: int | None
    expires_at: int | None
