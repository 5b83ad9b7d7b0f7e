"""The thread file system on both stores (spec 07 §7.8; transaction logic, run by the backend).

One ``files`` row per file, external link or explicit directory; implicit directories are
the proper ancestors of stored paths and are derived, never stored. Content is stored in
``file_chunks`` (at most :data:`CHUNK_BYTES` per row, so no single database value holds a
large file) under the row's ``id``, which is never reused: overwriting a file deletes the
old row with its chunks and inserts a new one, so a reader holding the old id (a stream)
sees that its version is gone.

Prefix queries are byte ranges on ``path`` (``path >= 'd/' AND path < 'd0'`` — ``0`` is the
character after ``/``), which SQLite's BINARY collation compares exactly and
case-sensitively: no ``LIKE``, no wildcard leakage (spec 07 §7.8 rule 6).

Every write goes through :class:`~threadloom.store.core.tx.Tx` and records one
``thread_events`` row per change (kind ``file``, the path, the published data as payload).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from threadloom.errors import (
    DirectoryNotEmpty,
    FileError,
    FileExists,
    FileNotFound,
    FileTooLarge,
    InvalidPath,
    IsADirectory,
    NotADirectory,
)
from threadloom.records import (
    DIRECTORY_MIME,
    FileRecord,
    FileStats,
    json_compact,
    name_of,
    parent_of,
)
from threadloom.store.base import Clock, FileContent, NewFile, StoredEvent
from threadloom.store.core.codec import OF_THREAD, THREAD_RANGE, dump_json
from threadloom.store.core.conn import Conn
from threadloom.store.core.tx import Tx

CHUNK_BYTES = 1_835_008
"""Largest content chunk kept in one row: 1.75 MiB (spec 07 §7.8 rule 7)."""

MAX_PATH = 1024

_COLUMNS = (
    "id, path, name, kind, mime_type, location, size, metadata, width, height, created_at,"
    " chunk_count"
)


# -- paths and rows ------------------------------------------------------------------------


def _below(path: str) -> tuple[str, tuple[str, ...]]:
    """A WHERE fragment selecting the entries strictly below directory ``path``."""
    if path == "/":
        return "1 = 1", ()
    return "path >= ? AND path < ?", (path + "/", path + "0")


def _prefix_range(prefix: str) -> tuple[str, tuple[Any, ...]]:
    """A WHERE fragment selecting the paths that start with the literal ``prefix``."""
    if not prefix:
        return "1 = 1", ()
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates cannot be stored: skip to the next code point
        last = 0xE000
    if last > 0x10FFFF:
        return "substr(path, 1, ?) = ?", (len(prefix), prefix)
    return "path >= ? AND path < ?", (prefix, prefix[:-1] + chr(last))


def _record(row: Sequence[Any]) -> FileRecord:
    """A FileRecord from a ``SELECT {_COLUMNS}`` row."""
    chunks = int(row[11])
    return FileRecord(
        path=row[1],
        name=row[2],
        mime_type=row[4],
        storage="url" if row[3] == "link" else "local",
        location=row[5],
        size=row[6],
        metadata=json.loads(row[7]) if row[7] else None,
        is_directory=row[3] == "dir",
        created_at=row[10],
        width=row[8],
        height=row[9],
        is_chunked=chunks > 1,
        chunk_count=chunks if chunks > 1 else None,
    )


def _directory(path: str, created_at: int) -> FileRecord:
    """The record of an implicit directory (or of the root)."""
    return FileRecord(
        path=path,
        name=name_of(path),
        mime_type=DIRECTORY_MIME,
        is_directory=True,
        created_at=created_at,
    )


def _entry(conn: Conn, thread_id: str, path: str) -> tuple[Any, ...] | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM files WHERE thread_id = ? AND path = ?", (thread_id, path)
    ).fetchone()
    return tuple(row) if row else None


def _oldest_below(conn: Conn, thread_id: str, path: str) -> int | None:
    """The smallest ``created_at`` below directory ``path``; ``None`` when nothing is below
    it (so an implicit directory exists exactly when this is not ``None``)."""
    where, params = _below(path)
    row = conn.execute(
        f"SELECT MIN(created_at) FROM files WHERE thread_id = ? AND {where}", (thread_id, *params)
    ).fetchone()
    return None if row[0] is None else int(row[0])


def _ancestor_file(conn: Conn, thread_id: str, path: str) -> str | None:
    """The highest proper ancestor of ``path`` that is a file or link, if any."""
    segments = path.split("/")[1:-1]
    ancestors = ["/" + "/".join(segments[: i + 1]) for i in range(len(segments))]
    if not ancestors:
        return None
    row = conn.execute(
        "SELECT path FROM files WHERE thread_id = ? AND kind != 'dir'"
        f" AND path IN ({','.join('?' * len(ancestors))}) ORDER BY length(path) LIMIT 1",
        (thread_id, *ancestors),
    ).fetchone()
    return str(row[0]) if row else None


def _file_event(tx: Tx, event_type: str, path: str, data: dict[str, Any]) -> StoredEvent:
    """Record one durable ``file`` event whose payload is the data published for it."""
    return tx.event("file", path, {"event_type": event_type, "data": data})


# -- reads ---------------------------------------------------------------------------------


def stat_file(conn: Conn, thread_id: str, path: str) -> FileRecord | None:
    if path != "/":
        row = _entry(conn, thread_id, path)
        if row is not None:
            return _record(row)
    oldest = _oldest_below(conn, thread_id, path)
    if oldest is not None:
        return _directory(path, oldest)
    if path != "/":
        return None
    created = conn.execute(
        "SELECT created_at_us FROM threads WHERE id = ?", (thread_id,)
    ).fetchone()
    return _directory("/", int(created[0]) // 1000 if created else 0)


def list_dir(conn: Conn, thread_id: str, path: str) -> list[FileRecord]:
    """Explicit children through the ``parent`` index, then implicit child directories
    from one pass over the deeper entries (each one's smallest ``created_at``)."""
    if path != "/":
        row = _entry(conn, thread_id, path)
        if row is not None and row[3] != "dir":
            return []
    out = [
        _record(r)
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM files WHERE thread_id = ? AND parent = ?", (thread_id, path)
        )
    ]
    explicit = {r.name for r in out}
    start = 1 if path == "/" else len(path) + 1
    implicit: dict[str, int] = {}
    where, params = _below(path)
    for deeper, created_at in conn.execute(
        f"SELECT path, created_at FROM files WHERE thread_id = ? AND {where} AND parent != ?",
        (thread_id, *params, path),
    ):
        child = deeper[start:].split("/", 1)[0]
        if child not in explicit and (child not in implicit or created_at < implicit[child]):
            implicit[child] = created_at
    prefix = "/" if path == "/" else path + "/"
    out.extend(_directory(prefix + child, at) for child, at in implicit.items())
    return out


