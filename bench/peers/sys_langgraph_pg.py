"""LangGraph on PostgreSQL: the graph of ``sys_langgraph.py`` (``StateGraph`` over
``MessagesState``, a fake model node and the prebuilt ``ToolNode``, routed by
``tools_condition``) compiled with ``AsyncPostgresSaver`` of langgraph-checkpoint-postgres
on an ``AsyncConnectionPool`` of psycopg_pool (at most 10 connections, as many as
Threadloom's store opens), opened with the settings its documentation asks for
(``autocommit=True``, ``prepare_threshold=0``, ``dict_row``) and set up with
``saver.setup()``. The graph is driven with ``ainvoke`` / ``aupdate_state`` /
``aget_state`` in every scenario, with LangGraph's default durability. The saver takes
one ``asyncio.Lock`` of its own around every cursor, so its database calls run one at a
time whatever the pool's size."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from sys_langgraph import LangGraph, build, turn_messages

POOL_SIZE = 10


class LangGraphPg(LangGraph):
    name = "langgraph-pg"
    backend = "postgresql"
    packages = ("langgraph", "langgraph-checkpoint-postgres", "psycopg", "psycopg-pool")
    persistence = (
        f"AsyncPostgresSaver on an AsyncConnectionPool (max {POOL_SIZE}), durability=async"
        " (default)"
    )

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.concurrent = True  # every call through the async API
        self.pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            path,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=False,
        )
        await self.pool.open()
        self.saver = AsyncPostgresSaver(self.pool)
        await self.saver.setup()
        self.graph = build(latency, async_node=True).compile(checkpointer=self.saver)

    async def seed(self, thread: Any, messages: int) -> None:
        rows: list[Any] = []
        i = 0
        while len(rows) < messages:
            rows.extend(turn_messages(-1 - i))
            i += 1
        # one checkpoint holding the whole history, as if the graph had just ended a turn
        await self.graph.aupdate_state(thread, {"messages": rows[:messages]}, as_node="agent")

    async def close(self) -> None:
        await self.pool.close()


SYSTEM = LangGraphPg()
