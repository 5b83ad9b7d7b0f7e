"""Backup and restore of an SQLite store (spec 17 §17.3): SQLite's online backup API.

``backup`` copies a store's file while a server writes it: the copy is SQLite's backup API
(``sqlite3.Connection.backup``), stepped a few pages at a time so a caller can show its
progress, under one read transaction held on the source from the first step to the last —
so every step reads the same snapshot (WAL readers never block the writer, nor does it block
them), the copy is that snapshot, and the backup never starts over because the server
committed meanwhile. The copy is written to a temporary file beside ``OUT``, switched out of
WAL mode (one self-contained file), checked with ``PRAGMA integrity_check``, synced, and
renamed to ``OUT``: ``OUT`` is either absent or a whole, checked backup.

``restore`` puts a backup in place of a store's file: it refuses while a process holds the
file's process lock (``process_lock``: a server runs it), refuses a backup that fails
``integrity_check``, that is no Threadloom store, or whose schema this release cannot use
(newer and not compatible, ``store/core/upgrades.py``), copies it to a temporary file beside
the target and renames it over the target. A database it replaces is kept beside it (a hard
link made before the rename, so the target path always holds one whole database), with its
WAL checkpointed into it first.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from threadloom.errors import StoreError
from threadloom.store.core.upgrades import SchemaTooNew
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.process_lock import ProcessLock

Progress = Callable[[int, int], None]
"""Called after each step with (pages copied, pages in all)."""

STEP_PAGES = 1024
"""Pages copied per step of the backup API (4 MiB at the default 4 KiB page)."""


@dataclass(frozen=True)
class Copied:
    """What a backup or restore wrote."""

    path: Path
    pages: int
    bytes: int
    schema_version: int
    threads: int
    seconds: float
    kept: Path | None = None
    """Restore only: where the database it replaced was kept."""


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    return sqlite3.connect(path, isolation_level=None)


def _schema_version(conn: sqlite3.Connection, what: str) -> int:
    try:
        row = conn.execute("SELECT max(version) FROM threadloom_migrations").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{what} is not a Threadloom SQLite store ({exc})") from exc
    if row is None or row[0] is None:
        raise StoreError(f"{what} is not a Threadloom SQLite store (no migration recorded)")
    return int(row[0])


def _integrity(conn: sqlite3.Connection, what: str) -> None:
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{what} fails SQLite's integrity check: {exc}") from exc
    if rows != ["ok"]:
        raise StoreError(f"{what} fails SQLite's integrity check: {'; '.join(rows[:5])}")


def _threads(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM threads").fetchone()[0])


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform syncs a directory
        _sync(directory)


def _temporary(target: Path) -> Path:
    return target.with_name(f".{target.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")


def _remove(path: Path) -> None:
    for name in (path, Path(f"{path}-journal"), Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            name.unlink()


def _copy(
    source: sqlite3.Connection, target: Path, progress: Progress | None, step_pages: int
) -> int:
    """Copy ``source``'s snapshot into a new file ``target``, self-contained (journal
    mode DELETE), checked and synced; the pages copied."""
    pages = 0

    def stepped(_status: int, remaining: int, total: int) -> None:
        nonlocal pages
        pages = total
        if progress is not None:
            progress(total - remaining, total)

    out = sqlite3.connect(target, isolation_level=None)
    try:
        # one read transaction across every step: each reads the same snapshot, and the
        # backup does not restart when another connection commits between two steps
        source.execute("BEGIN")
        try:
            source.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            source.backup(out, pages=step_pages, progress=stepped, sleep=0.005)
        finally:
            source.execute("COMMIT")
        mode = out.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
        if str(mode).lower() != "delete":
            raise StoreError(f"could not switch the copy {target} out of WAL mode ({mode})")
        _integrity(out, f"the copy {target}")
    finally:
        out.close()
    _sync(target)
    return pages


def backup(
    source: str | Path,
    out: str | Path,
    *,
    progress: Progress | None = None,
    replace: bool = False,
    step_pages: int = STEP_PAGES,
) -> Copied:
    """Back up the SQLite store at ``source`` (a server may be writing it) into ``out``:
    a consistent, integrity-checked copy, written atomically. ``out`` must not exist unless
    ``replace``."""
    started = time.monotonic()
    source, out = Path(source), Path(out)
    if not source.is_file():
        raise StoreError(f"cannot back up {str(source)!r}: no such file")
    if out.exists() and not replace:
        raise StoreError(f"{str(out)!r} exists: give another file, or --replace to overwrite it")
    if not out.parent.is_dir():
        raise StoreError(f"cannot write {str(out)!r}: directory {str(out.parent)!r} does not exist")
    if out.resolve() == source.resolve():
        raise StoreError("the backup cannot be written over the database it copies")
    conn = sqlite3.connect(source, isolation_level=None, timeout=10)
    temporary = _temporary(out)
    try:
        version = _schema_version(conn, repr(str(source)))
        pages = _copy(conn, temporary, progress, step_pages)
        check = _connect(temporary, read_only=True)
        try:
            threads = _threads(check)
        finally:
            check.close()
        os.replace(temporary, out)
        _sync_dir(out.parent)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot back up {str(source)!r}: {exc}") from exc
    finally:
        conn.close()
        _remove(temporary)
    return Copied(out, pages, out.stat().st_size, version, threads, time.monotonic() - started)


def check_backup(path: str | Path) -> tuple[int, int]:
    """Whether ``path`` is a backup this release can restore and serve: integrity, a
    Threadloom store, a schema it can use; its (schema version, threads)."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"no backup at {str(path)!r}")
    what = f"the backup {str(path)!r}"
    try:
        conn = _connect(path, read_only=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {what}: {exc}") from exc
    try:
        _integrity(conn, what)
        version = _schema_version(conn, what)
        try:
            schema.plan(conn)  # refuses a newer schema this release cannot use
        except SchemaTooNew as exc:
            raise SchemaTooNew(f"{what} cannot be restored by this release: {exc}") from None
        return version, _threads(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read {what}: {exc}") from exc
    finally:
        conn.close()


def restore(
    backup_path: str | Path,
    target: str | Path,
    *,
    progress: Progress | None = None,
    step_pages: int = STEP_PAGES,
) -> Copied:
    """Restore ``backup_path`` as the SQLite store ``target``, atomically; a database at
    ``target`` is kept beside it (``<target>.before-restore-<UTC time>``). Refused while a
    process holds ``target``'s lock, and for a backup :func:`check_backup` refuses."""
    started = time.monotonic()
    backup_path, target = Path(backup_path), Path(target)
    if not target.parent.is_dir():
        raise StoreError(
            f"cannot restore to {str(target)!r}: directory {str(target.parent)!r} does not exist"
        )
    if target.exists() and target.resolve() == backup_path.resolve():
        raise StoreError("the backup cannot be restored over itself")
    version, threads = check_backup(backup_path)
    lock = ProcessLock.acquire(str(target))  # StoreLocked: a server runs the file
    temporary = _temporary(target)
    kept: Path | None = None
    try:
        source = _connect(backup_path, read_only=True)
        try:
            pages = _copy(source, temporary, progress, step_pages)
        finally:
            source.close()
        if target.exists():
            kept = _keep(target)
        for leftover in (Path(f"{target}-wal"), Path(f"{target}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        os.replace(temporary, target)
        _sync_dir(target.parent)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot restore {str(backup_path)!r}: {exc}") from exc
    finally:
        _remove(temporary)
        lock.release()
    return Copied(
        target,
        pages,
        target.stat().st_size,
        version,
        threads,
        time.monotonic() - started,
        kept,
    )


def _keep(target: Path) -> Path:
    """Keep the database at ``target`` beside it: its WAL checkpointed into the file, then
    a hard link (the target path stays a whole database until the rename over it)."""
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy is not None and busy[0]:
            raise StoreError(f"cannot checkpoint the WAL of {str(target)!r}: it is in use")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read the database at {str(target)!r}: {exc}") from exc
    finally:
        conn.close()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = target.with_name(f"{target.name}.before-restore-{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = target.with_name(f"{target.name}.before-restore-{stamp}-{n}")
    os.link(target, kept)
    return kept
