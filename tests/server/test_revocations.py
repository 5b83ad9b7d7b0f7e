"""Spec 10 §10.9 rule 5: a revocation that lands while a socket is busy re-checking is not
lost — the next wait returns at once instead of sleeping a whole interval."""

from __future__ import annotations

import asyncio
import time

from threadloom.server.auth.principal import Revocations


async def test_a_notify_during_a_recheck_is_not_lost() -> None:
    revocations = Revocations()
    seen = revocations.generation
    revocations.notify()  # arrives while the waiter is re-checking, not waiting
    start = time.monotonic()
    seen_after = await revocations.wait(30, seen)
    assert time.monotonic() - start < 1
    assert seen_after == seen + 1


async def test_wait_wakes_on_notify_and_times_out_without_one() -> None:
    revocations = Revocations()
    seen = revocations.generation
    waiter = asyncio.create_task(revocations.wait(30, seen))
    await asyncio.sleep(0)
    revocations.notify()
    assert await asyncio.wait_for(waiter, 1) == seen + 1
    start = time.monotonic()
    assert await revocations.wait(0.05, seen + 1) == seen + 1
    assert time.monotonic() - start >= 0.04
