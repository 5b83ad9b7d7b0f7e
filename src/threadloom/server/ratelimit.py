"""In-memory sliding-window counters for the rate limits of spec 10 §10.11 (per node)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from threadloom.server.errors import ApiError

MAX_KEYS = 100_000


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


class AuthLimits:
    """The four limits of spec 10 §10.11."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.login_by_address = Window(10, 300, clock)
        self.login_by_username = Window(25, 900, clock)
        self.bearer_failures = Window(100, 60, clock)
        self.tickets = Window(60, 60, clock)

    def check_login(self, address: str, username: str | None) -> None:
        """429 when either login window is full (checked before any work is done)."""
        waits = [self.login_by_address.retry_after(address)]
        if username:
            waits.append(self.login_by_username.retry_after(username))
        worst = max((w for w in waits if w is not None), default=None)
        if worst is not None:
            raise rate_limited(worst)

    def login_failed(self, address: str, username: str | None) -> None:
        self.login_by_address.hit(address)
        if username:
            self.login_by_username.hit(username)
