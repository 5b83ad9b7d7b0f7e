"""The summary of a compaction in place of the messages it covers (spec 23 §23.4).

A thread's live histories carry its active compaction (``MessageHistory.caches`` under
``COMPACTION_KEY``: the record, or None when there is none), read from the store once per
history and replaced when this process compacts or undoes. Context assembly takes the
full pass when a compaction is active and, after the ``filter_messages`` hooks saw the live
history, replaces the covered messages with two history messages: the summary as a user
message, clearly labelled, and a short assistant acknowledgement — history the model reads,
never system instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
