"""The PostgreSQL dialect of the shared transaction logic, and the connection wrapper that
runs its ``?`` statements on psycopg (``PgConn``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, NoReturn

import psycopg
import psycopg.errors

from threadloom.store.core.conn import ELSEWHERE, WATCHED, Cursor, Dialect
from threadloom.store.core.search import websearch_text
from threadloom.store.core.tx import KEPT_ACTIVITY, KEPT_LEASE, KEPT_QUEUE_EMPTY, KEPT_REQUEST_BASE
from threadloom.store.postgres.wire import Rows, Wire
from threadloom.store.shapes import Fence, SearchTerm, StoredEvent

ACCOUNTS_LOCK = 0x746C6163  # "tlac": the key of the account writes' advisory lock

TOPICS = ("wake", "events", "chunks", "control", "registry")
"""The nodes' notification topics (spec 12 §12.4, §12.5, §12.7): transactions notify on
``events`` and ``wake``, the node (``node/pg.py``) on all of them."""


def channels(schema: str) -> dict[str, str]:
    """The channel of each topic for ``schema`` (``threadloom_<topic>`` in ``public``): one
    channel per schema, so stores in different schemas of one database (tests, several
    deployments) do not hear each other."""
    if schema == "public":
        return {topic: f"threadloom_{topic}" for topic in TOPICS}
    digest = hashlib.sha1(schema.encode()).hexdigest()[:12]
    return {topic: f"threadloom_{topic}_{digest}" for topic in TOPICS}


UNIQUE_KEYS = {
    "messages_pkey": "messages.rid",
    "messages_id_key": "messages.id",
    "users_pkey": "users.id",
    "users_username_key": "users.username",
    "api_keys_pkey": "api_keys.id",
    "api_keys_key_digest_key": "api_keys.key_digest",
    "threads_pkey": "threads.id",
    "message_queue_pkey": "message_queue.id",
    "tool_calls_pkey": "tool_calls.thread_id, tool_calls.id",
    "files_thread_id_path_key": "files.thread_id, files.path",
    "sessions_pkey": "sessions.token_digest",
    "auth_tickets_pkey": "auth_tickets.ticket_digest",
    "logs_pkey": "logs.id",
    "auth_attempts_pkey": "auth_attempts.attempt_id, auth_attempts.key_digest",
    "tool_ledger_pkey": "tool_ledger.thread_id, tool_ledger.tool_call_id",
    "user_quotas_pkey": "user_quotas.user_id",
    "oauth_clients_pkey": "oauth_clients.client_id",
    "oauth_codes_pkey": "oauth_codes.code_digest",
    "oauth_tokens_pkey": "oauth_tokens.access_digest",
    "oauth_tokens_refresh_digest_key": "oauth_tokens.refresh_digest",
    "oauth_spent_refresh_pkey": "oauth_spent_refresh.refresh_digest",
    "schedules_pkey": "schedules.id",
}
"""The schema's unique keys (``schema.py`` names them so) as ``table.column``, the form the
logic compares (SQLite's own)."""

_UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03", "53300")
"""SQLSTATEs (prefixes) of a database that cannot be reached now: a connection exception,
a shutdown (administrator or crash), a server starting or stopping, no free connection."""
_READ_ONLY_TRANSACTION = "25006"


_ATTEMPT = re.compile(r"^- host: '([^']*)', port: '([^']*)'(?:, hostaddr: '[^']*')?: (.*)$")
"""A line of psycopg's list of the failed attempts of a multi-host URL."""


def _one_reason(line: str) -> str:
    for marker in ("failed: ", "FATAL:  "):
        if marker in line:
            line = line.rsplit(marker, 1)[1]
    return line.strip()


def driver_reason(exc: BaseException) -> str:
    """The first line of a driver error, without libpq's connection preamble; for a URL of
    several hosts that all failed, each host's reason (``h1:5432: Connection refused;
    h2:5432: session is read-only``)."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    attempts = [m.groups() for m in map(_ATTEMPT.match, text.splitlines()) if m]
    if len(attempts) > 1:
        return "; ".join(f"{host}:{port}: {_one_reason(why)}" for host, port, why in attempts)
    return _one_reason(text.splitlines()[0])


def read_only_server(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server of ``conn`` said it takes no writes (PostgreSQL 14 and later
    report both settings to the client when they change): a standby (``in_hot_standby``),
    or an old primary an operator fenced with ``default_transaction_read_only = on``. A
    URL with ``target_session_attrs=read-write`` connects only to a server that takes
    writes, so a connection left on such a server is dropped and made again (spec 17
    §17.5)."""
    pgconn = conn.pgconn  # libpq's own answer, without the decoding (every transaction asks)
    return (
        pgconn.parameter_status(b"in_hot_standby") == b"on"
        or pgconn.parameter_status(b"default_transaction_read_only") == b"on"
    )


def unreachable(exc: psycopg.Error, conn: psycopg.Connection[Any] | None = None) -> bool:
    """Whether ``exc`` means the database cannot be reached now (rather than a statement
    that failed): the connection broke, the server said it is stopping or starting, or a
    write was refused because the server became read-only (a failover's old primary)."""
    if conn is not None and conn.broken:
        return True
    state = exc.sqlstate or ""
    if state == _READ_ONLY_TRANSACTION and conn is not None and read_only_server(conn):
        return True
    return state.startswith(_UNREACHABLE_STATES)


class PostgresDialect(Dialect):
    """PostgreSQL's texts. Booleans are stored as ``smallint`` 0/1, as in SQLite, so the
    predicates (``silent = 0``) are one text for both; JSON is stored as text and read
    through ``::json``."""

    name = "postgresql"
    leases = True
    lost_tails = False
    fenced = " AND lease_node = ? AND lease_token = ?"
    row_version = "threads.xmin::text"
    search_vector = "to_tsvector('simple'::regconfig, ?)"
    greatest = "GREATEST"
    is_same = "IS NOT DISTINCT FROM"
    lock_thread = " FOR NO KEY UPDATE"
    lock_accounts = f"SELECT pg_advisory_xact_lock({ACCOUNTS_LOCK})"
    no_limit = None
    position = "strpos"
    next_tnum = "nextval('threads_tnum_seq')"
    integrity_error = psycopg.errors.IntegrityError

    def __init__(self, node_ttl_s: float = 15.0) -> None:
        super().__init__()
        self.node_ttl_s = node_ttl_s
        self.channels: dict[str, str] = {}
        self.live_node = (
            "EXISTS (SELECT 1 FROM nodes n WHERE n.node_id = {owner}"
            f" AND n.heartbeat_at >= now() - interval '{float(node_ttl_s)} seconds')"
        )
        """Whether the node in column ``owner`` is live: its heartbeat within the TTL, by
        the database's clock (spec 12 §12.2 rule 3)."""
        self.lease_columns = ", lease_node, lease_token, " + self.live_node.format(
            owner="threads.lease_node"
        )
        self.tx_versions = ", threads.xmin::text, pg_current_xact_id()::xid::text"

    def use_channels(self, channels: dict[str, str]) -> None:
        """Name the notification channels of this store's schema (``channels``),
        before any write is flushed."""
        self.channels = channels

    def notify_tail(self, events: int, wake: bool) -> str:
        elsewhere = "threads.lease_node IS NOT NULL AND threads.lease_node <> ?"
        calls = []
        if events == WATCHED:
            calls.append(f"pg_notify('{self.channels['events']}', ?)")
        elif events == ELSEWHERE:
            calls.append(
                f"CASE WHEN {elsewhere} THEN pg_notify('{self.channels['events']}', ?) END"
            )
        if wake:
            calls.append(f"CASE WHEN {elsewhere} THEN pg_notify('{self.channels['wake']}', ?) END")
        return " RETURNING " + ", ".join(calls)

    def unowned(self, alias: str) -> str:
        owner = f"{alias}.lease_node"
        return f"({owner} IS NULL OR NOT {self.live_node.format(owner=owner)})"

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    def tag_values(self, column: str) -> tuple[str, str]:
        return f"json_array_elements_text({column}::json) AS tag(value)", "tag.value"

    def attachment_path_join(self, alias: str) -> tuple[str, str]:
        return f"json_array_elements({alias}.attachments::json) AS j(value)", "(j.value ->> 'path')"

    # the generated tsvector of migration 16 and its GIN index
    search_hits = (
        "SELECT m.thread_id AS thread_id, m.rid AS rid, ts_rank(m.search, sq.query) AS score"
        " FROM messages m, websearch_to_tsquery('simple', ?) AS sq(query)"
        " WHERE m.search @@ sq.query"
    )

    def search_match(self, terms: Sequence[SearchTerm]) -> str:
        return websearch_text(terms)

    def snippet_text(self, snippet: str) -> str:
        # ts_headline's parser drops what looks like an HTML tag: the snippet is made of
        # the text with each "<" as \x01, given back here
        return snippet.replace("\x01", "<")

    def search_snippets(self, count: int) -> str:
        return (
            "SELECT m.rid, ts_headline('simple', translate(m.content, '<', chr(1)), sq.query,"
            " 'StartSel=' || chr(2)"
            " || ', StopSel=' || chr(3) || ', MaxFragments=1, MaxWords=24, MinWords=10')"
            " FROM messages m, websearch_to_tsquery('simple', ?) AS sq(query)"
            f" WHERE m.rid IN ({','.join('?' * count)})"
        )

    def unique_violation(self, exc: BaseException) -> str | None:
        """By SQLSTATE (23505) and the constraint's name, never by the message."""
        if not isinstance(exc, psycopg.errors.UniqueViolation):
            return None
        name = exc.diag.constraint_name
        return UNIQUE_KEYS.get(name or "", name)


@lru_cache(maxsize=8192)
def translate(sql: str) -> str:
    """A statement of the shared logic in psycopg's parameter style: each ``?`` outside a
    string literal becomes ``%s``, each ``%`` becomes ``%%``."""
    if "?" not in sql and "%" not in sql:
        return sql
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "?" and not quoted:
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=8192)
def native(sql: str) -> bytes:
    """A statement of the shared logic in PostgreSQL's own parameter style, as a
    ``RawCursor`` sends it: each ``?`` outside a string literal becomes ``$1``, ``$2`` … in
    order; encoded once. psycopg then neither parses nor encodes it again: its parsing of a
    ``%s`` query is cached only for texts under 4,096 characters and 50 parameters, which a
    merged statement (a message, its LLM row, the thread row and the event rows) exceeds —
    about 170 µs of a regular-expression split at every execution (issue 40)."""
    out: list[str] = []
    quoted = False
    n = 0
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(ch)
    return "".join(out).encode()


