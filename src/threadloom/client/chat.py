"""The provider-independent chat model (spec 11 §11.3) and records → chat messages (§11.4).

Pure: no I/O, no clock, no randomness. Every object is immutable.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import quote

from threadloom.records import AttachmentRef
from threadloom.records import Message as Record

__all__ = [
    "EMPTY",
    "AgentError",
    "AttachmentRef",
    "Citation",
    "ContentBlock",
    "Delivery",
    "FileBlock",
    "ImageBlock",
    "Message",
    "Outcome",
    "Phase",
    "Role",
    "SubagentRef",
    "TextBlock",
    "ToolCall",
    "ToolResultBlock",
    "ToolUseBlock",
    "citations_of",
    "decode_json",
    "from_record",
    "parse_tool_calls",
    "upload_blocks",
]

Role = Literal["user", "assistant", "system", "tool"]
EMPTY: Mapping[str, Any] = MappingProxyType({})


def no_values() -> Mapping[str, Any]:
    """The default of mapping fields: the shared read-only empty mapping."""
    return EMPTY


def frozen(values: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only copy (``EMPTY`` for nothing)."""
    return MappingProxyType(dict(values)) if values else EMPTY


@dataclass(frozen=True, slots=True)
class TextBlock:
    type: Literal["text"] = "text"
    text: str = ""


@dataclass(frozen=True, slots=True)
class ImageBlock:
    type: Literal["image"] = "image"
    url: str = ""
    alt: str | None = None
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class FileBlock:
    type: Literal["file"] = "file"
    attachment: AttachmentRef | None = None
    url: str | None = None


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    type: Literal["tool_use"] = "tool_use"
    id: str = ""
    name: str = ""
    args: Any = None
    args_raw: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str = ""
    result: Any = None
    is_error: bool = False


ContentBlock = TextBlock | ImageBlock | FileBlock | ToolUseBlock | ToolResultBlock


class Phase(StrEnum):
    SENDING = "sending"
    QUEUED = "queued"
    STREAMING = "streaming"
    COMPLETE = "complete"


class Outcome(StrEnum):
    SUCCESS = "success"
    ERROR = "error"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"
    PAUSED = "paused"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where a message is in its life (spec 11 §11.3.3); ``generation`` names the attempt."""

    generation: str
    phase: Phase
    outcome: Outcome | None = None

    @staticmethod
    def static(message_id: str) -> Delivery:
        return Delivery(message_id, Phase.COMPLETE, Outcome.SUCCESS)

    @staticmethod
    def complete(generation: str, outcome: Outcome) -> Delivery:
        return Delivery(generation, Phase.COMPLETE, outcome)

    @staticmethod
    def streaming(generation: str) -> Delivery:
        return Delivery(generation, Phase.STREAMING)

    @staticmethod
    def queued(generation: str) -> Delivery:
        return Delivery(generation, Phase.QUEUED)

    @staticmethod
    def sending(generation: str) -> Delivery:
        return Delivery(generation, Phase.SENDING)

    @property
    def is_complete(self) -> bool:
        return self.phase is Phase.COMPLETE


ToolCallStatus = Literal["pending", "running", "complete", "error"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    args: Any
    status: ToolCallStatus
    result: Any = None
    error: str | None = None
    args_raw: str | None = None
    message_id: str | None = None

    @property
    def settled(self) -> bool:
        return self.status in ("complete", "error")


@dataclass(frozen=True, slots=True)
class Citation:
    id: str
    index: int
    title: str | None = None
    url: str | None = None
    snippet: str | None = None
    source_type: str | None = None
    icon_url: str | None = None
    published_at: str | int | None = None
    extra: Mapping[str, Any] = field(default_factory=no_values)


@dataclass(frozen=True, slots=True)
class SubagentRef:
    id: str
    relationship: str | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    status: str | None = None
    blocking: bool | None = None
    thread_name: str | None = None
    spawn_group_id: str | None = None


@dataclass(frozen=True, slots=True)
class AgentError:
    kind: Literal["connection", "auth", "server", "interrupted", "aborted", "rejected"]
    message: str
    retryable: bool
    status: int | None = None
    recovery: Literal["retry", "check", "none"] | None = None
    detail: Any = None


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message (spec 11 §11.3.1): ``key`` is stable, ``id`` the server id once known."""

    id: str
    key: str
    role: Role
    content: str | tuple[ContentBlock, ...]
    delivery: Delivery
    name: str | None = None
    tool_call_id: str | None = None
    tool_call_ids: tuple[str, ...] = ()
    reasoning: str | None = None
    reasoning_duration_ms: int | None = None
    citations: tuple[Citation, ...] = ()
    status: Literal["pending", "completed", "failed"] | None = None
    created_at_us: int | None = None
    silent: bool = False
    depth: int = 0
    parent_id: str | None = None
    subagent: SubagentRef | None = None
    attachments: tuple[AttachmentRef, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=no_values)
    extra: Mapping[str, Any] = field(default_factory=no_values)

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def output(self) -> Any:
        """The parsed value of a structured answer, ``metadata["output"]``, else None
        (spec 24 §24.5)."""
        return self.metadata.get("output")

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        if isinstance(self.content, str):
            return ()
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))


