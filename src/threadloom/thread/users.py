"""Who owns a thread: the identity authority behind ``ThreadState.user()`` (spec 02 §2.12)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from threadloom.records import UserHandle


@runtime_checkable
class IdentityAuthority(Protocol):
    """Answers who a user is; read on every ``user()`` call, never cached."""

    async def get_user(self, user_id: str) -> UserHandle | None: ...


class StaticUsers:
    """An in-memory identity authority: users given in code (tests, small deployments)."""

    def __init__(self, users: Iterable[UserHandle | Mapping[str, Any]] = ()) -> None:
        self._users: dict[str, UserHandle] = {}
        for user in users:
            self.put(user)

    def put(self, user: UserHandle | Mapping[str, Any]) -> UserHandle:
        handle = user if isinstance(user, UserHandle) else UserHandle.model_validate(dict(user))
        self._users[handle.id] = handle
        return handle

    def remove(self, user_id: str) -> None:
        self._users.pop(user_id, None)

    async def get_user(self, user_id: str) -> UserHandle | None:
        return self._users.get(user_id)
