"""User administration (spec 10 §10.5.8): the rules of a username, an application role
and a password, the bodies that create and patch a user, and the user as answered."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from threadloom.wire.model import Absent, Answer, Body, examples

USERNAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
APP_ROLE = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
MIN_PASSWORD_LENGTH = 12


class PatchUser(Body):
    model_config = examples({"display_name": "Example"}, {"role": "user"})

    password: str | None = Field(None, min_length=MIN_PASSWORD_LENGTH)
    role: Literal["admin", "user", "api"] | Absent = None
    permissions: list[Literal["logs"]] | None = None
    roles: (
        Annotated[list[Annotated[str, Field(pattern=APP_ROLE.pattern)]], Field(max_length=64)]
        | Absent
    ) = None
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None


class CreateUser(PatchUser):
    model_config = examples(
        {"username": "example", "password": "long enough secret", "role": "user"}
    )

    username: str = Field(pattern=USERNAME.pattern)


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
