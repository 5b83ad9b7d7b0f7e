"""The connection the backend-neutral transaction logic runs on, and the dialect it carries.

Every store method is a sync function ``fn(conn, clock, *args)`` (a write) or
``fn(conn, *args)`` (a read) that a backend's runner calls inside one transaction
(``runner.TxStore``). ``conn`` is DB-API shaped — ``sqlite3.Connection`` as it is, or the
PostgreSQL store's thin wrapper of a psycopg connection — and carries the backend's
:class:`Dialect` as ``conn.sql``: the few SQL texts and fragments that differ between the
backends. Everything else is one SQL text, written with ``?`` parameters, for both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from threadloom.store.shapes import Fence, SearchTerm, StoredEvent

T = TypeVar("T")


class Cursor(Protocol):
    """What the logic uses of a cursor: its rows and its row count."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside an open transaction, with its backend's dialect."""

    @property
    def sql(self) -> Dialect: ...

    @property
    def node_id(self) -> str | None:
        """The node this transaction runs on (where ``sql.leases``)."""
        ...

    @property
    def fence(self) -> Fence | None:
        """The execution lease this transaction's writes of its thread are checked against."""
        ...

    @property
    def announce(self) -> bool:
        """Whether this transaction tells the other nodes what it wrote (``Dialect
        .notify_tail``): only while some other node is live (spec 12 §12.7.1)."""
        ...

    def watched(self, thread_id: str, events: Sequence[StoredEvent]) -> bool:
        """Whether another node watches what ``events`` of ``thread_id`` show: a stream of
        the thread, or (a status change among them) a thread list (spec 12 §12.7.6). When
        not, the events are told only to a node that runs the thread."""
        ...

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...

    def defer(self, sql: str, parameters: Sequence[Any] = ..., /) -> object:
        """``execute`` for a statement whose rows and row count the logic does not read and
        whose error it does not catch (an error still fails the transaction): a backend may
        send it with the next statement or the COMMIT instead of at once (PostgreSQL's
        pipeline, ``PgConn``); SQLite runs it at once."""
        ...

    def defer_checked(
        self,
        sql: str,
        parameters: Sequence[Any],
        translate: Callable[[BaseException], BaseException | None],
        /,
    ) -> None:
        """``defer`` for a statement whose error the logic tells apart: ``translate`` is
        given the driver's error (when the statement is sent, or at the latest at the
        commit) and answers the error to raise instead, or ``None`` for the driver's."""
        ...

    def defer_expect(self, sql: str, parameters: Sequence[Any], rows: int, /) -> None:
        """``defer`` of a statement that must change ``rows`` rows, used only by a write that
        started from a kept state (``kept_state``): when it changes another number, the
        transaction fails and runs again from the row (where the logic checks the count
        itself)."""
        ...

    def kept_read(
        self, sql: str, check: str, fingerprint: Callable[[list[Any]], str]
    ) -> list[Any] | None:
        """The rows of the read ``sql`` as this node last read them (``keep_read``), where
        the backend keeps reads: it then sends ``check`` — a boolean query binding one
        ``?``, the rows' ``fingerprint``, true while a read now would give the same rows —
        with the transaction's statements, without waiting, and the transaction fails and
        runs again (reading) when it is false. Only for a write that started from a kept
        state (``kept_state``). ``None``: read."""
        ...

    def keep_read(self, sql: str, rows: list[Any]) -> None:
        """The rows the read ``sql`` gave, for ``kept_read``."""
        ...

    def kept_state(self, thread_id: str, waiting: bool) -> Sequence[Any] | None:
        """The thread's row as ``Tx`` reads it (``tx.STATE_COLUMNS``, the lease's) and
        whether its queue is empty, as this node's last write of it under the same lease
        left them, where the backend keeps them (PostgreSQL's ``TxStates``) and this
        transaction may start from them (``waiting``: only if the queue is known empty):
        the backend then makes sure, with the transaction's first statement, that the row
        is still that (it locks it, as the read would; otherwise the transaction fails and
        runs again from the row). ``None``: read the row."""
        ...

    def keep_state(self, thread_id: str, state: Sequence[Any] | None, xid: str | None) -> None:
        """The thread's row as this transaction leaves it (the layout of ``kept_state``;
        ``None``: not to be kept), kept by a backend that keeps states once it commits;
        ``xid``: the transaction's id where ``Tx`` read it (``Dialect.tx_versions``)."""
        ...

    def touched(self, thread_id: str, version: str, activity: int) -> None:
        """This transaction raised the thread's ``last_activity_us`` to at least
        ``activity`` (a descendant's write) and changed nothing else of its row, which had
        ``version``: a state kept of it at that version is kept at this transaction's."""
        ...

    def kept_base(self, thread_id: str, version: str) -> Any:
        """The request row kept with the thread's state (``Tx.request_base``) when the row's
        version (``Dialect.tx_versions``) is still the one that state was kept at; else
        ``None``."""
        ...


