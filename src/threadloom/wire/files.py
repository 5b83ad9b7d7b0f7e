"""A thread's files (spec 08 §8.8): list, read, write (data, a directory, a move, a rename)
and delete — query parameters, bodies and answers. The records ``FileRecord``,
``FileStats``, ``GrepResult`` and ``AttachmentRef`` are answered as they are."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from threadloom.records import FileRecord, GrepResult
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.patterns import BASE64_OR_EMPTY_PATTERN, BELOW_ROOT, END, FILE_MIME, SEGMENT
from threadloom.wire.query import boolean, choice, integer, path, text

FILES_LIMIT = 1000
"""The most hits of a file ``grep`` or ``find`` (§8.8): ``limit`` from 1 to it."""
BINARY = {"type": "string", "format": "binary"}
"""A file's bytes, as a schema."""

LIST_QUERY = (
    boolean("stats", "Total size and file count at or below `path`"),
    path("path", "With stats or grep: the directory"),
    text("grep", "Files whose text contains this (not empty)", min_length=1),
    text("find", "Entries whose name matches this glob (not empty)", min_length=1),
    choice("type", ("file", "directory", "all"), "With find: which entries"),
    integer("limit", "With grep or find: 1 to 1000 (default 100)", 1, FILES_LIMIT),
)
READ_QUERY = (
    boolean("thumbnail", "The image's thumbnail (image/jpeg)"),
    choice("format", ("json",), "The file's record instead of its bytes"),
)
DELETE_QUERY = (boolean("recursive", "Delete a directory with what it holds"),)

# -- write bodies ----------------------------------------------------------------------------


def _not_an_action(schema: dict[str, Any]) -> None:
    schema.setdefault("properties", {})["action"] = {"type": "null"}


class FileData(Body):
    """Write a file from base64 data."""

    model_config = examples({"data": "aGVsbG8K", "mimeType": "text/plain"}, extra=_not_an_action)

    data: str = Field(pattern=BASE64_OR_EMPTY_PATTERN, description="base64")
    mimeType: str | None = Field(None, pattern=FILE_MIME)
    metadata: dict[str, Any] | None = None
    thumbnail: str | None = Field(None, pattern=BASE64_OR_EMPTY_PATTERN, description="base64")
    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)


class MakeDirectory(Body):
    model_config = examples({"type": "directory"}, extra=_not_an_action)

    type: Literal["directory"]


class MoveFile(Body):
    model_config = examples({"action": "move", "destination": "/notes/moved.txt"})

    action: Literal["move"]
    destination: str = Field(pattern=BELOW_ROOT)


class RenameFile(Body):
    model_config = examples({"action": "rename", "newName": "renamed.txt"})

    action: Literal["rename"]
    newName: str = Field(pattern=f"^{SEGMENT}{END}")


UPLOAD_FORM = {
    "schema": {
        "type": "object",
        "required": ["file"],
        "properties": {"file": BINARY},
    }
}
"""A ``multipart/form-data`` write: one part named ``file``."""

# -- answers ---------------------------------------------------------------------------------


class FileListing(Answer):
    """A directory's entries (``GET /fs``, ``GET /fs/{dir}``)."""

    files: list[FileRecord]
    path: str


class FileSearch(Answer):
    """``GET /fs?grep=``: the files whose text matches, with a marked snippet."""

    results: list[GrepResult]
    pattern: str


class FileFound(Answer):
    """``GET /fs?find=``: the entries whose name matches the pattern."""

    files: list[FileRecord]
    pattern: str


class FileLink(Answer):
    file: FileRecord
    external: bool
    location: str | None


class FileAnswer(Answer):
    file: FileRecord


class DirectoryMade(Answer):
    directory: FileRecord
