"""``PgCluster``: the node on a PostgreSQL store (spec 12 §12.2, §12.4, §12.5, §12.7).

- The node's row in ``nodes``: inserted at start, its heartbeat refreshed, marked
  draining, deleted at the end; rows of nodes dead for an hour are deleted by anyone.
  Every time is the database's (``now()``), never a node's clock. The heartbeat runs on
  the store's own heartbeat thread and connection (``PostgresStore.write_aside``).
- The notifications: LISTEN on a connection of its own, reconnected with backoff (also
  when its server became read-only: a failover's old primary, spec 17 §17.5), and
  NOTIFY outside data transactions on another. Each topic (``wake``, ``events``,
  ``chunks``, ``control``, ``registry``) is one channel per schema
  (``store/postgres/dialect.channels``). Payloads are JSON objects; the receiver gets
  ``(topic, payload)``.
- What the other nodes watch, and whether any is live (``peers``): kept on the store,
  whose transactions read them to decide what they notify (spec 12 §12.7.1, §12.7.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
from psycopg import sql

from threadloom.errors import StoreError, StoreUnavailable
from threadloom.store.core.conn import Conn
from threadloom.store.postgres.dialect import driver_reason, read_only_server
from threadloom.store.postgres.store import PostgresStore
from threadloom.store.shapes import Clock

logger = logging.getLogger("threadloom.store.postgres")

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
PAYLOAD_LIMIT = 7_900
"""PostgreSQL refuses a payload of 8,000 bytes or more."""
DEAD_ROW_KEPT = "1 hour"
CHECK_SERVER_S = 5.0
"""How often the LISTEN connection checks that its server still takes writes."""

OnNotice = Callable[[str, dict[str, Any]], None]
OnConnected = Callable[[bool], Awaitable[None]]
"""As ``node/cluster.py`` names them (not imported: ``open_cluster`` imports this module)."""


class Notifications:
    """One node's LISTEN connection and NOTIFY connection."""

    def __init__(
        self,
        url: str,
        channel_names: dict[str, str],
        safe_url: str,
        node_id: str,
        connect_options: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.connect_options = connect_options or {}
        """The store's (``connect_timeout``): a LISTEN or NOTIFY connection waits no longer
        for a host that does not answer than the store's connections do."""
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
            self.url,
            autocommit=True,
            application_name=f"threadloom-listen {self.node_id}",
            **self.connect_options,
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
                while await self._on_writable_server(conn):
                    async for notice in conn.notifies(timeout=CHECK_SERVER_S):
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
                logger.warning(
                    "LISTEN connection to %s: the server became read-only (a failover's old"
                    " primary), connecting again",
                    self.safe_url,
                )
            except psycopg.Error as exc:
                logger.warning("LISTEN connection to %s lost: %s", self.safe_url, exc)
            self.listening = False
            await conn.close()
            conn = await self._reconnect()

    @staticmethod
    async def _on_writable_server(conn: psycopg.AsyncConnection[Any]) -> bool:
        """Whether the server still takes writes: the notifications of a failover's new
        primary never reach a connection left on the old one, which an operator may have
        kept running read-only (``target_session_attrs=read-write`` then connects to the
        new one). A round trip, so the server's reports of changed settings are read."""
        await conn.execute("SELECT 1")
        return not read_only_server(conn)

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
                            self.url, autocommit=True, **self.connect_options
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


# -- the node's row (spec 12 §12.2) -------------------------------------------------------
def register_node(conn: Conn, clock: Clock, node_id: str, host: str, pid: int) -> None:
    conn.execute(
        "INSERT INTO nodes(node_id, host, pid) VALUES (?, ?, ?) ON CONFLICT(node_id)"
        " DO UPDATE SET heartbeat_at = now(), draining = false, host = excluded.host,"
        " pid = excluded.pid",
        (node_id, host, pid),
    )


def heartbeat(conn: Conn, clock: Clock, node_id: str, host: str, pid: int) -> set[str]:
    """Refresh the heartbeat; a row that others deleted (the node was dead an hour, then
    came back) is inserted again. Returns the other nodes that are live."""
    updated = conn.execute(
        "UPDATE nodes SET heartbeat_at = now() WHERE node_id = ?", (node_id,)
    ).rowcount
    if not updated:
        register_node(conn, clock, node_id, host, pid)
    live = conn.sql.live_node.format(owner="n0.node_id")  # type: ignore[attr-defined]
    return {
        str(r[0])
        for r in conn.execute(
            f"SELECT n0.node_id FROM nodes n0 WHERE n0.node_id <> ? AND {live}", (node_id,)
        )
    }


def set_draining(conn: Conn, clock: Clock, node_id: str) -> None:
    conn.execute("UPDATE nodes SET draining = true WHERE node_id = ?", (node_id,))


def remove_node(conn: Conn, clock: Clock, node_id: str) -> None:
    conn.execute(
        f"DELETE FROM nodes WHERE node_id = ? OR heartbeat_at < now() - interval '{DEAD_ROW_KEPT}'",
        (node_id,),
    )


class PgCluster:
    """The :class:`~threadloom.node.cluster.Cluster` of a node on a PostgreSQL store."""

    shared = True

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.node_id: str | None = store.node_id
        self.notifications: Notifications | None = None

    @property
    def peers(self) -> bool:
        """Whether another node was live at the last heartbeat (or announced itself since):
        only then do transactions notify what they wrote (a NOTIFY serialises the commits
        of every notifying transaction of the database, spec 12 §12.7.1)."""
        return self.store.peers

    @peers.setter
    def peers(self, live: bool) -> None:
        self.store.peers = live

    @property
    def failovers(self) -> int:
        """Timeline changes the store's connections found (spec 17 §17.5.1 rule 7)."""
        return self.store.failovers

    def watch_failovers(self, callback: Callable[[], None]) -> None:
        self.store.on_failover = callback

    # -- this node's row (spec 12 §12.2) ---------------------------------------------------
    async def register_node(self) -> None:
        await self.store.write(register_node, self.node_id, socket.gethostname(), os.getpid())

    async def heartbeat(self) -> bool:
        try:
            others = await self.store.write_aside(
                heartbeat, self.node_id, socket.gethostname(), os.getpid()
            )
        except (psycopg.Error, StoreError, OSError):
            return False
        self.store.peers = bool(others)
        self.store.watches.keep_only(others)
        return True

    async def set_draining(self) -> None:
        await self.store.write(set_draining, self.node_id)

    async def remove_node(self) -> None:
        await self.store.write(remove_node, self.node_id)

    # -- the lease reads -------------------------------------------------------------------
    async def lost_runs(self, limit: int = 100, mine: bool = False) -> list[str]:
        return await self.store.lost_runs(limit, mine)

    async def claimable_queues(self, limit: int = 100) -> list[str]:
        return await self.store.claimable_queues(limit)

    async def live_owner(self, thread_id: str) -> str | None:
        return await self.store.live_owner(thread_id)

    # -- notifications (spec 12 §12.4, §12.5, §12.7) ------------------------------------
    async def listen(self, on_notice: OnNotice, on_connected: OnConnected) -> None:
        """LISTEN on this schema's channels until ``close``; ``on_notice(topic, payload)``
        for each notification, ``on_connected(first)`` after each (re)connection."""
        if self.notifications is None:
            store = self.store
            self.notifications = Notifications(
                store.url,
                store.sql.channels,
                store.safe_url,
                str(self.node_id),
                store.connect_options,
            )
            await self.notifications.start(on_notice, on_connected)

    async def notify(self, topic: str, payload: dict[str, Any]) -> bool:
        """Send a notification now, outside data transactions (``False`` if it failed)."""
        if self.notifications is None:
            return False
        return await self.notifications.notify(topic, payload)

    def watch(self, node: str, thread_ids: list[str], on: bool) -> None:
        self.store.watches.watch(node, thread_ids, on)

    def watch_lists(self, node: str, on: bool) -> None:
        self.store.watches.watch_lists(node, on)

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[bool]:
        """A session advisory lock of this schema, on a connection of its own held for the
        block: a second node is refused it (``False``) until the block ends, or until the
        holder's connection closes (a node that dies releases it with its session)."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.store.url, autocommit=True, application_name=f"threadloom-{name}"
            )
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"cannot reach PostgreSQL database {self.store.safe_url}: {driver_reason(exc)}"
            ) from exc
        try:
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(hashtext(%s || current_schema()))",
                (f"threadloom-{name}:",),
            )
            row = await cur.fetchone()
            yield bool(row and row[0])
        finally:
            await conn.close()  # ends the session: its advisory lock goes with it

    async def close(self) -> None:
        if self.notifications is not None:
            await self.notifications.close()
