"""The portable thread file (spec 21): a thread with its child-thread tree as one versioned
JSON document — its shape, how it is written (canonical bytes) and how it is read (the
format and version checked first). Plain data, no I/O; ``store/portable.py`` fills it from
a store and stores it in another."""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from threadloom.errors import FormatTooNew, PortableFormatError
from threadloom.records.approval import Approval
from threadloom.records.budget import ThreadBudget
from threadloom.records.log import LogRow
from threadloom.records.message import Message
from threadloom.records.thread import SharedState, SubagentRegistryEntry, ThreadStatus

FORMAT: Literal["threadloom.thread"] = "threadloom.thread"
"""The ``format`` of every portable thread file."""
VERSION = 1
"""The newest format version this code writes and reads (spec 21 §21.2)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PortableFile(_Strict):
    """One entry of a thread's file system (spec 07): a file with its bytes, a link, or an
    explicit directory."""

    path: str
    kind: Literal["file", "link", "dir"]
    mime_type: str
    location: str | None = None
    size: int = Field(default=0, ge=0)
    metadata: dict[str, Any] | None = None
    width: int | None = None
    height: int | None = None
    created_at: int
    """Milliseconds since the epoch of the entry's last write (spec 07 §7.3)."""
    content: str | None = None
    """A file's bytes, base64 (RFC 4648, with padding); ``None`` for a link or directory."""
    thumbnail: str | None = None
    """The file's stored thumbnail, base64; ``None`` when it has none."""

    def content_bytes(self) -> bytes | None:
        return None if self.content is None else _unbase64(self.content, self.path)

    def thumbnail_bytes(self) -> bytes | None:
        return None if self.thumbnail is None else _unbase64(self.thumbnail, self.path)


def _unbase64(text: str, path: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise PortableFormatError(f"files: the content of {path} is not base64") from None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class PortableCost(_Strict):
    """What the thread's log rows say it cost (spec 01 §1.10), summed in log order;
    derived from ``logs``, carried for a reader of the file."""

    llm_cost: float = 0.0
    app_cost: float = 0.0
    request_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class PortableThread(_Strict):
    """One thread of the tree, as history: its record and status, every stored message
    (all depths, canonical order), its log rows with their bodies, its subagent
    registry, its files and its shared state."""

    id: str
    agent_id: str
    origin_agent_id: str
    user_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    parent_id: str | None = None
    """The parent thread: another thread of this file, or ``None`` for the file's root."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    created_at_us: int
    terminated: int | None = None
    stopped: bool = False
    overlap: str | None = None
    status: ThreadStatus
    session_turns: tuple[int, int] = (0, 0)
    budgets: list[ThreadBudget] = Field(default_factory=list)
    shared_state: SharedState = Field(default_factory=SharedState)
    messages: list[Message] = Field(default_factory=list)
    logs: list[LogRow] = Field(default_factory=list)
    registry: list[SubagentRegistryEntry] = Field(default_factory=list)
    approvals: list[Approval] = Field(default_factory=list)
    """The thread's tool-call approvals (spec 14), decided or pending."""
    files: list[PortableFile] = Field(default_factory=list)
    cost: PortableCost = Field(default_factory=PortableCost)


class ThreadExport(_Strict):
    """The document (spec 21 §21.2): the header, then the threads, parents before their
    children (the root first)."""

    format: Literal["threadloom.thread"] = FORMAT
    version: int = VERSION
    root: str
    """The id of the exported thread (the first of ``threads``)."""
    lineage: list[str] = Field(default_factory=list)
    """The root's ancestors in the store it came from, its parent first: they are not in
    the file (only the exported thread and its descendants are), and an import does not
    link to them."""
    threads: list[PortableThread]

    def dump(self) -> bytes:
        """The file's bytes: canonical JSON — keys sorted, compact separators, UTF-8 with
        non-ASCII kept, one trailing newline — so equal contents are equal bytes."""
        data = self.model_dump(mode="json")
        text = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode() + b"\n"


def parse_export(raw: bytes | str | dict[str, Any]) -> ThreadExport:
    """A portable thread file read back: ``PortableFormatError`` when it is not one (not
    JSON, another ``format``, a field of the wrong shape), ``FormatTooNew`` when its
    version is newer than :data:`VERSION` — both checked before anything else is read."""
    if isinstance(raw, dict):
        data: Any = raw
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PortableFormatError(f"not a JSON document: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PortableFormatError(f'not a Threadloom thread file: "format" is not "{FORMAT}"')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PortableFormatError('"version" must be a positive integer')
    if version > VERSION:
        raise FormatTooNew(version, VERSION)
    try:
        doc = ThreadExport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PortableFormatError(f"{where}: {first['msg']}") from None
    if not doc.threads or doc.threads[0].id != doc.root or doc.threads[0].parent_id is not None:
        raise PortableFormatError("threads: the first thread must be the root, without a parent")
    seen: set[str] = set()
    for thread in doc.threads:
        if thread.id in seen:
            raise PortableFormatError(f"threads: thread {thread.id} appears twice")
        if thread.parent_id is not None and thread.parent_id not in seen:
            raise PortableFormatError(
                f"threads: the parent {thread.parent_id} of thread {thread.id} does not"
                " come before it in the file"
            )
        seen.add(thread.id)
    return doc
