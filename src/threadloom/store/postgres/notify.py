"""The nodes' notifications (spec 12 §12.4, §12.5, §12.7): LISTEN on a connection of its
own, reconnected with backoff, and NOTIFY outside data transactions on another.

Each topic (``wake``, ``events``, ``chunks``, ``control``, ``registry``) is one channel per
schema, so stores in different schemas of one database (tests, several deployments) do not
hear each other. Payloads are JSON objects; the receiver gets ``(topic, payload)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import sql

from threadloom.errors import StoreUnavailable
from threadloom.store.postgres.dialect import driver_reason

logger = logging.getLogger("threadloom.store.postgres")

TOPICS = ("wake", "events", "chunks", "control", "registry")
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
PAYLOAD_LIMIT = 7_900
"""PostgreSQL refuses a payload of 8,000 bytes or more."""

OnNotice = Callable[[str, dict[str, Any]], None]
OnConnected = Callable[[bool], Awaitable[None]]


def channels(schema: str) -> dict[str, str]:
    """The channel of each topic for ``schema`` (``threadloom_<topic>`` in ``public``)."""
    if schema == "public":
        return {topic: f"threadloom_{topic}" for topic in TOPICS}
    digest = hashlib.sha1(schema.encode()).hexdigest()[:12]
    return {topic: f"threadloom_{topic}_{digest}" for topic in TOPICS}


class Notifications:
    """One node's LISTEN connection and NOTIFY connection."""

    def __init__(
        self, url: str, channel_names: dict[str, str], safe_url: str, node_id: str
    ) -> None:
        self.url = url
        self.node_id = node_id
        self.safe_url = safe_url
        self.channels = channel_names
        self._topics = {name: topic for topic, name in channel_names.items()}
        self._task: asyncio.Task[None] | None = None
        self._sender: psycopg.AsyncConnection[Any] | None = None
        self._send_lock = asyncio.Lock()
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self.connects = 0
        """LISTEN connections made (a reconnection counts)."""
        self.listening = False

    async def start(self, on_notice: OnNotice, on_connected: OnConnected) -> None:
        """LISTEN on every topic (the first connection is made before this returns; a
        failure raises ``StoreUnavailable``), then deliver notifications until ``close``."""
        try:
            conn = await self._listen()
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot LISTEN on PostgreSQL database {self.safe_url}: {driver_reason(exc)}"
            ) from exc
        self._task = asyncio.get_running_loop().create_task(
            self._loop(conn, on_notice, on_connected), name="threadloom-listen"
        )

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, application_name=f"threadloom-listen {self.node_id}"
        )
        for name in self.channels.values():
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
        self._listener = conn
        self.connects += 1
        self.listening = True
        return conn

    async def _loop(
        self, conn: psycopg.AsyncConnection[Any], on_notice: OnNotice, on_connected: OnConnected
    ) -> None:
        first = True
        while True:
            try:
                await on_connected(first)
            except Exception:
                logger.exception("after (re)connecting the LISTEN connection")
            first = False
            try:
                async for notice in conn.notifies():
                    topic = self._topics.get(notice.channel)
                    if topic is None:
                        continue
                    try:
                        payload = json.loads(notice.payload)
                    except ValueError:
                        logger.warning("notification on %s is not JSON", notice.channel)
                        continue
                    try:
                        on_notice(topic, payload)
                    except Exception:
                        logger.exception("notification on %s failed", notice.channel)
            except psycopg.Error as exc:
                logger.warning("LISTEN connection to %s lost: %s", self.safe_url, exc)
            self.listening = False
            await conn.close()
            conn = await self._reconnect()

    async def _reconnect(self) -> psycopg.AsyncConnection[Any]:
        delay = BACKOFF_FIRST_S
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._listen()
            except psycopg.Error as exc:
                logger.warning("LISTEN reconnect to %s failed: %s", self.safe_url, exc)
                delay = min(delay * 2, BACKOFF_MAX_S)

    async def notify(self, topic: str, payload: dict[str, Any]) -> bool:
        """Send one notification now (outside any data transaction); ``False`` when it
        could not be sent (the frames it carries may be lost, spec 12 §12.7.2 rule 4)."""
        text = json.dumps(payload, separators=(",", ":"))
        async with self._send_lock:  # one connection: notifications leave in call order
            for attempt in range(2):
                try:
                    if self._sender is None or self._sender.closed:
                        self._sender = await psycopg.AsyncConnection.connect(
                            self.url, autocommit=True
                        )
                    await self._sender.execute(
                        "SELECT pg_notify(%s, %s)", (self.channels[topic], text)
                    )
                    return True
                except psycopg.Error as exc:
                    if self._sender is not None:
                        await self._sender.close()
                    self._sender = None
                    if attempt:
                        logger.warning("NOTIFY %s to %s failed: %s", topic, self.safe_url, exc)
        return False

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for conn in (self._listener, self._sender):
            if conn is not None and not conn.closed:
                await conn.close()
        self._listener = self._sender = None
        self.listening = False
