"""Persisted reasoning and the supply/convert/omit rules of spec 05 §5.6.

Threadloom stores every adapter's reasoning details in one dialect, the OpenRouter
reasoning-detail shape (§5.6.1)::

    {"type": "reasoning.text", "text": ..., "signature"?: ..., "format": ..., "id"?, "index"?}
    {"type": "reasoning.summary", "summary": ..., "format": ..., "id"?, "index"?}
    {"type": "reasoning.encrypted", "data": ..., "format": ..., "id"?, "index"?}

The builders below create entries in that shape (adapters use them on the way in); the
``*_supply`` functions implement one row each of the §5.6.2 conversion table (adapters use
them on the way out), and :func:`supply_reasoning` dispatches on the row name so the
whole table lives in one place. Everything here is pure: inputs are never modified, and
what is returned never aliases the caller's dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

TEXT = "reasoning.text"
SUMMARY = "reasoning.summary"
ENCRYPTED = "reasoning.encrypted"

FORMAT_ANTHROPIC = "anthropic-claude-v1"
FORMAT_OPENAI_RESPONSES = "openai-responses-v1"
FORMAT_GEMINI = "google-gemini-v1"
FORMAT_UNKNOWN = "unknown"

Details = Sequence[Mapping[str, Any]] | None

#: One row of the §5.6.2 table. ``compatible`` is ``reasoning_input="none"`` (the default);
#: ``compatible-reasoning-content`` is ``reasoning_input="reasoning_content"``.
ReasoningTarget = Literal[
    "scripted",
    "openai",
    "openrouter",
    "compatible",
    "compatible-reasoning-content",
    "openai-responses",
    "anthropic",
    "gemini",
]


# --------------------------------------------------------------------------------------
# Building persisted details (§5.6.1)


def _detail(
    kind: str,
    key: str,
    value: str,
    fmt: str,
    id: str | None,
    index: int | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, key: value}
    if extra:
        out.update(extra)
    out["format"] = fmt
    if id is not None:
        out["id"] = id
    if index is not None:
        out["index"] = index
    return out


def text_detail(
    text: str,
    *,
    format: str,
    signature: str | None = None,
    id: str | None = None,
    index: int | None = None,
) -> dict[str, Any]:
    """A ``reasoning.text`` entry (Anthropic ``thinking`` carries its ``signature``)."""
    extra = {"signature": signature} if signature is not None else None
    return _detail(TEXT, "text", text, format, id, index, extra)


def summary_detail(
    summary: str, *, format: str, id: str | None = None, index: int | None = None
) -> dict[str, Any]:
    """A ``reasoning.summary`` entry (an OpenAI Responses summary part)."""
    return _detail(SUMMARY, "summary", summary, format, id, index)


def encrypted_detail(
    data: str, *, format: str, id: str | None = None, index: int | None = None
) -> dict[str, Any]:
    """A ``reasoning.encrypted`` entry (Anthropic ``redacted_thinking``, OpenAI
    ``encrypted_content``)."""
    return _detail(ENCRYPTED, "data", data, format, id, index)


# --------------------------------------------------------------------------------------
# Small queries over details


def _entries(details: Details) -> list[Mapping[str, Any]]:
    """The entries that are objects (a malformed persisted list may hold anything)."""
    return [d for d in details or () if isinstance(d, Mapping)]


def details_for(format_family: str, details: Details) -> list[dict[str, Any]]:
    """Copies of the entries whose ``format`` is ``format_family``, in stored order.

    The first filter of the ``anthropic`` and ``openai-responses`` rows: details from
    another family are never sent to a provider that cannot read them.
    """
    return [copy.deepcopy(dict(d)) for d in _entries(details) if d.get("format") == format_family]


def summary_text(details: Details) -> str | None:
    """The ``text`` / ``summary`` values of the details joined by ``"\\n"``; None if none.

    The conversion of the row "openai chat, dialect ``compatible``,
    ``reasoning_input="reasoning_content"``" when ``reasoning_content`` is null. Encrypted
    entries have no readable text and are skipped, as are empty strings.
    """
    parts: list[str] = []
    for d in _entries(details):
        value = d.get("summary") if d.get("type") == SUMMARY else d.get("text")
        if d.get("type") in (TEXT, SUMMARY) and isinstance(value, str) and value:
            parts.append(value)
    return "\n".join(parts) if parts else None


# --------------------------------------------------------------------------------------
# The conversion table (§5.6.2), one function per row


@dataclass(frozen=True, slots=True)
class ReasoningSupply:
    """What an adapter sends for one assistant message's persisted reasoning.

    - ``details``: neutral detail entries sent as they are (scripted; OpenRouter's
      ``reasoning_details``), or None when omitted;
    - ``text``: reasoning text to send (scripted; OpenRouter ``reasoning``; compatible
      ``reasoning_content``), or None when omitted;
    - ``wire``: provider-native objects converted from the details (Responses
      ``reasoning`` input items; Anthropic ``thinking`` / ``redacted_thinking`` blocks),
      placed by the adapter before the message's own items / blocks.

    ``ReasoningSupply()`` — all empty — means "omit everything".
    """

    details: list[dict[str, Any]] | None = None
    text: str | None = None
    wire: list[dict[str, Any]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when nothing at all is sent."""
        return self.details is None and self.text is None and not self.wire


