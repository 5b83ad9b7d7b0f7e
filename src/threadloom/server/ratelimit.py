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

    def hit(self, key: str) -> float:
        """Count one event for ``key`` now; its time stamp (for ``give_back``)."""
        stamp = self.clock()
        self._live(key).append(stamp)
        return stamp

    def give_back(self, key: str, stamp: float) -> None:
        """Uncount the event ``hit`` counted at ``stamp`` (a no-op once it left the window)."""
        events = self._events.get(key)
        if events is not None and stamp in events:
            events.remove(stamp)

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


class LoginAttempt:
    """One login attempt counted in both login windows, from before the password is checked
    until it is known to have failed; ``succeeded()`` gives the slots back."""

    def __init__(self, limits: AuthLimits, address: str, username: str | None) -> None:
        self._taken: list[tuple[Window, str, float]] = [
            (limits.login_by_address, address, limits.login_by_address.hit(address))
        ]
        if username:
            stamp = limits.login_by_username.hit(username)
            self._taken.append((limits.login_by_username, username, stamp))

    def succeeded(self) -> None:
        """A successful login is not counted (spec 10 §10.11)."""
        for window, key, stamp in self._taken:
            window.give_back(key, stamp)
        self._taken = []


class AuthLimits:
    """The four limits of spec 10 §10.11."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.login_by_address = Window(10, 300, clock)
        self.login_by_username = Window(25, 900, clock)
        self.bearer_failures = Window(100, 60, clock)
        self.tickets = Window(60, 60, clock)

    def begin_login(self, address: str, username: str | None) -> LoginAttempt:
        """Reserve this attempt's place in the address and username windows, or raise the 429
        of the fuller one. Checking and counting are one step with no ``await`` between them,
        so concurrent attempts cannot all pass a check made before any of them was counted;
        the caller does the password work only after this returns."""
        waits = [self.login_by_address.retry_after(address)]
        if username:
            waits.append(self.login_by_username.retry_after(username))
        worst = max((w for w in waits if w is not None), default=None)
        if worst is not None:
            raise rate_limited(worst)
        return LoginAttempt(self, address, username)
