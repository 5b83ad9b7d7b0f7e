"""OpenAI Chat Completions messages ⇄ chat messages (spec 11 §11.7.1). Plain dicts; an SDK
object is accepted through its ``model_dump()``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal

from threadloom.client.chat import (
    AttachmentRef,
    Citation,
    ContentBlock,
    Delivery,
    FileBlock,
    ImageBlock,
    Message,
    Outcome,
    Phase,
    TextBlock,
    ToolUseBlock,
    frozen,
)

ReasoningMode = Literal["omit", "reasoning_content", "openrouter"]


def model_visible(message: Message, include_subprompts: bool = False) -> bool:
    """What a model sees (spec 11 §11.7): completed records, delivered with success."""
    if message.status not in ("completed", None):
        return False
    if message.delivery.phase is not Phase.COMPLETE:
        return False
    if message.delivery.outcome is not Outcome.SUCCESS:
        return False
    return include_subprompts or message.depth == 0


def _arguments(block: ToolUseBlock) -> str:
    if block.args_raw is not None:
        return block.args_raw
    return json.dumps(block.args, separators=(",", ":"))


def _user_parts(message: Message, attachment_url: Callable[[AttachmentRef], str] | None) -> Any:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "image_url", "image_url": {"url": block.url}})
        elif isinstance(block, FileBlock) and block.attachment is not None:
            ref = block.attachment
            path = attachment_url(ref) if attachment_url is not None else ref.path
            text = f"Attachment: {ref.name} ({ref.mimeType}) at {path}"
            parts.append({"type": "text", "text": text})
    return parts


def to_openai(
    messages: Iterable[Message],
    *,
    reasoning: ReasoningMode = "omit",
    attachment_url: Callable[[AttachmentRef], str] | None = None,
    include_subprompts: bool = False,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if not model_visible(m, include_subprompts):
            continue
        if m.role == "system":
            out.append({"role": "system", "content": m.text})
        elif m.role == "user":
            out.append({"role": "user", "content": _user_parts(m, attachment_url)})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        else:
            calls = m.tool_uses
            item: dict[str, Any] = {
                "role": "assistant",
                "content": m.text if m.text or not calls else None,
            }
            if calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments(c)},
                    }
                    for c in calls
                ]
            if m.name is not None:
                item["name"] = m.name
            if m.reasoning is not None and reasoning == "reasoning_content":
                item["reasoning_content"] = m.reasoning
            elif reasoning == "openrouter" and (
                m.reasoning is not None or "reasoning_details" in m.extra
            ):
                details = m.extra.get("reasoning_details")
                item["reasoning_details"] = (
                    details
                    if isinstance(details, list)
                    else [{"type": "reasoning.text", "text": m.reasoning}]
                )
            out.append(item)
    return out


def _plain(message: Any) -> dict[str, Any]:
    if hasattr(message, "model_dump"):
        dumped: dict[str, Any] = message.model_dump(exclude_none=True)
        return dumped
    return dict(message)


def _calls(items: Any) -> tuple[ToolUseBlock, ...]:
    blocks: list[ToolUseBlock] = []
    for call in items or ():
        function = call.get("function") or {}
        raw = function.get("arguments") or ""
        raw_text = raw if isinstance(raw, str) else json.dumps(raw, separators=(",", ":"))
        try:
            args: Any = json.loads(raw_text) if raw_text else {}
        except ValueError:
            args = {}
        blocks.append(
            ToolUseBlock(
                id=str(call.get("id", "")),
                name=str(function.get("name", "")),
                args=args,
                args_raw=raw_text,
            )
        )
    return tuple(blocks)


def from_openai(message: Any, *, id: str | None = None) -> Message:
    obj = _plain(message)
    message_id = id or obj.get("id") or str(uuid.uuid4())
    raw = obj.get("content")
    text = ""
    blocks: list[ContentBlock] = []
    if isinstance(raw, str):
        text = raw
    elif isinstance(raw, list):
        for part in raw:
            if part.get("type") == "text":
                text += str(part.get("text", ""))
            elif part.get("type") == "image_url":
                blocks.append(ImageBlock(url=str((part.get("image_url") or {}).get("url", ""))))
    calls = _calls(obj.get("tool_calls"))
    extra: dict[str, Any] = {}
    reasoning = obj.get("reasoning_content")
    if not isinstance(reasoning, str):
        reasoning = obj.get("reasoning") if isinstance(obj.get("reasoning"), str) else None
    details = obj.get("reasoning_details")
    if details is not None:
        extra["reasoning_details"] = details
        if reasoning is None and isinstance(details, list):
            texts = [d.get("text") for d in details if isinstance(d, dict)]
            reasoning = "\n".join(t for t in texts if isinstance(t, str)) or None
    citations: list[Citation] = []
    for note in obj.get("annotations") or ():
        if note.get("type") == "url_citation":
            cite = note.get("url_citation") or {}
            n = len(citations) + 1
            citations.append(
                Citation(
                    id=f"c{n}",
                    index=n,
                    title=cite.get("title"),
                    url=cite.get("url"),
                    source_type="web",
                )
            )
    content: str | tuple[ContentBlock, ...] = text
    if blocks or calls:
        content = ((TextBlock(text=text),) if text else ()) + tuple(blocks) + calls
    return Message(
        id=message_id,
        key=message_id,
        role=obj["role"],
        content=content,
        delivery=Delivery.static(message_id),
        name=obj.get("name"),
        tool_call_id=obj.get("tool_call_id"),
        tool_call_ids=tuple(c.id for c in calls),
        reasoning=reasoning,
        citations=tuple(citations),
        extra=frozen(extra),
    )


class OpenAIStreamAccumulator:
    """Folds ``chat.completion.chunk`` objects into one chat message."""

    def __init__(self, id: str | None = None) -> None:
        self.id = id
        self.text = ""
        self.reasoning: str | None = None
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None

    def feed(self, chunk: Any) -> None:
        obj = _plain(chunk)
        self.id = self.id or obj.get("id")
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text += delta["content"]
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    self.reasoning = (self.reasoning or "") + delta[key]
                    break
            for fragment in delta.get("tool_calls") or ():
                call = self.calls.setdefault(
                    int(fragment.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                function = fragment.get("function") or {}
                if fragment.get("id") and not call["id"]:
                    call["id"] = fragment["id"]
                if function.get("name") and not call["name"]:
                    call["name"] = function["name"]
                call["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def message(self) -> Message:
        message_id = self.id or "stream"
        calls = []
        for index in sorted(self.calls):
            call = self.calls[index]
            try:
                args: Any = json.loads(call["arguments"]) if call["arguments"] else {}
            except ValueError:
                args = {}
            calls.append(
                ToolUseBlock(
                    id=call["id"], name=call["name"], args=args, args_raw=call["arguments"]
                )
            )
        content: str | tuple[ContentBlock, ...] = self.text
        if calls:
            content = ((TextBlock(text=self.text),) if self.text else ()) + tuple(calls)
        extra: dict[str, Any] = {}
        if self.finish_reason == "length":
            extra["stop_reason"] = "length"
        delivery = (
            Delivery.complete(message_id, Outcome.SUCCESS)
            if self.finish_reason
            else Delivery.streaming(message_id)
        )
        return Message(
            id=message_id,
            key=message_id,
            role="assistant",
            content=content,
            delivery=delivery,
            tool_call_ids=tuple(c.id for c in calls),
            reasoning=self.reasoning,
            extra=frozen(extra),
        )