def scripted_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *scripted*: both supplied unchanged (the request log shows them as persisted)."""
    kept = None if details is None else [copy.deepcopy(dict(d)) for d in _entries(details)]
    return ReasoningSupply(details=kept, text=content)


def omit_supply(content: str | None = None, details: Details = None) -> ReasoningSupply:
    """Rows *openai chat, dialect ``openai``* and *dialect ``compatible``,
    ``reasoning_input="none"``*: the API accepts no reasoning input, so nothing is sent."""
    return ReasoningSupply()


def openrouter_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *openai chat, dialect ``openrouter``*.

    Entries whose ``type`` starts with ``reasoning.`` are sent unchanged as
    ``reasoning_details`` (any ``format``: OpenRouter routes them); other entries are
    omitted. ``reasoning_content`` is sent as ``reasoning`` only when no detail was sent.
    """
    kept = [
        copy.deepcopy(dict(d))
        for d in _entries(details)
        if isinstance(d.get("type"), str) and d["type"].startswith("reasoning.")
    ]
    if kept:
        return ReasoningSupply(details=kept)
    return ReasoningSupply(text=content)


def compatible_content_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *openai chat, dialect ``compatible``, ``reasoning_input="reasoning_content"``*.

    Details are omitted; the text is ``reasoning_content``, or — when that is null — the
    details converted by :func:`summary_text`.
    """
    return ReasoningSupply(text=content if content is not None else summary_text(details))


def responses_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *openai-responses*: entries of format ``openai-responses-v1`` with an ``id``
    become ``reasoning`` input items (:func:`responses_reasoning_items`); the text is
    omitted (the API takes reasoning only as items)."""
    return ReasoningSupply(wire=responses_reasoning_items(details))


