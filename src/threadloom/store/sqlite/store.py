"""The embedded SQLite store: one database file for all threads, WAL, FULL sync by default.

Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction, run where its
``write_mode`` says (``transactions.py``: at once on the event loop's thread, in a batch
there under load, or on the writer thread). Reads run on a small pool of threads with their
own connections (WAL readers never wait for a writer).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from threadloom.errors import StoreError
from threadloom.store.core.runner import TxStore
from threadloom.store.core.upgrades import SchemaTooNew
from threadloom.store.shapes import Clock, Fence, system_clock_us
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.dialect import SQLITE, SqliteConnection
from threadloom.store.sqlite.process_lock import ProcessLock
from threadloom.store.sqlite.search_index import BacklogPass, every_s_from_env
from threadloom.store.sqlite.transactions import Queued, Transactions
from threadloom.store.sqlite.wal_prefill import prefill_wal, wal_size
from threadloom.store.sqlite.writer import Writer, plain_call
from threadloom.store.workers import Workers

T = TypeVar("T")


Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
WriteMode = Literal["auto", "thread", "inline"]
_WRITE_MODES = ("auto", "thread", "inline")
CACHED_STATEMENTS = 512
"""Prepared statements a connection keeps (``sqlite3.connect(cached_statements=…)``);
Python's default, 128, is close to what the store's statements and their NULL patterns
(``core/null_literals``) need."""
WAL_AUTOCHECKPOINT_PAGES = 4000  # 16 MiB of WAL at 4 KiB pages
_SYNC_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def connect(path: str, synchronous: str, busy_timeout_ms: float) -> sqlite3.Connection:
    """A connection to ``path`` with the store's settings (spec 01 §1.11.4: foreign keys on,
    ``synchronous``, a busy timeout; the checkpoint threshold and statement cache below).
    Usable from any thread; the caller switches the file to WAL once."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        timeout=busy_timeout_ms / 1000,
        cached_statements=CACHED_STATEMENTS,
        factory=SqliteConnection,
    )
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    # A Threadloom write touches ~9 pages (record, indexes, counts, counters, event);
    # with SQLite's default of 1,000 pages one commit in ~110 would pay a checkpoint.
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    return conn


def prefill_steady_wal(conn: sqlite3.Connection, path: str) -> bool:
    """Prefill the WAL of ``path`` to the size it reaches at the store's checkpoint
    threshold (``wal_prefill``)."""
    page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    return prefill_wal(conn, path, wal_size(WAL_AUTOCHECKPOINT_PAGES, page_size))