class ThreadChanged(Exception):
    """A read run without a transaction around it found the thread's row changed between
    its statements (``Dialect.row_version``): a write of the thread committed between
    them. The backend reads it again in one transaction (``TxStore._checked_read``)."""


ELSEWHERE = 1
"""``notify_tail``: notify the events only when another node runs the thread."""
WATCHED = 2
"""``notify_tail``: notify the events whoever runs the thread (another node watches it)."""


class Dialect:
    """What differs between the SQL of two backends (a backend's subclass sets each).

    The texts are fragments the logic splices into its statements; ``statements(build)``
    keeps texts built from them once per dialect, so the drivers' statement caches find
    them by a string made once."""

    name: str = ""
    greatest: str = ""
    """The scalar maximum of two values: ``MAX`` (SQLite), ``GREATEST`` (PostgreSQL)."""
    is_same: str = ""
    """A null-safe equality operator: ``IS`` (SQLite), ``IS NOT DISTINCT FROM``."""
    lock_thread: str = ""
    """What follows the ``SELECT … FROM threads WHERE id = ?`` a write transaction starts
    with: nothing on SQLite (its write lock is the database's), a row lock on PostgreSQL,
    so the writes of one thread are serialised (spec 01 §1.11.2 rule 3)."""
    lock_accounts: str | None = None
    """A statement that serialises the account writes checking "another admin remains"
    (no write skew between two demotions); ``None`` where every write is serialised."""
    no_limit: int | None = None
    """The ``LIMIT`` value that means no limit: ``-1`` (SQLite), ``NULL`` (PostgreSQL)."""
    position: str = ""
    """``position(haystack, needle)`` as a function name: ``instr``, ``strpos``."""
    next_tnum: str = ""
    """The expression a new thread's ``tnum`` (the key prefix of its rows) is taken from."""
    integrity_error: type[Exception] | tuple[type[Exception], ...] = ()
    """The driver's exception class(es) for a violated constraint."""
    leases: bool = False
    """Whether threads carry leases (spec 12 §12.3: several nodes share the database)."""
    search_vector: str = ""
    """Where the store writes a message's full-text vector itself (spec 08 §8.14.1 rule
    1): the expression of the vector of one bound text, ``NULL`` for a message the search
    does not cover (PostgreSQL: ``to_tsvector('simple'::regconfig, ?)`` into
    ``messages.search``, migration 21). Empty where the database keeps its index from the
    rows by itself (SQLite: triggers)."""
    lost_tails: bool = True
    """Whether a run's last commits can be lost after their events were published, so a
    lost run's settlement skips event numbers (``Settlement.skip_events``): an embedded
    database's unsynced tail dies with the machine that ran the run. A database server
    outlives the node that died: what it acknowledged stays committed."""
    tx_versions: str = ""
    """Columns ``Tx`` reads last where the backend keeps states (``Conn.kept_state``): the
    row's version as read and the reading transaction's id (PostgreSQL: ``threads.xmin``
    and ``pg_current_xact_id()``)."""
    lease_columns: str = ""
    """Columns ``Tx`` reads after the others where ``leases``: the lease's node, its token
    and whether that node is live."""
    fenced: str = ""
    """The condition on the thread row of a fenced write (binds the node and the token)."""
    row_version: str = ""
    """An expression of a ``threads`` row's version, new with every committed update of
    the row (PostgreSQL: ``threads.xmin``, the transaction that wrote it). Every write
    transaction of a thread updates its row (``Tx.flush``), so statements that each see
    the same version of the row see one state of the thread: a read that checks it
    (``ThreadChanged``) may run without a transaction around it, a statement each and no
    BEGIN and COMMIT (issue 40). Empty where a read's statements always share one
    snapshot (SQLite: its reads are transactions)."""

    def notify_tail(self, events: int, wake: bool) -> str:
        """What follows ``Tx.flush``'s UPDATE of the thread row so the other nodes learn at
        commit that it wrote event rows (``events``: ``WATCHED``, whoever runs the thread,
        binds the payload; ``ELSEWHERE``, only when another node runs it, binds this node's
        id, then the payload) or queued work (``wake``: only when another node runs the
        thread; binds the node's id, then the payload, after the events'). The backend's
        connections announce only where other nodes listen (spec 12 §12.4, §12.7)."""
        return ""

    def __init__(self) -> None:
        self._memo: dict[Callable[[Dialect], Any], Any] = {}

    def statements(self, build: Callable[[Dialect], T]) -> T:
        """``build(self)``, made once per dialect (statement texts and their caches)."""
        found = self._memo.get(build)
        if found is None:
            found = self._memo[build] = build(self)
        result: T = found
        return result

    def unowned(self, alias: str) -> str:
        """A predicate: no live node holds the lease of thread row ``alias`` (always true
        where threads carry no leases: one process runs them all)."""
        return "1 = 1"

    def json_text(self, column: str, key: str) -> str:
        """The string at top-level ``key`` of the JSON object text in ``column``."""
        raise NotImplementedError

    def tag_values(self, column: str) -> tuple[str, str]:
        """``(from, expr)``: the elements of the JSON string array in ``column`` as a row
        source for a subquery, and the expression of one element's text. The predicates
        on tags (substring, exact) are written once over it, in ``core/threads.py``."""
        raise NotImplementedError

    def attachment_path_join(self, alias: str) -> tuple[str, str]:
        """``(from, expr)``: a join of each ref of the JSON array in ``alias.attachments``
        and the expression of that ref's ``path``."""
        raise NotImplementedError

    def unique_violation(self, exc: BaseException) -> str | None:
        """``table.column`` of the unique key ``exc`` violated; ``None`` for another
        error (a CHECK, a foreign key …)."""
        raise NotImplementedError

    search_catch_up: tuple[str, ...] = ()
    """The statements that bring the full-text index up to date, in one write transaction
    (``core/search.py``'s ``catch_up``): empty where every write keeps the index in step
    itself (PostgreSQL's generated column); SQLite's index its backlog (migration 27)."""

    search_hits: str = ""
    """The full-text index's part of a search (spec 08 §8.14, ``core/search.py``): a
    ``SELECT`` of ``thread_id``, ``rid`` and ``score`` (higher is better) of each indexed
    message matching the one ``?``, the text :meth:`search_match` made."""

    def search_match(self, terms: Sequence[SearchTerm]) -> str:
        """The search terms in the index's own query syntax, bound to :attr:`search_hits`."""
        raise NotImplementedError

    def snippet_text(self, snippet: str) -> str:
        """A snippet as :meth:`search_snippets` made it, as the message's own text."""
        return snippet

    def search_snippets(self, count: int) -> str:
        """A ``SELECT`` of ``(rid, snippet)`` for ``count`` messages by ``rid``, the matched
        words between ``\x02`` and ``\x03``; binds the match text, then the rids."""
        raise NotImplementedError