def list_entries(conn: Conn, thread_id: str, prefix: str) -> list[FileRecord]:
    where, params = _prefix_range(prefix)
    return [
        _record(r)
        for r in conn.execute(
            f"SELECT {_COLUMNS} FROM files WHERE thread_id = ? AND {where} ORDER BY path",
            (thread_id, *params),
        )
    ]


def file_stats(conn: Conn, thread_id: str, path: str) -> FileStats:
    where, params = _below(path)
    row = conn.execute(
        "SELECT COALESCE(SUM(size), 0), COUNT(*) FROM files WHERE thread_id = ?"
        f" AND kind != 'dir' AND (path = ? OR ({where}))",
        (thread_id, path, *params),
    ).fetchone()
    return FileStats(total_size=int(row[0]), file_count=int(row[1]))


def _content_id(conn: Conn, thread_id: str, path: str) -> tuple[int, int] | None:
    row = conn.execute(
        "SELECT id, size FROM files WHERE thread_id = ? AND path = ? AND kind = 'file'",
        (thread_id, path),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def read_file(conn: Conn, thread_id: str, path: str) -> bytes | None:
    found = _content_id(conn, thread_id, path)
    if found is None:
        return None
    chunks = conn.execute(
        "SELECT data FROM file_chunks WHERE file_id = ? ORDER BY idx", (found[0],)
    ).fetchall()
    return b"".join(bytes(c[0]) for c in chunks)


def open_file(conn: Conn, thread_id: str, path: str) -> FileContent | None:
    found = _content_id(conn, thread_id, path)
    return FileContent(version=found[0], size=found[1]) if found else None


def read_file_range(
    conn: Conn, thread_id: str, version: int, offset: int, length: int
) -> bytes | None:
    """Bytes ``[offset, offset + length)`` of content ``version``, slicing the one or more
    stored chunks the range spans inside SQLite (``substr`` on a BLOB counts bytes)."""
    row = conn.execute(
        f"SELECT size FROM files WHERE id = ? AND {OF_THREAD}", (version, thread_id)
    ).fetchone()
    if row is None:
        return None
    end = min(offset + length, int(row[0]))
    parts: list[bytes] = []
    for idx in range(offset // CHUNK_BYTES, (max(end, 1) - 1) // CHUNK_BYTES + 1):
        base = idx * CHUNK_BYTES
        lo, hi = max(offset - base, 0), min(end - base, CHUNK_BYTES)
        if hi <= lo:
            continue
        part = conn.execute(
            "SELECT substr(data, ?, ?) FROM file_chunks WHERE file_id = ? AND idx = ?",
            (lo + 1, hi - lo, version, idx),
        ).fetchone()
        if part is None:
            return None
        parts.append(bytes(part[0]))
    return b"".join(parts)


def get_file_thumbnail(conn: Conn, thread_id: str, path: str) -> bytes | None:
    row = conn.execute(
        "SELECT t.data FROM file_thumbnails t JOIN files f ON f.id = t.file_id"
        " WHERE f.thread_id = ? AND f.path = ?",
        (thread_id, path),
    ).fetchone()
    return bytes(row[0]) if row else None


# -- writes --------------------------------------------------------------------------------


def write_file(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    entry: NewFile,
    content: bytes | None,
    thumbnail: bytes | None,
    max_thread_bytes: int | None,
) -> tuple[FileRecord, StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    path = entry.path
    existing = _entry(conn, thread_id, path)
    if (existing is not None and existing[3] == "dir") or (
        existing is None and _oldest_below(conn, thread_id, path) is not None
    ):
        raise IsADirectory(f"Path is a directory: {path}")
    ancestor = _ancestor_file(conn, thread_id, path)
    if ancestor is not None:
        raise NotADirectory(f"Parent path is a file: {ancestor}")
    local = entry.storage == "local"
    data = (content or b"") if local else b""
    size = len(data) if local else entry.size
    if max_thread_bytes is not None and local:
        used = conn.execute(
            "SELECT COALESCE(SUM(size), 0) FROM files WHERE thread_id = ? AND kind = 'file'",
            (thread_id,),
        ).fetchone()[0]
        replaced = existing[6] if existing is not None and existing[3] == "file" else 0
        if int(used) - int(replaced) + size > max_thread_bytes:
            raise FileTooLarge(
                f"Thread files exceed the maximum total size of {max_thread_bytes} bytes: {path}"
            )
    if existing is not None:  # a new row id: a stream of the old content notices
        conn.execute("DELETE FROM files WHERE id = ?", (existing[0],))
    insert_entry(
        conn, thread_id, entry, "file" if local else "link", size, tx.now // 1000, data, thumbnail
    )
    fresh = _entry(conn, thread_id, path)
    assert fresh is not None
    record = _record(fresh)
    kind = "file_created" if existing is None else "file_updated"
    event = _file_event(tx, kind, path, {"path": path, "file": record.to_wire()})
    tx.flush()
    return record, event


def insert_entry(
    conn: Conn,
    thread_id: str,
    entry: NewFile,
    kind: str,
    size: int,
    created_at: int,
    data: bytes,
    thumbnail: bytes | None,
) -> None:
    """Insert the row of a file, link or directory (``kind``) at ``entry.path`` with its
    content in chunks and its thumbnail; ``created_at`` in ms. No checks, no event: the
    caller checked (``write_file``) or restores a whole file system (an import, spec 21)."""
    path = entry.path
    chunks = -(-len(data) // CHUNK_BYTES)
    cur = conn.execute(
        "INSERT INTO files(thread_id, path, parent, name, kind, mime_type, location, size,"
        " metadata, width, height, created_at, chunk_count)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            thread_id,
            path,
            parent_of(path),
            name_of(path),
            kind,
            entry.mime_type,
            entry.location,
            size,
            dump_json(entry.metadata),
            entry.width,
            entry.height,
            created_at,
            chunks,
        ),
    )
    file_id = cur.fetchone()[0]
    view = memoryview(data)
    conn.executemany(
        "INSERT INTO file_chunks(file_id, idx, data) VALUES (?, ?, ?)",
        ((file_id, i, view[i * CHUNK_BYTES : (i + 1) * CHUNK_BYTES]) for i in range(chunks)),
    )
    if thumbnail is not None:
        conn.execute(
            "INSERT INTO file_thumbnails(file_id, data) VALUES (?, ?)", (file_id, thumbnail)
        )


def unlink_file(conn: Conn, clock: Clock, thread_id: str, path: str) -> StoredEvent | None:
    tx = Tx(conn, thread_id, clock)
    row = _entry(conn, thread_id, path) if path != "/" else None
    if row is None:
        if path == "/" or _oldest_below(conn, thread_id, path) is not None:
            raise IsADirectory(f"Path is a directory: {path}")
        return None
    if row[3] == "dir":
        raise IsADirectory(f"Path is a directory: {path}")
    conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
    event = _file_event(tx, "file_deleted", path, {"path": path})
    tx.flush()
    return event


def mkdir_file(
    conn: Conn, clock: Clock, thread_id: str, path: str
) -> tuple[FileRecord, StoredEvent | None]:
    tx = Tx(conn, thread_id, clock)
    if path == "/":
        root = stat_file(conn, thread_id, "/")
        assert root is not None
        return root, None
    row = _entry(conn, thread_id, path)
    if row is not None:
        if row[3] == "dir":
            return _record(row), None
        raise NotADirectory(f"Parent path is a file: {path}")
    ancestor = _ancestor_file(conn, thread_id, path)
    if ancestor is not None:
        raise NotADirectory(f"Parent path is a file: {ancestor}")
    conn.execute(
        "INSERT INTO files(thread_id, path, parent, name, kind, mime_type, size, created_at)"
        " VALUES (?, ?, ?, ?, 'dir', ?, 0, ?)",
        (thread_id, path, parent_of(path), name_of(path), DIRECTORY_MIME, tx.now // 1000),
    )
    fresh = _entry(conn, thread_id, path)
    assert fresh is not None
    record = _record(fresh)
    event = _file_event(tx, "file_created", path, {"path": path, "file": record.to_wire()})
    tx.flush()
    return record, event


def rmdir_file(
    conn: Conn, clock: Clock, thread_id: str, path: str, recursive: bool
) -> list[StoredEvent]:
    if path == "/":
        raise FileError("Cannot remove the root directory")
    tx = Tx(conn, thread_id, clock)
    row = _entry(conn, thread_id, path)
    if row is not None and row[3] != "dir":
        raise NotADirectory(f"Not a directory: {path}")
    where, params = _below(path)
    below = conn.execute(
        f"SELECT id, path FROM files WHERE thread_id = ? AND {where} ORDER BY path",
        (thread_id, *params),
    ).fetchall()
    if row is None and not below:
        return []
    if below and not recursive:
        raise DirectoryNotEmpty("Directory not empty")
    doomed = ([(row[0], path)] if row is not None else []) + [(r[0], r[1]) for r in below]
    for start in range(0, len(doomed), 500):
        chunk = [d[0] for d in doomed[start : start + 500]]
        conn.execute(f"DELETE FROM files WHERE id IN ({','.join('?' * len(chunk))})", chunk)
    for _id, gone in doomed:
        _file_event(tx, "file_deleted", gone, {"path": gone})
    return tx.flush()


def move_file(
    conn: Conn, clock: Clock, thread_id: str, source: str, destination: str
) -> tuple[FileRecord, StoredEvent | None]:
    if source == "/":
        raise FileError("Cannot move the root directory")
    if destination == "/":
        raise FileError("Cannot move over the root directory")
    tx = Tx(conn, thread_id, clock)
    row = _entry(conn, thread_id, source)
    has_below = _oldest_below(conn, thread_id, source) is not None
    if row is None and not has_below:
        raise FileNotFound(f"Source path does not exist: {source}")
    if source == destination:
        same = stat_file(conn, thread_id, source)
        assert same is not None
        return same, None
    is_dir = row is None or row[3] == "dir"
    if is_dir and destination.startswith(source + "/"):
        raise FileError("Cannot move a directory into itself or one of its descendants")
    if (
        _entry(conn, thread_id, destination) is not None
        or _oldest_below(conn, thread_id, destination) is not None
    ):
        raise FileExists(f"Destination already exists: {destination}")
    ancestor = _ancestor_file(conn, thread_id, destination)
    if ancestor is not None:
        raise NotADirectory(f"Parent path is a file: {ancestor}")
    where, params = _below(source)
    if has_below:
        longest = conn.execute(
            f"SELECT MAX(length(path)) FROM files WHERE thread_id = ? AND {where}",
            (thread_id, *params),
        ).fetchone()[0]
        moved_length = int(longest) - len(source) + len(destination)
        if moved_length > MAX_PATH:
            raise InvalidPath(f"Path too long: {moved_length} characters")
    if row is not None:
        conn.execute(
            "UPDATE files SET path = ?, parent = ?, name = ? WHERE id = ?",
            (destination, parent_of(destination), name_of(destination), row[0]),
        )
    if has_below:
        cut = len(source) + 1  # substr() is 1-based and counts characters, as len() does
        conn.execute(
            "UPDATE files SET path = ? || substr(path, ?), parent = ? || substr(parent, ?)"
            f" WHERE thread_id = ? AND {where}",
            (destination, cut, destination, cut, thread_id, *params),
        )
    record = stat_file(conn, thread_id, destination)
    assert record is not None
    data = {"from": source, "path": destination, "file": record.to_wire()}
    event = _file_event(tx, "file_moved", destination, data)
    tx.flush()
    return record, event


# -- attachment files of deleted messages (spec 01 §1.11.3 rule 4, spec 07 §7.7.2) ---------


def _still_referenced(conn: Conn, thread_id: str, path: str) -> bool:
    """Whether a remaining message or queue entry of the thread has a ref to ``path``.

    A substring search on the stored JSON text (written by ``json_compact``) skips rows that cannot
    match; the join over its refs then compares the ``path`` of each ref exactly."""
    needle = json_compact(path)
    sql = conn.sql
    refs, ref_path = sql.attachment_path_join("r")
    for table, own in (("messages", THREAD_RANGE), ("message_queue", "thread_id = ?")):
        found = conn.execute(
            f"SELECT 1 FROM {table} AS r, {refs}"
            f" WHERE {own} AND r.attachments IS NOT NULL"
            f" AND {sql.position}(r.attachments, ?) > 0 AND {ref_path} = ? LIMIT 1",
            (*(thread_id,) * own.count("?"), needle, path),
        ).fetchone()
        if found is not None:
            return True
    return False


def drop_unreferenced_attachments(tx: Tx, attachments: Iterable[str | None]) -> None:
    """Delete the files named by the refs in ``attachments`` (stored JSON texts of the rows
    just deleted) unless another message or queue entry of the thread still refers to the
    same path; one ``file_deleted`` event each. Directories are never removed this way."""
    paths: dict[str, None] = {}
    for text in attachments:
        for item in json.loads(text) if text else ():
            path = item.get("path") if isinstance(item, dict) else None
            if isinstance(path, str):
                paths[path] = None
    for path in paths:
        if _still_referenced(tx.conn, tx.thread_id, path):
            continue
        cur = tx.conn.execute(
            "DELETE FROM files WHERE thread_id = ? AND path = ? AND kind != 'dir'",
            (tx.thread_id, path),
        )
        if cur.rowcount:
            _file_event(tx, "file_deleted", path, {"path": path})
