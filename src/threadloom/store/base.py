"""The Store protocol: persistence behind one contract (spec 01 §1.11, decision D13).

Every write method is one transaction that updates the record(s), the thread counters,
``message_counts``, ``tool_calls`` rows and the durable ``thread_events`` row(s) together,
and returns the events it committed, in event order. Nothing above ``store/`` knows which
database is underneath: the SQLite store and the PostgreSQL store pass one contract suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from threadloom.records import (
    FileRecord,
    FileStats,
    LogRow,
    Message,
    QueueEntry,
    SubagentRegistryEntry,
    ThreadRecord,
    ThreadStatus,
)

Clock = Callable[[], int]
"""Returns the current time in µs since the epoch; injectable for tests."""


def system_clock_us() -> int:
    """Wall-clock microseconds since the Unix epoch."""
    return time.time_ns() // 1000


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """A committed row of ``thread_events`` (spec 01 §1.11.5, spec 09 §9.6)."""

    thread_id: str
    seq: int
    kind: str
    entity_id: str | None
    payload: dict[str, Any] | None
    created_at: int


@dataclass(frozen=True, slots=True)
class NewThread:
    """What ``create_thread`` needs; the store adds counters and the initial status."""

    id: str
    agent_id: str
    user_id: str | None = None
    tags: tuple[str, ...] = ()
    parent_id: str | None = None
    arguments: dict[str, Any] | None = None
    overlap: str | None = None


@dataclass(frozen=True, slots=True)
class ThreadQuery:
    """Filters, order and page of a thread listing (spec 08 §8.3.1)."""

    user_id: str | None = None
    agent_id: str | None = None
    """Current or origin agent."""
    include_children: bool = False
    """With ``agent_id``: also every descendant of the matching threads."""
    parent_id: str | None = None
    roots_only: bool = False
    search: str | None = None
    """Case-insensitive substring of the id or of a tag."""
    created_from_us: int | None = None
    created_to_us: int | None = None
    executing: bool | None = None
    terminated: bool | None = None
    states: tuple[str, ...] = ()
    sort: str = "activity"
    """``activity`` (last activity, then creation, newest first), ``created``, ``oldest``."""
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True, slots=True)
class ThreadPatch:
    """Changes to a thread's mutable fields (spec 08 §8.3.5); applied in one transaction.

    ``env`` replaces every variable when ``replace_env`` (None clears them); then
    ``env_set``, ``env_type_set`` and ``env_delete`` apply in that order.
    """

    tags: tuple[str, ...] | None = None
    set_overlap: bool = False
    overlap: str | None = None
    replace_env: bool = False
    env: dict[str, str] | None = None
    env_types: dict[str, str] | None = None
    env_set: dict[str, str] = field(default_factory=dict)
    env_type_set: dict[str, str] = field(default_factory=dict)
    env_delete: tuple[str, ...] = ()
    set_properties: bool = False
    properties: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OwnerCount:
    user_id: str | None
    thread_count: int


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """A ``threads`` row: the record plus the engine's state columns (spec 04 §4.27)."""

    id: str
    agent_id: str
    origin_agent_id: str
    user_id: str | None
    tags: tuple[str, ...]
    parent_id: str | None
    arguments: dict[str, Any]
    created_at_us: int
    terminated: int | None
    status: ThreadStatus
    stopped: bool
    overlap: str | None
    event_seq: int
    events_pruned_through: int
    session_turns_a: int = 0
    session_turns_b: int = 0
    has_children: bool | None = None
    """Whether the thread's subagent registry holds any entry; ``None`` when the read that
    made this row did not look (only ``get_thread`` does)."""
    env_types: dict[str, str] | None = None
    """Which thread variables are ``text`` (the values themselves are write-only)."""
    last_activity_us: int | None = None
    """Last send or run start/end on this thread or a descendant (None: never)."""
    last_message_preview: str | None = None
    """Newest visible top-level user text, cut to 140 characters (list reads only)."""
    last_message_at_us: int | None = None
    """Newest visible user or final assistant message (list reads only)."""

    def record(self) -> ThreadRecord:
        """The wire-level thread record (``created_at`` in seconds, conflict C13)."""
        return ThreadRecord(
            id=self.id,
            agent_id=self.agent_id,
            origin_agent_id=self.origin_agent_id,
            user_id=self.user_id,
            tags=list(self.tags),
            parent=self.parent_id,
            terminated=self.terminated,
            created_at=self.created_at_us // 1_000_000,
            arguments=dict(self.arguments),
            status=self.status,
        )


