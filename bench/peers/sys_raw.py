"""The floor: plain ``sqlite3`` committing the rows a Threadloom turn stores, with the
same durability (WAL, ``synchronous=FULL``), one transaction per row — ``RawTurns`` of
bench/_raw_floor.py, the floor of ``make bench-turn``. No model, no framework."""

from __future__ import annotations

import asyncio
from typing import Any

from _common import System

from _raw_floor import RAW_INSERT, RawTurns


class Raw(System):
    name = "raw-sqlite3"
    packages = ()
    persistence = "WAL, synchronous=FULL, one commit per row (4 per turn)"

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.raw = RawTurns(path, 4)
        self.latency = latency
        self.concurrent = concurrent

    async def new_thread(self) -> Any:
        return self.raw.new_thread()

    async def turn(self, thread: Any, i: int) -> None:
        if not self.concurrent:
            self.raw.turn(thread, i)
            return
        # the same four commits, with the two model calls' latency between them
        user, call, result, final = self.raw.rows(thread, i)
        execute = self.raw.conn.execute
        for row, wait in ((user, True), (call, False), (result, True), (final, False)):
            execute("BEGIN")
            execute(RAW_INSERT, row)
            execute("COMMIT")
            if wait:
                await asyncio.sleep(self.latency)

    async def seed(self, thread: Any, messages: int) -> None:
        self.raw.seed(thread, messages)

    async def count(self, thread: Any) -> int:
        return self.raw.count(thread)

    async def close(self) -> None:
        self.raw.close()


SYSTEM = Raw()
