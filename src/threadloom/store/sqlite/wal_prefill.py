"""Prefilling the write-ahead log: the first commits after a start write into blocks that
already exist.

With ``synchronous=FULL`` every durable commit ends with an ``fdatasync`` of the WAL file.
While the file grows (from an empty WAL at open until the first checkpoint lets SQLite wrap
around, ``WAL_AUTOCHECKPOINT_PAGES`` pages later), each of those commits also changes the
file's size, and ext4 then has to commit its journal as well: measured on the dev VM, a
turn cost 3.48 ms in its first 75 turns after an open against 2.93 ms once the WAL is
reused (``make bench-turn`` section A's first blocks, and every short-lived process, pay
it). So the process that runs a file's threads writes the WAL's steady-state size in zeros
once, when it claims the file: about 17 MiB and some 13 ms at open, the size the WAL reaches
after 4,000 pages of writes anyway.

Safe because SQLite reads a WAL only up to its last valid frame: a file of zeros has no
valid header, so it holds no frames, and the first commit writes a new header at offset 0
(the same as after a checkpoint reset, when stale frames of an older generation follow the
new ones). It is done only when the WAL can be emptied first (a ``TRUNCATE`` checkpoint that
no other connection holds back) and under the write lock, so no frame is ever overwritten;
otherwise it is skipped. ``synchronous=NORMAL`` or ``OFF`` sync no commit, so they skip it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3

log = logging.getLogger(__name__)

_CHUNK = bytes(1 << 20)
SLACK_PAGES = 64
"""Frames a WAL may hold beyond the checkpoint threshold: the commit that crosses it."""


def wal_size(autocheckpoint_pages: int, page_size: int) -> int:
    """The WAL's size when it wraps: its header and the frames up to the checkpoint."""
    return 32 + (autocheckpoint_pages + SLACK_PAGES) * (page_size + 24)


def prefill_wal(conn: sqlite3.Connection, db_path: str, size: int) -> bool:
    """Empty the WAL of ``db_path`` and fill it with ``size`` zero bytes; False when the WAL
    could not be emptied (another connection reads or writes it), and nothing is done."""
    wal = db_path + "-wal"
    timeout = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")  # never wait for another connection: skip
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout)}")
    if busy:
        return False
    conn.execute("BEGIN IMMEDIATE")  # no frame can be appended while the zeros are written
    try:
        try:
            if os.path.getsize(wal) != 0:
                return False
        except FileNotFoundError:
            return False
        try:
            _write_zeros(wal, size)
        except OSError as exc:  # a full disk, say: the store works without the prefill
            log.warning("could not prefill the WAL %s (%s); continuing without", wal, exc)
            with contextlib.suppress(OSError):
                os.truncate(wal, 0)
            return False
        return True
    finally:
        conn.execute("COMMIT")


def _write_zeros(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        remaining = size
        while remaining > 0:
            remaining -= os.write(fd, _CHUNK[: min(remaining, len(_CHUNK))])
        os.fsync(fd)
    finally:
        os.close(fd)