@dataclass(frozen=True, slots=True)
class ParentDelivery:
    """A child's session result reaching its parent (spec 06 §6.8.3), committed in the
    same transaction as the child's run end: the parent's registry entry for
    ``reference`` gets ``status``, and ``entry`` (when set) is queued in the parent unless
    the parent is terminated. A parent that no longer exists gets nothing."""

    parent_id: str
    reference: str
    status: str
    entry: QueueEntry | None = None


@dataclass(frozen=True, slots=True)
class Settlement:
    """How to settle a run that did not end by itself (spec 04 §4.20.1, §4.24.1).

    One transaction, events in this order: pending model messages → ``failed`` (keeping
    ``partial_text``), then tool results for unanswered calls of the run's model messages
    and completion of incomplete LLM log rows (logs first when ``logs_first``), then the
    optional ``system`` note, then the status (``reason`` None leaves it unchanged).
    """

    tool_result_text: str
    log_error: str
    log_error_type: str
    since: int | None = None
    partial_text: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    note_status_kind: str | None = None
    reason: str | None = None
    logs_first: bool = False
    only_if_running: bool = False
    delivery: ParentDelivery | None = None
    """A child's session result for its parent, committed with the settlement (its events
    follow the child's)."""


LOST_RUN = Settlement(
    tool_result_text="Execution lost: the runtime restarted before this tool call finished.",
    log_error="Request lost: the runtime stopped before the response finished.",
    log_error_type="execution_lost",
    reason="execution_lost",
    logs_first=True,
    only_if_running=True,
)
"""Settlement of a run lost in a crash (spec 04 §4.24.1): only while the status is running."""


@dataclass(frozen=True, slots=True)
class ThreadStats:
    message_count: int
    log_count: int
    queued_count: int


@dataclass(slots=True)
class CostSums:
    """Sums over costed rows (spec 01 §1.10.2); a thread's or one model's share."""

    llm_cost: float = 0.0
    app_cost: float = 0.0
    input_cost: float = 0.0
    cached_cost: float = 0.0
    output_cost: float = 0.0
    router_fee_cost: float = 0.0
    request_count: int = 0
    message_count: int = 0


@dataclass(slots=True)
class CostSummary:
    """Per-thread sums and per-model LLM sums over a set of threads."""

    threads: dict[str, CostSums] = field(default_factory=dict)
    models: dict[str, CostSums] = field(default_factory=dict)


Order = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class NewFile:
    """What ``write_file`` stores at a normalised path (spec 07 §7.5): the description of
    a file (``storage="local"``, content passed beside it) or of an external link
    (``storage="url"``, ``location`` the URL, ``size`` as declared)."""

    path: str
    mime_type: str
    storage: Literal["local", "url"] = "local"
    location: str | None = None
    size: int = 0
    metadata: dict[str, Any] | None = None
    width: int | None = None
    height: int | None = None


@dataclass(frozen=True, slots=True)
class FileContent:
    """One version of a file's content, for chunked reads: ``version`` changes whenever
    the file is overwritten or deleted (a reader holding it notices, spec 07 §7.5)."""

    version: int
    size: int


# -- users and credentials (spec 10) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserRow:
    """A ``users`` row (spec 10 §10.5.8); ``password_hash`` is a KDF string, never a password."""

    id: str
    username: str
    role: str
    created_at_us: int
    password_hash: str | None = None
    permissions: tuple[str, ...] | None = None
    roles: tuple[str, ...] = ()
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None


