"""The shapes of the thread file system (spec 07 §7.3): plain typed data, no I/O.

Re-exported by ``threadloom.records``, their import place.
Python fields are snake_case; the wire keys are camelCase serialization aliases
(spec 01 §1.1), so ``record.to_wire()`` is what the HTTP routes and stream events carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

DIRECTORY_MIME = "inode/directory"
"""The MIME type of every directory record (spec 07 §7.3)."""

FileStorage = Literal["local", "url"]


def parent_of(path: str) -> str:
    """The parent directory of a normalised path: ``/a/b`` → ``/a``; ``/a`` → ``/``."""
    return path.rsplit("/", 1)[0] or "/"


def name_of(path: str) -> str:
    """The last segment of a normalised path (``""`` for the root)."""
    return path.rsplit("/", 1)[1]


class _CamelRecord(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready wire object (camelCase keys)."""
        return self.model_dump(by_alias=True)


class FileRecord(_CamelRecord):
    """One entry of a thread's file system: a file, an external link or a directory."""

    path: str
    name: str
    mime_type: str
    storage: FileStorage = "local"
    location: str | None = None
    size: int = Field(default=0, ge=0)
    metadata: dict[str, Any] | None = None
    is_directory: bool = False
    created_at: int = 0
    """Milliseconds since the epoch of the last write (spec 07 §7.3)."""
    width: int | None = None
    height: int | None = None
    is_chunked: bool = False
    chunk_count: int | None = None


class ReaddirResult(_CamelRecord):
    """The direct children of a directory: directories first, then by name."""

    entries: list[FileRecord] = Field(default_factory=list)

    def to_wire(self) -> dict[str, Any]:
        return {"entries": [e.to_wire() for e in self.entries]}


class FileStats(_CamelRecord):
    """Total bytes and number of files and links at or below a path (wire
    ``{totalSize, fileCount}``)."""

    total_size: int = 0
    file_count: int = 0


class GrepResult(_CamelRecord):
    """One file matched by ``grep_files``: its path, name and a marked snippet."""

    path: str
    name: str
    snippet: str


@dataclass(frozen=True, slots=True)
class FileChunk:
    """One piece of a streamed file: ``index`` from 0 of ``total_chunks``."""

    data: bytes
    index: int
    total_chunks: int
    is_last: bool


__all__ = [
    "DIRECTORY_MIME",
    "FileChunk",
    "FileRecord",
    "FileStats",
    "FileStorage",
    "GrepResult",
    "ReaddirResult",
    "name_of",
    "parent_of",
]