class Watches:
    """What the other nodes watch (spec 12 §12.7.6), as they announced it: the threads
    some node streams, by thread, the nodes watching; the nodes with thread-list sockets.
    Read by this node's transactions on worker threads (a set lookup), changed on the
    event loop (a whole set replaced or one member added or removed at a time)."""

    def __init__(self) -> None:
        self.threads: dict[str, set[str]] = {}
        self.lists: set[str] = set()

    def watch(self, node: str, thread_ids: Iterable[str], on: bool) -> None:
        for tid in thread_ids:
            nodes = self.threads.get(tid)
            if on:
                if nodes is None:
                    self.threads[tid] = {node}
                else:
                    nodes.add(node)
            elif nodes is not None:
                nodes.discard(node)
                if not nodes:
                    del self.threads[tid]

    def watch_lists(self, node: str, on: bool) -> None:
        if on:
            self.lists.add(node)
        else:
            self.lists.discard(node)

    def keep_only(self, live: set[str]) -> None:
        """Forget what nodes no longer live watched."""
        for tid, nodes in list(self.threads.items()):
            if not nodes <= live:
                nodes &= live
                if not nodes:
                    del self.threads[tid]
        self.lists &= live


STALE_STATE = "TL001"
"""The SQLSTATE ``threadloom_stale()`` raises (PostgreSQL migration 17): the thread row changed
since the state a write started from was committed (``TxStates``)."""
EXPECT_MISSED = "TL002"
"""The SQLSTATE of a statement deferred by ``PgConn.defer_expect`` that changed another number
of rows than expected."""

