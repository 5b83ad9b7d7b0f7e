"""Signing in, the caller, stream tickets and API keys (spec 10 §10.5)."""

from __future__ import annotations

from pydantic import Field

from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.patterns import API_PATH, NOT_BLANK
from threadloom.wire.query import boolean

KEYS_QUERY = (boolean("all", "Admins: every user's keys"),)

# -- bodies ----------------------------------------------------------------------------------


class Login(Body):
    username: str = Field(pattern=NOT_BLANK, description="trimmed")
    password: str = Field(min_length=1)


class TicketRequest(Body):
    model_config = examples({"pathname": "/api/events"})

    pathname: str = Field(
        pattern=API_PATH, description="the normalized /api/* path the ticket opens"
    )


class CreateApiKey(Body):
    model_config = examples({"name": "ci", "expires_in_days": 30})

    name: str = Field(min_length=1, max_length=100, pattern=NOT_BLANK, description="trimmed")
    expires_in_days: int | None = Field(None, ge=1, le=3650)
    user_id: str | None = None


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
