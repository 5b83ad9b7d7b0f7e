"""Anthropic Messages ⇄ chat messages (spec 11 §11.7.2). Plain dicts; an SDK object is accepted
through its ``model_dump()``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal

from threadloom.client.chat import (
    AttachmentRef,
    Citation,
    ContentBlock,
    Delivery,
    ImageBlock,
    Message,
    TextBlock,
    ToolUseBlock,
    frozen,
)
from threadloom.client.convert.openai import model_visible


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        head, data = url.split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": head.removeprefix("data:"), "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    if isinstance(m.content, str):
        return [{"type": "text", "text": m.content}] if m.content else []
    blocks: list[dict[str, Any]] = []
    for block in m.content:
        if isinstance(block, TextBlock) and block.text:
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            blocks.append(_image(block.url))
    return blocks


def _assistant_blocks(m: Message, thinking: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    details = m.extra.get("reasoning_details")
    if thinking == "keep" and isinstance(details, list):
        for item in details:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "redacted_thinking" and "data" in item:
                blocks.append({"type": "redacted_thinking", "data": item["data"]})
            elif item.get("signature"):
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": item.get("thinking", ""),
                        "signature": item["signature"],
                    }
                )
    if m.text:
        blocks.append({"type": "text", "text": m.text})
    for call in m.tool_uses:
        args = call.args if isinstance(call.args, dict) else {"value": call.args}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args})
    return blocks


def to_anthropic(
    messages: Iterable[Message],
    *,
    thinking: Literal["keep", "drop"] = "keep",
    attachment_url: Callable[[AttachmentRef], str] | None = None,
    include_subprompts: bool = False,
) -> tuple[str | None, list[dict[str, Any]]]:
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if not model_visible(m, include_subprompts):
            continue
        if m.role == "system":
            system.append(m.text)
            continue
        if m.role == "tool":
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": m.text,
                    "is_error": m.extra.get("tool_status") == "error",
                }
            ]
        elif m.role == "user":
            role, blocks = "user", _user_blocks(m)
        else:
            role, blocks = "assistant", _assistant_blocks(m, thinking)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # Anthropic requires alternation
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), turns


def _plain(message: Any) -> dict[str, Any]:
    if hasattr(message, "model_dump"):
        dumped: dict[str, Any] = message.model_dump(exclude_none=True)
        return dumped
    return dict(message)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return ""


def from_anthropic(message: Any) -> list[Message]:
    obj = _plain(message)
    raw = obj.get("content")
    items: list[dict[str, Any]] = (
        [{"type": "text", "text": raw}] if isinstance(raw, str) else list(raw or ())
    )
    if obj.get("role") == "assistant":
        message_id = str(obj.get("id") or uuid.uuid4())
        text = ""
        thoughts: list[str] = []
        details: list[dict[str, Any]] = []
        calls: list[ToolUseBlock] = []
        citations: list[Citation] = []
        for item in items:
            kind = item.get("type")
            if kind == "text":
                text += str(item.get("text", ""))
                for cite in item.get("citations") or ():
                    n = len(citations) + 1
                    citations.append(
                        Citation(
                            id=f"c{n}",
                            index=n,
                            url=cite.get("url"),
                            title=cite.get("title"),
                            snippet=cite.get("cited_text"),
                        )
                    )
            elif kind == "thinking":
                thoughts.append(str(item.get("thinking", "")))
                details.append(
                    {
                        "type": "thinking",
                        "thinking": item.get("thinking", ""),
                        "signature": item.get("signature"),
                    }
                )
            elif kind == "redacted_thinking":
                details.append({"type": "redacted_thinking", "data": item.get("data")})
            elif kind == "tool_use":
                calls.append(
                    ToolUseBlock(
                        id=str(item.get("id", "")),
                        name=str(item.get("name", "")),
                        args=item.get("input"),
                    )
                )
        content: str | tuple[ContentBlock, ...] = text
        if calls:
            content = ((TextBlock(text=text),) if text else ()) + tuple(calls)
        reasoning_extra: dict[str, Any] = {"reasoning_details": details} if details else {}
        return [
            Message(
                id=message_id,
                key=message_id,
                role="assistant",
                content=content,
                delivery=Delivery.static(message_id),
                tool_call_ids=tuple(c.id for c in calls),
                reasoning="\n".join(thoughts) if thoughts else None,
                citations=tuple(citations),
                extra=frozen(reasoning_extra),
            )
        ]
    out: list[Message] = []
    rest: list[ContentBlock] = []
    for item in items:
        kind = item.get("type")
        if kind == "tool_result":
            tool_id = str(uuid.uuid4())
            extra: dict[str, Any] = {"tool_status": "error"} if item.get("is_error") else {}
            out.append(
                Message(
                    id=tool_id,
                    key=tool_id,
                    role="tool",
                    content=_text_of(item.get("content")),
                    delivery=Delivery.static(tool_id),
                    tool_call_id=item.get("tool_use_id"),
                    extra=frozen(extra),
                )
            )
        elif kind == "text":
            rest.append(TextBlock(text=str(item.get("text", ""))))
        elif kind == "image":
            source = item.get("source") or {}
            if source.get("type") == "url":
                url = str(source.get("url", ""))
            else:
                url = f"data:{source.get('media_type')};base64,{source.get('data', '')}"
            rest.append(ImageBlock(url=url, mime_type=source.get("media_type")))
    if rest:
        user_id = str(uuid.uuid4())
        user_content: str | tuple[ContentBlock, ...]
        if all(isinstance(b, TextBlock) for b in rest):
            user_content = "".join(b.text for b in rest if isinstance(b, TextBlock))
        else:
            user_content = tuple(rest)
        out.append(
            Message(
                id=user_id,
                key=user_id,
                role="user",
                content=user_content,
                delivery=Delivery.static(user_id),
            )
        )
    return out
