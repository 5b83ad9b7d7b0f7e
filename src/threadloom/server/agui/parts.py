"""The content of a new AG-UI user message (spec 13 §13.2.3): its text, and its media parts
(AG-UI 1.0 ``image``, ``audio``, ``video`` and ``document`` parts) as attachments.

A part's bytes come inline: a ``data`` source (base64 and a MIME type), or a ``url`` source
holding a ``data:`` URL. Any other URL is refused rather than fetched (the server would
reach wherever a caller points it), and so is a ``file`` source (a provider's handle this
server cannot read). Everything is checked here, before anything is written: the base64,
the size, the MIME type (an image part is PNG, JPEG, GIF or WebP and its bytes are of that
type, as a tool's image is, spec 04 §4.5.4). The attachments are written as the send
route writes uploads (``Runtime.send_with_uploads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from threadloom.server.errors import ApiError, bad_field
from threadloom.server.uploads import Upload, too_large
from threadloom.thread.files import FileLimits
from threadloom.thread.filetypes import attachment_problem, base_mime, extension_for_mime
from threadloom.wire.messages import MAX_UPLOAD_DATA, MAX_UPLOADS
from threadloom.wire.patterns import decode_base64

NOT_FETCHED = (
    "is a URL, which this server does not fetch: send the bytes as a data source "
    "(base64 with its MIME type)"
)
NOT_READABLE = (
    "is a provider's file handle, which this server cannot read: send the bytes as a data "
    "source (base64 with its MIME type)"
)


@dataclass(frozen=True)
class Content:
    """What a new message brings: its text (its text parts joined by a newline) and the
    uploads of its media parts, in order."""

    text: str
    uploads: list[Upload] = field(default_factory=list)


def _inline(source: Any, at: str) -> tuple[str, str]:
    """The base64 text and the MIME type of a part's source."""
    kind = getattr(source, "type", None)
    if kind == "data":
        return str(source.value), str(source.mime_type)
    if kind == "url":
        value = str(source.value)
        head, sep, data = value.partition(",")
        if value[:5].lower() == "data:":
            if not (sep and head.lower().endswith(";base64")):
                raise bad_field(f"{at}.source.value", "must be a base64 data: URL")
            mime = head[5:-7].split(";", 1)[0] or source.mime_type or ""
            return data, mime
        raise bad_field(f"{at}.source", NOT_FETCHED)
    raise bad_field(f"{at}.source", NOT_READABLE)


def _upload(part: Any, at: str, number: int, limits: FileLimits) -> Upload:
    b64, mime = _inline(part.source, at)
    data = decode_base64(b64)
    if data is None:
        raise bad_field(f"{at}.source.value", "must be base64-encoded data")
    if not 1 <= len(data) <= MAX_UPLOAD_DATA:
        raise bad_field(f"{at}.source.value", f"must decode to 1 to {MAX_UPLOAD_DATA} bytes")
    if len(data) > limits.max_file_size:
        raise too_large(
            f"{at}.source.value",
            f"{at} exceeds the maximum file size of {limits.max_file_size} bytes",
        )
    kind = str(part.type)
    problem = attachment_problem(mime, data)
    if problem is None and kind != "document" and not base_mime(mime).startswith(f"{kind}/"):
        problem = f"is {base_mime(mime)}, which is not a type of an {kind} part"
    if problem is not None:
        raise bad_field(f"{at}.source", problem)
    name = f"{kind}-{number}.{extension_for_mime(mime)}"
    return Upload(name, mime, data, None, None, None)


def content_of(content: str | Sequence[Any] | None, at: str, limits: FileLimits) -> Content:
    """The text and the media of a message's ``content`` (``at`` its field, as
    ``messages[0].content``): 400 for a media part that cannot be stored, 413 for one over
    ``max_file_size``."""
    if content is None:
        return Content("")
    if isinstance(content, str):
        return Content(content)
    texts: list[str] = []
    uploads: list[Upload] = []
    for index, part in enumerate(content):
        kind = getattr(part, "type", None)
        if kind == "text":
            texts.append(part.text)
            continue
        uploads.append(_upload(part, f"{at}[{index}]", index + 1, limits))
        if len(uploads) > MAX_UPLOADS:
            raise bad_field(at, f"must have at most {MAX_UPLOADS} media parts")
    return Content("\n".join(texts), uploads)


def fit(uploads: Sequence[Upload], used: int, limits: FileLimits) -> None:
    """413 when ``uploads`` would take the thread's files (``used`` bytes now) over
    ``max_thread_file_bytes`` (spec 07 §7.4)."""
    quota = limits.max_thread_file_bytes
    if quota is not None and uploads and used + sum(len(u.data) for u in uploads) > quota:
        message = f"Thread files would exceed the maximum total size of {quota} bytes"
        raise ApiError(
            413, "payload_too_large", message, details=[{"field": "messages", "problem": message}]
        )
