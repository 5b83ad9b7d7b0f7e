"""Test doubles of things outside Threadloom (never of Threadloom's own parts)."""

from __future__ import annotations


class FakeClock:
    """A settable µs clock for the store (C01-001, C01-002)."""

    def __init__(self, start: int = 1_700_000_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now
