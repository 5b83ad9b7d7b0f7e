"""The files part of the Store protocol (spec 07): a thread's file system, stored by the
same store as its messages. ``threadloom.store.base.Store`` is a ``FileStore``."""

from __future__ import annotations

from typing import Protocol

from threadloom.records import FileRecord, FileStats
from threadloom.store.shapes import FileContent, NewFile, StoredEvent


class FileStore(Protocol):
    """A thread's files, links and directories, each change with its durable event."""

    # -- files (spec 07) ---------------------------------------------------------------
    # Paths given to the store are already normalised (spec 07 §7.2). Every write is one
    # transaction that also writes one durable ``file`` event per change: kind ``file``,
    # ``entity_id`` the path, ``payload`` the published data ``{"event_type", "data"}``
    # (file events are replayed from their payloads, spec 09 §9.7.2). Files work on
    # terminated threads. A store raises the ``FileError`` subclasses of spec 07 §7.5.
    async def write_file(
        self,
        thread_id: str,
        entry: NewFile,
        content: bytes | None,
        *,
        thumbnail: bytes | None = None,
        max_thread_bytes: int | None = None,
    ) -> tuple[FileRecord, StoredEvent]:
        """Create or replace the file or link at ``entry.path`` (``file_created`` or
        ``file_updated``). A directory there → ``IsADirectory``; a file above it →
        ``NotADirectory``; stored content of the thread over ``max_thread_bytes`` →
        ``FileTooLarge``."""
        ...

    async def read_file(self, thread_id: str, path: str) -> bytes | None:
        """The whole content, read in one snapshot; ``None`` for a link, a directory or
        nothing."""
        ...

    async def open_file(self, thread_id: str, path: str) -> FileContent | None:
        """The current content version of a stored file (``None`` as ``read_file``)."""
        ...

    async def read_file_range(
        self, thread_id: str, version: int, offset: int, length: int
    ) -> bytes | None:
        """``length`` bytes from ``offset`` of one content version, in one snapshot;
        ``None`` when that version no longer exists (overwritten or deleted)."""
        ...

    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None:
        """The record of a file, link, explicit or implicit directory, or the root."""
        ...

    async def list_dir(self, thread_id: str, path: str) -> list[FileRecord]:
        """Direct children of a directory (explicit and implicit), unordered; ``[]`` for a
        file or nothing."""
        ...

    async def list_entries(self, thread_id: str, prefix: str) -> list[FileRecord]:
        """Every stored file, link and explicit directory whose path starts with the
        literal ``prefix`` (case-sensitive, no wildcards), ordered by path."""
        ...

    async def file_stats(self, thread_id: str, path: str) -> FileStats:
        """Total size and number of files and links at or below ``path``."""
        ...

    async def get_file_thumbnail(self, thread_id: str, path: str) -> bytes | None: ...

    async def unlink_file(self, thread_id: str, path: str) -> StoredEvent | None:
        """Delete a file or link (``file_deleted``); ``None`` when nothing is there; a
        directory → ``IsADirectory``."""
        ...

    async def mkdir_file(self, thread_id: str, path: str) -> tuple[FileRecord, StoredEvent | None]:
        """Create an explicit directory (``file_created``); an existing explicit directory
        is returned without an event. A file at or above ``path`` → ``NotADirectory``."""
        ...

    async def rmdir_file(self, thread_id: str, path: str, recursive: bool) -> list[StoredEvent]:
        """Remove a directory (and with ``recursive`` everything below): one
        ``file_deleted`` per removed file, link and explicit directory, in path order."""
        ...

    async def move_file(
        self, thread_id: str, source: str, destination: str
    ) -> tuple[FileRecord, StoredEvent | None]:
        """Move an entry with everything below it (one ``file_moved``); no event when
        ``source == destination``."""
        ...
