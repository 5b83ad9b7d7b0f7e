"""OpenAI Agents SDK on PostgreSQL: the agent and offline model of
``sys_openai_agents.py`` run by ``Runner.run(..., session=...)`` with the SDK's
``SQLAlchemySession`` (``agents.extensions.memory``) on one SQLAlchemy ``AsyncEngine`` over
asyncpg (``postgresql+asyncpg://``), as its documentation shows; the engine keeps
SQLAlchemy's default pool size (5 connections, 10 more on demand) but waits up to
:data:`POOL_TIMEOUT_S` for a connection instead of the default 30 s: with 30 s the
concurrent scenario's 1,000 sessions fail (``QueuePool limit of size 5 overflow 10
reached, connection timed out``, seen on 4 December). One session per thread on the
shared engine; the first creates the tables (``create_tables=True``), the others find
them. The run's schema is asyncpg's ``search_path`` (``server_settings``)."""

from __future__ import annotations

import uuid
from typing import Any

from _pg import parts
from agents import set_tracing_disabled
from agents.extensions.memory import SQLAlchemySession
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sys_openai_agents import OpenAIAgents

POOL_TIMEOUT_S = 180.0
"""How long a session waits for one of the engine's connections: the scenario's limit."""


class OpenAIAgentsPg(OpenAIAgents):
    name = "openai-agents-pg"
    backend = "postgresql"
    packages = ("openai-agents", "openai", "sqlalchemy", "asyncpg")
    persistence = (
        "SQLAlchemySession on an AsyncEngine (asyncpg, SQLAlchemy's default pool 5 + 10,"
        f" pool_timeout {POOL_TIMEOUT_S:g} s)"
    )

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        await super().open(path, latency, concurrent)
        set_tracing_disabled(True)
        base, schema, app = parts(path)
        self.engine: AsyncEngine = create_async_engine(
            base.replace("postgresql://", "postgresql+asyncpg://", 1),
            connect_args={"server_settings": {"search_path": schema, "application_name": app}},
            pool_timeout=POOL_TIMEOUT_S,
        )
        first = SQLAlchemySession(str(uuid.uuid4()), engine=self.engine, create_tables=True)
        await first.get_items()  # creates the tables, once

    async def new_thread(self) -> Any:
        return SQLAlchemySession(str(uuid.uuid4()), engine=self.engine)

    async def close(self) -> None:
        await self.engine.dispose()


SYSTEM = OpenAIAgentsPg()
