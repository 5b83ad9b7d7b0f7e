"""The Store protocol: persistence behind one contract (spec 01 §1.11, decision D13).

Every write method is one transaction that updates the record(s), the thread counters,
``message_counts``, ``tool_calls`` rows and the durable ``thread_events`` row(s) together,
and returns the events it committed, in event order. Nothing above ``store/`` knows which
database is underneath: the SQLite store and the PostgreSQL store pass one contract suite.

``Store`` is the whole contract; its files (spec 07) and accounts (spec 10) parts are
protocols of their own, ``FileStore`` (``base_files.py``) and ``AccountStore``
(``base_accounts.py``), as are its schedules (spec 18, ``ScheduleStore``,
``base_schedules.py``) and its memory (spec 20, ``MemoryStore``, ``base_memory.py``),
which it extends. The plain data it takes and returns is
``shapes.py``, re-exported here.

What a node does beyond the data — its row and heartbeat, the lease reads that decide what
it runs, the notifications between nodes — is no part of it: that is the node's
``Cluster`` (``node/cluster.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from threadloom.records import (
    Approval,
    ApprovalDecision,
    ContextEntry,
    LogRow,
    Message,
    QueueEntry,
    SharedState,
    Spend,
    StatusError,
    SubagentRegistryEntry,
    ThreadStatus,
    ToolCall,
    UserQuota,
)
from threadloom.records.portable import ThreadExport
from threadloom.store.base_accounts import AccountStore
from threadloom.store.base_compactions import CompactionStore
from threadloom.store.base_files import FileStore
from threadloom.store.base_memory import MemoryStore
from threadloom.store.base_schedules import ScheduleStore
from threadloom.store.base_triggers import TriggerStore
from threadloom.store.base_webhooks import WebhookStore
from threadloom.store.shapes import (
    LOST_RUN,
    ApiKeyRow,
    ApprovalQuery,
    BodyStrip,
    Clock,
    CostSummary,
    CostSums,
    Decided,
    ExpiryCandidate,
    ExpiryKind,
    ExpiryRule,
    Fence,
    FileContent,
    InboxApproval,
    Lease,
    NewFile,
    NewThread,
    OperatingStats,
    Order,
    OwnerCount,
    ParentDelivery,
    PruneChunk,
    RequestDelta,
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
    delivered_message,
    search_terms,
    system_clock_us,
)

__all__ = [
    "LOST_RUN",
    "ApiKeyRow",
    "BodyStrip",
    "Clock",
    "CostSummary",
    "CostSums",
    "ExpiryCandidate",
    "ExpiryKind",
    "ExpiryRule",
    "Fence",
    "FileContent",
    "Lease",
    "NewFile",
    "NewThread",
    "OperatingStats",
    "Order",
    "OwnerCount",
    "ParentDelivery",
    "PruneChunk",
    "RequestDelta",
    "RunBegin",
    "RunEnd",
    "SearchHit",
    "SearchTerm",
    "SessionRow",
    "Settled",
    "Settlement",
    "StateChange",
    "StateWrite",
    "Store",
    "StoredEvent",
    "ThreadPatch",
    "ThreadQuery",
    "ThreadRow",
    "ThreadStats",
    "TicketRow",
    "UserPatch",
    "UserRow",
    "delivered_message",
    "search_terms",
    "system_clock_us",
]


@runtime_checkable
class Store(
    FileStore,
    AccountStore,
    ScheduleStore,
    WebhookStore,
    TriggerStore,
    MemoryStore,
    CompactionStore,
    Protocol,
):
    """Persistence of threads, messages, queue entries, logs, registry, events, files
    (:class:`FileStore`), accounts (:class:`AccountStore`), schedules
    (:class:`ScheduleStore`), outbound webhooks (:class:`WebhookStore`), inbound triggers
    (:class:`TriggerStore`), the memory store across threads (:class:`MemoryStore`,
    spec 20) and compaction records (:class:`CompactionStore`, spec 23)."""

    url: str
    kind: str
    """The backend, ``"sqlite"`` or ``"postgres"`` (health and diagnostics; never logic)."""
    node_id: str | None
    """This process's node id where several processes share the store (spec 12 §12.2)."""
    shared: bool
    """Whether several processes may run this store's threads at once (spec 12): their
    leases decide who runs a thread, and a lost run is one whose node is not live."""

    async def close(self) -> None:
        """Close the store; releases what ``claim_runner`` claimed."""
        ...

    def replica(self) -> Store:
        """The store that serves read-only pages — ``GET`` message pages and thread lists
        (spec 17 §17.5.4): this store, or a view of a PostgreSQL read replica whose reads see
        every write acknowledged before they began (else the primary answers them). Only
        its reads are used; the engine always reads and writes this store."""
        ...

    def replica_stats(self) -> dict[str, int]:
        """Reads of ``replica()`` by who answered (``replica``; the primary's ``lagging``,
        ``conflict``, ``unreachable``); empty without a replica."""
        ...

    def fenced(self, fence: Fence | None) -> Store:
        """This store with ``fence`` passed to each of its writes (spec 12 §12.3.3): a
        write of ``fence.thread_id`` is checked, in its transaction, against the lease —
        after another node took the thread over it finds no row and raises ``LeaseLost``,
        writing nothing; writes of other threads are not checked. A store whose threads
        carry no leases (one process runs them) returns itself, as it does for ``None``."""
        ...

    async def claim_runner(self) -> None:
        """Claim, for this process, the right to run this store's threads (a Runtime does
        before its start-up recovery, spec 12 §12.1 rule 4). A store only one process may
        run (an SQLite file) refuses while another process holds it: ``StoreLocked`` naming
        that process's pid. Idempotent; ``close`` releases it, and so does the holder's
        exit, however it exits. A store several processes share claims nothing here."""
        ...

    # -- threads ---------------------------------------------------------------------
    async def create_thread(self, new: NewThread) -> ThreadRow:
        """Insert a thread, status idle since its creation µs. Unknown parent →
        ``ThreadNotFound``."""
        ...

    async def import_threads(self, doc: ThreadExport) -> list[str]:
        """Store the threads of a portable file as history (spec 21 §21.4), parents first,
        in one transaction, with their ids, times, status, messages, logs, registry,
        approvals and files; no run starts and no queue is written. An id of the file
        the store holds already (a thread, message or log row) → ``ThreadExists`` naming
        it; a thread whose status is ``running`` → ``PortableFormatError``; nothing
        written then. Returns the thread ids."""
        ...

    async def fork_thread(self, doc: ThreadExport, from_thread: str, from_message: str) -> str:
        """Store the one thread of ``doc`` (new ids, no run) as a fork of ``from_thread``
        made at its message ``from_message`` (spec 08 §8.3.8): the import of
        ``import_threads`` and the lineage in one transaction. Returns the fork's id."""
        ...

    async def list_forks(self, thread_id: str) -> list[ThreadRow]:
        """The threads forked from ``thread_id``, oldest first, with list summaries."""
        ...

    async def create_child(
        self, new: NewThread, entry: SubagentRegistryEntry
    ) -> tuple[ThreadRow, StoredEvent]:
        """Insert a child thread (``new.parent_id`` set) and its parent's registry entry
        in one transaction, with the parent's ``subagent`` event (spec 06 §6.6.1 step 3):
        both exist or neither does."""
        ...

    async def get_thread(self, thread_id: str) -> ThreadRow | None: ...

    async def get_threads(self, thread_ids: Sequence[str]) -> dict[str, ThreadRow]: ...

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
        """Threads newest first, with the total matching the filters."""
        ...

    async def query_threads(self, query: ThreadQuery) -> tuple[list[ThreadRow], int]:
        """A page of threads with their list summaries, and the total matching."""
        ...

    async def catch_up_search(self) -> int:
        """Bring the full-text index up to date with the messages stored since it last
        did (spec 08 §8.14.1 rule 1): how many it indexed — 0 on a store whose every write
        keeps the index in step (PostgreSQL). :meth:`search_threads` does it first; the
        SQLite store also does it in the background, so the backlog stays small."""
        ...

    async def search_threads(
        self, query: ThreadQuery, terms: Sequence[SearchTerm]
    ) -> tuple[list[SearchHit], int]:
        """A page of the threads ``query`` selects that have a message matching ``terms``
        (at least one not excluded), best rank first, each with its best message and
        snippet; and how many threads match (spec 08 §8.14)."""
        ...

    async def thread_owners(self, user_id: str | None = None) -> list[OwnerCount]:
        """Thread counts per owner (only ``user_id``'s row when given), most threads first."""
        ...

    async def update_thread(self, thread_id: str, patch: ThreadPatch) -> ThreadRow:
        """Apply ``patch``; ``InvalidArgument`` when it leaves a type without a variable."""
        ...

    async def descendants(self, thread_id: str, limit: int | None = None) -> list[ThreadRow]:
        """Every descendant of the thread, in creation order (at most ``limit``)."""
        ...

    async def delete_thread(self, thread_id: str) -> list[str]:
        """Delete the thread and its descendants; ids deepest first, the thread last."""
        ...

    async def thread_stats(self, thread_id: str) -> ThreadStats: ...

    async def threads_with_status(self, state: str) -> list[str]: ...

    async def threads_with_queue(self) -> list[str]: ...

    async def operating_stats(self) -> OperatingStats:
        """Threads by run state and reason, the queue's depth and age, leases by node: one
        consistent read of aggregates for a metrics scrape (spec 17 §17.1)."""
        ...

    async def lease_heartbeat(self, thread_id: str) -> float | None:
        """When the node holding the thread's lease last heartbeat, in seconds since the
        epoch by the database's clock; None where threads carry no lease (one process runs
        the store) or that node has no row."""
        ...

    # -- run status and termination ---------------------------------------------------
    async def set_status(self, thread_id: str, status: ThreadStatus) -> StoredEvent:
        """Persist a ThreadStatus change with its ``status`` event."""
        ...

    # -- shared state and run context (spec 02 §2.20, spec 13 §13.2.11) ---------------
    async def get_shared_state(self, thread_id: str) -> SharedState:
        """The thread's shared state (``ThreadNotFound`` for an unknown thread)."""
        ...

    async def write_shared_state(self, thread_id: str, change: StateChange) -> StateWrite:
        """Apply ``change`` in one transaction with its ``shared_state`` event, or raise
        ``StateConflict`` / ``StateTooLarge`` / ``InvalidArgument`` and change nothing."""
        ...

    async def get_run_context(self, thread_id: str) -> list[ContextEntry]:
        """The context of the thread's latest AG-UI request (none: empty)."""
        ...

    async def set_run_context(self, thread_id: str, entries: Sequence[ContextEntry]) -> None:
        """Replace the thread's run context (no event: it is not part of its history)."""
        ...

    # -- the tool-call ledger (spec 14) -----------------------------------------------
    async def request_approvals(
        self, thread_id: str, approvals: Sequence[Approval]
    ) -> list[StoredEvent]:
        """Store pending approvals, one ``approval`` event each (its data: the approval
        as stored); a call already in the ledger keeps its row."""
        ...

    async def list_approvals(self, thread_id: str) -> list[Approval]:
        """The thread's approvals, oldest first."""
        ...

    async def query_approvals(self, query: ApprovalQuery) -> tuple[list[InboxApproval], int]:
        """A page of approvals across threads, newest request first, with the total
        matching the filters (spec 14 §14.9)."""
        ...

    async def get_approval(self, thread_id: str, tool_call_id: str) -> Approval | None: ...

    async def decide_approval(
        self, thread_id: str, tool_call_id: str, decision: ApprovalDecision
    ) -> Decided:
        """Record a decision on a pending approval in one transaction, or raise
        ``ApprovalNotFound`` / ``ApprovalConflict`` / ``InvalidArgument`` and change
        nothing (spec 14 §14.3)."""
        ...

    async def decided_parked(self, limit: int = 1_000) -> list[str]:
        """Threads parked for approval with no approval pending any more (their run did
        not start: a restart or a dead node in between, spec 14 §14.4)."""
        ...

    async def consume_approval(self, thread_id: str, tool_call_id: str) -> Approval | None:
        """Record the start of an approved call that has not started (consuming its
        approval); ``None`` when it is not one (the tool must not run)."""
        ...

    async def cancel_approvals(
        self, thread_id: str, reason: str, status: ThreadStatus | None
    ) -> list[StoredEvent]:
        """Cancel the approvals that can no longer run, answer their calls, and write
        ``status`` when any was cancelled (stop or terminate of a parked thread)."""
        ...

    async def settle_run(self, thread_id: str, settlement: Settlement) -> list[StoredEvent]:
        """Settle a stopped, interrupted, terminated, aborted or lost run in one
        transaction (see :class:`Settlement`)."""
        ...

    async def settle_resumable(self, thread_id: str, settlement: Settlement) -> Settled:
        """``settle_run`` of a lost run whose agent resumes (``settlement.resume_limit``,
        spec 16 §16.3): says whether the run is to be resumed (``Settled.resume``)."""
        ...

    async def record_tool_starts(
        self, thread_id: str, message_id: str, calls: Sequence[ToolCall]
    ) -> None:
        """Record, in one transaction, that ``calls`` of the model message ``message_id``
        start now (spec 16 §16.2): a ledger row each, approval NULL, ``started_at`` set;
        a call already in the ledger keeps its row."""
        ...

    async def tool_starts(self, thread_id: str) -> dict[str, int]:
        """The thread's tool calls whose start is recorded (plain starts and consumed
        approvals): tool call id → ``started_at``."""
        ...

    async def pending_resumes(self, limit: int = 1000) -> list[str]:
        """Threads whose lost run was settled to be resumed and that no run started since
        (spec 16 §16.4): ``failed``/``execution_lost`` with resumes counted, neither
        stopped nor terminated, no lease held."""
        ...

    async def clear_resumes(self, thread_id: str) -> None:
        """Set the thread's count of resumes in a row back to 0 (a resumed run ended)."""
        ...

    async def end_run(
        self,
        thread_id: str,
        reason: str,
        session: tuple[int, int],
        allow_continue: bool,
        delivery: ParentDelivery | None = None,
        error: StatusError | None = None,
    ) -> tuple[bool, list[StoredEvent]]:
        """The end-of-run check (spec 04 §4.7.3) in one transaction: persist the session
        counters and commit ``delivery`` (a child's session result, spec 06 §6.8.3);
        ``error`` is the cause a failed status keeps (spec 01 §1.7.4).
        Returns ``(False, events)`` when entries wait and the thread may run again (status
        left ``running``), else ``(True, events)`` with the settled status's event first;
        the delivery's events (on the parent) follow."""
        ...

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
        """The start of a run (spec 04 §4.7.3) in one transaction: ``None``, writing
        nothing, when the thread is gone or terminated, when ``only_parked`` and its status
        reason is not ``awaiting_approval`` (spec 14 §14.4), when ``only_resumed`` and no
        lost run of it waits to be resumed (spec 16 §16.4), when (unless ``force``) it is
        stopped or has no waiting entry, or when ``runnable`` (called with the thread's
        agent id inside the transaction; it must not do I/O) refuses it. Otherwise writes
        ``status`` (unless None) and, with ``deliver``, delivers every waiting entry in
        queue order as ``delivered_message`` builds it (no create hooks: the caller asks
        only when none apply). A transaction that writes a status or a delivery is
        durable."""
        ...

    async def enqueue_and_begin_run(
        self,
        thread_id: str,
        entry: QueueEntry,
        *,
        clear_stop: bool,
        status: ThreadStatus,
        runnable: Callable[[str], bool] | None = None,
    ) -> tuple[QueueEntry, StoredEvent, RunBegin | None]:
        """A send to a thread no run of this process owns: ``enqueue`` and then
        ``begin_run`` (not forced, delivering) in one durable transaction. The entry's
        event comes first; ``None`` for the run when ``begin_run`` would refuse."""
        ...

    async def deliver_queue(self, thread_id: str) -> list[tuple[Message, StoredEvent]]:
        """Deliver every waiting entry, in queue order, in one durable transaction (each
        as ``delivered_message`` builds it; no create hooks); [] and nothing written when
        none waits. Terminated → ``ThreadTerminated``."""
        ...

    async def finish_run(
        self, thread_id: str, message: Message, log: LogRow, end: RunEnd, *, new: bool = False
    ) -> tuple[Message, LogRow, bool, list[StoredEvent]]:
        """A run's last model message finalised with its LLM row (``update_message_and_log``
        with the response body) and the end-of-run check of ``end_run`` (without a parent
        delivery), in one transaction. Returns the stored message and row, whether the run
        settled, and the events: the log's, the message's, then the status's if settled.
        ``new``: the message and the row are not stored yet (a model call whose pending
        message was held back, ``engine/step/pending.py``): both are inserted as
        ``insert_message_and_log`` with ``new_log`` does, and the events are the
        message's, the log's, then the status's."""
        ...

    async def set_stopped(self, thread_id: str, stopped: bool) -> None:
        """Set or clear the thread's stop flag (spec 04 §4.20.2)."""
        ...

    async def set_session_turns(self, thread_id: str, side_a: int, side_b: int) -> None: ...

    async def set_agent(self, thread_id: str, agent_id: str) -> ThreadRow:
        """Bind the thread to another agent (a handoff, spec 04 §4.18)."""
        ...

    async def deliver_queue_entry(
        self, thread_id: str, entry_id: str, message: Message
    ) -> tuple[Message, StoredEvent] | None:
        """Store ``message`` (carrying the entry's id) and remove the entry, together;
        ``None`` when the entry is no longer waiting. Terminated → ``ThreadTerminated``."""
        ...

    async def update_log(
        self, thread_id: str, row: LogRow, *, bodies: Sequence[str] = ("request", "response")
    ) -> StoredEvent:
        """Replace a log row's columns (not its id, thread, order or ``created_at``); of
        its bodies the response when ``bodies`` names it. The request body is written at
        insert only (spec 04 §4.25): an update never rewrites, compares or deletes it,
        whatever ``bodies`` says."""
        ...

    async def terminate(self, thread_id: str) -> tuple[int, list[StoredEvent]]:
        """Set ``terminated`` and the stop flag; one ``message`` event per waiting queue
        entry, then a ``status`` event. Already terminated → (its timestamp, [])."""
        ...

    # -- messages --------------------------------------------------------------------
    async def insert_message(
        self, thread_id: str, message: Message, *, require_live: bool = True
    ) -> tuple[Message, StoredEvent]:
        """Insert with the next ``seq`` and a thread-clock ``created_at``; writes its
        ``tool_calls`` rows (a call id already used in the thread → ``InvalidMessage``).
        ``require_live``: a terminated thread raises ``ThreadTerminated``."""
        ...

    async def update_message(self, thread_id: str, message: Message) -> tuple[Message, StoredEvent]:
        """Replace the mutable fields of a stored message (never id, role, position,
        ``created_at``). Unknown → ``MessageNotFound``."""
        ...

    async def insert_message_and_log(
        self,
        thread_id: str,
        message: Message,
        log: LogRow,
        *,
        require_live: bool = True,
        new_log: bool = False,
        durable: bool = True,
    ) -> tuple[Message, LogRow, list[StoredEvent]]:
        """``insert_message`` and, in the same transaction, ``insert_log`` (``new_log``)
        or ``update_log`` without bodies; events: the message's, then the log's.
        ``durable=False`` (a pending model message with the LLM row of its request:
        state crash recovery repairs) lets the store commit without waiting for the
        disk; the next durable commit makes it durable too, in order."""
        ...

    async def update_message_and_log(
        self, thread_id: str, message: Message, log: LogRow, *, bodies: Sequence[str] = ()
    ) -> tuple[Message, list[StoredEvent]]:
        """``update_log`` then ``update_message`` in one transaction (a model message is
        finalised with its LLM row); events: the log's, then the message's."""
        ...

    async def delete_message(self, thread_id: str, message_id: str) -> list[StoredEvent]:
        """Delete a stored message with its cascade (spec 01 §1.11.3), or a waiting queue
        entry; one ``message_deleted`` event per removed item in canonical order, then one
        ``file`` event per attachment file removed with them (rule 4); [] when the id is
        neither."""
        ...

    async def get_message(self, thread_id: str, message_id: str) -> Message | None:
        """A stored message of this thread at any depth, else the pending view of a queue
        entry, else ``None``."""
        ...

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
        """A page over stored messages followed by pending queue views (spec 02 §2.4.1),
        in the requested order, with the filtered total."""
        ...

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
        """``read_page`` with each message as its wire record (``Message.to_wire()``), built
        from the rows without the records; ``None`` when a message of the page names a
        subagent (its projected fields need the thread layer: ``read_page`` then)."""
        ...

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
        """``get_thread`` and, when ``wanted(row)`` (called on whichever thread reads),
        ``read_page_wire``'s page, in one snapshot: a first read's access check and its
        page (issue 40). The page is ``None`` when there is no row, when ``wanted``
        refused it, or when a message of the page names a subagent. A store may read a
        default page without a transaction and, when a write of the thread committed
        between its statements, read both again in one: ``wanted`` is then asked again,
        of the row read again (spec 08 §8.4.1, C08-195)."""
        ...

    async def read_by_ids(
        self,
        thread_id: str,
        ids: Sequence[str],
        *,
        include_silent: bool,
        max_depth: int | None,
        include_workblocks: bool = False,
    ) -> list[Message]:
        """Ids mode (spec 02 §2.4.2): the matching candidates in canonical order."""
        ...

    async def newest_top_level_id(self, thread_id: str) -> str | None: ...

    async def top_level_history(self, thread_id: str) -> list[Message]:
        """Every stored top-level message in canonical order (execution history)."""
        ...

    # -- queue -----------------------------------------------------------------------
    async def enqueue(
        self, thread_id: str, entry: QueueEntry, *, clear_stop: bool
    ) -> tuple[QueueEntry, StoredEvent]:
        """Append a queue entry (``created_at`` from the thread clock). Terminated →
        ``ThreadTerminated``."""
        ...

    async def get_queue_entry(self, thread_id: str, entry_id: str) -> QueueEntry | None: ...

    async def update_queue_entry(
        self, thread_id: str, entry: QueueEntry
    ) -> tuple[QueueEntry, StoredEvent] | None:
        """Replace content, attachments, silent, metadata of a waiting entry; ``None`` when
        it is no longer waiting."""
        ...

    async def list_queue(self, thread_id: str) -> list[QueueEntry]: ...

    # -- registry --------------------------------------------------------------------
    async def get_registry(self, thread_id: str) -> list[SubagentRegistryEntry]: ...

    async def upsert_registry_entry(
        self, parent_id: str, entry: SubagentRegistryEntry
    ) -> StoredEvent: ...

    async def set_registry_status(
        self, parent_id: str, reference: str, status: str
    ) -> StoredEvent | None:
        """Set an entry's status; ``None`` (no event) when there is no such entry."""
        ...

    async def threads_with_open_children(self) -> list[str]:
        """Parents holding a registry entry whose status is not ``idle``, ``failed`` or
        ``terminated`` (the entries the reconciler checks, spec 06 §6.11)."""
        ...

    # -- logs and cost ---------------------------------------------------------------
    async def insert_log(
        self, thread_id: str, row: LogRow, *, anchor_newest: bool = False
    ) -> tuple[LogRow, StoredEvent]:
        """Insert a log row (``created_at`` from the clock, not bumped). With
        ``anchor_newest`` its ``message_id`` becomes the newest top-level message. A row
        with ``request_delta`` may have its request body stored as that delta; every read
        returns ``request_body`` exactly as given. A row may give its body lazily instead
        (``request_body`` None, the delta's ``whole`` and ``length``): reads then return
        ``whole()``, which the store builds only if it keeps the text. The returned row has
        no ``request_delta`` (and no ``request_body`` when it was given lazily)."""
        ...

    async def get_log(self, thread_id: str, log_id: str) -> LogRow | None: ...

    async def list_logs(
        self,
        thread_id: str,
        *,
        limit: int | None = 100,
        offset: int = 0,
        kind: str | None = None,
    ) -> list[LogRow]:
        """Rows by ``created_at`` then insertion order (spec 01 §1.3.5)."""
        ...

    async def cost_summary(self, thread_ids: Sequence[str]) -> CostSummary: ...

    # -- budgets and quotas (spec 15) ------------------------------------------------
    async def thread_spend(self, thread_id: str) -> Spend:
        """The spend of the thread and every descendant (its lifetime, spec 15 §15.5):
        USD of known cost, tokens, model requests (LLM rows) and successful requests of
        unknown cost; one read."""
        ...

    async def user_spend(self, user_id: str, since_us: int) -> Spend:
        """The spend of every thread of ``user_id`` whose LLM rows were created at or
        after ``since_us`` (a quota's window, spec 15 §15.4)."""
        ...

    async def set_user_quota(self, user_id: str, quota: UserQuota | None) -> None:
        """Set the quota of ``user_id``, or remove it (``None``)."""
        ...

    async def get_user_quota(self, user_id: str) -> UserQuota | None: ...

    async def list_user_quotas(self) -> list[UserQuota]:
        """Every quota, by user id."""
        ...

    # -- events ----------------------------------------------------------------------
    async def read_events(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[StoredEvent]: ...

    # -- retention (spec 17 §17.2) ----------------------------------------------------
    async def expiry_owners(self, keep: int) -> list[str | None]:
        """The owners (``None``: threads without one) with more than ``keep`` root threads."""
        ...

    async def expiry_page(
        self, rule: ExpiryRule, after: tuple[int, int, str] | None, limit: int
    ) -> list[ExpiryCandidate]:
        """Up to ``limit`` root threads in ``rule``'s order past the key ``after`` (None:
        from the start), each with its tree's size and whether it is active; for
        ``per_user`` every root of the owner in rank order (newest first: the caller
        counts the ranks), for the others only the roots the rule names, oldest first.
        One read."""
        ...

    async def delete_expired(self, rule: ExpiryRule, thread_id: str) -> dict[str, str | None]:
        """Delete the root thread and its descendants (``delete_thread``'s cascade) if,
        inside this one transaction, ``rule`` still names it and no thread of its tree is
        active (``running``, or queued messages); the deleted ids (deepest first, the
        thread last) with their owners, ``{}`` when nothing was deleted."""
        ...

    async def count_log_bodies(self, before_us: int, within: Sequence[str] | None = None) -> int:
        """Log rows created before ``before_us`` that still have a body (request,
        response, app request or app response); ``within``: only the rows of these root
        threads' trees (at most 500)."""
        ...

    async def strip_log_bodies(self, before_us: int, after: str | None, limit: int) -> BodyStrip:
        """One step of a log-body pass, one transaction on one thread: the thread of the
        first log row (by id, past ``after``; None: the start) created before
        ``before_us`` that has a body; of up to ``limit`` of its rows created before then,
        delete the bodies (request, response, app request and response), keeping every
        other column (tokens, cost, timings). A newer row whose request is stored as a
        delta of one of them is first stored in full, so it still reads the same. Call
        again with the returned cursor until it is ``None``."""
        ...

    async def prune_events(
        self, older_than_us: int, keep: int, after: int = 0, max_threads: int = 200
    ) -> PruneChunk:
        """One step of a pass over the replay window (spec 09 §9.6.1): for up to
        ``max_threads`` threads with event rows left, past cursor ``after`` (0: the
        start), delete the rows created before ``older_than_us`` and those with more than
        ``keep`` newer rows, in ``seq`` order, and record ``events_pruned_through``; one
        transaction. Call again with the returned cursor until it is ``None``."""
        ...
