"""``TxStore``: the Store protocol once, over the two calls a backend supplies.

Each method is one transaction: a write runs ``fn(conn, clock, *args)`` of the
backend-neutral modules of ``store/core`` through the backend's ``_write``, a read
``fn(conn, *args)`` through its ``_read``. A backend (``SqliteStore``, ``PostgresStore``)
supplies those two, its connection and dialect, its lifecycle and ``claim_runner``; it
writes none of the logic a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, cast

from threadloom.errors import StoreError
from threadloom.records import (
    Approval,
    ApprovalDecision,
    Compaction,
    ContextEntry,
    FileRecord,
    FileStats,
    LogRow,
    MemoryItem,
    Message,
    OAuthClient,
    OAuthCode,
    OAuthToken,
    QueueEntry,
    Schedule,
    ScheduleRow,
    SharedState,
    Spend,
    StatusError,
    SubagentRegistryEntry,
    ThreadStatus,
    ToolCall,
    Trigger,
    TriggerFire,
    TriggerRow,
    UserQuota,
    WebhookDelivery,
    WebhookSubscription,
)
from threadloom.records.portable import ThreadExport
from threadloom.store.base import Store
from threadloom.store.core import approvals as ledger
from threadloom.store.core import (
    auth,
    compactions,
    events,
    files,
    forks,
    logs,
    memory,
    messages,
    oauth,
    operating,
    outbox,
    portable,
    queue,
    retention,
    runs,
    schedules,
    search,
    threads,
    triggers,
)
from threadloom.store.core import shared as states
from threadloom.store.core import spend as spends
from threadloom.store.shapes import (
    ApiKeyRow,
    ApprovalQuery,
    BodyStrip,
    Clock,
    CostSummary,
    Decided,
    ExpiryCandidate,
    ExpiryRule,
    FileContent,
    InboxApproval,
    NewFile,
    NewThread,
    OperatingStats,
    Order,
    OwnerCount,
    ParentDelivery,
    PruneChunk,
    RunBegin,
    RunEnd,
    SearchHit,
    SearchTerm,
    SessionRow,
    Settled,
    Settlement,
    StateChange,
    StateWrite,
    StoredEvent,
    ThreadPatch,
    ThreadQuery,
    ThreadRow,
    ThreadStats,
    TicketRow,
    UserPatch,
    UserRow,
)

T = TypeVar("T")
Writing = Coroutine[Any, Any, T]
"""A write's coroutine (``TxStore._write``), returned as it is by the store's methods a
model step awaits."""

SMALL_PAGE = 100
"""A page of at most this many messages (the default page) is a small read
(``TxStore._small_read``): on SQLite read on the loop, about 0.3 ms for 100 messages of a
few hundred bytes, less than the hand-off to a reader thread and back costs (issue 40)."""


def _small(limit: int | None) -> bool:
    return limit is not None and limit <= SMALL_PAGE


class TxStore:
    """The :class:`~threadloom.store.base.Store` methods, each one transaction of the
    shared logic run by the backend's ``_read`` / ``_write``."""

    url: str
    clock: Clock
    kind: str = ""
    """The backend: ``"sqlite"`` or ``"postgres"`` (for diagnostics, never for logic)."""
    node_id: str | None = None
    """This process's node id (spec 12 §12.2), where several processes share the store."""
    shared = False
    """Whether several processes (nodes) may run this store's threads at once: their
    leases, heartbeats and sweeps then decide who runs what (spec 12)."""

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in a read transaction (one consistent snapshot)."""
        raise NotImplementedError

    async def _write(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> T:
        """Run ``fn(conn, clock, *args)`` in a write transaction; returns after it
        committed (``durable=False``: the commit need not wait for the disk)."""
        raise NotImplementedError

    async def _point_read(self, fn: Callable[..., T], *args: Any) -> T:
        """``_read`` of one row by its key (and at most the one row it names, as a key's
        user); a backend may run it where it costs least, and without a snapshot around
        it: each statement reads the latest commit, and a row deleted between the two
        reads as missing."""
        return await self._read(fn, *args)

    async def _small_read(self, fn: Callable[..., T], *args: Any) -> T:
        """``_read`` of a bounded, small amount (one row by its key, a page of at most
        ``SMALL_PAGE`` messages): in one snapshot, like ``_read``; a backend may run it
        where it costs least (SQLite: on the loop's own connection)."""
        return await self._read(fn, *args)

    async def _checked_read(self, fn: Callable[..., T], *args: Any) -> T:
        """``_small_read`` of a function that checks its statements all saw one version of
        the thread's row (``Dialect.row_version``; it raises ``ThreadChanged`` when one
        did not): a backend may run it without a transaction around it — no BEGIN and
        COMMIT — and again in one when it raised."""
        return await self._small_read(fn, *args)

    def replica(self) -> Store:
        """This store: a backend with a read replica returns a view of it (spec 17 §17.5.4)."""
        return cast("Store", self)

    def replica_stats(self) -> dict[str, int]:
        """Reads the replica's view served, by who answered; empty without a replica."""
        return {}

    # -- threads -----------------------------------------------------------------------
    async def create_thread(self, new: NewThread) -> ThreadRow:
        return await self._write(threads.create_thread, new)

    async def import_threads(self, doc: ThreadExport) -> list[str]:
        return await self._write(portable.import_threads, doc)

    async def fork_thread(self, doc: ThreadExport, from_thread: str, from_message: str) -> str:
        return await self._write(forks.fork_thread, doc, from_thread, from_message)

    async def list_forks(self, thread_id: str) -> list[ThreadRow]:
        return await self._read(forks.list_forks, thread_id)

    async def create_child(
        self, new: NewThread, entry: SubagentRegistryEntry
    ) -> tuple[ThreadRow, StoredEvent]:
        return await self._write(threads.create_child, new, entry)

    async def get_thread(self, thread_id: str) -> ThreadRow | None:
        return await self._point_read(threads.get_thread, thread_id)

    async def get_threads(self, thread_ids: Sequence[str]) -> dict[str, ThreadRow]:
        return await self._read(threads.get_threads, list(thread_ids))

    async def list_threads(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        parent_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[ThreadRow], int]:
        return await self._read(
            threads.list_threads, user_id, agent_id, parent_id, roots_only, limit, offset
        )

    async def query_threads(self, query: ThreadQuery) -> tuple[list[ThreadRow], int]:
        return await self._read(threads.query_threads, query)

    search_backlog = False
    """Whether the full-text index keeps a backlog (``Dialect.search_catch_up``) that a
    search first indexes: SQLite's (spec 08 §8.14.1 rule 1)."""

    async def catch_up_search(self) -> int:
        if not self.search_backlog:
            return 0
        return await self._write(search.catch_up, durable=False)

    async def search_threads(
        self, query: ThreadQuery, terms: Sequence[SearchTerm]
    ) -> tuple[list[SearchHit], int]:
        await self.catch_up_search()
        return await self._read(search.search_threads, query, tuple(terms))

    async def thread_owners(self, user_id: str | None = None) -> list[OwnerCount]:
        return await self._read(threads.thread_owners, user_id)

    async def update_thread(self, thread_id: str, patch: ThreadPatch) -> ThreadRow:
        return await self._write(threads.update_thread, thread_id, patch)

    async def descendants(self, thread_id: str, limit: int | None = None) -> list[ThreadRow]:
        return await self._read(threads.descendants, thread_id, limit)

    async def delete_thread(self, thread_id: str) -> list[str]:
        return await self._write(threads.delete_thread, thread_id)

    async def thread_stats(self, thread_id: str) -> ThreadStats:
        return await self._read(threads.thread_stats, thread_id)

    async def threads_with_status(self, state: str) -> list[str]:
        return await self._read(threads.threads_with_status, state)

    # the lease reads a node's Cluster answers with (``node/cluster.py``), not of the
    # Store protocol; where one process runs the store every running run is lost
    async def lost_runs(self, limit: int = 100, mine: bool = False) -> list[str]:
        return await self._read(threads.lost_runs, limit, mine)

    async def claimable_queues(self, limit: int = 100) -> list[str]:
        return await self._read(threads.claimable_queues, limit)

    async def live_owner(self, thread_id: str) -> str | None:
        return await self._point_read(threads.live_owner, thread_id)

    async def threads_with_queue(self) -> list[str]:
        return await self._read(threads.threads_with_queue)

    async def operating_stats(self) -> OperatingStats:
        return await self._read(operating.operating_stats)

    async def lease_heartbeat(self, thread_id: str) -> float | None:
        return await self._read(operating.lease_heartbeat, thread_id)

    async def threads_with_open_children(self) -> list[str]:
        return await self._read(threads.threads_with_open_children)

    async def terminate(self, thread_id: str) -> tuple[int, list[StoredEvent]]:
        return await self._write(threads.terminate, thread_id)

    # -- messages ----------------------------------------------------------------------
    async def insert_message(
        self, thread_id: str, message: Message, *, require_live: bool = True
    ) -> tuple[Message, StoredEvent]:
        return await self._write(messages.insert_message, thread_id, message, require_live)

    async def update_message(self, thread_id: str, message: Message) -> tuple[Message, StoredEvent]:
        return await self._write(messages.update_message, thread_id, message)

    async def delete_message(self, thread_id: str, message_id: str) -> list[StoredEvent]:
        return await self._write(messages.delete_message, thread_id, message_id)

    async def get_message(self, thread_id: str, message_id: str) -> Message | None:
        return await self._read(messages.get_message, thread_id, message_id)

    async def read_page(
        self,
        thread_id: str,
        *,
        limit: int | None,
        offset: int,
        order: Order,
        include_silent: bool,
        max_depth: int | None,
    ) -> tuple[list[Message], int]:
        return await self._read(
            messages.read_page, thread_id, limit, offset, order, include_silent, max_depth
        )

    async def read_page_wire(
        self,
        thread_id: str,
        *,
        limit: int | None,
        offset: int,
        order: Order,
        include_silent: bool,
        max_depth: int | None,
    ) -> tuple[list[dict[str, Any]], int] | None:
        read = self._small_read if _small(limit) else self._read
        return await read(
            messages.read_page_wire, thread_id, limit, offset, order, include_silent, max_depth
        )

    async def get_thread_page_wire(
        self,
        thread_id: str,
        *,
        limit: int | None,
        offset: int,
        order: Order,
        include_silent: bool,
        max_depth: int | None,
        wanted: Callable[[ThreadRow], bool],
    ) -> tuple[ThreadRow | None, tuple[list[dict[str, Any]], int] | None]:
        read = self._checked_read if _small(limit) else self._read
        return await read(
            threads.get_thread_page_wire,
            thread_id,
            limit,
            offset,
            order,
            include_silent,
            max_depth,
            wanted,
        )

    async def read_by_ids(
        self,
        thread_id: str,
        ids: Sequence[str],
        *,
        include_silent: bool,
        max_depth: int | None,
        include_workblocks: bool = False,
    ) -> list[Message]:
        return await self._read(
            messages.read_by_ids,
            thread_id,
            list(ids),
            include_silent,
            max_depth,
            include_workblocks,
        )

    async def newest_top_level_id(self, thread_id: str) -> str | None:
        return await self._read(messages.newest_top_level_id, thread_id)

    async def top_level_history(self, thread_id: str) -> list[Message]:
        return await self._read(messages.top_level_history, thread_id)

    # -- queue -------------------------------------------------------------------------
    async def enqueue(
        self, thread_id: str, entry: QueueEntry, *, clear_stop: bool
    ) -> tuple[QueueEntry, StoredEvent]:
        return await self._write(queue.enqueue, thread_id, entry, clear_stop)

    async def get_queue_entry(self, thread_id: str, entry_id: str) -> QueueEntry | None:
        return await self._read(queue.get_entry, thread_id, entry_id)

    async def update_queue_entry(
        self, thread_id: str, entry: QueueEntry
    ) -> tuple[QueueEntry, StoredEvent] | None:
        return await self._write(queue.update_entry, thread_id, entry)

    async def list_queue(self, thread_id: str) -> list[QueueEntry]:
        return await self._read(queue.list_entries, thread_id)

    # -- registry ----------------------------------------------------------------------
    async def get_registry(self, thread_id: str) -> list[SubagentRegistryEntry]:
        return await self._read(threads.get_registry, thread_id)

    async def upsert_registry_entry(
        self, parent_id: str, entry: SubagentRegistryEntry
    ) -> StoredEvent:
        return await self._write(threads.upsert_registry_entry, parent_id, entry)

    async def set_registry_status(
        self, parent_id: str, reference: str, status: str
    ) -> StoredEvent | None:
        return await self._write(threads.set_registry_status, parent_id, reference, status)

    # -- logs and cost -----------------------------------------------------------------
    # The writes a model step awaits return the write's own coroutine (``Writing``)
    # instead of awaiting it in one of their own: one coroutine less alive per write in
    # flight, which at thousands of threads is an object the collector promotes (issue 40)
    def insert_log(
        self, thread_id: str, row: LogRow, *, anchor_newest: bool = False
    ) -> Writing[tuple[LogRow, StoredEvent]]:
        return self._write(logs.insert_log, thread_id, row, anchor_newest)

    async def get_log(self, thread_id: str, log_id: str) -> LogRow | None:
        return await self._read(logs.get_log, thread_id, log_id)

    async def list_logs(
        self,
        thread_id: str,
        *,
        limit: int | None = 100,
        offset: int = 0,
        kind: str | None = None,
    ) -> list[LogRow]:
        return await self._read(logs.list_logs, thread_id, limit, offset, kind)

    async def cost_summary(self, thread_ids: Sequence[str]) -> CostSummary:
        return await self._read(logs.cost_summary, list(thread_ids))

    # -- budgets and quotas ------------------------------------------------------------
    async def thread_spend(self, thread_id: str) -> Spend:
        return await self._read(spends.thread_spend, thread_id)

    async def user_spend(self, user_id: str, since_us: int) -> Spend:
        return await self._read(spends.user_spend, user_id, since_us)

    async def set_user_quota(self, user_id: str, quota: UserQuota | None) -> None:
        await self._write(spends.set_user_quota, user_id, quota)

    async def get_user_quota(self, user_id: str) -> UserQuota | None:
        return await self._read(spends.get_user_quota, user_id)

    async def list_user_quotas(self) -> list[UserQuota]:
        return await self._read(spends.list_user_quotas)

    # -- events ------------------------------------------------------------------------
    async def read_events(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[StoredEvent]:
        return await self._read(threads.read_events, thread_id, after_seq, limit)

    # -- retention (spec 17 §17.2) ----------------------------------------------------
    async def expiry_owners(self, keep: int) -> list[str | None]:
        return await self._read(retention.expiry_owners, keep)

    async def expiry_page(
        self, rule: ExpiryRule, after: tuple[int, int, str] | None, limit: int
    ) -> list[ExpiryCandidate]:
        if limit < 1:
            raise StoreError("expiry_page: limit must be 1 or more")
        return await self._read(retention.expiry_page, rule, after, limit)

    async def delete_expired(self, rule: ExpiryRule, thread_id: str) -> dict[str, str | None]:
        return await self._write(retention.delete_expired, rule, thread_id)

    async def count_log_bodies(self, before_us: int, within: Sequence[str] | None = None) -> int:
        if within is not None and len(within) > 500:
            raise StoreError("count_log_bodies: at most 500 root threads at a time")
        return await self._read(
            retention.count_log_bodies, before_us, None if within is None else list(within)
        )

    async def strip_log_bodies(self, before_us: int, after: str | None, limit: int) -> BodyStrip:
        if limit < 1:
            raise StoreError("strip_log_bodies: limit must be 1 or more")
        # not synced on its own: a strip lost to a power cut is done again by the next pass
        return await self._write(retention.strip_log_bodies, before_us, after, limit, durable=False)

    async def prune_events(
        self, older_than_us: int, keep: int, after: int = 0, max_threads: int = 200
    ) -> PruneChunk:
        if keep < 0 or max_threads < 1:
            raise StoreError("prune_events: keep must be 0 or more, max_threads 1 or more")
        # not synced on its own: losing a prune to a power cut loses nothing
        return await self._write(
            events.prune_chunk, older_than_us, keep, after, max_threads, durable=False
        )

    # -- files (spec 07) ---------------------------------------------------------------
    async def write_file(
        self,
        thread_id: str,
        entry: NewFile,
        content: bytes | None,
        *,
        thumbnail: bytes | None = None,
        max_thread_bytes: int | None = None,
    ) -> tuple[FileRecord, StoredEvent]:
        return await self._write(
            files.write_file, thread_id, entry, content, thumbnail, max_thread_bytes
        )

    async def read_file(self, thread_id: str, path: str) -> bytes | None:
        return await self._read(files.read_file, thread_id, path)

    async def open_file(self, thread_id: str, path: str) -> FileContent | None:
        return await self._read(files.open_file, thread_id, path)

    async def read_file_range(
        self, thread_id: str, version: int, offset: int, length: int
    ) -> bytes | None:
        return await self._read(files.read_file_range, thread_id, version, offset, length)

    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None:
        return await self._read(files.stat_file, thread_id, path)

    async def list_dir(self, thread_id: str, path: str) -> list[FileRecord]:
        return await self._read(files.list_dir, thread_id, path)

    async def list_entries(self, thread_id: str, prefix: str) -> list[FileRecord]:
        return await self._read(files.list_entries, thread_id, prefix)

    async def file_stats(self, thread_id: str, path: str) -> FileStats:
        return await self._read(files.file_stats, thread_id, path)

    async def get_file_thumbnail(self, thread_id: str, path: str) -> bytes | None:
        return await self._read(files.get_file_thumbnail, thread_id, path)

    async def unlink_file(self, thread_id: str, path: str) -> StoredEvent | None:
        return await self._write(files.unlink_file, thread_id, path)

    async def mkdir_file(self, thread_id: str, path: str) -> tuple[FileRecord, StoredEvent | None]:
        return await self._write(files.mkdir_file, thread_id, path)

    async def rmdir_file(self, thread_id: str, path: str, recursive: bool) -> list[StoredEvent]:
        return await self._write(files.rmdir_file, thread_id, path, recursive)

    async def move_file(
        self, thread_id: str, source: str, destination: str
    ) -> tuple[FileRecord, StoredEvent | None]:
        return await self._write(files.move_file, thread_id, source, destination)

    # -- runs ----------------------------------------------------------------------------
    async def set_status(self, thread_id: str, status: ThreadStatus) -> StoredEvent:
        return await self._write(threads.set_status, thread_id, status)

    # -- shared state and run context (spec 02 §2.20, spec 13 §13.2.11) ---------------
    async def get_shared_state(self, thread_id: str) -> SharedState:
        return await self._point_read(states.get_shared_state, thread_id)

    async def write_shared_state(self, thread_id: str, change: StateChange) -> StateWrite:
        return await self._write(states.write_shared_state, thread_id, change)

    async def get_run_context(self, thread_id: str) -> list[ContextEntry]:
        return await self._point_read(states.get_run_context, thread_id)

    async def set_run_context(self, thread_id: str, entries: Sequence[ContextEntry]) -> None:
        await self._write(states.set_run_context, thread_id, list(entries))

    # -- the tool-call ledger (spec 14) -----------------------------------------------
    async def request_approvals(
        self, thread_id: str, approvals: Sequence[Approval]
    ) -> list[StoredEvent]:
        return await self._write(ledger.request_approvals, thread_id, list(approvals))

    async def list_approvals(self, thread_id: str) -> list[Approval]:
        return await self._read(ledger.list_approvals, thread_id)

    async def query_approvals(self, query: ApprovalQuery) -> tuple[list[InboxApproval], int]:
        return await self._read(ledger.query_approvals, query)

    async def get_approval(self, thread_id: str, tool_call_id: str) -> Approval | None:
        return await self._read(ledger.get_approval, thread_id, tool_call_id)

    async def decide_approval(
        self, thread_id: str, tool_call_id: str, decision: ApprovalDecision
    ) -> Decided:
        return await self._write(ledger.decide_approval, thread_id, tool_call_id, decision)

    async def decided_parked(self, limit: int = 1_000) -> list[str]:
        return await self._read(ledger.decided_parked, limit)

    async def consume_approval(self, thread_id: str, tool_call_id: str) -> Approval | None:
        return await self._write(ledger.consume_approval, thread_id, tool_call_id)

    async def cancel_approvals(
        self, thread_id: str, reason: str, status: ThreadStatus | None
    ) -> list[StoredEvent]:
        return await self._write(runs.cancel_approvals, thread_id, reason, status)

    async def settle_run(self, thread_id: str, settlement: Settlement) -> list[StoredEvent]:
        return await self._write(runs.settle_run, thread_id, settlement)

    async def settle_resumable(self, thread_id: str, settlement: Settlement) -> Settled:
        return await self._write(runs.settle_resumable, thread_id, settlement)

    async def record_tool_starts(
        self, thread_id: str, message_id: str, calls: Sequence[ToolCall]
    ) -> None:
        await self._write(ledger.record_starts, thread_id, message_id, list(calls))

    async def tool_starts(self, thread_id: str) -> dict[str, int]:
        return await self._read(ledger.tool_starts, thread_id)

    async def pending_resumes(self, limit: int = 1000) -> list[str]:
        return await self._read(runs.pending_resumes, limit)

    async def clear_resumes(self, thread_id: str) -> None:
        await self._write(runs.clear_resumes, thread_id)

    async def end_run(
        self,
        thread_id: str,
        reason: str,
        session: tuple[int, int],
        allow_continue: bool,
        delivery: ParentDelivery | None = None,
        error: StatusError | None = None,
    ) -> tuple[bool, list[StoredEvent]]:
        return await self._write(
            runs.end_run, thread_id, reason, session, allow_continue, delivery, error
        )

    async def begin_run(
        self,
        thread_id: str,
        *,
        status: ThreadStatus | None,
        force: bool,
        deliver: bool,
        runnable: Callable[[str], bool] | None = None,
        only_parked: bool = False,
        only_resumed: bool = False,
    ) -> RunBegin | None:
        return await self._write(
            runs.begin_run, thread_id, status, force, deliver, runnable, only_parked, only_resumed
        )

    async def enqueue_and_begin_run(
        self,
        thread_id: str,
        entry: QueueEntry,
        *,
        clear_stop: bool,
        status: ThreadStatus,
        runnable: Callable[[str], bool] | None = None,
    ) -> tuple[QueueEntry, StoredEvent, RunBegin | None]:
        return await self._write(
            runs.enqueue_and_begin_run, thread_id, entry, clear_stop, status, runnable
        )

    async def deliver_queue(self, thread_id: str) -> list[tuple[Message, StoredEvent]]:
        return await self._write(runs.deliver_queue, thread_id)

    async def finish_run(
        self, thread_id: str, message: Message, log: LogRow, end: RunEnd, *, new: bool = False
    ) -> tuple[Message, LogRow, bool, list[StoredEvent]]:
        return await self._write(runs.finish_run, thread_id, message, log, end, new)

    async def set_stopped(self, thread_id: str, stopped: bool) -> None:
        await self._write(runs.set_stopped, thread_id, stopped)

    async def set_session_turns(self, thread_id: str, side_a: int, side_b: int) -> None:
        await self._write(runs.set_session_turns, thread_id, side_a, side_b)

    async def set_agent(self, thread_id: str, agent_id: str) -> ThreadRow:
        return await self._write(runs.set_agent, thread_id, agent_id)

    async def deliver_queue_entry(
        self, thread_id: str, entry_id: str, message: Message
    ) -> tuple[Message, StoredEvent] | None:
        return await self._write(runs.deliver_queue_entry, thread_id, entry_id, message)

    def update_log(
        self, thread_id: str, row: LogRow, *, bodies: Sequence[str] = ("request", "response")
    ) -> Writing[StoredEvent]:
        return self._write(runs.update_log, thread_id, row, tuple(bodies))

    def insert_message_and_log(
        self,
        thread_id: str,
        message: Message,
        log: LogRow,
        *,
        require_live: bool = True,
        new_log: bool = False,
        durable: bool = True,
    ) -> Writing[tuple[Message, LogRow, list[StoredEvent]]]:
        return self._write(
            runs.insert_message_and_log,
            thread_id,
            message,
            log,
            require_live,
            new_log,
            durable=durable,
        )

    def update_message_and_log(
        self, thread_id: str, message: Message, log: LogRow, *, bodies: Sequence[str] = ()
    ) -> Writing[tuple[Message, list[StoredEvent]]]:
        return self._write(runs.update_message_and_log, thread_id, message, log, tuple(bodies))

    # -- accounts (spec 10) --------------------------------------------------------------
    async def create_user(self, user: UserRow) -> UserRow:
        return await self._write(auth.create_user, user)

    async def get_user(self, user_id: str) -> UserRow | None:
        return await self._point_read(auth.get_user, user_id)

    async def get_user_by_name(self, username: str) -> UserRow | None:
        return await self._point_read(auth.get_user_by_name, username)

    async def list_users(self) -> list[UserRow]:
        return await self._read(auth.list_users)

    async def update_user(self, user_id: str, patch: UserPatch) -> UserRow | None:
        return await self._write(auth.update_user, user_id, patch)

    async def rehash_password(self, user_id: str, old: str, new: str) -> bool:
        return await self._write(auth.rehash_password, user_id, old, new)

    async def delete_user(self, user_id: str) -> bool:
        return await self._write(auth.delete_user, user_id)

    async def has_credentials(self) -> bool:
        return await self._read(auth.has_credentials)

    async def create_api_key(self, key: ApiKeyRow, key_digest: str) -> ApiKeyRow:
        return await self._write(auth.create_api_key, key, key_digest)

    async def list_api_keys(self, user_id: str | None) -> list[ApiKeyRow]:
        return await self._read(auth.list_api_keys, user_id)

    async def get_api_key(self, key_id: str) -> ApiKeyRow | None:
        return await self._point_read(auth.get_api_key, key_id)

    async def delete_api_key(self, key_id: str) -> bool:
        return await self._write(auth.delete_api_key, key_id)

    async def api_key_by_digest(self, key_digest: str) -> tuple[ApiKeyRow, UserRow] | None:
        return await self._point_read(auth.api_key_by_digest, key_digest)

    async def delete_api_key_by_digest(self, key_digest: str) -> bool:
        return await self._write(auth.delete_api_key_by_digest, key_digest)

    async def touch_api_key(self, key_id: str, used_at_us: int) -> None:
        await self._write(auth.touch_api_key, key_id, used_at_us)

    async def create_session(self, token_digest: str, session: SessionRow) -> None:
        await self._write(auth.create_session, token_digest, session)

    async def session_by_digest(self, token_digest: str) -> tuple[SessionRow, UserRow] | None:
        return await self._point_read(auth.session_by_digest, token_digest)

    async def delete_session(self, token_digest: str) -> bool:
        return await self._write(auth.delete_session, token_digest)

    async def create_ticket(self, ticket_digest: str, ticket: TicketRow) -> None:
        await self._write(auth.create_ticket, ticket_digest, ticket)

    async def take_ticket(self, ticket_digest: str) -> TicketRow | None:
        return await self._write(auth.take_ticket, ticket_digest)

    async def create_oauth_client(self, client: OAuthClient) -> None:
        await self._write(oauth.create_oauth_client, client)

    async def get_oauth_client(self, client_id: str) -> OAuthClient | None:
        return await self._point_read(oauth.get_oauth_client, client_id)

    async def create_oauth_code(self, code: OAuthCode) -> None:
        await self._write(oauth.create_oauth_code, code)

    async def take_oauth_code(self, code_digest: str) -> OAuthCode | None:
        return await self._write(oauth.take_oauth_code, code_digest)

    async def create_oauth_token(self, token: OAuthToken) -> bool:
        return await self._write(oauth.create_oauth_token, token)

    async def take_oauth_refresh(self, refresh_digest: str) -> OAuthToken | None:
        return await self._write(oauth.take_oauth_refresh, refresh_digest)

    async def get_oauth_refresh(self, refresh_digest: str) -> OAuthToken | None:
        return await self._point_read(oauth.get_oauth_refresh, refresh_digest)

    async def revoke_oauth_token(self, token_digest: str) -> OAuthToken | None:
        return await self._write(oauth.revoke_oauth_token, token_digest)

    async def oauth_token_by_digest(self, access_digest: str) -> tuple[OAuthToken, UserRow] | None:
        return await self._point_read(oauth.oauth_token_by_digest, access_digest)

    async def list_oauth_grants(self, user_id: str) -> list[tuple[OAuthToken, OAuthClient | None]]:
        return await self._read(oauth.list_oauth_grants, user_id)

    async def revoke_oauth_grant(self, user_id: str, grant_id: str) -> bool:
        return await self._write(oauth.revoke_oauth_grant, user_id, grant_id)

    # -- schedules (spec 18) ---------------------------------------------------------------
    async def create_schedule(
        self, schedule: Schedule, source: str, next_fire_us: int | None
    ) -> ScheduleRow | None:
        return await self._write(schedules.create_schedule, schedule, source, next_fire_us)

    async def replace_schedule(
        self, schedule: Schedule, source: str, next_fire_us: int | None
    ) -> ScheduleRow | None:
        return await self._write(schedules.replace_schedule, schedule, source, next_fire_us)

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self._write(schedules.delete_schedule, schedule_id)

    async def get_schedule(self, schedule_id: str) -> ScheduleRow | None:
        return await self._point_read(schedules.get_schedule, schedule_id)

    async def list_schedules(self) -> list[ScheduleRow]:
        return await self._read(schedules.list_schedules)

    async def due_schedules(self, now_us: int, limit: int) -> list[ScheduleRow]:
        return await self._read(schedules.due_schedules, now_us, limit)

    async def claim_schedule_fire(
        self,
        schedule_id: str,
        due_us: int,
        node: str,
        lease_until_us: int,
        *,
        expect_next_us: int | None = None,
        new_next_us: int | None = None,
        stale_lease_until_us: int | None = None,
    ) -> ScheduleRow | None:
        return await self._write(
            schedules.claim_schedule_fire,
            schedule_id,
            due_us,
            node,
            lease_until_us,
            expect_next_us,
            new_next_us,
            stale_lease_until_us,
        )

    async def finish_schedule_fire(
        self,
        schedule_id: str,
        due_us: int,
        node: str,
        status: str,
        thread_id: str | None,
        error: str | None,
    ) -> bool:
        return await self._write(
            schedules.finish_schedule_fire, schedule_id, due_us, node, status, thread_id, error
        )

    # -- compactions (spec 23) -----------------------------------------------------------
    async def add_compaction(self, record: Compaction) -> Compaction | None:
        return await self._write(compactions.add_compaction, record)

    async def list_compactions(
        self, thread_id: str, *, active_only: bool = False
    ) -> list[Compaction]:
        return await self._read(compactions.list_compactions, thread_id, active_only)

    async def undo_compaction(self, thread_id: str, compaction_id: str) -> Compaction | None:
        return await self._write(compactions.undo_compaction, thread_id, compaction_id)

    # -- memory (spec 20) ----------------------------------------------------------------
    async def put_memory(
        self,
        scope: str,
        namespace: str,
        key: str,
        value: str,
        *,
        ttl_us: int | None = None,
        if_version: int | None = None,
    ) -> MemoryItem | None:
        return await self._write(memory.put_item, scope, namespace, key, value, ttl_us, if_version)

    async def get_memory(self, scope: str, namespace: str, key: str) -> MemoryItem | None:
        return await self._point_read(memory.get_item, scope, namespace, key, self.clock())

    async def delete_memory(
        self, scope: str, namespace: str, key: str, *, if_version: int | None = None
    ) -> bool:
        return await self._write(memory.delete_item, scope, namespace, key, if_version)

    async def search_memory(
        self,
        scope: str,
        prefix: Sequence[str],
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[MemoryItem]:
        return await self._read(
            memory.search_items, scope, tuple(prefix), filter, limit, offset, self.clock()
        )

    async def memory_namespaces(
        self,
        scope: str,
        prefix: Sequence[str] = (),
        *,
        suffix: Sequence[str] = (),
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        return await self._read(
            memory.list_namespaces,
            scope,
            tuple(prefix),
            tuple(suffix),
            max_depth,
            limit,
            offset,
            self.clock(),
        )

    async def delete_expired_memory(self, limit: int = 1000) -> int:
        return await self._write(memory.delete_expired, limit)

    async def take_attempt(self, attempt_id: str, windows: Sequence[tuple[str, int, int]]) -> int:
        # a counted attempt lost in a crash is no loss: no wait for the disk
        return await self._write(auth.take_attempt, attempt_id, list(windows), durable=False)

    async def give_back_attempt(self, attempt_id: str) -> None:
        await self._write(auth.give_back_attempt, attempt_id, durable=False)

    # -- inbound triggers (spec 22) ---------------------------------------------------
    async def create_trigger(self, trigger: Trigger, secret: str) -> TriggerRow | None:
        return await self._write(triggers.create_trigger, trigger, secret)

    async def replace_trigger(self, trigger: Trigger, secret: str | None) -> TriggerRow | None:
        return await self._write(triggers.replace_trigger, trigger, secret)

    async def delete_trigger(self, trigger_id: str) -> bool:
        return await self._write(triggers.delete_trigger, trigger_id)

    async def get_trigger(self, trigger_id: str) -> TriggerRow | None:
        return await self._point_read(triggers.get_trigger, trigger_id)

    async def list_triggers(self) -> list[TriggerRow]:
        return await self._read(triggers.list_triggers)

    async def claim_trigger_fire(
        self, trigger_id: str, key: str, thread_id: str, lease_us: int
    ) -> TriggerFire:
        return await self._write(triggers.claim_trigger_fire, trigger_id, key, thread_id, lease_us)

    async def finish_trigger_fire(self, trigger_id: str, key: str) -> bool:
        return await self._write(triggers.finish_trigger_fire, trigger_id, key)

    async def release_trigger_fire(self, trigger_id: str, key: str) -> bool:
        return await self._write(triggers.release_trigger_fire, trigger_id, key)

    # -- outbound webhooks (spec 19) ---------------------------------------------------
    async def create_webhook(self, sub: WebhookSubscription) -> WebhookSubscription:
        return await self._write(outbox.create_subscription, sub)

    async def get_webhook(self, sub_id: str) -> WebhookSubscription | None:
        return await self._point_read(outbox.get_subscription, sub_id)

    async def list_webhooks(self) -> list[WebhookSubscription]:
        return await self._read(outbox.list_subscriptions)

    async def update_webhook(
        self, sub_id: str, changes: dict[str, Any]
    ) -> WebhookSubscription | None:
        return await self._write(outbox.update_subscription, sub_id, dict(changes))

    async def delete_webhook(self, sub_id: str) -> bool:
        return await self._write(outbox.delete_subscription, sub_id)

    async def emit_webhook(self, event_type: str, data: dict[str, Any]) -> int:
        return await self._write(_emit, event_type, data)

    async def claim_webhooks(
        self, node_id: str, limit: int, lease_us: int
    ) -> list[tuple[WebhookDelivery, WebhookSubscription]]:
        if not await self._read(outbox.any_due, self.clock()):  # idle: no write lock
            return []
        return await self._write(outbox.claim_due, node_id, limit, lease_us)

    async def record_webhook_attempt(
        self,
        event_id: str,
        sub_id: str,
        node_id: str,
        state: str,
        next_at_us: int | None,
        status: int | None,
        error: str | None,
    ) -> bool:
        return await self._write(
            outbox.record_attempt, event_id, sub_id, node_id, state, next_at_us, status, error
        )

    async def list_webhook_deliveries(
        self, state: str | None = None, subscription_id: str | None = None, limit: int = 100
    ) -> list[WebhookDelivery]:
        return await self._read(outbox.list_deliveries, state, subscription_id, limit)

    async def get_webhook_delivery(self, event_id: str, sub_id: str) -> WebhookDelivery | None:
        return await self._point_read(outbox.get_delivery, event_id, sub_id)

    async def redeliver_webhook(self, event_id: str, sub_id: str) -> WebhookDelivery | None:
        return await self._write(outbox.redeliver, event_id, sub_id)

    async def count_settled_webhooks(self, state: str, before_us: int) -> int:
        return await self._read(outbox.count_settled, state, before_us)

    async def prune_settled_webhooks(self, state: str, before_us: int, limit: int) -> int:
        if limit < 1:
            raise StoreError("prune_settled_webhooks: limit must be 1 or more")
        return await self._write(outbox.prune_settled, state, before_us, limit)


def _emit(conn: Any, clock: Clock, event_type: str, data: dict[str, Any]) -> int:
    return outbox.emit(conn, clock(), event_type, data)
