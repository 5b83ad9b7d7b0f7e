"""A transaction's statements (a write's or a read's) in libpq's pipeline mode, sent and
read through psycopg's binding of libpq (``PGconn``) and its adapters (``Transformer``):
the parameters dumped and the rows loaded by psycopg as its cursors do, without its
cursors, its pipeline and the generators they run on.

Issue 40 measured psycopg's pipeline at 160–300 µs of CPU for a write of two statements and
a Sync, and this at 37–56 µs (``Wire``): a turn is four write transactions, and psycopg's
machinery was the larger part of the store's worker threads' CPU. What psycopg did that
this keeps: the connection's adapters (booleans as 0/1, ``store.py``), the types it sends
with each parameter, its loaders for the rows, its exception classes for a statement's
error (``psycopg.errors.error_from_result``), and preparing a statement once it repeats. What
this does itself: the protocol's order of results (each statement's, then the Sync's) and
which statements the server holds prepared — known from the results, so a statement whose
PREPARE was in a segment the server aborted is not taken as prepared (the psycopg 3.3.9 bug
``store._run_write`` had to work around by replacing the connection).
"""

from __future__ import annotations

import select
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

_OK = pq.ExecStatus.COMMAND_OK
_TUPLES = pq.ExecStatus.TUPLES_OK
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_OFF = pq.PipelineStatus.OFF

PREPARE_AFTER = 2
"""A statement is prepared at its second execution on a connection (psycopg's default is the
fifth): the write path's texts repeat every turn, and a one-off is not prepared."""
PREPARED_MAX = 200
"""At most this many statements prepared on a connection; past it the least recently used
one is deallocated."""
_SEEN_MAX = 4096


class Rows:
    """One statement's result (the :class:`~threadloom.store.core.conn.Cursor` the logic
    reads): complete once the pipeline's Sync has been read (``Wire.sync``)."""

    __slots__ = ("_result", "_rows", "_wire", "rowcount")

    def __init__(self, wire: Wire) -> None:
        self._wire = wire
        self._result: pq.abc.PGresult | None = None
        self._rows: list[Any] | None = None
        self.rowcount = -1

    @classmethod
    def total(cls, wire: Wire, each: Sequence[Rows]) -> Rows:
        """The result of a statement run once for each of several parameter rows: the rows
        changed by all (psycopg's ``executemany``), no rows to read."""
        rows = cls(wire)
        rows.rowcount = sum(r.rowcount for r in each if r.rowcount > 0)
        return rows

    def _take(self, result: pq.abc.PGresult) -> None:
        self._result = result
        tuples = result.command_tuples
        self.rowcount = -1 if tuples is None else tuples

    def fetchall(self) -> list[Any]:
        rows = self._rows
        if rows is None:
            result = self._result
            if result is None or result.status != _TUPLES or not result.ntuples:
                rows = []
            else:  # loaded when read: most results (BEGIN, the writes, a check) never are
                transformer = self._wire.transformer
                transformer.set_pgresult(result)
                rows = transformer.load_rows(0, result.ntuples, tuple)
            self._rows = rows
            self._result = None
        taken, self._rows = rows, []
        return taken

    def fetchone(self) -> Any:
        rows = self.fetchall()
        if not rows:
            return None
        if len(rows) > 1:
            self._rows = rows[1:]
        return rows[0]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class _Prepare:
    """A PREPARE in the pipeline: its statement counts as prepared only if it succeeded."""

    __slots__ = ("key", "name")

    def __init__(self, key: tuple[bytes, tuple[int, ...]], name: bytes) -> None:
        self.key = key
        self.name = name


