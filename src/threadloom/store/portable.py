"""Threads that move (spec 21): a thread with its child-thread tree read from one store into
a portable file (``records/portable.py``), and such a file stored in another store as
history. Above no backend: the export reads through the Store protocol, the import is the
one write ``Store.import_threads``; new ids, when asked, are given here, consistently."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from threadloom.errors import ThreadBusy, ThreadNotFound
from threadloom.records import FileRecord, LogRow, Message, new_id
from threadloom.records.portable import (
    FORMAT,
    PortableCost,
    PortableFile,
    PortableFork,
    PortableThread,
    ThreadExport,
    b64,
    version_for,
)
from threadloom.store.base import Store, ThreadRow

IdMode = Literal["keep", "new"]
"""How an import treats the file's ids: ``keep`` them (an id already stored refuses the
import), or give every thread, message and log row a ``new`` one (spec 21 §21.4)."""


async def export_thread(store: Store, thread_id: str) -> ThreadExport:
    """The thread ``thread_id`` and its descendants as a portable file. ``ThreadNotFound``
    for an unknown thread; ``ThreadBusy`` while a thread of the tree runs (a file carries
    history, spec 21 §21.3)."""
    root = await store.get_thread(thread_id)
    if root is None:
        raise ThreadNotFound(thread_id)
    rows = [root, *await store.descendants(thread_id)]
    for row in rows:
        if row.status.state == "running":
            raise ThreadBusy(
                f"Thread {row.id} is running; export it when its run has ended", row.id
            )
    lineage: list[str] = []
    parent = root.parent_id
    while parent is not None and parent not in lineage:
        lineage.append(parent)
        above = await store.get_thread(parent)
        parent = above.parent_id if above is not None else None
    threads = [await _thread(store, row, is_root=row is root) for row in rows]
    return ThreadExport(
        format=FORMAT,
        version=version_for(threads),
        root=root.id,
        lineage=lineage,
        threads=threads,
    )


async def _thread(store: Store, row: ThreadRow, *, is_root: bool) -> PortableThread:
    tid = row.id
    waiting = {e.id for e in await store.list_queue(tid)}
    page, _ = await store.read_page(
        tid, limit=None, offset=0, order="asc", include_silent=True, max_depth=None
    )
    messages = [m for m in page if m.id not in waiting]
    logs = [
        r.model_copy(update={"request_delta": None}) for r in await store.list_logs(tid, limit=None)
    ]
    files: list[PortableFile] = []
    for entry in await store.list_entries(tid, "/"):
        kind: Literal["file", "link", "dir"] = (
            "dir" if entry.is_directory else "link" if entry.storage == "url" else "file"
        )
        content = await store.read_file(tid, entry.path) if kind == "file" else None
        thumbnail = await store.get_file_thumbnail(tid, entry.path) if kind == "file" else None
        files.append(portable_file(entry, kind, content or b"", thumbnail))
    return PortableThread(
        id=tid,
        agent_id=row.agent_id,
        origin_agent_id=row.origin_agent_id,
        user_id=row.user_id,
        tags=list(row.tags),
        parent_id=None if is_root else row.parent_id,
        arguments=dict(row.arguments),
        created_at_us=row.created_at_us,
        terminated=row.terminated,
        stopped=row.stopped,
        overlap=row.overlap,
        status=row.status,
        session_turns=(row.session_turns_a, row.session_turns_b),
        budgets=list(row.budgets),
        shared_state=await store.get_shared_state(tid),
        messages=messages,
        logs=logs,
        registry=await store.get_registry(tid),
        approvals=await store.list_approvals(tid),
        files=files,
        cost=_cost(logs),
        compactions=await store.list_compactions(tid),
        forked_from=_forked_from(row),
    )


def _forked_from(row: ThreadRow) -> PortableFork | None:
    """The thread's fork lineage as its row read it (the root's: a fork is a top-level
    thread, spec 08 §8.3.8, so a descendant's row, read without it, has none)."""
    if row.forked_from_thread_id is None or row.forked_from_message_id is None:
        return None
    return PortableFork(thread_id=row.forked_from_thread_id, message_id=row.forked_from_message_id)


def portable_file(
    entry: FileRecord,
    kind: Literal["file", "link", "dir"],
    content: bytes,
    thumbnail: bytes | None,
) -> PortableFile:
    """A file entry of a thread as a thread file carries it (spec 21), with its bytes and
    thumbnail (a file's; a link's and a directory's have none)."""
    return PortableFile(
        path=entry.path,
        kind=kind,
        mime_type=entry.mime_type,
        location=entry.location,
        size=entry.size,
        metadata=entry.metadata,
        width=entry.width,
        height=entry.height,
        created_at=entry.created_at,
        content=b64(content) if kind == "file" else None,
        thumbnail=None if thumbnail is None else b64(thumbnail),
    )


