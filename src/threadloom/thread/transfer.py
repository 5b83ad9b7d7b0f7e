"""Attachments that cross a thread boundary: copied into the destination thread under a new
``/attachments/`` path, with a new ref (spec 06 §6.12).

Parent → child for subagent creation and messages; child → parent for session results and
notifications. The copy is a new file of the destination thread: deleting either side
later leaves the other intact.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadloom.errors import InvalidArgument
from threadloom.records import AttachmentRef, name_of
from threadloom.thread.files import attachment_ref, write_file
from threadloom.thread.filetypes import (
    OCTET_STREAM,
    extension_for_mime,
    extension_of,
    mime_from_name,
    normalize_path,
)

if TYPE_CHECKING:
    from threadloom.thread.state import ThreadState

STEM_LIMIT = 64
_WHITESPACE = re.compile(r"\s+")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_DASHES = re.compile(r"-{2,}")

Source = str | AttachmentRef | Mapping[str, Any]
"""A path in the source thread, a ref, or a ref-shaped object with a string ``path``."""


def display_name(*candidates: str | None) -> str:
    """The first non-empty candidate, reduced to a safe file name: last path segment,
    whitespace runs and characters outside ``[A-Za-z0-9._-]`` as ``-``, runs of ``-``
    collapsed, ``-`` trimmed at both ends; ``asset`` when nothing is left."""
    raw = next((c for c in candidates if isinstance(c, str) and c.strip()), "asset")
    name = re.split(r"[/\\]", raw.strip())[-1]
    name = _UNSAFE.sub("-", _WHITESPACE.sub("-", name))
    name = _DASHES.sub("-", name).strip("-")
    return name or "asset"


def _useful_mime(mime_type: object) -> str | None:
    if isinstance(mime_type, str) and mime_type.strip() and mime_type.strip() != OCTET_STREAM:
        return mime_type.strip()
    return None


def target_path(name: str, mime_type: str) -> str:
    """``/attachments/<stem>-<8 hex>.<ext>`` for a display name and MIME type."""
    ext = extension_of(name)
    stem = name[: -(len(ext) + 1)] if ext else name
    stem = stem[:STEM_LIMIT] or "asset"
    suffix = ext.lower() if ext else extension_for_mime(mime_type)
    return f"/attachments/{stem}-{uuid.uuid4().hex[:8]}.{suffix}"


def _source_parts(item: Source) -> tuple[str, Mapping[str, Any]]:
    """(path, ref fields) of one source item."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, AttachmentRef):
        return item.path, item.model_dump()
    if isinstance(item, Mapping) and isinstance(item.get("path"), str):
        return item["path"], item
    raise InvalidArgument("an attachment must be a path or an object with a string path")


async def copy_attachments(
    source: ThreadState, target: ThreadState, items: Sequence[Source]
) -> list[AttachmentRef]:
    """Copy each named file of ``source`` into ``target``; refs to the copies, in order.

    A path that names no file of ``source`` (deleted meanwhile, or a directory) is skipped:
    callers that must refuse missing paths check them first. The destination's size limits
    apply (``FileTooLarge``).
    """
    copied: list[AttachmentRef] = []
    for item in items:
        path, ref = _source_parts(item)
        path = normalize_path(path)
        record = await source.stat_file(path)
        data = None if record is None or record.is_directory else await source.read_file(path)
        if record is None or data is None:
            continue
        name = display_name(ref.get("name"), record.name, name_of(path))
        mime = (
            _useful_mime(record.mime_type)
            or _useful_mime(ref.get("mimeType"))
            or mime_from_name(name, OCTET_STREAM)
        )
        description = ref.get("description")
        written = await write_file(
            target,
            target_path(name, mime),
            data,
            mime,
            width=record.width,
            height=record.height,
        )
        copied.append(
            attachment_ref(written, name, description if isinstance(description, str) else None)
        )
    return copied


__all__ = ["Source", "copy_attachments", "display_name", "target_path"]
