"""User administration (spec 10 §10.5.8): the rules of a username, an application role
and a password, the bodies that create and patch a user, and the user as answered."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.problems import check, refuse

USERNAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
APP_ROLE = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
MIN_PASSWORD_LENGTH = 12
UserRole = Literal["admin", "user", "api"]
Permission = Literal["logs"]
KNOWN_PERMISSIONS: tuple[str, ...] = get_args(Permission)
MAX_PROFILE = 2048
"""The longest ``display_name``, ``email`` or ``avatar_url``."""


def _password(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) < MIN_PASSWORD_LENGTH):
        raise refuse(
            f"must be at least {MIN_PASSWORD_LENGTH} characters",
            f"Password must be at least {MIN_PASSWORD_LENGTH} characters",
        )
    return value


def _role(value: Any) -> str:
    if value not in get_args(UserRole):
        raise refuse("must be one of admin, user, api")
    return str(value)


def _permissions(value: Any) -> list[str] | None:
    if value is not None and (
        not isinstance(value, list) or any(p not in KNOWN_PERMISSIONS for p in value)
    ):
        raise refuse("must be null or a list of known permissions (logs)")
    return value


def _app_roles(value: Any) -> list[str]:
    if (
        not isinstance(value, list)
        or len(value) > 64
        or any(not isinstance(r, str) or not APP_ROLE.match(r) for r in value)
    ):
        raise refuse("must be at most 64 strings of 1-128 characters of [A-Za-z0-9._:/-]")
    return value


def _profile(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > MAX_PROFILE):
        raise refuse("must be a string or null")
    return value


def _username(value: Any) -> str:
    if not isinstance(value, str) or not USERNAME.match(value):
        raise refuse("must be 1-64 characters of [A-Za-z0-9._-]")
    return value


Profile = Annotated[str | None, check(_profile)]


class PatchUser(Body):
    # only the fields present change (model_fields_set); the problems in this order
    model_config = examples({"display_name": "Example"}, {"role": "user"})

    password: Annotated[str | None, check(_password)] = Field(None, min_length=MIN_PASSWORD_LENGTH)
    role: Annotated[UserRole | Absent, check(_role)] = None
    permissions: Annotated[list[Permission] | None, check(_permissions)] = None
    roles: Annotated[
        Annotated[list[Annotated[str, Field(pattern=APP_ROLE.pattern)]], Field(max_length=64)]
        | Absent,
        check(_app_roles),
    ] = None
    display_name: Profile = None
    email: Profile = None
    avatar_url: Profile = None


class _Username(Body):
    username: Annotated[str, check(_username)] = Field(pattern=USERNAME.pattern)


class CreateUser(PatchUser, _Username):
    # the username first (bases' fields are ordered from the last base)
    model_config = examples(
        {"username": "example", "password": "long enough secret", "role": "user"}
    )


class User(Answer):
    id: str
    username: str
    role: str
    permissions: list[str] | None
    roles: list[str]
    display_name: str | None
    email: str | None
    avatar_url: str | None
    created_at: int | None


class UserList(Answer):
    users: list[User]


class UserAnswer(Answer):
    user: User
