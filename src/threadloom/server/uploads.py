"""Attachment upload items of request bodies (spec 08 §8.2.5): validated first, stored only
when the whole request is valid, removed again when the request fails after storing.

Everything the file layer would refuse is checked here, before the first item is written:
a refused request must not leave ``file_created``/``file_deleted`` events behind (each
item is its own commit, so a late refusal would have written and removed the ones before
it). ``parse_uploads`` checks the items as ``ThreadState.write_attachment`` does (a name
that is not blank, a MIME type, data), ``check_uploads_fit`` the size limits of spec 07.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from threadloom.records import AttachmentRef
from threadloom.server.errors import ApiError, Problems
from threadloom.thread.files import file_limits
from threadloom.thread.state import ThreadState
from threadloom.wire.patterns import decode_base64, is_mime_type

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub

MAX_ITEMS = 20
MAX_DATA = 20 * 1024 * 1024
MAX_THUMBNAIL = 1024 * 1024


@dataclass(frozen=True)
class Upload:
    name: str
    mime_type: str
    data: bytes
    width: int | None
    height: int | None
    description: str | None


def _dimension(item: dict[str, Any], key: str, at: str, problems: Problems) -> int | None:
    value = item.get(key)
    return None if value is None else problems.integer(value, f"{at}.{key}", 1, 100_000)


def parse_uploads(value: Any, at: str, problems: Problems) -> list[Upload]:
    """Validate ``value`` as a list of upload items; problems are added, never raised."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(at, "must be an array")
        return []
    if len(value) > MAX_ITEMS:
        problems.add(at, f"must have at most {MAX_ITEMS} items")
        return []
    out: list[Upload] = []
    for i, item in enumerate(value):
        here = f"{at}[{i}]"
        if not isinstance(item, dict):
            problems.add(here, "must be an object")
            continue
        name = item.get("name")
        if (
            not isinstance(name, str)
            or not 1 <= len(name) <= 255
            or not name.strip()
            or any(c in name for c in "/\\\x00")
        ):
            problems.add(
                f"{here}.name", "must be 1-255 characters, not blank, without '/', '\\' or NUL"
            )
            name = None
        mime = item.get("mimeType")
        if not isinstance(mime, str) or not is_mime_type(mime):
            problems.add(f"{here}.mimeType", "must be a MIME type such as image/png")
            mime = None
        raw = item.get("data")
        data = decode_base64(raw) if isinstance(raw, str) else None
        if data is None:
            problems.add(f"{here}.data", "must be base64-encoded data")
        elif not 1 <= len(data) <= MAX_DATA:
            problems.add(f"{here}.data", f"must decode to 1 to {MAX_DATA} bytes")
            data = None
        thumb = item.get("thumbnail")
        if thumb is not None:
            decoded = decode_base64(thumb) if isinstance(thumb, str) else None
            if decoded is None or len(decoded) > MAX_THUMBNAIL:
                problems.add(f"{here}.thumbnail", "must be base64 of at most 1 MiB")
        description = item.get("description")
        if description is not None and (
            not isinstance(description, str) or len(description) > 2000
        ):
            problems.add(f"{here}.description", "must be a string of at most 2000 characters")
            description = None
        width = _dimension(item, "width", here, problems)
        height = _dimension(item, "height", here, problems)
        if name is not None and mime is not None and data is not None:
            out.append(Upload(name, mime, data, width, height, description))
    return out


def too_large(field: str, message: str) -> ApiError:
    return ApiError(
        413, "payload_too_large", message, details=[{"field": field, "problem": message}]
    )


async def check_uploads_fit(
    hub: ThreadHub, groups: list[tuple[str, list[Upload]]], state: ThreadState | None = None
) -> None:
    """413 before anything is written when an item is larger than ``max_file_size``, or
    when the items together would pass ``max_thread_file_bytes`` (spec 07 §7.4). ``groups``
    are the items of each body field (``attachments``, ``initial_messages[2].attachments``);
    ``state`` is the thread they go to (None: a thread about to be created, empty).

    With two or more items the thread's current total is read first (files and links,
    ``get_file_stats``: a thread holding links may be refused slightly early); a single
    item is left to the store, whose check and write are one commit."""
    limits = file_limits(hub)
    for at, uploads in groups:
        for i, up in enumerate(uploads):
            if len(up.data) > limits.max_file_size:
                raise too_large(
                    f"{at}[{i}].data",
                    f"{at}[{i}] exceeds the maximum file size of {limits.max_file_size} bytes",
                )
    quota = limits.max_thread_file_bytes
    every = [up for _, uploads in groups for up in uploads]
    if quota is None or len(every) < 2:
        return
    used = 0 if state is None else (await state.get_file_stats("/")).total_size
    if used + sum(len(up.data) for up in every) > quota:
        field = groups[0][0] if len(groups) == 1 else "initial_messages"
        raise too_large(field, f"Thread files would exceed the maximum total size of {quota} bytes")


async def store_uploads(state: ThreadState, uploads: list[Upload]) -> list[AttachmentRef]:
    """Write each upload as an attachment file; on failure the ones written are removed."""
    refs: list[AttachmentRef] = []
    try:
        for up in uploads:
            refs.append(
                await state.write_attachment(
                    up.data,
                    name=up.name,
                    mime_type=up.mime_type,
                    width=up.width,
                    height=up.height,
                    description=up.description,
                )
            )
    except BaseException:
        await remove_uploads(state, refs)
        raise
    return refs


async def remove_uploads(state: ThreadState, refs: list[AttachmentRef]) -> None:
    for ref in refs:
        try:
            await state.unlink_file(ref.path)
        except Exception:  # best effort: an orphan attachment file is harmless
            pass
