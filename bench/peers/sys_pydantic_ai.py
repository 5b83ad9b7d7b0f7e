"""pydantic-ai: an ``Agent`` on a ``FunctionModel`` with one plain tool. pydantic-ai keeps
no history of its own (its ``ConversationStore`` ships an in-memory backend only), so the
history is persisted the way its chat-app example does it: after each run the run's new
messages (``result.new_messages_json()``) go into a SQLite table as one row, committed;
before each run the thread's rows are read back with ``ModelMessagesTypeAdapter`` and
passed as ``message_history``. The database calls run on a one-thread executor, as in
the example; the file is opened in WAL mode with ``synchronous=FULL`` like the floor's."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from concurrent.futures import ThreadPoolExecutor
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
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL,
    message_list TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_thread ON messages(thread_id, id);
"""


class Database:
    """The chat-app example's store, keyed by thread: one row per run."""

    def __init__(self, path: str) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.executescript(SCHEMA)
        self.conn.commit()

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def _add(self, thread_id: str, data: bytes) -> None:
        self.conn.execute(
            "INSERT INTO messages (thread_id, message_list) VALUES (?, ?)", (thread_id, data)
        )
        self.conn.commit()

    def _get(self, thread_id: str) -> list[Any]:
        return self.conn.execute(
            "SELECT message_list FROM messages WHERE thread_id = ? ORDER BY id", (thread_id,)
        ).fetchall()

    async def add_messages(self, thread_id: str, data: bytes) -> None:
        await self._run(self._add, thread_id, data)

    async def get_messages(self, thread_id: str) -> list[ModelMessage]:
        rows = await self._run(self._get, thread_id)
        messages: list[ModelMessage] = []
        for (data,) in rows:
            messages.extend(ModelMessagesTypeAdapter.validate_json(data))
        return messages

    def close(self) -> None:
        self.executor.shutdown()
        self.conn.close()


def make_agent(latency: float) -> Agent[None, str]:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
        last = messages[-1]
        usage = RequestUsage(
            input_tokens=USAGE["input_tokens"], output_tokens=USAGE["output_tokens"]
        )
        if any(isinstance(part, ToolReturnPart) for part in last.parts):
            return ModelResponse(parts=[TextPart(FINAL_TEXT)], usage=usage)
        return ModelResponse(parts=[ToolCallPart("echo", dict(TOOL_ARGS))], usage=usage)

    agent = Agent(FunctionModel(model), instructions=SYSTEM_PROMPT)

    @agent.tool_plain
    def echo(v: int) -> str:
        """Echo the value back."""
        return tool_result(v)

    return agent


class PydanticAI(System):
    name = "pydantic-ai"
    packages = ("pydantic-ai-slim", "pydantic")
    persistence = (
        "new_messages_json() of each run appended as one row and committed (WAL,"
        " synchronous=FULL); history read back every turn"
    )

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.db = Database(path)
        self.agent = make_agent(latency)

    async def new_thread(self) -> Any:
        return str(uuid.uuid4())

    async def turn(self, thread: Any, i: int) -> None:
        history = await self.db.get_messages(thread)
        result = await self.agent.run(question(i), message_history=history)
        assert result.output == FINAL_TEXT
        await self.db.add_messages(thread, result.new_messages_json())

    async def seed(self, thread: Any, messages: int) -> None:
        # one real run gives the four messages of a turn; each seeded turn is that run's
        # JSON with its own question, one row per turn as turns store them
        template = await self.agent.run(question(0))
        data = template.new_messages_json().decode()
        probe = ModelMessagesTypeAdapter.validate_json(data)
        if len(probe) != 4:
            raise RuntimeError(f"a pydantic-ai turn stores {len(probe)} messages, not 4")
        rows: list[tuple[str, str]] = []
        done = 0
        i = 0
        while done < messages:
            msgs = ModelMessagesTypeAdapter.validate_json(
                data.replace(question(0), question(-1 - i))
            )
            take = min(4, messages - done)
            rows.append((thread, ModelMessagesTypeAdapter.dump_json(msgs[:take]).decode()))
            done += take
            i += 1
        self.db.conn.executemany(
            "INSERT INTO messages (thread_id, message_list) VALUES (?, ?)", rows
        )
        self.db.conn.commit()

    async def count(self, thread: Any) -> int:
        return len(await self.db.get_messages(thread))

    async def close(self) -> None:
        self.db.close()


SYSTEM = PydanticAI()
