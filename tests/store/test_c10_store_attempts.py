"""The login attempts of spec 10 §10.11 kept in the store (``take_attempt`` /
``give_back_attempt``), on SQLite and PostgreSQL: all windows or none, the wait until the
fullest has room, a success given back, old attempts leaving their window."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fakes import FakeClock
from store_probe import StoreProbe
from threadloom.store import open_store
from threadloom.store.base import Store

S = 1_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(db_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    opened = await open_store(db_url, clock=clock)
    yield opened
    await opened.close()


async def test_c10_041_attempts_are_counted_in_every_window_or_in_none(
    store: Store, clock: FakeClock, db_url: str
) -> None:
    """C10-041: ``take_attempt`` counts an attempt under each (key, limit, window) or, when
    one window is full, under none and answers the µs until it has room; a given-back
    attempt leaves every window; an attempt older than its window no longer counts."""
    address, user = ("a" * 64, 2, 300 * S), ("u" * 64, 3, 900 * S)
    assert await store.take_attempt("t1", [address, user]) == 0
    clock.now += 10 * S
    assert await store.take_attempt("t2", [address, user]) == 0
    clock.now += 10 * S
    # the address window is full: nothing counted, the wait is until t1 leaves it
    assert await store.take_attempt("t3", [address, user]) == 280 * S
    rows = StoreProbe(db_url).rows("SELECT attempt_id FROM auth_attempts ORDER BY attempt_id")
    assert sorted(r[0] for r in rows) == ["t1", "t1", "t2", "t2"]
    # another address: the username window has one place left
    other = ("b" * 64, 2, 300 * S)
    assert await store.take_attempt("t4", [other, user]) == 0
    assert await store.take_attempt("t5", [other, user]) == 880 * S
    await store.give_back_attempt("t4")  # a success is not counted
    assert await store.take_attempt("t6", [other, user]) == 0
    # after 300 s the address window has room again; the username window has not
    clock.now += 281 * S
    assert await store.take_attempt("t7", [address]) == 0
    assert await store.take_attempt("t8", [address, user]) == 900 * S - 301 * S


async def test_concurrent_attempts_count_exactly_the_limit(store: Store) -> None:
    """Twenty attempts at once on one key of limit 5 → exactly 5 counted."""
    window = ("c" * 64, 5, 300 * S)
    waits = await asyncio.gather(*(store.take_attempt(f"k{n}", [window]) for n in range(20)))
    assert sorted(w == 0 for w in waits).count(True) == 5
