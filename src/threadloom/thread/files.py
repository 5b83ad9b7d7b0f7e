"""The thread file system behind ThreadState's file methods (spec 07 §7.5, spec 02 §2.15).

Every method normalises its paths first (spec 07 §7.2), so a refused path raises
``InvalidPath`` before anything is read or written, and no path can leave the thread's own
space: paths are never resolved against anything, and every store query is scoped to the
thread. Arguments are checked next (limits, MIME type, metadata, dimensions). Writes then
commit under the thread's write lock and publish their durable ``file`` events on the bus
before the lock is released, like every other write (``docs/thread-core.md``). Nothing
here checks ``terminated``: files keep working on terminated threads [seed].
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

from threadloom.errors import FileError, FileTooLarge, InvalidArgument, InvalidPath
from threadloom.records import (
    DIRECTORY_MIME,
    AttachmentRef,
    FileChunk,
    FileRecord,
    FileStats,
    GrepResult,
    ReaddirResult,
    json_compact,
    name_of,
    new_id,
    parent_of,
)
from threadloom.store.base import FileContent, NewFile, StoredEvent
from threadloom.thread.filetypes import (
    OCTET_STREAM,
    TEXT_DEFAULT,
    attachment_extension,
    content_snippet,
    find_folded,
    image_size,
    is_text_mime,
    literal_prefix,
    mime_from_name,
    name_snippet,
    normalize_path,
    sniff_mime,
)
from threadloom.thread.pathglob import Glob

if TYPE_CHECKING:
    from threadloom.store.base import Store
    from threadloom.thread.hub import ThreadHub
    from threadloom.thread.state import ThreadState

FindType = Literal["file", "directory", "all"]

MAX_METADATA_BYTES = 65_536
MAX_THUMBNAIL_BYTES = 1_048_576
MAX_QUERY = 256
MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class FileLimits:
    """The size limits of spec 07 §7.4 (options of ``Runtime.open``)."""

    max_file_size: int = 64 * 1024 * 1024
    max_thread_file_bytes: int | None = None


DEFAULT_LIMITS = FileLimits()


def file_limits(hub: ThreadHub) -> FileLimits:
    """The limits configured for ``hub`` with :func:`configure_file_limits`, else defaults."""
    limits = getattr(hub, "file_limits", None)
    return limits if isinstance(limits, FileLimits) else DEFAULT_LIMITS


def configure_file_limits(hub: ThreadHub, limits: FileLimits) -> None:
    """Set the file size limits of every ThreadState of ``hub`` (``Runtime.open``'s
    ``max_file_size`` and ``max_thread_file_bytes`` options)."""
    if limits.max_file_size < 0 or (limits.max_thread_file_bytes or 0) < 0:
        raise InvalidArgument("file size limits must be ≥ 0")
    hub.file_limits = limits


# -- argument checks ---------------------------------------------------------------------


def _target(path: object) -> str:
    """A normalised path that can hold a file (not the root)."""
    normalized = normalize_path(path)
    if normalized == "/":
        raise InvalidPath("Cannot write to the root directory")
    return normalized


def _mime(mime_type: object) -> str | None:
    if mime_type is None:
        return None
    if not isinstance(mime_type, str) or not mime_type.strip():
        raise InvalidArgument("mime_type must be a non-empty string or None")
    return mime_type.strip()


def _metadata(metadata: object) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidArgument("metadata must be a JSON object or None")
    try:
        text = json_compact(dict(metadata))
    except (TypeError, ValueError):
        raise InvalidArgument("metadata must be JSON-encodable") from None
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidArgument(f"metadata exceeds {MAX_METADATA_BYTES} bytes")
    loaded: dict[str, Any] = json.loads(text)  # a private copy, as stored
    return loaded


def _dimension(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgument(f"{name} must be a positive integer or None")
    return value


def _limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def _content(data: object) -> tuple[bytes, str]:
    """The bytes to store and the MIME type used when neither caller nor name gives one."""
    if isinstance(data, str):
        return data.encode("utf-8"), TEXT_DEFAULT
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data), OCTET_STREAM
    raise InvalidArgument("data must be bytes or str")


def _is_web_url(location: str) -> bool:
    try:
        parts = urlsplit(location)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def _publish(state: ThreadState, events: Iterable[StoredEvent | None]) -> None:
    """Publish committed ``file`` events (called under the thread's write lock)."""
    for event in events:
        if event is not None:
            state.hub.publish(state.thread_id, "file", event.seq, dict(event.payload or {}))


# -- writes --------------------------------------------------------------------------------


async def write_file(
    state: ThreadState,
    path: str,
    data: bytes | str,
    mime_type: str | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
    width: int | None = None,
    height: int | None = None,
    thumbnail: bytes | None = None,
) -> FileRecord:
    """Create or overwrite a file: MIME type as given, else by extension; dimensions as
    given, else read from an image header; ``file_created`` or ``file_updated``."""
    target = _target(path)
    content, fallback = _content(data)
    mime = (
        _mime(mime_type)
        or (sniff_mime(content) if not isinstance(data, str) else None)
        or mime_from_name(name_of(target), fallback)
    )
    limits = file_limits(state.hub)
    if len(content) > limits.max_file_size:
        raise FileTooLarge(
            f"File exceeds the maximum size of {limits.max_file_size} bytes: {target}"
        )
    meta = _metadata(metadata)
    w, h = _dimension("width", width), _dimension("height", height)
    if w is None or h is None:
        found_w, found_h = image_size(mime, content)
        w, h = (found_w if w is None else w), (found_h if h is None else h)
    if thumbnail is not None:
        if not isinstance(thumbnail, bytes | bytearray | memoryview):
            raise InvalidArgument("thumbnail must be bytes or None")
        thumbnail = bytes(thumbnail)
        if len(thumbnail) > MAX_THUMBNAIL_BYTES:
            raise FileTooLarge(
                f"Thumbnail exceeds the maximum size of {MAX_THUMBNAIL_BYTES} bytes: {target}"
            )
    entry = NewFile(
        path=target, mime_type=mime, size=len(content), metadata=meta, width=w, height=h
    )
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        record, event = await state.store.write_file(
            tid,
            entry,
            content,
            thumbnail=thumbnail,
            max_thread_bytes=limits.max_thread_file_bytes,
        )
        _publish(state, [event])
    return record


async def link_file(
    state: ThreadState,
    path: str,
    location: str,
    *,
    mime_type: str | None = None,
    size: int = 0,
    metadata: Mapping[str, Any] | None = None,
) -> FileRecord:
    """Create or overwrite an external link (no content; ``read_file`` gives None)."""
    target = _target(path)
    if not isinstance(location, str) or not _is_web_url(location):
        raise InvalidArgument("Only http and https locations can be linked")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise InvalidArgument("size must be an integer ≥ 0")
    url_name = urlsplit(location).path.rsplit("/", 1)[-1]
    mime = _mime(mime_type) or mime_from_name(url_name)
    entry = NewFile(
        path=target,
        mime_type=mime,
        storage="url",
        location=location,
        size=size,
        metadata=_metadata(metadata),
    )
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        record, event = await state.store.write_file(tid, entry, None)
        _publish(state, [event])
    return record


async def unlink_file(state: ThreadState, path: str) -> None:
    """Delete a file or link; a missing path is no error and publishes nothing."""
    target = normalize_path(path)
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        _publish(state, [await state.store.unlink_file(tid, target)])


async def mkdir_file(state: ThreadState, path: str) -> FileRecord:
    """Create an explicit directory, which exists even when empty (idempotent)."""
    target = normalize_path(path)
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        record, event = await state.store.mkdir_file(tid, target)
        _publish(state, [event])
    return record


async def rmdir_file(state: ThreadState, path: str, *, recursive: bool = False) -> None:
    """Remove a directory; non-recursive only when nothing is below it."""
    target = normalize_path(path)
    if not isinstance(recursive, bool):
        raise InvalidArgument("recursive must be a boolean")
    if target == "/":
        raise FileError("Cannot remove the root directory")
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        _publish(state, await state.store.rmdir_file(tid, target, recursive))


async def move_file(state: ThreadState, source: str, destination: str) -> FileRecord:
    """Move an entry with its subtree: one ``file_moved`` event for the moved entry."""
    src, dst = normalize_path(source), normalize_path(destination)
    if src == "/":
        raise FileError("Cannot move the root directory")
    if dst == "/":
        raise FileError("Cannot move over the root directory")
    hub, tid = state.hub, state.thread_id
    async with hub.lock(tid):
        record, event = await state.store.move_file(tid, src, dst)
        _publish(state, [event])
    return record


async def rename_file(state: ThreadState, path: str, new_name: str) -> FileRecord:
    """``move_file`` to ``new_name`` in the same directory; the name is one segment."""
    if not isinstance(new_name, str):
        raise InvalidArgument("new_name must be a string")
    if not new_name:
        raise FileError("New name must not be empty")
    if "/" in new_name:
        raise FileError("New name must not contain path separators")
    if new_name in (".", ".."):
        raise FileError(f"Invalid name: {new_name}")
    source = normalize_path(path)
    if source == "/":
        raise FileError("Cannot move the root directory")
    destination = normalize_path(f"{parent_of(source).rstrip('/')}/{new_name}")
    return await move_file(state, source, destination)


async def write_attachment(
    state: ThreadState,
    data: bytes,
    *,
    name: str,
    mime_type: str | None = None,
    width: int | None = None,
    height: int | None = None,
    description: str | None = None,
) -> AttachmentRef:
    """Store bytes as a new ``/attachments/<ms>-<8 hex>.<ext>`` file and return a ref to
    it with a new UUID4 id (spec 07 §7.6)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("name must be a non-empty string")
    if description is not None and not isinstance(description, str):
        raise InvalidArgument("description must be a string or None")
    mime = _mime(mime_type) or mime_from_name(name)
    millis = state.hub.clock() // 1000
    ext = attachment_extension(name, mime)
    path = f"/attachments/{millis}-{uuid.uuid4().hex[:8]}.{ext}"
    record = await write_file(state, path, data, mime, width=width, height=height)
    return attachment_ref(record, name, description)


class Upload(Protocol):
    """Bytes to store as an attachment, with what ``write_attachment`` takes besides them
    (an upload item of a request body, spec 08 §8.2.5)."""

    @property
    def name(self) -> str: ...
    @property
    def mime_type(self) -> str: ...
    @property
    def data(self) -> bytes: ...
    @property
    def width(self) -> int | None: ...
    @property
    def height(self) -> int | None: ...
    @property
    def description(self) -> str | None: ...


async def write_attachments(state: ThreadState, uploads: Sequence[Upload]) -> list[AttachmentRef]:
    """Write each upload as an attachment file (each its own commit); on failure the ones
    written are removed again."""
    refs: list[AttachmentRef] = []
    try:
        for up in uploads:
            refs.append(
                await write_attachment(
                    state,
                    up.data,
                    name=up.name,
                    mime_type=up.mime_type,
                    width=up.width,
                    height=up.height,
                    description=up.description,
                )
            )
    except BaseException:
        await remove_attachments(state, refs)
        raise
    return refs


async def remove_attachments(state: ThreadState, refs: Sequence[AttachmentRef]) -> None:
    """Remove the files of ``refs``, best effort: an orphan attachment file is harmless."""
    for ref in refs:
        try:
            await unlink_file(state, ref.path)
        except Exception:
            pass


def attachment_ref(record: FileRecord, name: str, description: str | None) -> AttachmentRef:
    """A new ref (fresh UUID4 id) to a stored file, shown under ``name``."""
    return AttachmentRef(
        id=new_id(),
        type="file",
        path=record.path,
        name=name,
        mimeType=record.mime_type,
        size=record.size,
        width=record.width,
        height=record.height,
        description=description,
    )


# -- reads ---------------------------------------------------------------------------------


async def read_file(state: ThreadState, path: str) -> bytes | None:
    """The whole content, read in one snapshot (never a mix of two writes)."""
    return await state.hub.store.read_file(state.thread_id, normalize_path(path))


async def read_file_stream(
    state: ThreadState, path: str, *, chunk_size: int = 1_048_576
) -> AsyncIterator[FileChunk] | None:
    """An iterator over the current content version in ``chunk_size`` pieces."""
    target = normalize_path(path)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidArgument("chunk_size must be a positive integer")
    handle = await state.hub.store.open_file(state.thread_id, target)
    if handle is None:
        return None
    return _stream(state.hub.store, state.thread_id, target, handle, chunk_size)


async def _stream(
    store: Store, thread_id: str, path: str, handle: FileContent, chunk_size: int
) -> AsyncIterator[FileChunk]:
    """Chunks of one content version, each read in its own snapshot: the stream never
    holds the whole file, and a rewrite or delete meanwhile is reported, never mixed in."""
    total = max(1, -(-handle.size // chunk_size))
    for index in range(total):
        data = await store.read_file_range(
            thread_id, handle.version, index * chunk_size, chunk_size
        )
        if data is None:
            raise FileError(f"File changed while reading: {path}")
        yield FileChunk(data=data, index=index, total_chunks=total, is_last=index == total - 1)


async def stat_file(state: ThreadState, path: str) -> FileRecord | None:
    return await state.hub.store.stat_file(state.thread_id, normalize_path(path))


async def readdir_file(state: ThreadState, path: str = "/") -> ReaddirResult:
    """Direct children, directories first, then by name in code-point order."""
    entries = await state.hub.store.list_dir(state.thread_id, normalize_path(path))
    entries.sort(key=lambda e: (not e.is_directory, e.name))
    return ReaddirResult(entries=entries)


async def get_file_stats(state: ThreadState, path: str = "/") -> FileStats:
    return await state.hub.store.file_stats(state.thread_id, normalize_path(path))


async def get_file_thumbnail(state: ThreadState, path: str) -> bytes | None:
    return await state.hub.store.get_file_thumbnail(state.thread_id, normalize_path(path))


def _with_implicit(entries: list[FileRecord]) -> list[FileRecord]:
    """The stored entries plus the implicit directories above them (each dated by the
    oldest entry below it); an implicit directory's whole subtree is in ``entries``
    whenever its own path starts with the scanned prefix."""
    stored = {e.path for e in entries}
    implicit: dict[str, int] = {}
    for entry in entries:
        parent = parent_of(entry.path)
        while parent != "/":
            if parent not in stored:
                seen = implicit.get(parent)
                implicit[parent] = entry.created_at if seen is None else min(seen, entry.created_at)
            parent = parent_of(parent)
    directories = [
        FileRecord(
            path=p, name=name_of(p), mime_type=DIRECTORY_MIME, is_directory=True, created_at=at
        )
        for p, at in implicit.items()
    ]
    return entries + directories


async def find_files(
    state: ThreadState, pattern: str, *, type: FindType = "all", limit: int = 100
) -> list[FileRecord]:
    """Glob over every path (implicit directories included), ordered by path. The store
    scans only the pattern's literal prefix; the glob itself is matched here, in a worker
    thread: the pattern and the paths are the user's, and however cheap each match is
    (:mod:`threadloom.thread.pathglob` is linear in the path), a thread may hold many."""
    if not isinstance(pattern, str):
        raise InvalidArgument("pattern must be a string")
    if not pattern:
        raise FileError("Pattern must not be empty")
    if type not in ("file", "directory", "all"):
        raise InvalidArgument("type must be 'file', 'directory' or 'all'")
    wanted = _limit(limit)
    glob = Glob.compile(pattern)
    if glob.impossible:
        return []
    entries = await state.hub.store.list_entries(state.thread_id, literal_prefix(pattern))
    return await asyncio.to_thread(_matching, entries, glob, type, wanted)


def _matching(
    entries: list[FileRecord], glob: Glob, type: FindType, wanted: int
) -> list[FileRecord]:
    """The first ``wanted`` entries (and implicit directories) by path that are of ``type``
    and match ``glob``; matching stops once they are found."""
    candidates = [
        e
        for e in _with_implicit(entries)
        if type == "all" or e.is_directory == (type == "directory")
    ]
    candidates.sort(key=lambda e: e.path)
    found: list[FileRecord] = []
    for entry in candidates:
        if glob.match(entry.path):
            found.append(entry)
            if len(found) >= wanted:
                break
    return found


async def grep_files(
    state: ThreadState, pattern: str, *, path: str | None = None, limit: int = 100
) -> list[GrepResult]:
    """Case-insensitive substring search in the content of text files (by MIME type, and
    valid UTF-8) and in the names of all files and links, ordered by path."""
    if not isinstance(pattern, str):
        raise InvalidArgument("pattern must be a string")
    if not pattern.strip():
        raise FileError("Search query must not be empty")
    if len(pattern) > MAX_QUERY:
        raise FileError("Search query too long")
    wanted = _limit(limit)
    base = "/" if path is None else normalize_path(path)
    needle = pattern.casefold()
    store, tid = state.hub.store, state.thread_id
    results: list[GrepResult] = []
    for entry in await store.list_entries(tid, "/" if base == "/" else base + "/"):
        if entry.is_directory:
            continue
        snippet: str | None = None
        if entry.storage == "local" and is_text_mime(entry.mime_type):
            snippet = _content_match(await store.read_file(tid, entry.path), needle)
        if snippet is None:
            span = find_folded(entry.name, needle)
            snippet = name_snippet(entry.name, span) if span else None
        if snippet is not None:
            results.append(GrepResult(path=entry.path, name=entry.name, snippet=snippet))
            if len(results) >= wanted:
                break
    return results


def _content_match(content: bytes | None, needle: str) -> str | None:
    """The snippet of the first match in UTF-8 ``content`` (``None``: no match, not UTF-8)."""
    if not content:
        return None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    span = find_folded(text, needle)
    return content_snippet(text, span) if span else None
