"""The plain data the Store protocol takes and returns (spec 01 §1.11): thread rows and
patches, run settlements, cost sums, file and account records, and a log row's request
delta (``RequestDelta``, defined in ``records/log.py`` below ``LogRow``, which carries it). No
I/O here; the protocol itself is ``threadloom.store.base``, which re-exports every name
of this module."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from threadloom.records import (
    Approval,
    Message,
    QueueEntry,
    SharedState,
    StatusError,
    ThreadBudget,
    ThreadRecord,
    ThreadStatus,
)
from threadloom.records import RequestDelta as RequestDelta

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
    data: dict[str, Any] | None = field(default=None, compare=False)
    """What to publish for the event, when the transaction that wrote it knows the
    committed state (spec 09 §9.6 rule 6: the committing node sends its committed state),
    so publishing needs no read. Never stored: replay reads the entity then."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """A write of a thread's shared state (spec 02 §2.20): ``replace`` it (``None``: keep
    it), then set the keys of ``merge`` and drop those of ``remove``; refused unless the
    stored version is ``expected_version`` (``None``: any)."""

    replace: dict[str, Any] | None = None
    merge: dict[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    expected_version: int | None = None


@dataclass(frozen=True, slots=True)
class StateWrite:
    """The shared state after a write, and its ``shared_state`` event (none when the
    write changed nothing)."""

    state: SharedState
    events: list[StoredEvent]


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
    budgets: tuple[ThreadBudget, ...] = ()
    """The thread's own budgets (spec 15 §15.3); the store adds the ``thread``-scope
    budgets its parent keeps (they limit an ancestor's lifetime, descendants included)."""


@dataclass(frozen=True, slots=True)
class ApprovalQuery:
    """Filters and page of the approvals inbox across threads (spec 14 §14.9)."""

    user_id: str | None = None
    """Only threads this user owns (``None``: every thread — an admin's inbox)."""
    agent_id: str | None = None
    """Only threads whose current agent is this one."""
    states: tuple[str, ...] = ("pending",)
    """Approval states to list; empty: every state."""
    limit: int = 50
    offset: int = 0


@dataclass(frozen=True, slots=True)
class InboxApproval:
    """One approval of the inbox with what the inbox shows of its thread."""

    approval: Approval
    agent_id: str
    user_id: str | None


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
    tags: tuple[str, ...] = ()
    """Tags the thread must have, each exactly (case-sensitive, whole tag)."""
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
    ``env_set``, ``env_type_set`` and ``env_delete`` apply in that order. ``agent_id``
    binds the thread to another agent in the same transaction.
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
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class PruneChunk:
    """What one step of an event-row pruning pass did (``Store.prune_events``)."""

    rows: int
    """Event rows deleted."""
    threads: int
    """Threads whose pruning this step finished (a thread the row budget split between
    steps counts in the step that finishes it)."""
    cursor: int | None
    """Where the pass goes on (the next call's ``after``); ``None``: the pass is done."""


ExpiryKind = Literal["inactive", "terminated", "per_user"]
"""The thread rules of retention (spec 17 §17.2): no activity since a time, terminated
before a time, beyond the newest ``keep`` of their owner."""


@dataclass(frozen=True, slots=True)
class ExpiryRule:
    """One thread rule of retention (spec 17 §17.2), as the store applies it to root
    threads (a child thread goes with its root, never alone)."""

    kind: ExpiryKind
    before_us: int = 0
    """``inactive``: a root whose ``last_activity_us`` is before this goes;
    ``terminated``: one terminated before this."""
    keep: int = 0
    """``per_user``: the newest ``keep`` roots of ``user_id`` (by last activity, then
    creation, then id) stay."""
    user_id: str | None = None
    """``per_user``: the owner whose roots are ranked (``None``: threads without one)."""


@dataclass(frozen=True, slots=True)
class ExpiryCandidate:
    """A root thread a retention rule names, as one page read it."""

    id: str
    user_id: str | None
    threads: int
    """The thread and its descendants: what its deletion removes."""
    active: bool
    """A thread of the tree is ``running`` or has queued messages: it is not deleted."""
    key: tuple[int, int, str]
    """The rule's order key of the row (the next page starts after it)."""


@dataclass(frozen=True, slots=True)
class BodyStrip:
    """What one step of a log-body pass did (``Store.strip_log_bodies``)."""

    rows: int
    """Log rows whose bodies were deleted."""
    rerooted: int
    """Newer rows whose request, stored as a delta of a stripped row, was written out in
    full first (spec 04 §4.25)."""
    cursor: str | None
    """Where the pass goes on (the next call's ``after``); ``None``: the pass is done."""


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
    budgets: tuple[ThreadBudget, ...] = ()
    """The budgets the thread keeps (spec 15 §15.3): its own and its ancestors'
    ``thread``-scope ones."""
    has_run_context: bool = False
    """Whether the thread keeps a run context (spec 13 §13.2.11): a run reads it only then."""
    forked_from_thread_id: str | None = None
    """The thread this one was forked from (spec 08 §8.3.8); ``None`` for a thread that is no
    fork. The original may have been deleted since."""
    forked_from_message_id: str | None = None
    """The original's message the fork was made at (its id in the original thread)."""

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


def delivered_message(entry: QueueEntry) -> Message:
    """The stored message a queue entry becomes at delivery (spec 04 §4.10 step 2), before
    the create hooks: the entry's id, role, content, attachments, silent flag and metadata,
    ``subagent_id`` from ``metadata.subagent_id``; ``created_at`` is set by the store."""
    value = (entry.metadata or {}).get("subagent_id")
    return Message(
        id=entry.id,
        role=entry.role,
        content=entry.content,
        attachments=entry.attachments,
        silent=entry.silent,
        metadata=entry.metadata,
        subagent_id=value if isinstance(value, str) and value else None,
    )


SEARCH_MAX_TERMS = 16
"""The most terms a search text keeps (the rest are ignored)."""
_SEARCH_TERM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """One term of a search text (spec 08 §8.14): a word or a quoted phrase, whose words
    a message must hold (in that order, for a phrase) — or must not, when ``exclude``."""

    text: str
    exclude: bool = False


def search_terms(text: str) -> tuple[SearchTerm, ...]:
    """The terms of a search text: words and ``"quoted phrases"`` separated by spaces, a
    leading ``-`` excluding one. A term without a letter or digit is dropped (no word of
    it could be found); at most :data:`SEARCH_MAX_TERMS`. The stores turn the same terms
    into their own query syntax, so no text a person types is ever query syntax."""
    terms: list[SearchTerm] = []
    for m in _SEARCH_TERM.finditer(text):
        phrase = m.group(2) is not None
        words = (m.group(2) if phrase else m.group(4).replace('"', "")).strip()
        if not any(ch.isalnum() for ch in words):
            continue
        terms.append(SearchTerm(" ".join(words.split()), bool(m.group(1) or m.group(3))))
    return tuple(terms[:SEARCH_MAX_TERMS])


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A thread a search found (spec 08 §8.14): the thread with its list summaries, its
    best-ranked matching message, a snippet of that message's text as parts (``True``:
    a matched word), the store's rank of it (higher is better; comparable only within
    one answer) and how many of the thread's messages match."""

    thread: ThreadRow
    message_id: str
    snippet: tuple[tuple[str, bool], ...]
    rank: float
    matches: int


