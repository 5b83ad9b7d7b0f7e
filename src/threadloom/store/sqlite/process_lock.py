"""The SQLite store's process lock (spec 12 §12.1 rule 4): one process runs a file's threads.

SQLite itself lets several processes share a file, but a Runtime assumes it is the only one
running that file's threads: its start-up recovery settles every ``running`` thread as
``failed``/``execution_lost``, which would wrongly end the runs of another live process.
So the process that runs threads on ``<file>`` holds an exclusive lock on ``<file>.lock``
(``flock``; ``msvcrt.locking`` on Windows) and writes its pid into it; a second process is
refused with :class:`~threadloom.errors.StoreLocked` naming that pid. The operating system
drops the lock when the holder exits, however it exits (``SIGKILL`` included), so a crash
never leaves a stale lock behind. The file is left in place: deleting it would let two
processes lock two different files of the same name.

Processes that only read or manage users and keys (``threadloom users …``) do not take it.
"""

from __future__ import annotations

import os
import sys

from threadloom.errors import StoreError, StoreLocked

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    _PID_AT = 1  # the locked byte stays unread by others: the pid follows it

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    _PID_AT = 0


def lock_path(db_path: str) -> str:
    return db_path + ".lock"


def _holder(fd: int) -> int | None:
    """The pid the holder wrote, if it has written one yet."""
    try:
        os.lseek(fd, _PID_AT, os.SEEK_SET)
        text = os.read(fd, 64)
    except OSError:
        return None
    digits = text.decode("ascii", "replace").strip()
    return int(digits) if digits.isdigit() else None


class ProcessLock:
    """An exclusive lock on ``<db_path>.lock`` held by this process until :meth:`release`."""

    def __init__(self, fd: int, path: str) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, db_path: str) -> ProcessLock:
        """Lock ``<db_path>.lock`` or raise ``StoreLocked`` naming the holder's pid."""
        path = lock_path(db_path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open the lock file {path!r} of {db_path!r}: {exc}") from exc
        try:
            try:
                locked = _try_lock(fd)
            except OSError as exc:  # a file system without locks (ENOLCK, say)
                raise StoreError(f"cannot lock {path!r} of {db_path!r}: {exc}") from exc
            if not locked:
                raise StoreLocked(db_path, _holder(fd), path)
            os.ftruncate(fd, _PID_AT)
            os.lseek(fd, _PID_AT, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            _unlock(fd)
        finally:
            os.close(fd)
