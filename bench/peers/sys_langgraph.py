"""LangGraph: a ``StateGraph`` over ``MessagesState`` with a model node and a prebuilt
``ToolNode`` (routed by ``tools_condition``), checkpointed by ``SqliteSaver`` on a file
(``AsyncSqliteSaver`` for the concurrent scenario, the async form of the same saver).
The model node is a zero-latency fake (``asyncio.sleep(latency)`` when concurrent) that
answers a user message with one ``echo`` tool call and the tool result with ``done``.
Each graph call runs with LangGraph's default durability."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from typing import Any

from _common import (
    FINAL_TEXT,
    SYSTEM_PROMPT,
    TOOL_ARGS,
    USAGE,
    System,
    question,
    tool_result,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def echo(v: int) -> str:
    """Echo the value back."""
    return tool_result(v)


def answer(messages: list[AnyMessage]) -> AIMessage:
    """The fake model: a tool call for a user message, ``done`` after the tool result."""
    # what a real model node sends: the system prompt and the whole history
    request = [SystemMessage(SYSTEM_PROMPT), *messages]
    usage: Any = {**USAGE, "total_tokens": sum(USAGE.values())}
    if isinstance(request[-1], ToolMessage):
        return AIMessage(FINAL_TEXT, usage_metadata=usage)
    call_id = "call_" + uuid.uuid4().hex[:8]
    calls: Any = [{"name": "echo", "args": dict(TOOL_ARGS), "id": call_id}]
    return AIMessage("", tool_calls=calls, usage_metadata=usage)


def build(latency: float, async_node: bool = False) -> StateGraph[Any]:
    """The graph; its model node is a coroutine when there is a latency to sleep or
    ``async_node`` (a graph driven by ``ainvoke`` only)."""

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [answer(state["messages"])]}

    async def agent_async(state: MessagesState) -> dict[str, Any]:
        if latency:
            await asyncio.sleep(latency)
        return {"messages": [answer(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent_async if latency or async_node else agent)
    builder.add_node("tools", ToolNode([echo]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder


def turn_messages(i: int) -> list[AnyMessage]:
    """The four messages a turn leaves in the state."""
    call_id = "call_" + uuid.uuid4().hex[:8]
    return [
        HumanMessage(question(i)),
        AIMessage("", tool_calls=[{"name": "echo", "args": dict(TOOL_ARGS), "id": call_id}]),
        ToolMessage(tool_result(1), name="echo", tool_call_id=call_id),
        AIMessage(FINAL_TEXT),
    ]


class LangGraph(System):
    name = "langgraph"
    packages: tuple[str, ...] = ("langgraph", "langgraph-checkpoint-sqlite", "langchain-core")
    persistence = (
        "SqliteSaver on a file (WAL, sqlite3 default synchronous=FULL), durability=async (default)"
    )

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.concurrent = concurrent
        if concurrent:
            self.persistence = (
                "AsyncSqliteSaver on a file (aiosqlite, WAL, synchronous=FULL),"
                " durability=async (default)"
            )
            self._saver_cm = AsyncSqliteSaver.from_conn_string(path)
            self.saver: Any = await self._saver_cm.__aenter__()
        else:
            self.conn = sqlite3.connect(path, check_same_thread=False)
            self.saver = SqliteSaver(self.conn)
        self.graph = build(latency).compile(checkpointer=self.saver)

    async def new_thread(self) -> Any:
        return {"configurable": {"thread_id": str(uuid.uuid4())}}

    async def turn(self, thread: Any, i: int) -> None:
        payload = {"messages": [HumanMessage(question(i))]}
        if self.concurrent:
            await self.graph.ainvoke(payload, thread)
        else:
            self.graph.invoke(payload, thread)

    async def seed(self, thread: Any, messages: int) -> None:
        rows: list[AnyMessage] = []
        i = 0
        while len(rows) < messages:
            rows.extend(turn_messages(-1 - i))
            i += 1
        # one checkpoint holding the whole history, as if the graph had just ended a turn
        self.graph.update_state(thread, {"messages": rows[:messages]}, as_node="agent")

    async def count(self, thread: Any) -> int:
        if self.concurrent:
            state = await self.graph.aget_state(thread)
        else:
            state = self.graph.get_state(thread)
        return len(state.values.get("messages", []))

    async def close(self) -> None:
        if self.concurrent:
            await self._saver_cm.__aexit__(None, None, None)
        else:
            self.conn.close()


SYSTEM = LangGraph()