@dataclass(frozen=True, slots=True)
class RunBegin:
    """What ``Store.begin_run`` committed: the thread row as of the commit, the queue
    entries it delivered, and its events (the status change first, then one ``message``
    event per delivered entry)."""

    row: ThreadRow
    delivered: list[Message]
    events: list[StoredEvent]
    lease: Lease | None = None
    """The lease the run holds (a store several nodes share; ``None`` on SQLite)."""
    parked: bool = False
    """Whether the thread was parked for approval (its status reason before this run was
    ``awaiting_approval``, spec 14 §14.4): the run reads the ledger before anything else."""
    resumed: bool = False
    """Whether the run resumes a lost run (spec 16 §16.4): the status before it was
    ``failed``/``execution_lost`` with resumes counted; it answers the lost run's open
    calls before anything else, and keeps the queue for its first step."""

    @property
    def holds_queue(self) -> bool:
        """Whether the run keeps the queue until its open calls are answered."""
        return self.parked or self.resumed


@dataclass(frozen=True, slots=True)
class Lease:
    """A node's ownership of a thread's execution (spec 12 §12.3): the node and the
    fencing token of this ownership, which only ever grows per thread."""

    node_id: str
    token: int


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease an execution's writes of ``thread_id`` are checked against."""

    thread_id: str
    lease: Lease


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The end-of-run check (spec 04 §4.7.3) to commit with a run's last write: the
    run's reason code, its session counters, and whether waiting entries may continue
    the run (``False`` while shutting down)."""

    reason: str
    session: tuple[int, int]
    allow_continue: bool
    error: StatusError | None = None
    """Why the run failed (its ``failed`` status keeps it, spec 01 §1.7.4)."""


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
    error: StatusError | None = None
    """Why a ``failed`` status failed (spec 01 §1.7.4); ``None``: the reason's own."""
    logs_first: bool = False
    only_if_running: bool = False
    delivery: ParentDelivery | None = None
    """A child's session result for its parent, committed with the settlement (its events
    follow the child's)."""
    take_over: bool = False
    """Settle a lost run: the node takes the lease first unless a live node holds it (then
    nothing is written), and releases it after (spec 12 §12.6.3)."""
    skip_events: int = 0
    """Event numbers left unused before the settlement's own events and recorded as
    pruned (``events_pruned_through``): the numbers a lost unsynced tail may have
    published, so they are never given to other events (spec 09 §9.6 rule 1)."""
    resume_limit: int | None = None
    """A lost run of an agent with ``on_lost="resume"`` (spec 16): its ``max_resumes``.
    While the thread's resumes in a row are fewer, and the thread is neither stopped nor
    terminated, the settlement leaves the run's top-level tool calls open, its approvals
    as they are and a child's session result undelivered, and counts one resume
    (``Store.settle_resumable``); else the run is settled for good (with the error
    ``ResumesExhausted`` when the count was reached) and the count goes back to 0."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What ``Store.settle_resumable`` committed: its events, and the number of the
    resume it counted (1 for the first in a row), 0 when the run was settled for good."""

    events: list[StoredEvent]
    resume: int = 0


