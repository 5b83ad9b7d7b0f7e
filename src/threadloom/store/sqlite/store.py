"""The embedded SQLite store: one database file for all threads, WAL, FULL sync by default.

Every write is one ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction, run where its
``write_mode`` says (``transactions.py``: at once on the event loop's thread, in a batch
there under load, or on the writer thread). Reads run on a small pool of threads with their
own connections (WAL readers never wait for a writer).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from threadloom.errors import StoreError
from threadloom.records import (
    FileRecord,
    FileStats,
    LogRow,
    Message,
    QueueEntry,
    SubagentRegistryEntry,
)
from threadloom.store.base import (
    Clock,
    CostSummary,
    FileContent,
    NewFile,
    NewThread,
    Order,
    OwnerCount,
    PruneChunk,
    StoredEvent,
    ThreadPatch,
    ThreadQuery,
    ThreadRow,
    ThreadStats,
    system_clock_us,
)
from threadloom.store.sqlite import events, files, logs, messages, queue, schema, threads
from threadloom.store.sqlite.auth import AuthMethods
from threadloom.store.sqlite.nulls import CACHED_STATEMENTS
from threadloom.store.sqlite.process_lock import ProcessLock
from threadloom.store.sqlite.run_methods import RunMethods
from threadloom.store.sqlite.transactions import Queued, Transactions
from threadloom.store.sqlite.wal_prefill import prefill_wal, wal_size
from threadloom.store.sqlite.writer import Writer, plain_call

T = TypeVar("T")


Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
WriteMode = Literal["auto", "thread", "inline"]
_WRITE_MODES = ("auto", "thread", "inline")
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


class SqliteStore(Transactions, AuthMethods, RunMethods):
    """The :class:`~threadloom.store.base.Store` on an SQLite file."""

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
    ) -> None:
        if synchronous not in _SYNC_LEVELS:
            raise StoreError(f"synchronous must be one of {_SYNC_LEVELS}, not {synchronous!r}")
        if write_mode not in _WRITE_MODES:
            raise StoreError(f"write_mode must be one of {_WRITE_MODES}, not {write_mode!r}")
        self.write_mode = write_mode
        self.path = path
        self.url = url or f"sqlite:///{path}"
        self.synchronous = synchronous
        self._relaxable = synchronous in ("FULL", "EXTRA")
        """Whether a non-durable write can skip the sync of its commit."""
        self.clock = clock
        self._busy_timeout_ms = busy_timeout_ms
        self._writer = Writer(self._run_batch)
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="threadloom-sqlite-r")
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
        except (sqlite3.Error, RuntimeError, OSError) as exc:
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

    async def claim_runner(self) -> None:
        """Lock ``<file>.lock`` for this process (``process_lock``); ``StoreLocked`` when
        another process holds it. Then, with per-commit syncs, prefill the WAL
        (``wal_prefill``): the commits after the start write into existing blocks."""
        if self._closed:
            raise StoreError("store is closed")
        if self._process_lock is not None or self.path == ":memory:":
            return
        self._process_lock = ProcessLock.acquire(self.path)
        if self._relaxable:  # FULL or EXTRA: every durable commit syncs the WAL
            self.wal_prefilled = await self._writer.submit(plain_call, self._prefill_wal)

    def _prefill_wal(self) -> bool:
        assert self._wconn is not None
        return prefill_steady_wal(self._wconn, self.path)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.shutdown()
        self._readers.shutdown(wait=True)
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
        return await asyncio.get_running_loop().run_in_executor(
            self._readers, self._snapshot, fn, args
        )

    # -- threads -----------------------------------------------------------------------
    async def create_thread(self, new: NewThread) -> ThreadRow:
        return await self._write(threads.create_thread, new)

    async def create_child(
        self, new: NewThread, entry: SubagentRegistryEntry
    ) -> tuple[ThreadRow, StoredEvent]:
        return await self._write(threads.create_child, new, entry)

    async def get_thread(self, thread_id: str) -> ThreadRow | None:
        return await self._read(threads.get_thread, thread_id)

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

    async def threads_with_queue(self) -> list[str]:
        return await self._read(threads.threads_with_queue)

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
    async def insert_log(
        self, thread_id: str, row: LogRow, *, anchor_newest: bool = False
    ) -> tuple[LogRow, StoredEvent]:
        return await self._write(logs.insert_log, thread_id, row, anchor_newest)

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

    # -- events ------------------------------------------------------------------------
    async def read_events(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[StoredEvent]:
        return await self._read(threads.read_events, thread_id, after_seq, limit)

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
