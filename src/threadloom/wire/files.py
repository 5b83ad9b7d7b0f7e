"""A thread's files (spec 08 §8.8): list, read, write (data, a directory, a move, a rename)
and delete — query parameters, bodies and answers. The records ``FileRecord``,
``FileStats``, ``GrepResult`` and ``AttachmentRef`` are answered as they are."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from threadloom.records import FileRecord, GrepResult
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.patterns import (
    BASE64_OR_EMPTY_PATTERN,
    BELOW_ROOT,
    END,
    FILE_MIME,
    SEGMENT,
    decode_base64,
    valid_mime,
)
from threadloom.wire.problems import check, integer_from, refuse
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


MAX_PIXELS = 100_000
"""The largest width or height, as for upload items (§8.2.5); also keeps values inside
SQLite's range."""


def _not_an_action(schema: dict[str, Any]) -> None:
    schema.setdefault("properties", {})["action"] = {"type": "null"}


def _base64(value: Any) -> bytes:
    data = decode_base64(value) if isinstance(value, str) else None
    if data is None:
        raise refuse("must be base64-encoded data")
    return data


def _base64_or_null(value: Any) -> bytes | None:
    return None if value is None else _base64(value)


def _file_mime(value: Any) -> str | None:
    if value is None:
        return None
    if not valid_mime(value):
        raise refuse("must be a MIME type such as text/plain")
    return str(value)


def _object_or_null(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise refuse("must be an object")
    return value


_BASE64_TEXT = {"type": "string", "pattern": BASE64_OR_EMPTY_PATTERN}
_pixels = integer_from(1, MAX_PIXELS)


class FileData(Body):
    """Write a file from base64 data."""

    # checked, ``data`` and ``thumbnail`` hold the decoded bytes
    model_config = examples({"data": "aGVsbG8K", "mimeType": "text/plain"}, extra=_not_an_action)

    data: Annotated[bytes, check(_base64), WithJsonSchema(_BASE64_TEXT)] = Field(
        description="base64"
    )
    mimeType: Annotated[str | None, check(_file_mime)] = Field(None, pattern=FILE_MIME)
    metadata: Annotated[dict[str, Any] | None, check(_object_or_null)] = None
    thumbnail: Annotated[
        bytes | None,
        check(_base64_or_null),
        WithJsonSchema({"anyOf": [_BASE64_TEXT, {"type": "null"}]}),
    ] = Field(None, description="base64")
    width: Annotated[int | None, check(_pixels)] = Field(None, ge=1, le=MAX_PIXELS)
    height: Annotated[int | None, check(_pixels)] = Field(None, ge=1, le=MAX_PIXELS)


class MakeDirectory(Body):
    model_config = examples({"type": "directory"}, extra=_not_an_action)

    type: Literal["directory"]


def _path_string(value: Any) -> str:
    if not isinstance(value, str):
        raise refuse("must be a path string")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise refuse("must be a string")
    return value


class MoveFile(Body):
    # parsed once ``action`` said move; the path's own rules are the thread's (spec 07)
    model_config = examples({"action": "move", "destination": "/notes/moved.txt"})

    action: Literal["move"]
    destination: Annotated[str, check(_path_string)] = Field(pattern=BELOW_ROOT)


class RenameFile(Body):
    # parsed once ``action`` said rename; the name's own rules are the thread's (spec 07)
    model_config = examples({"action": "rename", "newName": "renamed.txt"})

    action: Literal["rename"]
    newName: Annotated[str, check(_string)] = Field(pattern=f"^{SEGMENT}{END}")


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