def decode_json(text: str | None) -> Any:
    """The JSON value of ``text``, else the text itself."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def parse_tool_calls(text: str | None) -> tuple[ToolUseBlock, ...] | None:
    """The calls of a record's ``tool_calls`` JSON text; None when it does not parse."""
    if not text:
        return ()
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None
    blocks: list[ToolUseBlock] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("function"), dict):
            return None
        function = item["function"]
        raw = function.get("arguments")
        raw_text = raw if isinstance(raw, str) else json.dumps(raw, separators=(",", ":"))
        try:
            args: Any = json.loads(raw_text) if raw_text else {}
        except ValueError:
            args = {}
        blocks.append(
            ToolUseBlock(
                id=str(item.get("id", "")),
                name=str(function.get("name", "")),
                args=args,
                args_raw=raw_text,
            )
        )
    return tuple(blocks)


_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "refId"),
    "title": ("title", "name"),
    "url": ("url", "href", "source"),
    "snippet": ("snippet", "content", "excerpt"),
}


def _first(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if obj.get(key) is not None:
            return obj[key]
    return None


def _web(url: Any) -> str | None:
    return "web" if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def citations_of(items: Any) -> tuple[Citation, ...]:
    """``metadata.citations`` → citations (spec 11 §11.3.5)."""
    if not isinstance(items, list):
        return ()
    out: list[Citation] = []
    for item in items:
        n = len(out) + 1
        if isinstance(item, str):
            out.append(Citation(id=f"c{n}", index=n, url=item, source_type=_web(item)))
        elif isinstance(item, Mapping):
            url = _first(item, _ALIASES["url"])
            known = {k for keys in _ALIASES.values() for k in keys}
            known |= {"source_type", "sourceType", "icon_url", "iconUrl"}
            known |= {"published_at", "publishedAt"}
            out.append(
                Citation(
                    id=str(_first(item, _ALIASES["id"]) or f"c{n}"),
                    index=n,
                    title=_first(item, _ALIASES["title"]),
                    url=url,
                    snippet=_first(item, _ALIASES["snippet"]),
                    source_type=_first(item, ("source_type", "sourceType")) or _web(url),
                    icon_url=_first(item, ("icon_url", "iconUrl")),
                    published_at=_first(item, ("published_at", "publishedAt")),
                    extra=frozen({k: v for k, v in item.items() if k not in known}),
                )
            )
    return tuple(out)


def upload_blocks(uploads: Sequence[Any]) -> tuple[ContentBlock, ...]:
    """Blocks of the attachments of an optimistic send (``Upload``s, not stored yet): an image
    shows from a ``data:`` URL; another file gets a provisional ``AttachmentRef`` with an empty
    ``path`` until the server's record brings the stored one."""
    blocks: list[ContentBlock] = []
    for upload in uploads:
        mime = str(getattr(upload, "mime_type", "application/octet-stream"))
        data = bytes(getattr(upload, "data", b""))
        description = getattr(upload, "description", None)
        if mime.startswith("image/"):
            url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
            blocks.append(ImageBlock(url=url, alt=description, mime_type=mime))
        else:
            ref = AttachmentRef(
                id="",
                path="",
                name=str(getattr(upload, "name", "")),
                mimeType=mime,
                size=len(data),
                description=description,
            )
            blocks.append(FileBlock(attachment=ref))
    return tuple(blocks)


AttachmentUrl = Callable[[str, AttachmentRef], str]
"""``(thread_id, ref) -> url`` of an attachment's image/file block (spec 11 §11.4)."""


def fs_url(base_url: str = "") -> AttachmentUrl:
    """The default ``attachment_url``: ``<base_url>/api/threads/<thread>/fs<path>``, thread id
    and path segments percent-encoded (``base_url=""`` gives the path alone)."""
    base = base_url.rstrip("/")

    def url(thread_id: str, ref: AttachmentRef) -> str:
        segments = "/".join(quote(part, safe="") for part in ref.path.split("/") if part)
        return f"{base}/api/threads/{quote(thread_id, safe='')}/fs/{segments}"

    return url


def _subagent(record: Record) -> SubagentRef | None:
    if record.subagent_id is None:
        return None
    return SubagentRef(
        id=record.subagent_id,
        relationship=record.subagent_relationship,
        name=record.subagent_name,
        title=record.subagent_title,
        description=record.subagent_description,
        status=record.subagent_status,
        blocking=record.subagent_blocking,
        thread_name=record.subagent_thread_name,
        spawn_group_id=record.subagent_spawn_group_id,
    )


_RELATIVE_FS = fs_url()


def from_record(
    record: Record,
    delivery: Delivery,
    *,
    key: str | None = None,
    thread_id: str = "",
    attachment_url: AttachmentUrl | None = None,
) -> Message:
    """A chat message from a server record (spec 11 §11.4) with the given delivery; image and
    file blocks get ``attachment_url(thread_id, ref)`` (default: the server-relative
    ``/api/threads/<thread>/fs<path>``; a ``ThreadSession`` prefixes its client's base URL)."""
    text = record.content or ""
    extra: dict[str, Any] = {}
    calls = parse_tool_calls(record.tool_calls)
    if calls is None:
        extra["tool_calls_raw"] = record.tool_calls
        calls = ()
    attachments = tuple(record.attachments or ())
    blocks: list[ContentBlock] = []
    for ref in attachments:
        url = (attachment_url or _RELATIVE_FS)(thread_id, ref)
        if ref.mimeType.startswith("image/"):
            blocks.append(ImageBlock(url=url, alt=ref.description, mime_type=ref.mimeType))
        else:
            blocks.append(FileBlock(attachment=ref, url=url))
    blocks.extend(calls)
    content: str | tuple[ContentBlock, ...] = text
    if blocks:
        content = ((TextBlock(text=text),) if text else ()) + tuple(blocks)
    if record.tool_status is not None:
        extra["tool_status"] = record.tool_status
    if record.reasoning_details is not None:
        extra["reasoning_details"] = decode_json(record.reasoning_details)
    if record.prompt is not None:
        extra["prompt"] = record.prompt
    if record.log_id is not None:
        extra["log_id"] = record.log_id
    metadata = record.metadata or {}
    duration = metadata.get("reasoning_duration_ms")
    return Message(
        id=record.id,
        key=key or record.id,
        role=record.role,
        content=content,
        delivery=delivery,
        name=record.name,
        tool_call_id=record.tool_call_id,
        tool_call_ids=tuple(c.id for c in calls),
        reasoning=record.reasoning_content,
        reasoning_duration_ms=duration if isinstance(duration, int) else None,
        citations=citations_of(metadata.get("citations")),
        status=record.status,
        created_at_us=record.created_at,
        silent=record.silent,
        depth=record.depth,
        parent_id=record.parent_id,
        subagent=_subagent(record),
        attachments=attachments,
        metadata=frozen(metadata),
        extra=frozen(extra),
    )