_GUARD = (
    b"SELECT CASE WHEN (SELECT xmin FROM threads WHERE id = $1 FOR NO KEY UPDATE) = $2::xid"
    b" THEN pg_current_xact_id()::xid::text ELSE threadloom_stale()::text END"
)
_XID = b"SELECT pg_current_xact_id()::xid::text"

_STARTED: Sequence[Any] = ()
"""``PgConn.own``: the transaction started from the kept state and has not written the row."""

STATES_KEPT = 20_000
"""At most this many threads' states are kept (``TxStates``): past it the oldest half is
forgotten (a running thread's next write then reads its row once)."""


class TxStates:
    """The state of the threads this node runs, as its last fenced write of each committed:
    ``Tx``'s columns and the lease's (the row ``Tx`` reads, ``tx.STATE_COLUMNS``), with the
    id of the transaction that wrote it — the row's ``xmin`` for as long as nobody writes
    the row again. The next fenced write of the thread starts from it instead of reading the
    row: its first statement locks the row, as the read would, and fails with
    ``STALE_STATE`` unless ``xmin`` is still that id; the write then runs again from the
    row (spec 01 §1.11.2 rule 4). Any other write of the row — another node's, a send or a
    stop on this node, a child's activity — gives it a new ``xmin``, so a kept state is
    never used once it is out of date. Read and written by this node's transactions on
    worker threads (one dictionary operation at a time)."""

    __slots__ = ("reads", "rows", "stale")

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, Sequence[Any]]] = {}
        self.reads: dict[str, list[Any]] = {}
        """Rows of a read by its text (``PgConn.kept_read``): the enabled webhook
        subscriptions."""
        self.stale = 0
        """Writes that started from a kept state the row had moved past (and ran again)."""

    def keep(self, thread_id: str, xid: str, state: Sequence[Any]) -> None:
        rows = self.rows
        rows.pop(thread_id, None)  # the newest last: the oldest are forgotten first
        if len(rows) >= STATES_KEPT:
            for old in list(rows)[: STATES_KEPT // 2]:
                rows.pop(old, None)
        rows[thread_id] = (xid, state)

    def forget(self, thread_id: str) -> None:
        self.rows.pop(thread_id, None)

    def clear(self) -> None:
        self.rows.clear()
        self.reads.clear()


class PgConn:
    """A psycopg connection as the shared logic's :class:`~threadloom.store.core.conn.Conn`:
    ``execute``, ``executemany`` and ``defer`` of ``?`` statements, and the dialect.

    With ``pipeline`` (a transaction in libpq's pipeline mode, ``wire.Wire``) a deferred
    statement is only queued: it goes to the server with the next statement whose result
    the logic reads (``execute`` sends what is queued and waits for all of it) or with the
    COMMIT, so a transaction's closing writes and its COMMIT are one round trip. Without
    one (a replica's read), ``defer`` is ``execute``."""

    __slots__ = (
        "announce",
        "begun",
        "checks",
        "fence",
        "guard",
        "guarding",
        "node_id",
        "opening",
        "own",
        "pipeline",
        "queued",
        "raw",
        "sql",
        "states",
        "touches",
        "watches",
        "xid",
    )

    def __init__(
        self,
        raw: psycopg.Connection[Any],
        sql: Dialect,
        node_id: str | None = None,
        fence: Fence | None = None,
        announce: bool = False,
        watches: Watches | None = None,
        pipeline: Wire | None = None,
        states: TxStates | None = None,
        opening: bytes | None = b"BEGIN",
    ) -> None:
        self.raw = raw
        self.sql = sql
        self.node_id = node_id
        self.fence = fence
        self.announce = announce
        self.watches = watches
        self.pipeline = pipeline
        self.queued: list[tuple[str, Sequence[Any]]] = []
        self.checks: list[Callable[[BaseException], BaseException | None]] = []
        """The ``translate`` of each statement deferred with one (``defer_checked``)
        since the last sync: an error the sync raises is given to each in turn."""
        self.states = states
        self.xid: str | None = None
        """This transaction's id, where ``Tx``'s read of a row answered it."""
        self.opening = opening
        """What opens the transaction on ``pipeline`` (``_open``): BEGIN for a write, the
        snapshot's BEGIN for a read; ``None``: statements that run without one (a point or
        checked read)."""
        self.begun = opening is None
        """Whether the transaction was opened (``_open``), or needs no opening."""
        self.touches: dict[str, tuple[str, int]] = {}
        """Threads whose activity time only this transaction raised (``touched``): the
        version each had, and the time."""
        self.guarding: tuple[str, str] | None = None
        """The kept state's check not sent yet (``kept_state``): the thread and the id."""
        self.guard: Cursor | None = None
        """The cursor of the check that a kept state still holds (``kept_state``): its row
        is the transaction's id."""
        self.own: dict[str, Sequence[Any] | None] = {}
        """The threads whose state this transaction started from a kept one or wrote: the
        state to keep at its commit (``None``: none to keep; ``_STARTED``: unwritten)."""

    def watched(self, thread_id: str, events: Sequence[StoredEvent]) -> bool:
        watches = self.watches
        if watches is None:
            return False
        if thread_id in watches.threads:
            return True
        return bool(watches.lists) and any(e.kind == "status" for e in events)

    def kept_state(self, thread_id: str, waiting: bool) -> Sequence[Any] | None:
        states = self.states
        fence = self.fence
        if states is None or fence is None or thread_id in self.own or self.guarding:
            return None  # this transaction may have changed the row: read it
        found = states.rows.get(thread_id)
        if found is None:
            return None
        xid, state = found
        lease = fence.lease
        if (
            state[KEPT_LEASE] != lease.node_id
            or state[KEPT_LEASE + 1] != lease.token
            or (waiting and not state[KEPT_QUEUE_EMPTY])
        ):
            return None
        # sent with the next statement, no wait; answers the transaction's id (``commit``)
        self.guarding = (thread_id, xid)
        if self.begun:
            self._guard()  # else with the transaction's first statement (``_open``, ``commit``)
        self.own[thread_id] = _STARTED
        return state

    def kept_read(
        self, sql: str, check: str, fingerprint: Callable[[list[Any]], str]
    ) -> list[Any] | None:
        states = self.states
        rows = None if states is None or not self.own else states.reads.get(sql)
        if rows is None:
            return None
        self.queued.append(
            (
                f"SELECT CASE WHEN ({check}) THEN 1 ELSE threadloom_stale('{EXPECT_MISSED}') END",
                (fingerprint(rows),),
            )
        )
        return rows

    def keep_read(self, sql: str, rows: list[Any]) -> None:
        if self.states is not None:
            self.states.reads[sql] = rows

    def _guard(self) -> None:
        """Send the check that the kept state still holds (``kept_state``). Prepared like
        the rest."""
        guarding, self.guarding = self.guarding, None
        if guarding is not None:
            assert self.pipeline is not None
            self.guard = self.pipeline.send(_GUARD, guarding)

    def _open(self) -> None:
        """BEGIN, sent before the transaction's first read (and the kept state's check
        right after it): a transaction that reads nothing goes without it (``commit``)."""
        assert self.pipeline is not None and self.opening is not None
        self.pipeline.send(self.opening, prepare=False)  # nothing to plan: never prepared
        self.begun = True
        self._guard()

    def keep_state(self, thread_id: str, state: Sequence[Any] | None, xid: str | None) -> None:
        if self.states is not None:
            self.own[thread_id] = state
            if xid is not None:
                self.xid = xid

    def touched(self, thread_id: str, version: str, activity: int) -> None:
        if self.states is not None:
            self.touches[thread_id] = (version, activity)

    def kept_base(self, thread_id: str, version: str) -> Any:
        states = self.states
        found = None if states is None else states.rows.get(thread_id)
        if found is None or found[0] != version:
            return None
        return found[1][KEPT_REQUEST_BASE]

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        if self.pipeline is None:
            cursor: Cursor = psycopg.RawCursor(self.raw).execute(native(sql), parameters)
            return cursor
        pipeline = self.pipeline
        try:  # its rows, its row count and its error: now
            if not self.begun:
                self._open()
            if self.queued:
                self.send_queued()
            rows = pipeline.send(native(sql), parameters)
            pipeline.sync()
        except psycopg.Error as exc:
            self.failed(exc)
        self.checks.clear()
        return rows

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor:
        pipeline = self.pipeline
        if pipeline is None:
            cursor = psycopg.RawCursor(self.raw)
            cursor.executemany(native(sql), parameters)
            result: Cursor = cursor
            return result
        text = native(sql)
        try:
            if not self.begun:
                self._open()
            if self.queued:
                self.send_queued()
            sent = [pipeline.send(text, row) for row in parameters]
            pipeline.sync()
        except psycopg.Error as exc:
            self.failed(exc)
        self.checks.clear()
        return Rows.total(pipeline, sent)

    def defer(self, sql: str, parameters: Sequence[Any] = (), /) -> None:
        if self.pipeline is None:
            psycopg.RawCursor(self.raw).execute(native(sql), parameters)
        else:
            self.queued.append((sql, parameters))

    def defer_checked(
        self,
        sql: str,
        parameters: Sequence[Any],
        translate: Callable[[BaseException], BaseException | None],
        /,
    ) -> None:
        if self.pipeline is None:
            try:
                self.execute(sql, parameters)
            except psycopg.Error as exc:
                error = translate(exc)
                if error is None:
                    raise
                raise error from exc
        else:
            self.queued.append((sql, parameters))
            self.checks.append(translate)

    def defer_expect(self, sql: str, parameters: Sequence[Any], rows: int, /) -> None:
        """``defer`` of a statement that must change ``rows`` rows: its transaction fails
        with ``STALE_STATE`` (and runs again from the rows) when it changes another number.
        Sent as ``WITH x AS (… RETURNING 1) SELECT CASE WHEN count(*) = rows …`` (the last
        of a merged statement)."""
        assert self.pipeline is not None  # a write transaction's, started from a kept state
        self.queued.append((f"{_EXPECT}{rows}*/ {sql} RETURNING 1", parameters))

    def failed(self, exc: psycopg.Error) -> NoReturn:
        """A statement of the pipeline failed (its error arrives at the sync; one whose
        parameters could not be adapted, while it is sent): end the failed segment, so the
        pipeline closes clean, and raise the error — as what the ``translate`` of a checked
        statement makes of it, where one does."""
        pipeline = self.pipeline
        assert pipeline is not None
        checks, self.checks = self.checks, []
        if pipeline.pending:
            try:
                pipeline.sync()
            except psycopg.Error:
                pass  # the rest of the failed segment: aborted with it
        for check in checks:
            error = check(exc)
            if error is not None:
                raise error from exc
        raise exc

    def commit(self) -> None:
        """The deferred statements, COMMIT, and their results (pipeline mode); then the
        states of the threads this transaction wrote are kept (``TxStates``)."""
        pipeline = self.pipeline
        assert pipeline is not None
        own = self.own
        xid: Cursor | None = None
        try:
            if self.guarding is not None:
                self._guard()
            if self.queued:
                self.send_queued()
            if self.xid is None and (
                self.touches
                or any(state is not _STARTED and state is not None for state in own.values())
            ):
                xid = self.guard or pipeline.send(_XID)
            if self.begun:
                pipeline.send(b"COMMIT", prepare=False)
            # else no statement read anything: they ran in the implicit transaction the
            # protocol opens for them, which this Sync commits (or, one failing, rolls back)
            pipeline.sync()
        except psycopg.Error as exc:
            self.failed(exc)
        self.checks.clear()
        if own or self.touches:
            states = self.states
            assert states is not None
            found = (self.xid,) if self.xid is not None else None if xid is None else xid.fetchone()
            for thread_id, (version, activity) in self.touches.items():
                kept = states.rows.get(thread_id)
                if thread_id in own or kept is None:
                    continue
                if found is None or kept[0] != version:
                    states.forget(thread_id)
                    continue
                raised = list(kept[1])
                raised[KEPT_ACTIVITY] = max(raised[KEPT_ACTIVITY] or 0, activity)  # as written
                states.keep(thread_id, found[0], tuple(raised))
            for thread_id, state in own.items():
                if state is _STARTED:
                    continue  # not written: the kept state still holds
                if state is None or found is None:
                    states.forget(thread_id)
                else:
                    states.keep(thread_id, found[0], state)

    def forget_states(self) -> None:
        """The transaction failed: the states it started from or wrote are not kept (the
        next write of each thread reads its row)."""
        states = self.states
        if states is not None:
            for thread_id in self.own:
                states.forget(thread_id)

    def begin(self, durable: bool) -> None:
        """Open the write transaction: BEGIN goes with the first read (``_open``), or not at
        all when the transaction reads nothing (``commit``); a write that need not wait for
        the disk sends it now, with its ``SET LOCAL``."""
        if not durable:
            self._open()
            assert self.pipeline is not None
            self.pipeline.send(b"SET LOCAL synchronous_commit = off", prepare=False)

    def send_queued(self) -> None:
        """Send the deferred statements (without waiting): those that touch no table in
        common as one statement (``merged``), the rest after them in order."""
        queued, self.queued = self.queued, []
        pipeline = self.pipeline
        assert pipeline is not None
        if len(queued) == 1:
            sql, parameters = queued[0]
            pipeline.send(native(merged((sql,)) if sql[0] == "/" else sql), parameters)
            return
        for group in _groups(queued):
            if len(group) == 1:
                sql, parameters = group[0]
                pipeline.send(native(merged((sql,)) if sql[0] == "/" else sql), parameters)
            else:
                params: list[Any] = []
                for _, p in group:
                    params += p
                pipeline.send(native(merged(tuple(sql for sql, _ in group))), params)


_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _tables(sql: str) -> frozenset[str]:
    """The tables a statement names (after FROM, JOIN, INTO, UPDATE)."""
    return frozenset(name.lower() for name in _TABLE.findall(sql))


def _groups(queued: list[tuple[str, Sequence[Any]]]) -> list[list[tuple[str, Sequence[Any]]]]:
    """``queued`` in runs whose statements name no table in common and of which at most
    one returns rows (it goes last: the merged statement's own): the statements of a
    merged statement all see the transaction as it was before it, so one that reads or
    changes what another changes must follow it in a statement of its own."""
    groups: list[list[tuple[str, Sequence[Any]]]] = []
    group: list[tuple[str, Sequence[Any]]] = []
    seen: frozenset[str] = frozenset()
    returning = False
    checks: list[tuple[str, Sequence[Any]]] = []
    for item in queued:
        if item[0].startswith("SELECT "):
            # a kept read's check (``kept_read``): of a table no statement here writes, so
            # with the statement being gathered (``_with_checks``)
            checks.append(item)
            continue
        tables = _tables(item[0])
        returns = " RETURNING " in item[0]
        if group and (seen & tables or (returns and returning)):
            groups += _with_checks(checks, group)
            checks, group, seen, returning = [], [], frozenset(), False
        if returns:
            group.append(item)
            returning = True
        else:
            group.insert(len(group) - 1 if returning else len(group), item)
        seen |= tables
    if checks or group:
        groups += _with_checks(checks, group)
    return groups


def _with_checks(
    checks: list[tuple[str, Sequence[Any]]], group: list[tuple[str, Sequence[Any]]]
) -> list[list[tuple[str, Sequence[Any]]]]:
    """A kept read's check as the statement of the writes gathered with it when none of
    them returns rows (the writes its ``WITH`` queries: one statement fewer, and the check
    sees what it would have seen first, its table written by none of them); else first, a
    statement of its own."""
    if len(checks) == 1 and group and not any(" RETURNING " in sql for sql, _ in group):
        return [group + checks]
    return [*([check] for check in checks), *([group] if group else [])]


@lru_cache(maxsize=1024)
def merged(texts: tuple[str, ...]) -> str:
    """One statement running ``texts`` (data-changing statements naming no table in
    common, and perhaps a kept read's check last) as PostgreSQL's data-modifying ``WITH``
    queries, the last as the statement itself: the parameters are those of each in order
    (``?`` still: ``native`` numbers them)."""
    heads = ", ".join(f"w{i} AS ({t})" for i, t in enumerate(texts[:-1]))
    last = texts[-1]
    if last.startswith(_EXPECT):  # its rows counted: as many as expected, or stale
        rows, _, text = last[len(_EXPECT) :].partition("*/ ")
        heads += f"{', ' if heads else ''}x AS ({text})"
        return (
            f"WITH {heads} SELECT CASE WHEN count(*) = {int(rows)} THEN 1"
            f" ELSE threadloom_stale('{EXPECT_MISSED}') END FROM x"
        )
    return f"WITH {heads} {last}"


_EXPECT = "/*expect "
"""The head of a statement deferred by ``PgConn.defer_expect``: ``/*expect N*/ … RETURNING 1``."""
