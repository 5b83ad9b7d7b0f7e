"""Session results of child threads and their delivery to the parent (spec 06 §6.8).

At the end of every run of a child thread the engine derives a session result from the
run's reason code (§6.8.1). It reaches the parent in one of three ways: a parent tool
call waiting for it gets it as its result (blocking, §6.8.2); otherwise, with implicit
communication, it is queued into the parent as a silent message for the owning side
(§6.8.3); with explicit communication only the registry status changes (§6.8.4).

The child's run end, the registry update and the parent's queue entry commit in one
transaction (``ParentDelivery``); what follows the commit (waking the parent, answering
the waiting call, the child's hand-off note, ending a one-shot instance) is ``finish``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from threadloom.define.tool import ToolResult
from threadloom.errors import ThreadTerminated
from threadloom.node.host import ChildResult, Peers
from threadloom.records import AttachmentRef, Message, QueueEntry, SubagentRegistryEntry, new_id
from threadloom.store.base import ParentDelivery, ThreadRow
from threadloom.thread import messages as thread_messages
from threadloom.thread.hub import ThreadHub
from threadloom.thread.queue import enqueue
from threadloom.thread.state import ThreadState
from threadloom.thread.transfer import copy_attachments

logger = logging.getLogger("threadloom.engine")

ABORT_TEXTS = {
    "terminated": "Subagent was terminated.",
    "aborted_by_user": "Subagent execution was stopped by user.",
    "execution_lost": "Subagent execution was lost when the runtime restarted.",
}
"""Rules 4-6 of §6.8.1: failures whatever the agent binds."""

RETURNED = "has returned the following result"
FAILED = "has reported a failure"
ATTACHMENT_MARKERS = (
    "\n\nThe subagent also returned the following attachment:\n\n",
    "\n\nThe subagent also returned the following attachments:\n\n",
)
"""The parts of the parent's queued result message (§6.8.3)."""

FAILED_CODES = frozenset(("step_error", "repeated_tool_error", "aborted", "budget_exceeded"))
"""Rule 9: failures of an agent without terminal session tools."""


@dataclass
class SessionResult:
    """The outcome of one child run (§6.8.1); ``attachments`` are the child's refs and
    ``message_id`` the child message the text came from (``forwarded_from``)."""

    success: bool
    text: str
    reason: str
    attachments: list[AttachmentRef] = field(default_factory=list)
    message_id: str | None = None


def binds_session_tools(agent: Any) -> bool:
    """Whether either side of ``agent`` binds ``session_stop`` or ``session_fail``."""
    sides = (getattr(agent, "side_a", None), getattr(agent, "side_b", None))
    return any(
        side is not None and (side.session_stop is not None or side.session_fail is not None)
        for side in sides
    )


def abort_result(reason: str, agent: Any = None) -> SessionResult | None:
    """The session result of a run that did not end by itself (rules 4-7, 9)."""
    if reason in ABORT_TEXTS:
        return SessionResult(False, ABORT_TEXTS[reason], reason)
    if reason == "interrupted":
        return None  # the run that follows at once derives one
    return ended_result(reason, agent, None, None)


def ended_result(
    reason: str,
    agent: Any,
    ending: Message | None,
    final: Message | None,
    stop_text: str | None = None,
) -> SessionResult:
    """Rules 1-3 and 8-10: ``ending`` is the stored result of the successful
    ``session_stop``/``session_fail`` call, ``final`` the newest completed, non-silent,
    top-level user or assistant message of the run, ``stop_text`` the ``stop_session``
    result."""
    if reason in ("session_stop", "session_fail") and ending is not None:
        return SessionResult(
            reason == "session_stop",
            ending.content or "",
            reason,
            [a for a in ending.attachments or [] if isinstance(a, AttachmentRef)],
            ending.id,
        )
    if reason == "state_stop_session":
        return SessionResult(True, stop_text or "Session stopped.", reason)
    if reason in ABORT_TEXTS:
        return SessionResult(False, ABORT_TEXTS[reason], reason)
    if binds_session_tools(agent):
        return SessionResult(
            False,
            f"Subagent execution stopped before completion ({reason}). It did not call a "
            "terminal session tool (session_stop/session_fail).",
            reason,
        )
    if reason in FAILED_CODES:
        return SessionResult(False, f"Subagent execution failed ({reason}).", reason)
    if final is None:
        return SessionResult(True, "Subagent completed.", reason)
    refs = [a for a in final.attachments or [] if isinstance(a, AttachmentRef)]
    return SessionResult(True, final.content or "", reason, refs, final.id)


