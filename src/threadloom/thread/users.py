"""Who owns a thread: the identity authority behind ``ThreadState.user()`` (spec 02 §2.12,
spec 10 §10.10). By default it is the store's users table (``StoreUsers``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from threadloom.records import UserHandle
from threadloom.store.base import Store


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


class StoreUsers:
    """The store's users table as the identity authority (spec 10 §10.10 rule 1): the row is
    read on every call, so an admin's change is seen by the next ``user()``."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def get_user(self, user_id: str) -> UserHandle | None:
        row = await self.store.get_user(user_id)
        if row is None:
            return None
        return UserHandle(
            id=row.id,
            username=row.username,
            display_name=row.display_name,
            email=row.email,
            avatar_url=row.avatar_url,
            role=row.role,
            permissions=row.permissions,
            roles=row.roles,
        )
