"""The rate limits of spec 10 §10.11: the login windows kept in the store (so they hold
across the nodes of a PostgreSQL cluster), the others in sliding-window counters of this
process's memory (per node)."""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections import deque
from collections.abc import Callable

from threadloom.server.errors import ApiError
from threadloom.store.base_accounts import AccountStore

MAX_KEYS = 100_000
US = 1_000_000


class Window:
    """At most ``limit`` events per ``seconds`` for each key."""

    def __init__(
        self, limit: int, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.seconds = seconds
        self.clock = clock
        self._events: dict[str, deque[float]] = {}

    def _live(self, key: str) -> deque[float]:
        now = self.clock()
        events = self._events.get(key)
        if events is None:
            if len(self._events) >= MAX_KEYS:
                self._prune(now)
            events = self._events[key] = deque()
        while events and events[0] <= now - self.seconds:
            events.popleft()
        return events

    def _prune(self, now: float) -> None:
        for key in [k for k, v in self._events.items() if not v or v[-1] <= now - self.seconds]:
            del self._events[key]

    def retry_after(self, key: str) -> int | None:
        """Seconds until the next event for ``key`` is allowed; None when allowed now."""
        events = self._live(key)
        if len(events) < self.limit:
            return None
        return max(1, math.ceil(events[0] + self.seconds - self.clock()))

    def hit(self, key: str) -> None:
        """Count one event for ``key`` now."""
        self._live(key).append(self.clock())

    def take(self, key: str) -> None:
        """Count one event for ``key``, or raise the 429 of ``rate_limited`` when the window
        is full (the refused attempt is not counted)."""
        wait = self.retry_after(key)
        if wait is not None:
            raise rate_limited(wait)
        self.hit(key)


def rate_limited(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "rate_limited",
        "Too many authentication attempts. Try again later.",
        extra={"retryAfter": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


LOGIN_BY_ADDRESS = (10, 300)
"""Login attempts per client address: 10 per 5 minutes."""
LOGIN_BY_USERNAME = (25, 900)
"""Login attempts per username: 25 per 15 minutes."""


def _key(kind: str, value: str) -> str:
    """The stored key of a window: a digest, never the address or the username typed."""
    return hashlib.sha256(f"{kind}\0{value}".encode()).hexdigest()


class LoginAttempt:
    """One login attempt counted in both login windows, from before the password is checked
    until it is known to have failed; ``succeeded()`` gives the slots back."""

    def __init__(self, store: AccountStore, attempt_id: str) -> None:
        self._store = store
        self._id: str | None = attempt_id

    async def succeeded(self) -> None:
        """A successful login is not counted (spec 10 §10.11)."""
        if self._id is not None:
            attempt, self._id = self._id, None
            await self._store.give_back_attempt(attempt)


class AuthLimits:
    """The four limits of spec 10 §10.11; the login windows are the store's."""

    def __init__(self, store: AccountStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.bearer_failures = Window(100, 60, clock)
        self.tickets = Window(60, 60, clock)

    async def begin_login(self, address: str, username: str | None) -> LoginAttempt:
        """Count this attempt in the address and username windows, or raise the 429 of the
        fuller one. Checking and counting are one transaction of the store, so concurrent
        attempts — through this node or any other — cannot all pass a check made before
        any of them was counted; the caller does the password work only after this
        returns."""
        windows = [(_key("address", address), LOGIN_BY_ADDRESS[0], LOGIN_BY_ADDRESS[1] * US)]
        if username:
            limit, seconds = LOGIN_BY_USERNAME
            windows.append((_key("username", username), limit, seconds * US))
        attempt_id = str(uuid.uuid4())
        wait_us = await self.store.take_attempt(attempt_id, windows)
        if wait_us:
            raise rate_limited(max(1, math.ceil(wait_us / US)))
        return LoginAttempt(self.store, attempt_id)
