"""The node's two contracts with the engine (spec 12).

``NodeHost`` is what the node's liveness loop and relay ask of the engine that runs the
threads: wake a thread, abort or drop runs, settle lost ones, answer a blocking call whose
child ran on another node. The engine implements it; the node never imports the engine.

``Peers`` is the other direction: what the engine's run manager tells the other nodes
(a stop of another node's run, a wake-up it will not take, a child's result no call here
waits for). The relay implements it; the runtime hands it to the run manager.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from threadloom.records import AttachmentRef


class RunView(Protocol):
    """What the relay reads of a run of this node."""

    @property
    def task(self) -> asyncio.Task[Any] | None:
        """The run's task (cancelled when its thread is deleted on another node)."""
        ...

    @property
    def partial(self) -> Mapping[str, str]:
        """The text generated so far, per message being generated."""
        ...

    @property
    def partial_reasoning(self) -> Mapping[str, str]:
        """The reasoning generated so far, per message being generated."""
        ...


class NodeHost(Protocol):
    """What the node's liveness and relay ask of the engine."""

    @property
    def closing(self) -> bool:
        """True once the runtime drains: it starts nothing more."""
        ...

    def wake(self, thread_id: str) -> None:
        """The thread has queued work: start its run unless one is active."""
        ...

    def owns(self, thread_id: str) -> bool:
        """Whether a run of the thread is registered or starting here."""
        ...

    def run_of(self, thread_id: str) -> RunView | None:
        """The thread's run registered here, if any."""
        ...

    async def abort(self, thread_id: str, reason: str) -> bool:
        """The abort procedure for the thread's run here (spec 04 §4.20.1)."""
        ...

    async def recover(
        self, *, mine: bool = False, threads: Collection[str] | None = None
    ) -> list[str]:
        """Settle the runs no live node runs (``Runtime.recover``)."""
        ...

    async def settle_lost(self, thread_id: str, reason: str) -> bool:
        """Settle the thread's run, whose node is dead, with ``reason`` and deliver its
        result; ``True`` when a run was settled (spec 12 §12.5 rule 4)."""
        ...

    async def resume_parked(self) -> None:
        """Start the runs of threads parked for approval whose approvals were all decided
        while no run started (the deciding node died in between, spec 14 §14.4)."""
        ...

    def drop_all(self) -> None:
        """Self-fencing: cancel every run without settling it, start none until
        ``resume``."""
        ...

    def resume(self) -> None:
        """The fence is lifted: runs start again."""
        ...

    def forget_cached(self) -> None:
        """The database failed over (spec 17 §17.5.3 rule 4): forget what is kept in memory
        of its rows (it may be ahead of an asynchronous standby's)."""
        ...

    def waiting(self) -> list[str]:
        """The children whose session result a blocking call here still waits for."""
        ...

    def answer(self, result: ChildResult) -> None:
        """Answer the blocking call waiting here for ``result.child_id`` (if any still
        does) with the session result another node delivered."""
        ...

    def parse_result(self, child_id: str, content: str) -> tuple[bool, str] | None:
        """(success, text) of a queued message that delivers child ``child_id``'s session
        result; ``None`` when it is not one."""
        ...


@dataclass
class ChildResult:
    """A child's session result, as one node tells another (spec 06 §6.8.2, spec 12)."""

    child_id: str
    parent_id: str
    success: bool
    text: str
    reason: str
    message_id: str | None = None
    queued_id: str | None = None
    """The parent's queue entry that delivers it (taken back where a call answers it)."""
    refs: list[AttachmentRef] = field(default_factory=list)
    """The attachments copied to the parent."""


class Peers(Protocol):
    """What the engine's run manager tells the other nodes (the relay)."""

    async def remote_abort(self, thread_id: str, reason: str) -> bool:
        """Have the owner of another node's run abort it, or settle it here when the
        owner is dead; ``True`` once its status left ``running``."""
        ...

    def refused_wake(self, thread_id: str) -> None:
        """This node will not start the thread's run (draining, fenced): another should."""
        ...

    def unwaited(self, result: ChildResult) -> None:
        """A child's result of a blocking relationship that no call here waits for (a
        call on the node running the parent may)."""
        ...
