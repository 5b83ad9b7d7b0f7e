"""Attachment upload items of request bodies (spec 08 §8.2.5): validated first, stored only
when the whole request is valid (``thread.files.write_attachments``, which removes them
again when the request fails after storing).

Everything the file layer would refuse is checked here, before the first item is written:
a refused request must not leave ``file_created``/``file_deleted`` events behind (each
item is its own commit, so a late refusal would have written and removed the ones before
it). The request models check the items as ``ThreadState.write_attachment`` does (a name
that is not blank, a MIME type, data: ``wire.messages.Upload``); ``uploads_of`` takes the
checked items, ``check_uploads_fit`` checks the size limits of spec 07.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from threadloom.server.errors import ApiError
from threadloom.thread.files import file_limits
from threadloom.thread.state import ThreadState
from threadloom.wire.messages import Upload as UploadItem

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub


@dataclass(frozen=True)
class Upload:
    name: str
    mime_type: str
    data: bytes
    width: int | None
    height: int | None
    description: str | None


def uploads_of(items: list[UploadItem] | None) -> list[Upload]:
    """The checked items of a body (``wire.messages.Upload``) as uploads to store."""
    return [
        Upload(it.name, it.mimeType, it.data, it.width, it.height, it.description)
        for it in items or ()
    ]


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