def _cost(logs: list[LogRow]) -> PortableCost:
    """The thread's cost from its log rows, summed in log order (spec 01 §1.10.2): LLM
    rows (``kind`` null) and the ``app_cost`` of application rows."""
    cost = PortableCost()
    for row in logs:
        if row.kind is None:
            cost.llm_cost += row.cost_total or 0.0
            cost.request_count += 1
            cost.input_tokens += row.input_tokens or 0
            cost.output_tokens += row.output_tokens or 0
        elif row.kind == "app" and row.app_cost is not None:
            cost.app_cost += row.app_cost
    return cost


async def import_thread(store: Store, doc: ThreadExport, ids: IdMode = "keep") -> ThreadExport:
    """Store ``doc``'s threads as history (no run starts) in one transaction; returns the
    document as stored (with ``ids="new"``, under its new ids). ``ThreadExists`` names an
    id already stored (``ids="keep"``); nothing is written then."""
    if ids == "new":
        doc = renumber(doc)
    await store.import_threads(doc)
    return doc


def renumber(doc: ThreadExport, fresh: Callable[[], str] = new_id) -> ThreadExport:
    """``doc`` with a new id for every thread, message and log row, each reference to one
    of them changed with it (spec 21 §21.4); tool call ids and file paths stay, and so does
    a fork lineage naming a thread that is not in the file."""
    threads: dict[str, str] = {t.id: fresh() for t in doc.threads}
    messages: dict[str, str] = {m.id: fresh() for t in doc.threads for m in t.messages}
    logs: dict[str, str] = {r.id: fresh() for t in doc.threads for r in t.logs}

    def th(value: str | None) -> str | None:
        return None if value is None else threads.get(value, value)

    def msg(value: str | None) -> str | None:
        return None if value is None else messages.get(value, value)

    def log(value: str | None) -> str | None:
        return None if value is None else logs.get(value, value)

    out: list[PortableThread] = []
    for t in doc.threads:
        status = t.status
        if status.error is not None and status.error.log_id is not None:
            status = status.model_copy(
                update={
                    "error": status.error.model_copy(update={"log_id": log(status.error.log_id)})
                }
            )
        out.append(
            t.model_copy(
                update={
                    "id": threads[t.id],
                    "parent_id": th(t.parent_id),
                    "status": status,
                    "budgets": [b.model_copy(update={"owner": th(b.owner)}) for b in t.budgets],
                    "messages": [_message(m, th, msg, log) for m in t.messages],
                    "logs": [
                        r.model_copy(
                            update={
                                "id": logs[r.id],
                                "message_id": msg(r.message_id),
                                "parent_log_id": log(r.parent_log_id),
                                "retry_of_log_id": log(r.retry_of_log_id),
                            }
                        )
                        for r in t.logs
                    ],
                    "registry": [
                        e.model_copy(update={"reference": th(e.reference)}) for e in t.registry
                    ],
                    "approvals": [
                        a.model_copy(
                            update={"thread_id": threads[t.id], "message_id": msg(a.message_id)}
                        )
                        for a in t.approvals
                    ],
                    "forked_from": None
                    if t.forked_from is None
                    else PortableFork(
                        thread_id=th(t.forked_from.thread_id) or t.forked_from.thread_id,
                        message_id=msg(t.forked_from.message_id) or t.forked_from.message_id,
                    ),
                    "compactions": [
                        c.model_copy(
                            update={
                                "id": fresh(),
                                "thread_id": threads[t.id],
                                "first_message_id": msg(c.first_message_id),
                                "last_message_id": msg(c.last_message_id),
                            }
                        )
                        for c in t.compactions
                    ],
                }
            )
        )
    return doc.model_copy(update={"root": threads[doc.root], "threads": out})


def _message(
    m: Message,
    th: Callable[[str | None], str | None],
    msg: Callable[[str | None], str | None],
    log: Callable[[str | None], str | None],
) -> Message:
    update: dict[str, Any] = {
        "id": msg(m.id),
        "parent_id": msg(m.parent_id),
        "log_id": log(m.log_id),
        "subagent_id": th(m.subagent_id),
    }
    metadata = m.metadata
    if metadata is not None and isinstance(metadata.get("subagent_id"), str):
        update["metadata"] = {**metadata, "subagent_id": th(metadata["subagent_id"])}
    return m.model_copy(update=update)
