"""The portable thread file (spec 21): a thread with its child-thread tree as one versioned
JSON document — its shape, how it is written (canonical bytes) and how it is read (the
format and version checked first). Plain data, no I/O; ``store/portable.py`` fills it from
a store and stores it in another."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from threadloom.errors import FormatTooNew, PortableFormatError
from threadloom.records.approval import Approval
from threadloom.records.budget import ThreadBudget
from threadloom.records.compaction import Compaction
from threadloom.records.log import LogRow
from threadloom.records.message import Message
from threadloom.records.thread import SharedState, SubagentRegistryEntry, ThreadStatus

FORMAT: Literal["threadloom.thread"] = "threadloom.thread"
"""The ``format`` of every portable thread file."""
VERSION = 2
"""The newest format version this code writes and reads (spec 21 §21.2): 2 adds a
thread's ``forked_from`` and makes ``compactions`` part of the format."""


def _integral(value: Any) -> Any:
    """JSON has one kind of number: ``595.0`` is the integer 595 (JSON Schema's
    ``integer`` accepts it too); a fraction, a text or a boolean stays refused."""
    if type(value) is float and value.is_integer() and INT_MIN <= value <= INT_MAX:
        return int(value)
    return value


Time = Annotated[int, Field(ge=0, strict=True), BeforeValidator(_integral)]
"""A time of the file (µs, or ms where it says so): a non-negative integer, no boolean."""
Count = Annotated[int, Field(ge=0, strict=True), BeforeValidator(_integral)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PortableFile(_Strict):
    """One entry of a thread's file system (spec 07): a file with its bytes, a link, or an
    explicit directory."""

    path: str
    kind: Literal["file", "link", "dir"]
    mime_type: str
    location: str | None = None
    size: Count = 0
    metadata: dict[str, Any] | None = None
    width: Count | None = None
    height: Count | None = None
    created_at: Time
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
        raise PortableFormatError(
            "files", "must hold base64", f"files: the content of {path} is not base64"
        ) from None


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


class PortableFork(_Strict):
    """Where a thread was forked from (spec 08 §8.3.8): a thread and one of its messages,
    in the store the file was written from — not a thread of the file."""

    thread_id: str
    message_id: str


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
    created_at_us: Time
    terminated: Time | None = None
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
    compactions: list[Compaction] = Field(default_factory=list)
    """The thread's compaction records (spec 23), undone ones too; left out of the file
    when there are none, so such a file is the same bytes as before spec 23."""
    forked_from: PortableFork | None = None
    """The thread's fork lineage (spec 21 §21.1 rule 2); left out of the file when the
    thread is not a fork."""


OPTIONAL_KEYS = ("compactions", "forked_from")
"""A thread's keys left out of the file when empty: what version 2 added to version 1."""


def version_for(threads: list[PortableThread]) -> int:
    """The version a file of ``threads`` is written with (spec 21 §21.2 rule 3): the
    lowest that carries it — 1 when no thread has a key of version 2 (such a file is read
    by every Threadloom), else 2 (an older reader then refuses it by its version)."""
    if any(t.compactions or t.forked_from is not None for t in threads):
        return VERSION
    return 1


class ThreadExport(_Strict):
    """The document (spec 21 §21.2): the header, then the threads, parents before their
    children (the root first)."""

    format: Literal["threadloom.thread"]
    version: Annotated[int, Field(ge=1, le=VERSION, strict=True), BeforeValidator(_integral)]
    """The file's format version: a newer one is refused before the rest is read."""
    root: str
    """The id of the exported thread (the first of ``threads``)."""
    lineage: list[str] = Field(default_factory=list)
    """The root's ancestors in the store it came from, its parent first: they are not in
    the file (only the exported thread and its descendants are), and an import does not
    link to them."""
    threads: list[PortableThread] = Field(min_length=1)

    def dump(self) -> bytes:
        """The file's bytes: canonical JSON — keys sorted, compact separators, UTF-8 with
        non-ASCII kept, one trailing newline — so equal contents are equal bytes."""
        data = self.model_dump(mode="json")
        for thread in data["threads"]:
            for key in OPTIONAL_KEYS:
                if not thread[key]:
                    del thread[key]
        text = json.dumps(
            data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode() + b"\n"


INT_MIN, INT_MAX = -(2**63), 2**63 - 1
"""The range of every integer of the file (the stores' 64-bit columns)."""
MAX_PATH = 1024


def _at(loc: tuple[int | str, ...]) -> str:
    """``("threads", 0, "id")`` → ``threads[0].id`` (spec 08 §8.1.3's field names)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _integers_in_range(value: Any, loc: tuple[int | str, ...] = ()) -> None:
    """``PortableFormatError`` naming the first integer outside the 64-bit range."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(value, loc)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if not INT_MIN <= item <= INT_MAX:
                raise PortableFormatError(_at(at), "must be a 64-bit integer")
        elif isinstance(item, dict):
            stack.extend((v, (*at, str(k))) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, (*at, i)) for i, v in reversed(list(enumerate(item))))


def _good_path(path: str) -> bool:
    """A normalised absolute path of spec 07 §7.2: ``/a/b``, no empty, ``.`` or ``..``
    segment, no control character."""
    if not path.startswith("/") or path == "/" or len(path) > MAX_PATH:
        return False
    if any(ord(c) < 0x20 or c == "\x7f" for c in path):
        return False
    return all(seg not in ("", ".", "..") for seg in path[1:].split("/"))


def parse_export(raw: bytes | str | dict[str, Any]) -> ThreadExport:
    """A portable thread file read back: ``PortableFormatError`` naming the field when it
    is not one (not JSON, another ``format``, a field of the wrong shape, an id twice),
    ``FormatTooNew`` when its version is newer than :data:`VERSION` — the format and the
    version checked before anything else is read."""
    if isinstance(raw, dict):
        data: Any = raw
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise PortableFormatError("body", f"is not a JSON document: {exc}") from None
    if not isinstance(data, dict):
        raise PortableFormatError("body", "must be a JSON object")
    if data.get("format") != FORMAT:
        raise PortableFormatError(
            "format",
            f'must be "{FORMAT}"',
            f'not a Threadloom thread file: "format" is not "{FORMAT}"',
        )
    version = _integral(data.get("version"))
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PortableFormatError("version", "must be a positive integer")
    if version > VERSION:
        raise FormatTooNew(version, VERSION)
    _integers_in_range(data)
    try:
        doc = ThreadExport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PortableFormatError(_at(tuple(first["loc"])), first["msg"]) from None
    _check(doc)
    return doc


def _check(doc: ThreadExport) -> None:
    """The rules across fields: the root first, parents before children, ids once."""
    if doc.threads[0].id != doc.root:
        raise PortableFormatError("root", "must be the id of the first thread")
    if doc.threads[0].parent_id is not None:
        raise PortableFormatError("threads[0].parent_id", "must be null (the root)")
    threads: set[str] = set()
    messages: set[str] = set()
    logs: set[str] = set()
    compactions: set[str] = set()
    for i, thread in enumerate(doc.threads):
        at = f"threads[{i}]"
        if thread.id in threads:
            raise PortableFormatError(f"{at}.id", "appears twice")
        if thread.parent_id is not None and thread.parent_id not in threads:
            raise PortableFormatError(
                f"{at}.parent_id", "must name a thread that comes before it in the file"
            )
        threads.add(thread.id)
        if thread.status.state == "running":
            raise PortableFormatError(
                f"{at}.status.state", "must not be running: a file carries history, not a run"
            )
        for j, message in enumerate(thread.messages):
            if message.id in messages:
                raise PortableFormatError(f"{at}.messages[{j}].id", "appears twice")
            if message.status is None:
                raise PortableFormatError(f"{at}.messages[{j}].status", "must not be null")
            messages.add(message.id)
        for j, row in enumerate(thread.logs):
            if row.id in logs:
                raise PortableFormatError(f"{at}.logs[{j}].id", "appears twice")
            logs.add(row.id)
        for what, keys in (
            ("registry", [e.reference for e in thread.registry]),
            ("approvals", [a.tool_call_id for a in thread.approvals]),
            ("files", [f.path for f in thread.files]),
        ):
            seen: set[str] = set()
            for j, key in enumerate(keys):
                if key in seen:
                    raise PortableFormatError(f"{at}.{what}[{j}]", "appears twice")
                seen.add(key)
        own = {m.id for m in thread.messages}
        for j, c in enumerate(thread.compactions):
            if c.id in compactions:  # ids are unique store-wide, as messages'
                raise PortableFormatError(f"{at}.compactions[{j}].id", "appears twice")
            compactions.add(c.id)
            for end in ("first_message_id", "last_message_id"):
                if getattr(c, end) not in own:
                    raise PortableFormatError(
                        f"{at}.compactions[{j}].{end}", "must name a message of the thread"
                    )
        kinds = {f.path: f.kind for f in thread.files}
        for j, f in enumerate(thread.files):
            if not _good_path(f.path):
                raise PortableFormatError(f"{at}.files[{j}].path", "must be a normalised path")
            for part in ("content", "thumbnail"):
                text = getattr(f, part)
                if text is not None:
                    try:
                        base64.b64decode(text, validate=True)
                    except ValueError:
                        raise PortableFormatError(
                            f"{at}.files[{j}].{part}", "must be base64"
                        ) from None
            parent = f.path.rsplit("/", 1)[0]
            while parent:
                if kinds.get(parent, "dir") != "dir":
                    raise PortableFormatError(
                        f"{at}.files[{j}].path", f"is below {parent}, which is not a directory"
                    )
                parent = parent.rsplit("/", 1)[0]
