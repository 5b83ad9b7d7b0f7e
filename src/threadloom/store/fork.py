"""Forking a thread (spec 08 §8.3.8): a new thread whose history is a copy of another's up
to one of its messages — optionally with that message's text replaced — while the original
is never changed. Above no backend: the history is read through the Store protocol, the
copy is built as a one-thread portable file (``records/portable.py``, new ids) and stored
with its lineage by the one write ``Store.fork_thread``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from threadloom.errors import ForkPointUnfinished, InvalidField, MessageNotFound, ThreadNotFound
from threadloom.records import Message, ThreadStatus, new_id
from threadloom.records.portable import (
    FORMAT,
    VERSION,
    PortableFile,
    PortableThread,
    ThreadExport,
)
from threadloom.store.base import Store, ThreadRow
from threadloom.store.portable import portable_file


@dataclass(frozen=True)
class Fork:
    """What a fork stored: the new thread's row, the copy of the fork point's message (its
    new id) and the number of messages copied."""

    row: ThreadRow
    message_id: str
    copied: int


def history_to(messages: list[Message], message_id: str) -> list[Message]:
    """The prefix of ``messages`` (canonical order) a fork at ``message_id`` copies: up to
    and including that message, and on to the end of any tool round it leaves open — until
    every tool call of the prefix has its result in it, so a fork never holds a dangling
    call. ``MessageNotFound`` when no message has that id; ``ForkPointUnfinished`` when the
    prefix holds a message still being generated, or a call whose result is not stored
    (yet)."""
    at = next((i for i, m in enumerate(messages) if m.id == message_id), None)
    if at is None:
        raise MessageNotFound(message_id)
    answered_at = {m.tool_call_id: i for i, m in enumerate(messages) if m.tool_call_id}
    end = at
    i = 0
    while i <= end:
        m = messages[i]
        if m.status == "pending":
            raise ForkPointUnfinished(
                f"Message {m.id} is still being generated; fork at an earlier message", m.id
            )
        for call in m.decoded_tool_calls() if m.role == "assistant" else ():
            found = answered_at.get(call.id)
            if found is None:
                raise ForkPointUnfinished(
                    f"Tool call {call.id} of message {m.id} has no result yet; fork at an"
                    " earlier message",
                    m.id,
                )
            end = max(end, found)
        i += 1
    return messages[: end + 1]


def _renumbered(copied: list[Message], fresh: Callable[[], str]) -> list[Message]:
    """The copied messages under new ids, ``parent_id`` following within the copy; no log
    row is copied, so ``log_id`` is cleared."""
    ids = {m.id: fresh() for m in copied}
    return [
        m.model_copy(
            update={
                "id": ids[m.id],
                "parent_id": ids.get(m.parent_id) if m.parent_id is not None else None,
                "log_id": None,
            }
        )
        for m in copied
    ]


async def _files(store: Store, thread_id: str, copied: list[Message]) -> list[PortableFile]:
    """The files of ``thread_id`` that the copied messages' attachments name, at the same
    paths (so the copies' refs resolve in the fork); a file deleted since is skipped."""
    wanted = {a.path for m in copied for a in m.attachments or ()}
    out: list[PortableFile] = []
    for path in sorted(wanted):
        entry = await store.stat_file(thread_id, path)
        if entry is None or entry.is_directory or entry.storage == "url":
            continue
        content = await store.read_file(thread_id, path)
        if content is None:
            continue
        thumbnail = await store.get_file_thumbnail(thread_id, path)
        out.append(portable_file(entry, "file", content, thumbnail))
    return out


async def fork_thread(
    store: Store,
    thread_id: str,
    message_id: str,
    content: str | None = None,
    *,
    now_us: int,
    fresh: Callable[[], str] = new_id,
) -> Fork:
    """Fork ``thread_id`` at its message ``message_id`` (spec 08 §8.3.8); with ``content``,
    the copy of that message has this text instead. The new thread has the original's
    agent, origin agent, owner, tags, arguments and overlap policy, status ``idle`` since
    ``now_us``, and no run; the original is not written."""
    source = await store.get_thread(thread_id)
    if source is None:
        raise ThreadNotFound(thread_id)
    waiting = {e.id for e in await store.list_queue(thread_id)}
    page, _ = await store.read_page(
        thread_id, limit=None, offset=0, order="asc", include_silent=True, max_depth=None
    )
    history = [m for m in page if m.id not in waiting]
    copied = history_to(history, message_id)
    point = next(i for i, m in enumerate(copied) if m.id == message_id)
    if content is not None:
        if copied[point].role == "tool":
            raise InvalidField("content", "cannot replace a tool result's text")
        copied[point] = copied[point].model_copy(update={"content": content})
    messages = _renumbered(copied, fresh)
    fork_id = fresh()
    doc = ThreadExport(
        format=FORMAT,
        version=VERSION,
        root=fork_id,
        threads=[
            PortableThread(
                id=fork_id,
                agent_id=source.agent_id,
                origin_agent_id=source.origin_agent_id,
                user_id=source.user_id,
                tags=list(source.tags),
                arguments=dict(source.arguments),
                created_at_us=now_us,
                overlap=source.overlap,
                status=ThreadStatus(state="idle", since=now_us, reason=None),
                messages=messages,
                files=await _files(store, thread_id, copied),
            )
        ],
    )
    await store.fork_thread(doc, thread_id, message_id)
    row = await store.get_thread(fork_id)
    assert row is not None
    return Fork(row=row, message_id=messages[point].id, copied=len(messages))


__all__ = ["Fork", "fork_thread", "history_to"]
