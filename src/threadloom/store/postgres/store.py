"""The PostgreSQL store: the shared transaction logic on psycopg 3 (``threadloom[postgres]``).

Each store method is one transaction of ``store/core``, run on a worker thread with a
connection of its own (``THREADLOOM_DB_POOL_SIZE`` threads, 10 by default): writes at READ
COMMITTED, serialised per thread by the row lock their first statement takes
(``Dialect.lock_thread``); reads in one REPEATABLE READ READ ONLY snapshot. A write that
loses a serialization race or a deadlock is run again, a bounded number of times with a
jittered pause; a connection that breaks before its commit is replaced and the write run
again on the new one — so is one whose server said it became read-only (a failover's old
primary: with ``target_session_attrs=read-write`` in the URL the new connection finds the
new primary, spec 17 §17.5). A database that cannot be reached (a connect refused or failing, a
connection broken again after its replacement, or during a commit) is a
:class:`~threadloom.errors.StoreUnavailable` naming the URL without its password, chained
to the driver's error: never a raw ``psycopg.OperationalError``. A write with
``durable=False`` commits without waiting for the WAL flush (``synchronous_commit = off``
for that transaction).

With ``read_url`` (``THREADLOOM_DATABASE_READ_URL``, a streaming standby) the store has a
:class:`ReplicaReads` view (``replica()``) that serves the pages of ``GET`` routes from the
standby, each read as fresh as the primary was when it began, or answered by the primary
(spec 17 §17.5.4).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg.adapt import Dumper
from psycopg.conninfo import conninfo_to_dict

from threadloom.errors import StoreError, StoreUnavailable
from threadloom.store.base import Store
from threadloom.store.core.conn import ThreadChanged
from threadloom.store.core.runner import TxStore
from threadloom.store.postgres import schema
from threadloom.store.postgres.dialect import (
    EXPECT_MISSED,
    STALE_STATE,
    PgConn,
    PostgresDialect,
    TxStates,
    Watches,
    channels,
    driver_reason,
    read_only_server,
    unreachable,
)
from threadloom.store.postgres.wire import Wire
from threadloom.store.shapes import Clock, Fence, system_clock_us
from threadloom.store.workers import Workers

T = TypeVar("T")
logger = logging.getLogger("threadloom.store.postgres")

DEFAULT_POOL_SIZE = 10
DEFAULT_READ_WAIT_S = 0.1
"""How long a replica read waits for the standby to replay the primary's position before the
primary answers it (``THREADLOOM_DATABASE_READ_WAIT_MS``)."""
RETRIES = 8
"""Times a write that lost a serialization race or a deadlock is run again."""
_IDLE = psycopg.pq.TransactionStatus.IDLE


def _rollback(conn: psycopg.Connection[Any]) -> None:
    """ROLLBACK the write transaction on libpq's connection itself: through a cursor
    psycopg takes a ROLLBACK for the end of DDL and forgets what it prepared, deallocating
    it later — late in pipeline mode, after the next transaction prepared statements again
    (which then do not exist). A transaction whose statements all ran keeps what was
    prepared valid (the server's prepared statements outlive a rollback)."""
    result = conn.pgconn.exec_(b"ROLLBACK")
    if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
        raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


_RETRYABLE = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)
_SYNC_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SNAPSHOT = b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
"""What opens a read's transaction (``_run_read``)."""
_MAYBE_UNREACHABLE = (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction)
"""The errors ``unreachable`` tells apart: a connection's, or a write refused by a server
that became read-only (a failover's old primary)."""


