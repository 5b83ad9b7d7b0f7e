"""The summary of a compaction in place of the messages it covers (spec 23 §23.4).

A thread's live histories carry its active compaction (``MessageHistory.caches`` under
``COMPACTION_KEY``: the record, or None when there is none), read from the store once per
history and replaced when this process compacts or undoes. Context assembly takes the
full pass when a compaction is active and, after the ``filter_messages`` hooks saw the live
history, replaces the covered messages with two history messages: the summary as a user
message, clearly labelled, and a short assistant acknowledgement — history the model reads,
never system instructions. Where the compaction also holds a provider's own compaction
item made for the request's adapter and model, the request carries it beside the summary
(``native_in``) and that adapter sends it in the summary's place (spec 23 §23.4 rule 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.engine.request.presentation import RequestMessage
from threadloom.providers.types import NativeCompaction
from threadloom.records import Compaction, Message
from threadloom.records.compaction import SUMMARY_PREFIX
from threadloom.thread.history import MessageHistory

COMPACTION_KEY = ("compaction",)
"""The key of the active compaction in ``MessageHistory.caches``."""

UNKNOWN = object()
"""What ``caches`` gives for a history that has not read its compaction yet."""

ACKNOWLEDGEMENT = "Understood: I will continue from this summary of our earlier conversation."


async def active_compaction(store: Any, thread_id: str, history: MessageHistory) -> Any:
    """The thread's active compaction as ``history`` knows it (read once from the store)."""
    known = history.caches.get(COMPACTION_KEY, UNKNOWN)
    if known is UNKNOWN:
        records = await store.list_compactions(thread_id, active_only=True)
        known = history.caches[COMPACTION_KEY] = records[-1] if records else None
    return known


def summary_messages(compaction: Compaction) -> list[Message]:
    """The two messages that stand for the covered range (ids derived from the record's,
    so a log shows where they came from)."""
    text = (
        f"{SUMMARY_PREFIX}: {compaction.message_count} messages, compacted; the original "
        f"messages are kept in the thread]\n\n{compaction.summary}"
    )
    return [
        Message(
            id=f"{compaction.id}-summary",
            role="user",
            content=text,
            created_at=compaction.created_at,
            metadata={"compaction_id": compaction.id},
        ),
        Message(
            id=f"{compaction.id}-ack",
            role="assistant",
            content=ACKNOWLEDGEMENT,
            created_at=compaction.created_at,
            metadata={"compaction_id": compaction.id},
        ),
    ]


def covered_ids(records: Sequence[Message], compaction: Compaction) -> set[str] | None:
    """The ids of the stored records the compaction covers (every one up to its last
    message), or None when that message is no longer in the history (then the compaction
    does not apply: the originals are used)."""
    ids: set[str] = set()
    for record in records:
        ids.add(record.id)
        if record.id == compaction.last_message_id:
            return ids
    return None


def substitute(
    snapshot: list[Message], records: Sequence[Message], compaction: Compaction
) -> list[Message]:
    """``snapshot`` with the covered messages replaced by the summary messages, placed
    where the first covered one was (messages a hook added keep their places)."""
    covered = covered_ids(records, compaction)
    if covered is None:
        return snapshot
    out: list[Message] = []
    placed = False
    for message in snapshot:
        if message.id in covered:
            if not placed:
                out.extend(summary_messages(compaction))
                placed = True
            continue
        out.append(message)
    if not placed:
        out[0:0] = summary_messages(compaction)
    return out


def native_items(compaction: Compaction, provider: Any, model_id: str) -> list[Any] | None:
    """The wire items of ``compaction``'s provider item when it was made by an adapter of
    ``provider``'s kind and name for model ``model_id`` (else None: the text summary)."""
    item = compaction.provider_item
    kind = getattr(provider, "native_compaction", None)
    if not isinstance(item, dict) or kind is None or item.get("type") != kind:
        return None
    if item.get("provider") != getattr(provider, "name", None) or item.get("model") != model_id:
        return None
    output = item.get("output")
    return list(output) if isinstance(output, list) else None


def native_in(
    compaction: Compaction | None,
    messages: Sequence[RequestMessage],
    provider: Any,
    model_id: str,
) -> NativeCompaction | None:
    """The native compaction a request of ``messages`` carries: the provider item, if it
    is ``provider``'s (``native_items``), at the place of the summary and its
    acknowledgement — found by their ids, so a hook that moved or dropped them leaves the
    request with the text."""
    if compaction is None:
        return None
    items = native_items(compaction, provider, model_id)
    if items is None:
        return None
    summary, ack = (m.id for m in summary_messages(compaction))
    for at in range(len(messages) - 1):
        if messages[at].source_id == summary and messages[at + 1].source_id == ack:
            kind = str(getattr(provider, "native_compaction", ""))
            return NativeCompaction(kind=kind, at=at, items=items)
    return None