LOST_TAIL_EVENTS = 16
"""Event numbers a run's unsynced tail can have published: the pending model message and
the LLM row of one request (two events; docs/engine.md, "Durability"), with room to
spare."""

LOST_RUN = Settlement(
    tool_result_text="Execution lost: the runtime restarted before this tool call finished.",
    log_error="Request lost: the runtime stopped before the response finished.",
    log_error_type="execution_lost",
    reason="execution_lost",
    logs_first=True,
    only_if_running=True,
    take_over=True,
    skip_events=LOST_TAIL_EVENTS,
)
"""Settlement of a run lost in a crash (spec 04 §4.24.1): only while the status is running.
An operating-system crash can have lost the run's last, unsynced commit after its events
were published; its event numbers are skipped and count as pruned, so a stream client that
saw them resumes with ``resync`` instead of missing the events that would reuse them."""


@dataclass(frozen=True, slots=True)
class ThreadStats:
    message_count: int
    log_count: int
    queued_count: int


@dataclass(frozen=True, slots=True)
class OperatingStats:
    """What the store holds now, for the gauges of a metrics scrape (spec 17 §17.1): one
    read, the same on every node (``Store.operating_stats``)."""

    threads: dict[tuple[str, str], int]
    """Threads by ``(run state, reason)``; the reason ``""`` where the status has none."""
    queued_messages: int
    """Entries waiting in threads' queues."""
    queued_threads: int
    """Threads with at least one waiting entry."""
    oldest_queued_us: int | None
    """``created_at`` of the oldest waiting entry (µs since the epoch); None: none waits."""
    leases: dict[str, int]
    """Running threads by the node holding their lease (where threads carry leases; on
    a store one process runs, the running threads under ``""``)."""


@dataclass(slots=True)
class CostSums:
    """Sums over LLM and costed app rows (spec 01 §1.10.2); a thread's or one model's
    share."""

    llm_cost: float = 0.0
    app_cost: float = 0.0
    input_cost: float = 0.0
    cached_cost: float = 0.0
    output_cost: float = 0.0
    router_fee_cost: float = 0.0
    request_count: int = 0
    message_count: int = 0
    unpriced_count: int = 0
    """LLM requests without a price (``cost_total`` null): counted, costing nothing."""


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


class Decided(NamedTuple):
    """What a decision on an approval wrote (spec 14 §14.3): the approval as decided, its
    events, and whether no approval of the thread is pending any more (the run may go on)."""

    approval: Approval
    events: list[StoredEvent]
    ready: bool