class Wire:
    """One connection's transactions in pipeline mode: ``enter``, ``send`` the
    statements (each answers its :class:`Rows`), ``sync`` to send a Sync and read every
    result up to it (raising the first statement's error), ``leave``. One a connection,
    used by the worker thread that owns it; it remembers which statements the server holds
    prepared for that connection."""

    __slots__ = (
        "_count",
        "_fd",
        "_pending",
        "_poll",
        "_prepared",
        "_seen",
        "conn",
        "pgconn",
        "transformer",
    )

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.pgconn = conn.pgconn
        self.transformer = Transformer(conn)
        self._pending: list[Rows | _Prepare] = []
        self._prepared: OrderedDict[tuple[bytes, tuple[int, ...]], bytes] = OrderedDict()
        self._seen: dict[tuple[bytes, tuple[int, ...]], int] = {}
        self._count = 0
        self._poll = select.poll()
        self._fd = -1

    # -- the pipeline ------------------------------------------------------------------
    def enter(self) -> None:
        pgconn = self.pgconn
        fd = pgconn.socket
        if fd != self._fd:
            if self._fd >= 0:
                self._poll.unregister(self._fd)
            self._poll.register(fd, select.POLLIN)
            self._fd = fd
        pgconn.enter_pipeline_mode()

    def leave(self) -> None:
        """Leave pipeline mode, first reading what is still pending (a transaction that
        failed midway), whose errors are dropped: the caller has its own."""
        pgconn = self.pgconn
        if pgconn.pipeline_status == _OFF:
            return
        try:
            if self._pending:
                try:
                    self.sync()
                except psycopg.Error:
                    pass
            pgconn.exit_pipeline_mode()
        except psycopg.Error:
            if not self.conn.broken:
                raise

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def send(self, sql: bytes, parameters: Sequence[Any] = (), prepare: bool = True) -> Rows:
        """Queue ``sql`` (``$n`` parameters) with ``parameters``; its rows once synced."""
        transformer = self.transformer
        pgconn = self.pgconn
        if parameters:
            values = transformer.dump_sequence(parameters, [PyFormat.AUTO] * len(parameters))
            types: tuple[int, ...] = transformer.types or ()
            formats = transformer.formats
        else:
            values, types, formats = None, (), None
        rows = Rows(self)
        key = (sql, types)
        prepared = self._prepared
        name = prepared.get(key)
        if name is not None:
            prepared.move_to_end(key)
            pgconn.send_query_prepared(name, values, formats)
        elif prepare and self._seen.get(key, 0) + 1 >= PREPARE_AFTER:
            self._seen.pop(key, None)
            if len(prepared) >= PREPARED_MAX:
                _, old = prepared.popitem(last=False)
                # never prepared again under that name: if the DEALLOCATE is lost with an
                # aborted segment, the server keeps one statement too many, nothing worse
                pgconn.send_query_params(b"DEALLOCATE " + old, None)
                self._pending.append(Rows(self))
            self._count += 1
            name = b"_tl_%d" % self._count
            prepared[key] = name  # the rest of this segment may use it; undone if it failed
            pgconn.send_prepare(name, sql, types)
            self._pending.append(_Prepare(key, name))
            pgconn.send_query_prepared(name, values, formats)
        else:
            if prepare:
                seen = self._seen
                if len(seen) >= _SEEN_MAX:
                    seen.clear()
                seen[key] = seen.get(key, 0) + 1
            pgconn.send_query_params(sql, values, types, formats)
        self._pending.append(rows)
        return rows

    def sync(self) -> None:
        """Send a Sync and read every result up to it; raise the first statement's error
        (the statements after it in the segment were skipped by the server)."""
        pgconn = self.pgconn
        pending, self._pending = self._pending, []
        pgconn.pipeline_sync()
        self._flush()
        error: psycopg.Error | None = None
        for item in pending:
            result = self._result()
            while result is None:  # not expected: a statement's results end with a NULL
                result = self._result()
            status = result.status
            if isinstance(item, _Prepare):
                if status != _OK:
                    self._prepared.pop(item.key, None)
            else:
                item._take(result)
            if status != _OK and status != _TUPLES and status != _ABORTED and error is None:
                error = psycopg.errors.error_from_result(result, encoding=self.conn.info.encoding)
            if status != _SYNC:
                self._result()  # the NULL that ends each statement's results
        result = self._result()
        while result is None or result.status != _SYNC:
            result = self._result()
        if error is not None:
            raise error

    # -- the socket --------------------------------------------------------------------
    def _flush(self) -> None:
        pgconn = self.pgconn
        while pgconn.flush():
            # the server's side is full: read what it sent meanwhile, wait, send the rest
            self._poll.modify(self._fd, select.POLLIN | select.POLLOUT)
            try:
                self._poll.poll()
            finally:
                self._poll.modify(self._fd, select.POLLIN)
            pgconn.consume_input()

    def _result(self) -> pq.abc.PGresult | None:
        pgconn = self.pgconn
        while pgconn.is_busy():
            self._poll.poll()
            pgconn.consume_input()
        return pgconn.get_result()