class _BoolAsSmallint(Dumper):
    """Python ``bool`` bound as ``smallint`` 0/1: the schema's booleans are 0/1 columns,
    as in SQLite, so the shared statements compare them with ``= 0``."""

    oid = psycopg.adapters.types["int2"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


def new_node_id() -> str:
    """``<hostname>-<8 random hex>`` (spec 12 §12.2 rule 1): a restarted process is a new node."""
    return f"{socket.gethostname()}-{secrets.token_hex(4)}"


def redacted(url: str) -> str:
    """``url`` without its password (in the authority or as a ``password`` parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def connect_options(url: str, timeout_s: float) -> dict[str, Any]:
    """What every connection of a node is made with besides ``url``: ``connect_timeout``
    (whole seconds, at least 1) unless the URL gives its own, which then applies — per
    host: with several hosts (a failover's URL, spec 17 §17.5) a host that does not answer
    costs that long before the next is tried."""
    try:
        given = "connect_timeout" in conninfo_to_dict(url)
    except psycopg.Error:
        given = False  # the connect itself says what is wrong with the URL
    return {} if given else {"connect_timeout": max(1, round(timeout_s))}


def _timeline(conn: psycopg.Connection[Any]) -> int | None:
    """The timeline of the server's WAL (the first 8 hex digits of its WAL file's name): a
    promoted standby starts a new one. ``None`` where it cannot be read (a standby, when the
    URL lets one be chosen)."""
    try:
        row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
    except psycopg.Error:
        return None
    return int(str(row[0])[:8], 16) if row else None


class ThreadConnections:
    """The connections of a pool's worker threads to one server: one a thread, made at its
    first use and again after it broke, each with its ``Wire`` (what its transactions are
    sent on); closed together."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.all: list[psycopg.Connection[Any]] = []

    def current(self) -> psycopg.Connection[Any] | None:
        """This thread's connection, if it has one."""
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        return conn

    def wire(self, conn: psycopg.Connection[Any]) -> Wire:
        """The ``Wire`` of ``conn`` (this thread's connection)."""
        wire: Wire | None = getattr(self._local, "wire", None)
        if wire is None or wire.conn is not conn:
            wire = self._local.wire = Wire(conn)
        return wire

    def keep(self, conn: psycopg.Connection[Any]) -> None:
        """``conn`` becomes this thread's connection."""
        self._local.conn = conn
        self._local.wire = None
        with self._lock:
            self.all.append(conn)

    def discard(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if conn in self.all:
                self.all.remove(conn)
        conn.close()
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
            self._local.wire = None

    def close_all(self) -> None:
        with self._lock:
            connections, self.all = self.all, []
        for conn in connections:
            conn.close()


class PostgresStore(TxStore):
    """The :class:`~threadloom.store.base.Store` on a PostgreSQL database (its current
    schema)."""

    kind = "postgres"
    shared = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = system_clock_us,
        pool_size: int | None = None,
        synchronous: str = "FULL",
        write_mode: str = "auto",
        connect_timeout_s: float = 10.0,
        node_id: str | None = None,
        node_ttl_s: float = 15.0,
        read_url: str | None = None,
        read_wait_s: float = DEFAULT_READ_WAIT_S,
    ) -> None:
        if synchronous not in _SYNC_LEVELS:
            raise StoreError(f"synchronous must be one of {_SYNC_LEVELS}, not {synchronous!r}")
        if write_mode != "auto":
            raise StoreError(f"write_mode {write_mode!r} is a setting of the SQLite store")
        if pool_size is None:
            raw = os.environ.get("THREADLOOM_DB_POOL_SIZE", str(DEFAULT_POOL_SIZE))
            try:
                pool_size = int(raw)
            except ValueError:
                raise StoreError(
                    f"THREADLOOM_DB_POOL_SIZE must be an integer, not {raw!r}"
                ) from None
        if pool_size < 1:
            raise StoreError("the PostgreSQL pool size must be at least 1")
        self.url = url
        self.node_id = node_id or new_node_id()
        self.sql = PostgresDialect(node_ttl_s)
        self.safe_url = redacted(url)
        self.clock = clock
        self.pool_size = pool_size
        self._always_relaxed = synchronous in ("OFF", "NORMAL")
        self.connect_options = connect_options(url, connect_timeout_s)
        """``connect_timeout`` for every connection of the node (``connect_options``)."""
        self._workers = Workers(pool_size, "threadloom-pg")
        """The node's worker threads, each with its connection (``ThreadConnections``)."""
        self._beats = ThreadPoolExecutor(1, thread_name_prefix="threadloom-pg-heartbeat")
        """The heartbeat's own thread and connection: a heartbeat queued behind the node's
        data work would be late under load and fence a node whose database is fine."""
        self.connections = ThreadConnections()
        self._lock = threading.Lock()
        self._closed = False
        self.peers = False
        """Whether another node was live at the last heartbeat (or announced itself since):
        only then do transactions notify what they wrote (a NOTIFY serialises the commits
        of every notifying transaction of the database, spec 12 §12.7.1). The node keeps
        it (``node/pg.py``)."""
        self.states = TxStates()
        """The state of each thread as this node's last fenced write of it committed: the
        next fenced write starts from it instead of reading the row (``TxStates``)."""
        self.watches = Watches()
        """What the other nodes watch: the events of those threads are told to every node,
        the others' only to a node that runs the thread (spec 12 §12.7.6)."""
        self.commits = 0
        """Write transactions committed (the heartbeat's not counted)."""
        self.retries = 0
        """Writes run again after a serialization failure, a deadlock or a lost connection."""
        self.rereads = 0
        """Reads run without a transaction (``_checked_read``) that were run again in one
        because a write of their thread committed between their statements."""
        self.timeline: int | None = None
        """The WAL timeline of the server of the newest connection: a change is a failover
        (logged once per change, spec 17 §17.5.1 rule 7)."""
        self.failovers = 0
        """Timeline changes seen: the node drops and settles its runs after each
        (``node/liveness.py``, spec 17 §17.5.2 rule 5)."""
        self.on_failover: Callable[[], None] | None = None
        """Called, on the worker thread that found it, when a new connection finds a new
        timeline (the node's, ``node/pg.py``)."""
        self._replica = ReplicaReads(self, read_url, read_wait_s) if read_url else None

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    async def open(cls, url: str, **options: Any) -> PostgresStore:
        """Connect, then create or migrate the schema (under an advisory lock); a clear
        ``StoreError`` naming the URL (without its password) otherwise."""
        store = cls(url, **options)
        try:
            await store._workers.call(store._migrate)
        except BaseException as exc:
            await store.close()
            cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
            if isinstance(cause, psycopg.Error | schema.SchemaTooNew):
                kind = StoreUnavailable if isinstance(exc, StoreUnavailable) else StoreError
                raise kind(
                    f"cannot open PostgreSQL database {store.safe_url}: {driver_reason(cause)}"
                ) from cause
            raise
        return store

    def open_connection(self, url: str) -> psycopg.Connection[Any]:
        """A new autocommit connection to ``url`` as every connection of the node is made
        (its connect timeout, booleans bound as 0/1, the commit level)."""
        conn = psycopg.connect(url, autocommit=True, **self.connect_options)
        conn.adapters.register_dumper(bool, _BoolAsSmallint)
        if self._always_relaxed:
            conn.execute("SET synchronous_commit = off")
        return conn

    def _connect(self) -> psycopg.Connection[Any]:
        conn = self.open_connection(self.url)
        timeline = _timeline(conn)
        with self._lock:
            if timeline is not None and timeline != self.timeline:
                if self.timeline is not None:
                    self.failovers += 1
                    self.states.clear()  # the new primary's transaction ids are its own
                    if self.on_failover is not None:
                        self.on_failover()
                    logger.warning(
                        "the database %s is on a new timeline (%d → %d): it failed over to a"
                        " standby; the node drops its runs and forgets the rows it cached (spec"
                        " 17 §17.5.3 rule 4)",
                        self.safe_url,
                        self.timeline,
                        timeline,
                    )
                self.timeline = timeline
        return conn

    def _connection(self) -> psycopg.Connection[Any]:
        """This worker thread's connection (a new one when it has none, it broke, or its
        server said it became read-only); ``StoreUnavailable`` when a new one cannot be
        made."""
        conn = self.connections.current()
        if conn is None or conn.closed or conn.broken or read_only_server(conn):
            if conn is not None:
                self.connections.discard(conn)
            try:
                conn = self._connect()
                self.connections.keep(conn)
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"cannot reach PostgreSQL database {self.safe_url}: {driver_reason(exc)}"
                ) from exc
        return conn

    def _lost(self, exc: psycopg.Error) -> StoreUnavailable:
        return StoreUnavailable(f"lost the connection to {self.safe_url}: {driver_reason(exc)}")

    def _migrate(self) -> int:
        conn = self._connection()
        version = schema.migrate(conn)
        found = conn.execute("SELECT current_schema()").fetchone()
        self.schema = str(found[0]) if found else "public"
        self.sql.use_channels(channels(self.schema))
        return version

    def replica(self) -> Store:
        """The read replica's view when ``read_url`` names one, else this store."""
        return cast(Store, self if self._replica is None else self._replica)

    def replica_stats(self) -> dict[str, int]:
        return {} if self._replica is None else dict(self._replica.served)

    async def claim_runner(self) -> None:
        """Several processes share a PostgreSQL database: nothing to claim here (each
        runs the threads whose leases it holds)."""
        if self._closed:
            raise StoreError("store is closed")

    def fenced(self, fence: Fence | None) -> PostgresStore | FencedStore:
        """This store with ``fence`` passed to every write (an execution's writes, spec 12
        §12.3.3): a view sharing its connections, pool and state."""
        return self if fence is None else FencedStore(self, fence)

    # -- writes of the node (``node/pg.py``), not of the Store protocol -----------------
    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, clock, *args)`` in a write transaction: the node's row (spec 12 §12.2)."""
        return await self._write(fn, *args)

    async def write_aside(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, clock, *args)`` in a write transaction on the heartbeat's own thread
        and connection, without waiting for the WAL flush (a heartbeat lost in a crash is
        no loss) and not counted in ``commits``: a heartbeat queued behind the node's data
        work would be late under load and fence a node whose database is fine."""
        if self._closed:
            raise StoreError("store is closed")
        return await asyncio.get_running_loop().run_in_executor(
            self._beats, self._run_write, fn, args, False, None, False
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._replica is not None:
            await self._replica.close_connections()
        await asyncio.get_running_loop().run_in_executor(None, self._workers.shutdown)
        self._beats.shutdown(wait=False)  # a heartbeat may hang on a stalled connection
        self.states.clear()
        self.connections.close_all()

    # -- execution ---------------------------------------------------------------------
    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreError("store is closed")
        return await self._workers.call(self._run_read, fn, args)

    async def _write(
        self, fn: Callable[..., T], *args: Any, durable: bool = True, fence: Fence | None = None
    ) -> T:
        """``fence``: the lease a write of its thread is checked against (``fenced``)."""
        if self._closed:
            raise StoreError("store is closed")
        return await self._workers.call(self._run_write, fn, args, durable, fence)

    async def _point_read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreError("store is closed")
        return await self._workers.call(self._run_read, fn, args, False)

    async def _checked_read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreError("store is closed")
        return await self._workers.call(self._run_checked, fn, args)

    def _run_checked(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn``, which checks that its statements saw one version of the thread's row,
        without a transaction around it: two statements are two round trips, not four.
        When a write of the thread committed between them (``ThreadChanged``), again in
        a snapshot."""
        try:
            return self._run_read(fn, args, False)
        except ThreadChanged:
            self.rereads += 1
        return self._run_read(fn, args)

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...], snapshot: bool = True) -> T:
        """``fn`` in a read-only snapshot, whose BEGIN goes with its first statement (a
        round trip a statement, and the COMMIT's); ``snapshot=False`` (a point read,
        ``Store._point_read``: one row by its key and at most the row it names; a checked
        read) without the transaction around it — a round trip a statement. Its statements
        go on the connection's ``Wire``, as a write's do."""
        for attempt in range(2):
            conn = self._connection()
            try:
                wire = self.connections.wire(conn)
                wire.enter()
                try:
                    # the snapshot's BEGIN goes with the first statement
                    pg = PgConn(
                        conn,
                        self.sql,
                        self.node_id,
                        pipeline=wire,
                        opening=_SNAPSHOT if snapshot else None,
                    )
                    try:
                        return fn(pg, *args)
                    finally:
                        if pg.opening is not None and pg.begun and not conn.broken:
                            wire.send(b"COMMIT", prepare=False)
                            wire.sync()
                finally:
                    wire.leave()
            except _MAYBE_UNREACHABLE as exc:
                if not unreachable(exc, conn):
                    raise
                self.connections.discard(conn)  # a connection that broke: once more on a new one
                if attempt:
                    raise self._lost(exc) from exc
        raise AssertionError("unreachable")

    def _run_write(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        durable: bool,
        fence: Fence | None,
        counted: bool = True,
    ) -> T:
        attempt = 0
        states = self.states
        while True:
            conn = self._connection()
            committing = False
            pg: PgConn | None = None
            try:
                try:
                    wire = self.connections.wire(conn)
                    wire.enter()
                    try:
                        pg = PgConn(
                            conn,
                            self.sql,
                            self.node_id,
                            fence,
                            self.peers,
                            self.watches,
                            wire,
                            states,
                        )
                        pg.begin(durable)  # sent with the transaction's first read
                        result = fn(pg, self.clock, *args)
                        committing = True
                        pg.commit()  # the deferred writes and COMMIT: one round trip
                    finally:
                        wire.leave()
                except BaseException:
                    if pg is not None:
                        pg.forget_states()
                    # a failed statement leaves the transaction open (aborted) past the
                    # pipeline's sync, whether it was the logic's or a deferred one
                    if not conn.broken and conn.info.transaction_status != _IDLE:
                        _rollback(conn)
                    raise
                if counted:  # the data's commits, not the heartbeat's
                    self.commits += 1
                return result
            except _RETRYABLE:
                if attempt >= RETRIES:
                    raise
            except _MAYBE_UNREACHABLE as exc:
                if not unreachable(exc, conn):
                    raise
                self.connections.discard(conn)
                if committing:
                    raise StoreUnavailable(
                        f"the connection to {self.safe_url} broke during a commit: whether"
                        f" the write was stored is unknown ({driver_reason(exc)})"
                    ) from exc
                if attempt >= 1:
                    raise self._lost(exc) from exc
            except psycopg.DatabaseError as exc:
                if exc.sqlstate not in (STALE_STATE, EXPECT_MISSED):
                    raise
                # the row moved past the kept state this write started from (forgotten
                # now): at once again, from the row
                self.states.stale += 1
                continue
            attempt += 1
            self.retries += 1
            time.sleep(random.uniform(0, 0.002 * 2 ** min(attempt, 6)))