def final_message(history: Sequence[Message], since: int) -> Message | None:
    """Rule 10's message: newest completed, non-silent, top-level ``user``/``assistant``
    message created at or after ``since``."""
    for message in reversed(history):
        if message.created_at < since:
            return None
        if (
            message.status == "completed"
            and not message.silent
            and message.depth == 0
            and message.role in ("user", "assistant")
        ):
            return message
    return None


def result_text(reference: str, result: SessionResult, paths: Sequence[str]) -> str:
    """The parent's queued message (§6.8.3)."""
    head = RETURNED if result.success else FAILED
    text = f"Subagent (reference: {reference}) {head}:\n\n{result.text}"
    if len(paths) == 1:
        text += f"{ATTACHMENT_MARKERS[0]}{paths[0]}"
    elif paths:
        listing = "\n".join(paths)
        text += f"{ATTACHMENT_MARKERS[1]}{listing}"
    return text


def parse_result_text(reference: str, content: str) -> tuple[bool, str] | None:
    """``result_text``'s inverse: (success, the result's text) from a queued message that
    delivers the session result of child ``reference``; ``None`` when it is not one."""
    head = f"Subagent (reference: {reference}) "
    for success, said in ((True, RETURNED), (False, FAILED)):
        prefix = f"{head}{said}:\n\n"
        if content.startswith(prefix):
            text = content[len(prefix) :]
            cut = max(text.rfind(marker) for marker in ATTACHMENT_MARKERS)
            return success, text[:cut] if cut >= 0 else text
    return None


def waited_result(reference: str, result: SessionResult, copied: list[AttachmentRef]) -> ToolResult:
    """A blocking call's result (§6.8.2)."""
    suffix = f"\n\nReference: {reference}"
    if result.success:
        return ToolResult(status="success", result=result.text + suffix, attachments=copied)
    return ToolResult(status="error", error=result.text + suffix)


@dataclass
class Prepared:
    """A delivery ready to commit with the child's run end, and what follows it."""

    delivery: ParentDelivery
    entry: SubagentRegistryEntry
    result: SessionResult
    copied: list[AttachmentRef]
    waiter: asyncio.Future[ToolResult] | None
    fallback: QueueEntry | None = None
    """What is queued instead when the waiting call went away before the commit."""

    @property
    def handed_off(self) -> bool:
        """Whether the result reached the parent (waiting call or queue)."""
        return self.waiter is not None or self.delivery.entry is not None


class Parents(Protocol):
    """Where a child's session result goes, as the manager of the runs (``runs.py``'s
    ``RunManager``) keeps it: the hub, the parent calls waiting for a child's result, and
    the other nodes (a blocking result no call here waits for goes to them)."""

    @property
    def hub(self) -> ThreadHub: ...
    @property
    def waiters(self) -> dict[str, asyncio.Future[ToolResult]]: ...
    @property
    def peers(self) -> Peers | None: ...


