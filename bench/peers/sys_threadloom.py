"""Threadloom: ``Runtime.open`` with its defaults (SQLite file, WAL, ``synchronous=FULL``),
the chat agent of bench/_workload.py on the scripted model (each reply with a fixed
usage, like every fake here), a turn = ``send_message`` + ``wait_idle``."""

from __future__ import annotations

from typing import Any

from _common import System

from _workload import make_definitions, message_total, one_turn, question
from threadloom import Runtime
from threadloom.records import new_id
from threadloom.store.sqlite.store import SqliteStore

_SYNC = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def turn_rows(i: int) -> list[dict[str, Any]]:
    """The four messages a turn stores, as ``inject_message`` takes them."""
    call_id = "call_" + new_id()[:8]
    return [
        {"role": "user", "content": question(i)},
        {
            "role": "assistant",
            "name": "Agent",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"v":1}'},
                }
            ],
        },
        {
            "role": "tool",
            "name": "echo",
            "tool_call_id": call_id,
            "tool_status": "success",
            "content": "echo 1",
        },
        {"role": "assistant", "name": "Agent", "content": "done"},
    ]


class Threadloom(System):
    name = "threadloom"
    packages: tuple[str, ...] = ("threadloom",)

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.runtime = await Runtime.open(
            self.store_url(path), definitions=make_definitions(latency, fixed_usage=True)
        )
        self.persistence = self.describe()

    def store_url(self, path: str) -> str:
        """What ``Runtime.open`` is given: the file ``path`` as a SQLite URL."""
        return f"sqlite:///{path}"

    def describe(self) -> str:
        """How the opened runtime persists (its store's durability setting)."""
        store = self.runtime.store
        assert isinstance(store, SqliteStore)
        sync = _SYNC.get(store.pragma("synchronous"), "?")
        return f"Runtime.open defaults, synchronous={sync}, each message committed as it is stored"

    async def new_thread(self) -> Any:
        return await self.runtime.create_thread("chat")

    async def turn(self, thread: Any, i: int) -> None:
        await one_turn(self.runtime, thread.thread_id, i)

    async def seed(self, thread: Any, messages: int) -> None:
        done = 0
        i = 0
        while done < messages:
            for row in turn_rows(-1 - i)[: messages - done]:
                await thread.inject_message(row)
                done += 1
            i += 1

    async def count(self, thread: Any) -> int:
        return await message_total(thread)

    async def close(self) -> None:
        await self.runtime.close()


SYSTEM = Threadloom()