class FencedStore(TxStore):
    """A PostgreSQL store's writes with an execution's fence (``PostgresStore.fenced``):
    the same transactions on the same pool, each write passed the fence."""

    kind = "postgres"
    shared = True

    def __init__(self, store: PostgresStore, fence: Fence) -> None:
        self.store = store
        self.fence = fence
        self.url = store.url
        self.clock = store.clock
        self.node_id = store.node_id

    def fenced(self, fence: Fence | None) -> PostgresStore | FencedStore:
        return self.store.fenced(fence)

    async def claim_runner(self) -> None:
        await self.store.claim_runner()

    async def close(self) -> None:
        """Nothing of its own: the store it views is closed by its owner."""

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.store._read(fn, *args)

    async def _point_read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.store._point_read(fn, *args)

    async def _checked_read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.store._checked_read(fn, *args)

    async def _write(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> T:
        return await self.store._write(fn, *args, durable=durable, fence=self.fence)

    def replica(self) -> Store:
        return self.store.replica()

    def replica_stats(self) -> dict[str, int]:
        return self.store.replica_stats()


_LAGGING = object()
"""A replica read the standby could not serve fresh enough: the primary answers it."""


def _wal_position(conn: PgConn) -> str:
    """The primary's WAL position now (no table read)."""
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    return str(row[0])


class ReplicaReads(TxStore):
    """The reads of a :class:`PostgresStore` served by a streaming standby (spec 17
    §17.5.4): the store's read methods (``read_page``, ``query_threads`` …); no writes.

    A read first asks the primary for its WAL position (``pg_current_wal_lsn()``, no table
    read), waits up to ``wait_s`` for the standby to have replayed that far, and only then
    takes its snapshot there. So it sees every write acknowledged before it began, on any
    node (read-your-writes), and a page never lacks what a ``seq`` read before it claims. A
    standby that lags longer, that cancels the read (a conflict with its replay), or that
    cannot be reached is not waited for: the primary answers (``served`` counts which). A
    point read (one row by its key) is the primary's: it costs the primary no more than the
    position. The standby is read in the primary's schema."""

    kind = "postgres"
    shared = True

    def __init__(self, primary: PostgresStore, url: str, wait_s: float) -> None:
        self.primary = primary
        self.url = url
        self.safe_url = redacted(url)
        self.clock = primary.clock
        self.node_id = primary.node_id
        self.wait_s = wait_s
        self.served = {"replica": 0, "lagging": 0, "conflict": 0, "unreachable": 0}
        """Reads by who answered: the standby, or the primary because the standby lagged,
        cancelled the read, or could not be reached."""
        self._workers = Workers(primary.pool_size, "threadloom-pg-replica")
        self.connections = ThreadConnections()
        self._down = False

    def replica(self) -> Store:
        return cast(Store, self)

    def replica_stats(self) -> dict[str, int]:
        return dict(self.served)

    def fenced(self, fence: Fence | None) -> PostgresStore | FencedStore:
        return self.primary.fenced(fence)

    async def claim_runner(self) -> None:
        await self.primary.claim_runner()

    async def close(self) -> None:
        """Nothing of its own: its primary closes it (``close_connections``)."""

    async def close_connections(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._workers.shutdown)
        self.connections.close_all()

    async def _write(self, fn: Callable[..., T], *args: Any, durable: bool = True) -> T:
        raise StoreError("a read replica takes no writes: write through the primary's store")

    async def _point_read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.primary._point_read(fn, *args)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        primary = self.primary
        target = await primary._point_read(_wal_position)
        try:
            result = await self._workers.call(self._run_read, fn, args, target)
        except StoreUnavailable as exc:
            self.served["unreachable"] += 1
            if not self._down:
                self._down = True
                logger.warning("the read replica is unreachable, the primary answers: %s", exc)
            return await primary._read(fn, *args)
        if result is _LAGGING or result is psycopg.errors.SerializationFailure:
            self.served["lagging" if result is _LAGGING else "conflict"] += 1
            return await primary._read(fn, *args)
        if self._down:
            self._down = False
            logger.warning("the read replica %s answers again", self.safe_url)
        self.served["replica"] += 1
        return result  # type: ignore[no-any-return]

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self.connections.current()
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                self.connections.discard(conn)
            try:
                conn = self.primary.open_connection(self.url)
                conn.execute(
                    "SELECT set_config('search_path', quote_ident(%s), false)",
                    (self.primary.schema,),
                )
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"cannot reach the read replica {self.safe_url}: {driver_reason(exc)}"
                ) from exc
            self.connections.keep(conn)
        return conn

    def _run_read(self, fn: Callable[..., T], args: tuple[Any, ...], target: str) -> Any:
        """``fn`` in a snapshot of the standby taken once it replayed ``target``; else
        ``_LAGGING`` (not in time) or ``SerializationFailure`` (the standby cancelled it)."""
        deadline = time.monotonic() + self.wait_s
        for attempt in range(2):
            conn = self._connection()
            try:
                while True:  # a promoted standby has no replay position: its own then
                    row = conn.execute(
                        "SELECT COALESCE(pg_last_wal_replay_lsn(), pg_current_wal_lsn())"
                        " >= %s::pg_lsn",
                        (target,),
                    ).fetchone()
                    if row is not None and row[0]:
                        break
                    if time.monotonic() >= deadline:
                        return _LAGGING
                    time.sleep(0.002)
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    return fn(PgConn(conn, self.primary.sql, self.node_id), *args)
                finally:
                    if not conn.broken:
                        conn.execute("COMMIT")
            except psycopg.errors.SerializationFailure:
                return psycopg.errors.SerializationFailure
            except psycopg.OperationalError as exc:
                if not unreachable(exc, conn):
                    raise
                self.connections.discard(conn)
                if attempt:
                    raise StoreUnavailable(
                        f"lost the connection to the read replica {self.safe_url}:"
                        f" {driver_reason(exc)}"
                    ) from exc
        raise AssertionError("unreachable")