def path_from_url(url: str) -> str:
    """``sqlite:///relative.db`` → ``relative.db``; ``sqlite:////abs/x.db`` → ``/abs/x.db``
    (SQLAlchemy's convention); a plain path is taken as it is."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
    elif url.startswith("sqlite://"):
        raise StoreError(f"invalid SQLite URL {url!r}: use sqlite:///path/to/file.db")
    else:
        path = url
    path = path.split("?", 1)[0]
    if not path:
        raise StoreError(f"invalid SQLite URL {url!r}: no file path")
    return path


class SqliteStore(Transactions, TxStore):
    """The :class:`~threadloom.store.base.Store` on an SQLite file."""

    kind = "sqlite"
    search_backlog = bool(SQLITE.search_catch_up)

    def __init__(
        self,
        path: str,
        *,
        url: str | None = None,
        synchronous: Synchronous = "FULL",
        clock: Clock = system_clock_us,
        readers: int = 4,
        busy_timeout_ms: int = 10_000,
        write_mode: WriteMode = "auto",
        node_id: str | None = None,
        node_ttl_s: float = 15.0,
        index_every_s: float | None = None,
    ) -> None:
        if synchronous not in _SYNC_LEVELS:
            raise StoreError(f"synchronous must be one of {_SYNC_LEVELS}, not {synchronous!r}")
        if write_mode not in _WRITE_MODES:
            raise StoreError(f"write_mode must be one of {_WRITE_MODES}, not {write_mode!r}")
        every_s = every_s_from_env(os.environ) if index_every_s is None else index_every_s
        self.write_mode = write_mode
        self.node_id = node_id
        """Kept for diagnostics only: one process runs an SQLite file (no leases, no
        heartbeat; ``node_ttl_s`` is accepted and unused)."""
        self.path = path
        self.url = url or f"sqlite:///{path}"
        self.synchronous = synchronous
        self._relaxable = synchronous in ("FULL", "EXTRA")
        """Whether a non-durable write can skip the sync of its commit."""
        self.clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._writer = Writer(self._run_batch)
        self._readers = Workers(readers, "threadloom-sqlite-r")
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._wconn: sqlite3.Connection | None = None
        self._iconn: sqlite3.Connection | None = None
        self._queued = 0  # writes queued (a batch or the writer thread), not yet answered
        self._batch: list[Queued] = []
        self._flush_scheduled = False
        self.commits = 0
        """Write transactions committed (a group commit counts once)."""
        self.writes = 0
        """Write operations committed or refused."""
        self._closed = False
        self._process_lock: ProcessLock | None = None
        self.wal_prefilled = False
        """Whether ``claim_runner`` wrote the WAL's steady-state size in zeros."""
        self.backlog_pass = BacklogPass(self.catch_up_search, lambda: self.writes, every_s)
        """The search index's background pass (``search_index.py``), started by
        ``claim_runner``: the process that runs the file's threads writes its messages.
        ``index_every_s``: seconds between passes (default ``THREADLOOM_SEARCH_INDEX_SECONDS``,
        else 1; 0: none)."""

    # -- lifecycle ---------------------------------------------------------------------
    @classmethod
    async def open(cls, url: str, **options: Any) -> SqliteStore:
        """Open (creating and migrating) the database; a clear ``StoreError`` otherwise."""
        path = path_from_url(url)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise StoreError(
                f"cannot open SQLite database {path!r}: directory {directory!r} does not exist"
            )
        store = cls(path, url=url, **options)
        try:
            await store._writer.submit(plain_call, store._open_writer)
        except (sqlite3.Error, RuntimeError, OSError, SchemaTooNew) as exc:
            await store.close()
            raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from exc
        return store

    def _connect(self, busy_timeout_ms: int | None = None) -> sqlite3.Connection:
        timeout_ms = self._busy_timeout_ms if busy_timeout_ms is None else busy_timeout_ms
        conn = connect(self.path, self.synchronous, timeout_ms)
        with self._lock:
            self._connections.append(conn)
        return conn

    def _open_writer(self) -> None:
        conn = self._connect()
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"could not switch to WAL journal mode (got {mode!r})")
        schema.migrate(conn)
        self._wconn = conn
        if self.write_mode != "thread":
            self._iconn = self._connect(busy_timeout_ms=0)

    def fenced(self, fence: Fence | None) -> SqliteStore:
        """Itself: its threads carry no leases (one process runs them), so no write is
        checked against a fence (spec 12 §12.3.3)."""
        return self

    async def claim_runner(self) -> None:
        """Lock ``<file>.lock`` for this process (``process_lock``); ``StoreLocked`` when
        another process holds it. Then, with per-commit syncs, prefill the WAL
        (``wal_prefill``): the commits after the start write into existing blocks."""
        if self._closed:
            raise StoreError("store is closed")
        if self._process_lock is not None or self.path == ":memory:":
            return
        self._process_lock = ProcessLock.acquire(self.path)
        self.backlog_pass.start()
        if self._relaxable:  # FULL or EXTRA: every durable commit syncs the WAL
            self.wal_prefilled = await self._writer.submit(plain_call, self._prefill_wal)

    def _prefill_wal(self) -> bool:
        assert self._wconn is not None
        return prefill_steady_wal(self._wconn, self.path)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.backlog_pass.stop()
        self._writer.shutdown()
        self._readers.shutdown()
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        if self._process_lock is not None:  # last: the file is no longer written
            self._process_lock.release()
            self._process_lock = None

    def pragma(self, name: str) -> Any:
        """Read a PRAGMA on a fresh reader connection (diagnostics and tests)."""
        conn = self._connect()
        try:
            return conn.execute(f"PRAGMA {name}").fetchone()[0]
        finally:
            with self._lock:
                self._connections.remove(conn)
            conn.close()

    # -- execution ---------------------------------------------------------------------
    def _reader_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _snapshot(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._reader_conn()
        conn.execute("BEGIN")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("COMMIT")

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreError("store is closed")
        return await self._readers.call(self._snapshot, fn, args)

    async def _point_read(self, fn: Callable[..., T], *args: Any) -> T:
        """One row by its key: a small read (``_small_read``)."""
        return await self._small_read(fn, *args)

    async def _small_read(self, fn: Callable[..., T], *args: Any) -> T:
        """A small read (a row by its key, a page of the default size), in a snapshot on
        the loop's own connection: an indexed lookup costs tens of microseconds, a page
        of 100 messages about 0.3 ms, less than handing it to a reader thread and back
        (about a third of a ``GET …/messages`` answered from kept pages went to that
        hand-off, and a third of a first read's CPU with the reader threads contending
        for the GIL: issue 40). WAL readers never wait for the writer; a lock that would
        make it wait (busy timeout 0) sends the read to a reader thread instead."""
        conn = self._iconn
        if conn is not None and not self._closed:  # write_mode "thread": the loop has none
            try:
                conn.execute("BEGIN")
                try:
                    return fn(conn, *args)
                finally:
                    conn.execute("COMMIT")
            except sqlite3.OperationalError:
                pass  # busy: a reader thread may wait for it
        return await self._read(fn, *args)