async def prepare(
    manager: Parents, child: ThreadRow, result: SessionResult | None
) -> Prepared | None:
    """Everything the delivery needs before its transaction: the parent's entry, the
    attachments copied child → parent (§6.12), the waiting call or the queue entry."""
    hub, parent_id = manager.hub, child.parent_id
    if parent_id is None or result is None:
        return None
    entry = next(
        (e for e in await hub.store.get_registry(parent_id) if e.reference == child.id), None
    )
    parent = await hub.store.get_thread(parent_id)
    if entry is None or parent is None:
        return None
    copied: list[AttachmentRef] = []
    if result.attachments:
        try:
            copied = await copy_attachments(
                ThreadState(hub, child), ThreadState(hub, parent), result.attachments
            )
        except Exception:  # a full parent: the text still arrives
            logger.exception("thread %s: copying result attachments to the parent", child.id)
    waiter = manager.waiters.get(child.id)
    if waiter is not None and waiter.done():
        waiter = None
    status = "idle" if result.success else "failed"
    if result.reason == "terminated":
        status = "terminated"
    queued: QueueEntry | None = None
    if entry.parent_communication == "implicit" and parent.terminated is None:
        queued = QueueEntry(
            id=new_id(),
            role="assistant" if entry.owner == "b" else "user",
            content=result_text(child.id, result, [ref.path for ref in copied]),
            attachments=copied or None,
            silent=True,
            metadata={
                "subagent_id": child.id,
                "forwarded_from": {"thread_id": child.id, "message_id": result.message_id},
            },
            source="subagent",
            created_at=0,
        )
    delivery = ParentDelivery(parent_id, child.id, status, queued if waiter is None else None)
    return Prepared(delivery, entry, result, copied, waiter, queued)


def _child_result(child: ThreadRow, prepared: Prepared) -> ChildResult:
    """The result as the relay tells it to the node that may run the parent's call."""
    result, queued = prepared.result, prepared.delivery.entry
    return ChildResult(
        child.id,
        prepared.delivery.parent_id,
        result.success,
        result.text,
        result.reason,
        message_id=result.message_id,
        queued_id=queued.id if queued is not None else None,
        refs=list(prepared.copied),
    )


async def finish(manager: Parents, child: ThreadRow, prepared: Prepared | None) -> None:
    """After the delivery committed: the child's hand-off note, the end of a one-shot
    (non-resumable) instance (§6.3.4), then the parent: woken for its queue entry, or its
    waiting call answered — so the parent never sees a result before the child's side of
    it is done."""
    if prepared is None:
        return
    hub = manager.hub
    parent_id = prepared.delivery.parent_id
    state = ThreadState(hub, child)
    if prepared.handed_off:
        kind = "result" if prepared.result.success else "failure"
        try:
            await thread_messages.create(
                state,
                Message(
                    id=new_id(),
                    role="system",
                    content=f"{kind.capitalize()} forwarded to the parent thread.",
                    silent=True,
                    metadata={
                        "status_kind": "subagent_event",
                        "subagent_event": "parent_handoff",
                        "handoff_kind": kind,
                        "parent_thread_id": parent_id,
                    },
                ),
                propagate=False,
                require_live=False,
            )
        except Exception:
            logger.exception("thread %s: storing the hand-off note", child.id)
    if not prepared.entry.resumable:
        try:
            await state.terminate()
        except Exception:
            logger.exception("thread %s: ending the one-shot instance", child.id)
    if prepared.delivery.entry is not None:
        hub.signal_work(parent_id)
    waiter = prepared.waiter
    if waiter is None:
        if prepared.entry.blocking and manager.peers is not None:
            # a blocking call may wait on the node that runs the parent (spec 12)
            manager.peers.unwaited(_child_result(child, prepared))
    elif not waiter.done():
        waiter.set_result(waited_result(child.id, prepared.result, prepared.copied))
    elif waiter is not None and prepared.fallback is not None:
        # the call was cancelled between preparing and committing: deliver as if
        # non-blocking (§6.8.2), in a transaction of its own
        fallback = prepared.fallback
        fields = {k: getattr(fallback, k) for k in ("role", "content", "silent", "metadata")}
        try:
            await enqueue(
                hub, parent_id, {**fields, "attachments": fallback.attachments}, "subagent"
            )
        except ThreadTerminated:
            pass


__all__ = [
    "Prepared",
    "SessionResult",
    "abort_result",
    "ended_result",
    "final_message",
    "finish",
    "parse_result_text",
    "prepare",
    "result_text",
    "waited_result",
]
