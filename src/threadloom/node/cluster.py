"""The ``Cluster`` protocol: the node's side of a store (spec 12 §12.2, §12.4, §12.6, §12.7).

A runtime is one node of its store's cluster. The ``Cluster`` keeps the node's row (its
registration, heartbeat, draining and removal), answers the lease reads that decide what
the node runs (the runs lost with dead nodes, the queues no live node runs, a thread's live
owner), and carries the notifications between nodes (LISTEN/NOTIFY and what the other
nodes watch). The store keeps the data; its transactions read the lease and, where several
nodes share it, notify what they wrote.

Two implementations:

- ``LocalCluster``: a store one process runs (SQLite). There is one node and no other:
  every ``running`` run was lost with the previous process, nothing needs a heartbeat,
  there are no peers and nobody to notify (§12.6.5).
- ``PgCluster`` (``node/pg.py``): a PostgreSQL store several processes share.

``open_cluster`` picks the one for a store; this module imports no backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from threadloom.store.base import Store

OnNotice = Callable[[str, dict[str, Any]], None]
"""Called with ``(topic, payload)`` for each notification another node sent."""
OnConnected = Callable[[bool], Awaitable[None]]
"""Called after each (re)connection of the LISTEN connection (``True``: the first)."""


class Cluster(Protocol):
    """The node's row, the lease reads and the notifications of one node."""

    node_id: str | None
    """This node's id in its leases and heartbeats (``None`` where one process runs)."""
    shared: bool
    """Whether several nodes may run the store's threads (a heartbeat and sweeps then)."""
    peers: bool
    """Whether another node was live at the last heartbeat: only then do transactions
    notify what they wrote (spec 12 §12.7.1). Set too when another node is heard."""

    @property
    def failovers(self) -> int:
        """How many times the store found its database failed over to a standby (a new
        WAL timeline, spec 17 §17.5.1 rule 7); 0 where that cannot happen."""
        ...

    def watch_failovers(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from any thread) when the store finds its database failed
        over; never where that cannot happen."""
        ...

    # -- the node's row (spec 12 §12.2) ---------------------------------------------------
    async def register_node(self) -> None:
        """Insert (or revive) this node's row."""
        ...

    async def heartbeat(self) -> bool:
        """Refresh this node's heartbeat; ``False`` when the database could not be written."""
        ...

    async def set_draining(self) -> None:
        """Mark this node draining (spec 12 §12.6.4): it takes no new lease."""
        ...

    async def remove_node(self) -> None:
        """Delete this node's row (its last act), and rows of nodes dead for an hour."""
        ...

    # -- the lease reads ------------------------------------------------------------------
    async def lost_runs(self, limit: int = 100, mine: bool = False) -> list[str]:
        """Threads ``running`` that no live node runs: runs lost with their process (spec
        12 §12.6.1), to settle with ``LOST_RUN``; where one process runs, all of them.
        ``mine``: also those whose lease names this node (it runs none of them)."""
        ...

    async def claimable_queues(self, limit: int = 100) -> list[str]:
        """Threads with queued entries, neither stopped nor terminated, no live node runs
        (spec 12 §12.4 rule 4)."""
        ...

    async def live_owner(self, thread_id: str) -> str | None:
        """The live node holding the thread's lease (``None``: none, or no leases)."""
        ...

    # -- notifications (spec 12 §12.4, §12.5, §12.7) --------------------------------------
    async def listen(self, on_notice: OnNotice, on_connected: OnConnected) -> None:
        """Hear the other nodes' notifications (topics ``wake``, ``events``, ``chunks``,
        ``control``, ``registry``) until ``close``."""
        ...

    async def notify(self, topic: str, payload: dict[str, Any]) -> bool:
        """Send a notification to the other nodes now, outside any data transaction;
        ``False`` when there is nobody to tell or it could not be sent."""
        ...

    def watch(self, node: str, thread_ids: list[str], on: bool) -> None:
        """Node ``node`` streams ``thread_ids`` (``on``) or no longer does: this node's
        transactions tell it their events (spec 12 §12.7.6)."""
        ...

    def watch_lists(self, node: str, on: bool) -> None:
        """Node ``node`` has thread-list sockets (``on``) or no longer has: this node's
        status changes are told to it."""
        ...

    def exclusive(self, name: str) -> contextlib.AbstractAsyncContextManager[bool]:
        """A block of work that one node of the cluster does at a time (retention, spec 17
        §17.2): entered with ``True`` when this node holds ``name``'s lock for the block,
        ``False`` when another node holds it (the block then does nothing)."""
        ...

    async def close(self) -> None:
        """Close the notification connections (before the store closes)."""
        ...


@runtime_checkable
class LeaseReads(Protocol):
    """The store's reads of the threads' leases (``store/core/threads.py``), which a
    cluster answers its lease reads with: both stores have them (``TxStore``), though
    they are no part of the data ``Store`` protocol."""

    async def lost_runs(self, limit: int = 100, mine: bool = False) -> list[str]: ...

    async def claimable_queues(self, limit: int = 100) -> list[str]: ...

    async def live_owner(self, thread_id: str) -> str | None: ...


class LocalCluster:
    """The cluster of a store one process runs: this process alone."""

    shared = False
    peers = False
    failovers = 0

    def __init__(self, store: LeaseReads, node_id: str | None = None) -> None:
        self.store = store
        self.node_id = node_id

    def watch_failovers(self, callback: Callable[[], None]) -> None:
        """One process's store does not fail over."""

    async def register_node(self) -> None:
        """Nothing to register: no other node looks."""

    async def heartbeat(self) -> bool:
        return True

    async def set_draining(self) -> None:
        """Nothing to mark: no other node takes the queues over."""

    async def remove_node(self) -> None:
        """No row to delete."""

    async def lost_runs(self, limit: int = 100, mine: bool = False) -> list[str]:
        """Every ``running`` thread: its run was lost with the process that ran it."""
        return await self.store.lost_runs(limit, mine)

    async def claimable_queues(self, limit: int = 100) -> list[str]:
        return await self.store.claimable_queues(limit)

    async def live_owner(self, thread_id: str) -> str | None:
        return None  # no leases: this process runs every thread

    async def listen(self, on_notice: OnNotice, on_connected: OnConnected) -> None:
        """Nobody else to hear."""

    async def notify(self, topic: str, payload: dict[str, Any]) -> bool:
        return False  # nobody to tell

    def watch(self, node: str, thread_ids: list[str], on: bool) -> None:
        """No other node streams anything."""

    def watch_lists(self, node: str, on: bool) -> None:
        """No other node has thread-list sockets."""

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[bool]:
        """This process is the only node: it holds every lock (the store's claim keeps a
        second process out, ``Store.claim_runner``)."""
        yield True

    async def close(self) -> None:
        """Nothing open."""


def open_cluster(store: Store) -> Cluster:
    """The cluster of ``store``'s node: ``PgCluster`` where several processes share it
    (imported only then: it needs the PostgreSQL driver), else ``LocalCluster``."""
    if not isinstance(store, LeaseReads):
        raise TypeError(f"{type(store).__name__} has no lease reads (lost_runs, …)")
    if store.shared:
        from threadloom.node.pg import PgCluster
        from threadloom.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no cluster for a shared {type(store).__name__}")
        return PgCluster(store)
    return LocalCluster(store, store.node_id)