def anthropic_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *anthropic*: entries of format ``anthropic-claude-v1`` become thinking blocks
    (:func:`anthropic_thinking_blocks`); the text is omitted (Anthropic accepts no
    unsigned reasoning)."""
    return ReasoningSupply(wire=anthropic_thinking_blocks(details))


def responses_reasoning_items(details: Details) -> list[dict[str, Any]]:
    """Responses ``reasoning`` input items for one assistant message (spec 05 §5.8.3).

    Entries with format ``openai-responses-v1`` and a string ``id`` are grouped by ``id``
    in order of first appearance; each group becomes ``{"type": "reasoning", "id",
    "summary": [{"type": "summary_text", "text"}, ...], "encrypted_content"?}``, with
    ``encrypted_content`` the ``data`` of the group's ``reasoning.encrypted`` entry when
    there is one. Other entry types of the family add nothing to their group.
    """
    items: dict[str, dict[str, Any]] = {}
    for d in details_for(FORMAT_OPENAI_RESPONSES, details):
        item_id = d.get("id")
        if not isinstance(item_id, str) or not item_id:
            continue
        item = items.setdefault(item_id, {"type": "reasoning", "id": item_id, "summary": []})
        if d.get("type") == SUMMARY and isinstance(d.get("summary"), str):
            item["summary"].append({"type": "summary_text", "text": d["summary"]})
        elif d.get("type") == ENCRYPTED and isinstance(d.get("data"), str):
            item["encrypted_content"] = d["data"]
    return list(items.values())


def anthropic_thinking_blocks(details: Details) -> list[dict[str, Any]]:
    """Anthropic thinking blocks for one assistant message, in stored order (§5.6.2, §5.9.2).

    Of the ``anthropic-claude-v1`` entries, ``reasoning.text`` with a non-empty
    ``signature`` → ``{"type": "thinking", "thinking", "signature"}`` and
    ``reasoning.encrypted`` → ``{"type": "redacted_thinking", "data"}``, both verbatim;
    unsigned text, summaries and other formats are omitted.
    """
    blocks: list[dict[str, Any]] = []
    for d in details_for(FORMAT_ANTHROPIC, details):
        kind = d.get("type")
        signature = d.get("signature")
        if kind == TEXT and isinstance(signature, str) and signature:
            blocks.append(
                {"type": "thinking", "thinking": str(d.get("text") or ""), "signature": signature}
            )
        elif kind == ENCRYPTED and isinstance(d.get("data"), str):
            blocks.append({"type": "redacted_thinking", "data": d["data"]})
    return blocks


def gemini_supply(content: str | None, details: Details) -> ReasoningSupply:
    """Row *gemini* (spec 05 §5.11.3): of the ``google-gemini-v1`` entries,
    ``reasoning.text`` with a ``signature`` → a thought part (``wire``, from
    :func:`gemini_thought_parts`) and ``reasoning.encrypted`` → a signature that the adapter
    puts back on the part that carried it (``details``: the entry's ``id`` names the
    function call, no ``id`` means the text part); the text and other entries are omitted
    (thought summaries are not model input, and other formats are not Gemini's)."""
    signatures = [
        d
        for d in details_for(FORMAT_GEMINI, details)
        if d.get("type") == ENCRYPTED and isinstance(d.get("data"), str) and d["data"]
    ]
    return ReasoningSupply(details=signatures or None, wire=gemini_thought_parts(details))


def gemini_thought_parts(details: Details) -> list[dict[str, Any]]:
    """Gemini thought parts ``{"text", "thought": true, "thoughtSignature"}`` for the
    ``google-gemini-v1`` ``reasoning.text`` entries that carry a signature, in stored
    order; unsigned thought summaries are omitted."""
    parts: list[dict[str, Any]] = []
    for d in details_for(FORMAT_GEMINI, details):
        signature = d.get("signature")
        if d.get("type") == TEXT and isinstance(signature, str) and signature:
            text = str(d.get("text") or "")
            parts.append({"text": text, "thought": True, "thoughtSignature": signature})
    return parts


_ROWS = {
    "scripted": scripted_supply,
    "openai": omit_supply,
    "openrouter": openrouter_supply,
    "compatible": omit_supply,
    "compatible-reasoning-content": compatible_content_supply,
    "openai-responses": responses_supply,
    "anthropic": anthropic_supply,
    "gemini": gemini_supply,
}


def supply_reasoning(
    target: ReasoningTarget, content: str | None, details: Details
) -> ReasoningSupply:
    """Apply the §5.6.2 row ``target`` to one assistant message's persisted reasoning.

    ``content`` / ``details`` are the message's ``reasoning_content`` /
    ``reasoning_details`` as they arrive in the request. The result says what to send;
    the inputs are never modified (the persisted record is never changed, seed §1.3.4).
    """
    try:
        row = _ROWS[target]
    except KeyError:
        raise ValueError(f"unknown reasoning target: {target!r}") from None
    return row(content, details)


__all__ = [
    "ENCRYPTED",
    "FORMAT_ANTHROPIC",
    "FORMAT_GEMINI",
    "FORMAT_OPENAI_RESPONSES",
    "FORMAT_UNKNOWN",
    "SUMMARY",
    "TEXT",
    "Details",
    "ReasoningSupply",
    "ReasoningTarget",
    "anthropic_supply",
    "anthropic_thinking_blocks",
    "compatible_content_supply",
    "details_for",
    "encrypted_detail",
    "gemini_supply",
    "gemini_thought_parts",
    "omit_supply",
    "openrouter_supply",
    "responses_reasoning_items",
    "responses_supply",
    "scripted_supply",
    "summary_detail",
    "summary_text",
    "supply_reasoning",
    "text_detail",
]