@dataclass(frozen=True, slots=True)
class UserPatch:
    """Changes to a user, applied in one transaction. A field left ``None`` (or a ``set_*``
    flag left false) keeps its value; a new password revokes the user's sessions."""

    set_password: bool = False
    password_hash: str | None = None
    role: str | None = None
    set_permissions: bool = False
    permissions: tuple[str, ...] | None = None
    roles: tuple[str, ...] | None = None
    profile: dict[str, str | None] = field(default_factory=dict)
    """``display_name``, ``email``, ``avatar_url``: the keys present are set."""


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    """An API key's record; the key itself is stored only as its SHA-256 digest."""

    id: str
    user_id: str
    name: str
    key_prefix: str
    last_five: str
    created_at_us: int
    last_used_at_us: int | None = None
    expires_at_us: int | None = None


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A login session; the token itself is stored only as its SHA-256 digest."""

    user_id: str
    created_at_us: int
    expires_at_us: int


@dataclass(frozen=True, slots=True)
class TicketRow:
    """A WebSocket ticket (spec 10 §10.9): bound to a pathname, carrying the credential it
    was minted with (``auth_type`` and the digest of that credential) to re-check at use."""

    pathname: str
    auth_type: str
    principal_id: str
    credential_digest: str | None
    expires_at_us: int


@runtime_checkable
class Store(Protocol):
    """Persistence of threads, messages, queue entries, logs, registry, events and files."""

    url: str

    async def close(self) -> None: ...

    # -- threads ---------------------------------------------------------------------
    async def create_thread(self, new: NewThread) -> ThreadRow:
        """Insert a thread, status idle since its creation µs. Unknown parent →
        ``ThreadNotFound``."""
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

    # -- run status and termination ---------------------------------------------------
    async def set_status(self, thread_id: str, status: ThreadStatus) -> StoredEvent:
        """Persist a ThreadStatus change with its ``status`` event."""
        ...

    async def settle_run(self, thread_id: str, settlement: Settlement) -> list[StoredEvent]:
        """Settle a stopped, interrupted, terminated, aborted or lost run in one
        transaction (see :class:`Settlement`)."""
        ...

    async def end_run(
        self,
        thread_id: str,
        reason: str,
        session: tuple[int, int],
        allow_continue: bool,
        delivery: ParentDelivery | None = None,
    ) -> tuple[bool, list[StoredEvent]]:
        """The end-of-run check (spec 04 §4.7.3) in one transaction: persist the session
        counters and commit ``delivery`` (a child's session result, spec 06 §6.8.3).
        Returns ``(False, events)`` when entries wait and the thread may run again (status
        left ``running``), else ``(True, events)`` with the settled status's event first;
        the delivery's events (on the parent) follow."""
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
        its bodies only the ``bodies`` parts named (the others are left as stored)."""
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
    ) -> tuple[Message, LogRow, list[StoredEvent]]:
        """``insert_message`` and, in the same transaction, ``insert_log`` (``new_log``)
        or ``update_log`` without bodies; events: the message's, then the log's."""
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
        ``anchor_newest`` its ``message_id`` becomes the newest top-level message."""
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

    # -- events ----------------------------------------------------------------------
    async def read_events(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[StoredEvent]: ...

    # -- files (spec 07) ---------------------------------------------------------------
    # Paths given to the store are already normalised (spec 07 §7.2). Every write is one
    # transaction that also writes one durable ``file`` event per change: kind ``file``,
    # ``entity_id`` the path, ``payload`` the published data ``{"event_type", "data"}``
    # (file events are replayed from their payloads, spec 09 §9.7.2). Files work on
    # terminated threads. A store raises the ``FileError`` subclasses of spec 07 §7.5.
    async def write_file(
        self,
        thread_id: str,
        entry: NewFile,
        content: bytes | None,
        *,
        thumbnail: bytes | None = None,
        max_thread_bytes: int | None = None,
    ) -> tuple[FileRecord, StoredEvent]:
        """Create or replace the file or link at ``entry.path`` (``file_created`` or
        ``file_updated``). A directory there → ``IsADirectory``; a file above it →
        ``NotADirectory``; stored content of the thread over ``max_thread_bytes`` →
        ``FileTooLarge``."""
        ...

    async def read_file(self, thread_id: str, path: str) -> bytes | None:
        """The whole content, read in one snapshot; ``None`` for a link, a directory or
        nothing."""
        ...

    async def open_file(self, thread_id: str, path: str) -> FileContent | None:
        """The current content version of a stored file (``None`` as ``read_file``)."""
        ...

    async def read_file_range(
        self, thread_id: str, version: int, offset: int, length: int
    ) -> bytes | None:
        """``length`` bytes from ``offset`` of one content version, in one snapshot;
        ``None`` when that version no longer exists (overwritten or deleted)."""
        ...

    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None:
        """The record of a file, link, explicit or implicit directory, or the root."""
        ...

    async def list_dir(self, thread_id: str, path: str) -> list[FileRecord]:
        """Direct children of a directory (explicit and implicit), unordered; ``[]`` for a
        file or nothing."""
        ...

    async def list_entries(self, thread_id: str, prefix: str) -> list[FileRecord]:
        """Every stored file, link and explicit directory whose path starts with the
        literal ``prefix`` (case-sensitive, no wildcards), ordered by path."""
        ...

    async def file_stats(self, thread_id: str, path: str) -> FileStats:
        """Total size and number of files and links at or below ``path``."""
        ...

    async def get_file_thumbnail(self, thread_id: str, path: str) -> bytes | None: ...

    async def unlink_file(self, thread_id: str, path: str) -> StoredEvent | None:
        """Delete a file or link (``file_deleted``); ``None`` when nothing is there; a
        directory → ``IsADirectory``."""
        ...

    async def mkdir_file(self, thread_id: str, path: str) -> tuple[FileRecord, StoredEvent | None]:
        """Create an explicit directory (``file_created``); an existing explicit directory
        is returned without an event. A file at or above ``path`` → ``NotADirectory``."""
        ...

    async def rmdir_file(self, thread_id: str, path: str, recursive: bool) -> list[StoredEvent]:
        """Remove a directory (and with ``recursive`` everything below): one
        ``file_deleted`` per removed file, link and explicit directory, in path order."""
        ...

    async def move_file(
        self, thread_id: str, source: str, destination: str
    ) -> tuple[FileRecord, StoredEvent | None]:
        """Move an entry with everything below it (one ``file_moved``); no event when
        ``source == destination``."""
        ...

    # -- users and credentials (spec 10) ---------------------------------------------
    async def create_user(self, user: UserRow) -> UserRow:
        """Insert a user. A taken username → ``UsernameTaken`` (nothing stored)."""
        ...

    async def get_user(self, user_id: str) -> UserRow | None: ...

    async def get_user_by_name(self, username: str) -> UserRow | None: ...

    async def list_users(self) -> list[UserRow]:
        """Every user, ordered by username."""
        ...

    async def update_user(self, user_id: str, patch: UserPatch) -> UserRow | None:
        """Apply ``patch`` (None for an unknown user). Demoting the last admin →
        ``LastAdmin``; a password change deletes the user's sessions in the same
        transaction."""
        ...

    async def delete_user(self, user_id: str) -> bool:
        """Delete a user with their sessions and API keys (their threads keep ``user_id``).
        False for an unknown user; deleting the last admin → ``LastAdmin``."""
        ...

    async def has_credentials(self) -> bool:
        """Whether any user row or API key exists (spec 10 §10.1)."""
        ...

    async def create_api_key(self, key: ApiKeyRow, key_digest: str) -> ApiKeyRow: ...

    async def list_api_keys(self, user_id: str | None) -> list[ApiKeyRow]:
        """Keys of ``user_id`` (every key when None), oldest first."""
        ...

    async def get_api_key(self, key_id: str) -> ApiKeyRow | None: ...

    async def delete_api_key(self, key_id: str) -> bool: ...

    async def api_key_by_digest(self, key_digest: str) -> tuple[ApiKeyRow, UserRow] | None:
        """The key and its user by the key's digest (expiry is the caller's check)."""
        ...

    async def delete_api_key_by_digest(self, key_digest: str) -> bool: ...

    async def touch_api_key(self, key_id: str, used_at_us: int) -> None:
        """Record a use of the key (callers write at most once a minute per key)."""
        ...

    async def create_session(self, token_digest: str, session: SessionRow) -> None: ...

    async def session_by_digest(self, token_digest: str) -> tuple[SessionRow, UserRow] | None:
        """The session and its user by the token's digest (expiry is the caller's check)."""
        ...

    async def delete_session(self, token_digest: str) -> bool: ...

    async def create_ticket(self, ticket_digest: str, ticket: TicketRow) -> None:
        """Store a ticket; tickets expired for a while are pruned in the same transaction."""
        ...

    async def take_ticket(self, ticket_digest: str) -> TicketRow | None:
        """Delete the ticket and return it (None when unknown): a ticket is used once."""
        ...
