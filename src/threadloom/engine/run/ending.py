"""How a run ends: the end-of-run check, the abort procedure and its settlement, a run
lost with its node, a run broken by a store that could not be written, a lease lost,
self-fencing (spec 04 §4.7.3, §4.20.1, §4.21.1; spec 12 §12.3.3, §12.5, §12.6.3).

The manager of the runs (``runs.py``'s ``RunManager``) starts runs; these functions end
them, and its methods of the same names call them. They see the manager through
:class:`Runs`: its registered runs, its flags and the few entry points an ending needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from threadloom.engine.run import results
from threadloom.engine.run.loop import RUN_FAILED, Run
from threadloom.errors import LeaseLost
from threadloom.metrics import Metrics
from threadloom.records import FAILED_REASONS, LogRow, Message, StatusError, ThreadStatus
from threadloom.store.base import LOST_RUN, RunEnd, Settlement
from threadloom.thread.lock import ThreadLock

PARKS = frozenset({"awaiting_approval", "awaiting_client_tool"})
"""Reasons a run ends on calls that wait (a person's approval, spec 14; the client's
result, spec 13 §13.7): the queue waits with them, it is not delivered at once."""

logger = logging.getLogger("threadloom.engine")


class Runs(results.Parents, Protocol):
    """What ending a run needs of the manager of the runs (``runs.py``'s ``RunManager``)."""

    fenced: bool
    """True while this node has fenced itself: no run starts (``drop_all`` sets it)."""
    metrics: Metrics

    @property
    def closing(self) -> bool: ...
    @property
    def active(self) -> dict[str, Run]: ...
    @property
    def background(self) -> set[asyncio.Task[Any]]: ...
    def gate(self, thread_id: str) -> ThreadLock: ...
    def owns(self, thread_id: str) -> bool: ...
    def wake(self, thread_id: str) -> None: ...
    async def start(
        self,
        thread_id: str,
        *,
        side: str = "a",
        force: bool = False,
        keep_status: bool = False,
        spawn: bool = True,
    ) -> Run | None: ...


@dataclass(frozen=True)
class AbortKind:
    reason: str
    note: str
    log_error: str
    log_error_type: str
    write_note: bool
    status_kind: str | None


ABORTS: Mapping[str, AbortKind] = {
    "aborted_by_user": AbortKind(
        "aborted_by_user",
        "Execution stopped by user",
        "Interrupted by user",
        "user_interrupted",
        True,
        "stopped_by_user",
    ),
    "interrupted": AbortKind(
        "interrupted",
        "Execution interrupted by a new message",
        "Interrupted by user",
        "user_interrupted",
        False,
        None,
    ),
    "terminated": AbortKind(
        "terminated",
        "Thread terminated",
        "Thread terminated",
        "user_interrupted",
        True,
        "terminated",
    ),
    "aborted": AbortKind(
        "aborted",
        "Execution aborted: the runtime is shutting down",
        "Execution aborted: the runtime is shutting down",
        "interrupted_incomplete",
        False,
        None,
    ),
}


def _unfence(run: Run) -> None:
    """Stop fencing ``run``'s writes with its lease, now released (the writes that follow
    a run's end — a hand-off note, a one-shot child's end — are no execution's)."""
    run.fence = None


async def end_of_run(manager: Runs, run: Run, reason: str) -> bool:
    """The end-of-run check (spec 04 §4.7.3): ``True`` → run again at once."""
    tid = run.thread_id
    if run.ended is not None:  # committed with the run's last message (finish_run)
        settled = run.ended[1]
        if settled:
            _unfence(run)
            release(manager, run)
            await _resumed_ended(manager, run)
        else:
            run.ended = None
        return not settled
    prepared = await results.prepare(manager, run.row, run.session_result(reason))
    one_shot = prepared is not None and not prepared.entry.resumable
    async with manager.hub.lock(tid):
        async with _parent_lock(manager, prepared):
            settled, events = await run.store.end_run(
                tid,
                reason,
                (run.session["a"], run.session["b"]),
                not (manager.closing or one_shot or reason in PARKS),
                prepared.delivery if prepared is not None else None,
                run.failure,
            )
            await manager.hub.publish_events(events)
        if settled:
            run.finished = True
            manager.active.pop(tid, None)
            _unfence(run)  # the lease is released: later writes are no execution's
    if settled:
        await _resumed_ended(manager, run)
    await results.finish(manager, run.row, prepared)
    return not settled


async def _resumed_ended(manager: Runs, run: Run) -> None:
    """A run that resumed a lost one ended: the thread's resumes in a row start again
    from 0 (spec 16 §16.5). A failed write leaves the count as it is (a later lost run
    is then settled for good sooner, never resumed more often)."""
    if not run.resumed:
        return
    run.resumed = False
    try:
        await manager.hub.store.clear_resumes(run.thread_id)
    except Exception as exc:
        logger.warning("thread %s: clearing its count of resumes failed: %s", run.thread_id, exc)


def release(manager: Runs, run: Run) -> None:
    """Forget a run whose end-of-run check settled with its last message; wakes that
    arrived meanwhile start the next run."""
    run.finished = True
    if manager.active.get(run.thread_id) is run:
        del manager.active[run.thread_id]
    if run.rewake:
        run.rewake = False
        manager.wake(run.thread_id)


async def finish_run(
    manager: Runs, run: Run, message: Message, log: LogRow, reason: str
) -> Message:
    """Finalise the run's last model message with its LLM row and commit the end-of-run
    check with them (one transaction), when the step is known to end the run with
    ``reason`` and no update hook runs (see ``step.ends_with``)."""
    async with manager.hub.lock(run.thread_id):
        return await finish_run_locked(manager, run, message, log, reason)


async def finish_run_locked(
    manager: Runs, run: Run, message: Message, log: LogRow, reason: str, *, new: bool = False
) -> Message:
    """``finish_run`` under the thread's write lock, which the caller holds; ``new``:
    the message and its row are inserted (``Store.finish_run``). Publishes, in commit
    order, the log and the message, then the step's ``step_completed`` and
    ``stopped`` telemetry, then the settled status, as a separate end-of-run check
    would."""
    tid = run.thread_id
    end = RunEnd(reason, (0, 0), not manager.closing)
    stored, log, settled, events = await run.store.finish_run(tid, message, log, end, new=new)
    pair, status = events[:2], events[2:]
    stored = (await manager.hub.project(tid, [stored]))[0]
    for event in pair:
        if event.kind == "log":
            manager.hub.publish_log(tid, event.seq, log)
        else:
            manager.hub.publish_message(event, stored)
    if run.listened:
        run.publish_telemetry("step_completed", step=run.run_steps, stopped=True)
        run.publish_telemetry("stopped", reason=reason, side=run.side)
    await manager.hub.publish_events(status)
    run.ended = (reason, settled)
    return stored


def _parent_lock(manager: Runs, prepared: results.Prepared | None) -> Any:
    """The parent's write lock for a delivery (always taken child first, then parent)."""
    if prepared is None:
        return contextlib.nullcontext()
    return manager.hub.lock(prepared.delivery.parent_id)


# -- aborting ----------------------------------------------------------------------
async def abort(manager: Runs, thread_id: str, reason: str) -> bool:
    """The abort procedure (spec 04 §4.20.1); ``True`` when a run was settled. Where
    several nodes share the store, a run of another node is aborted by its owner (or,
    when the owner is dead, settled here) as spec 12 §12.5 says."""
    run = manager.active.get(thread_id)
    if run is None or run.task is None:
        if manager.hub.store.shared and manager.peers is not None:
            return await manager.peers.remote_abort(thread_id, reason)
        return False
    if run.abort_reason is None:
        run.abort_reason = reason
        run.task.cancel()
    await asyncio.wait([run.task])
    if run.finished or run.settled:
        return False
    await settle(manager, run, reason)
    return True


async def settle(manager: Runs, run: Run, reason: str) -> None:
    """Commit the settlement of an aborted run: records first, status last."""
    kind = ABORTS[reason]
    tid = run.thread_id
    run.settled = True
    prepared = await results.prepare(manager, run.row, results.abort_result(reason, run.agent))
    await manager.hub.store.set_session_turns(tid, run.session["a"], run.session["b"])
    settlement = Settlement(
        since=run.started_at,
        partial_text=run.partial_texts(),
        tool_result_text=kind.note,
        log_error=kind.log_error,
        log_error_type=kind.log_error_type,
        note=kind.note if kind.write_note else None,
        note_status_kind=kind.status_kind,
        reason=None if reason == "interrupted" else reason,
        delivery=prepared.delivery if prepared is not None else None,
    )
    async with manager.hub.lock(tid):
        async with _parent_lock(manager, prepared):
            try:  # the owner's write, from any task: fenced
                events = await run.store.settle_run(tid, settlement)
            except LeaseLost:  # taken over meanwhile: the new owner settles it
                events = []
                prepared = None
            await manager.hub.publish_events(events)
        manager.active.pop(tid, None)
    _unfence(run)
    if events:
        await _resumed_ended(manager, run)
        manager.metrics.run_ended(reason, reason in FAILED_REASONS)
    if reason == "aborted" and events:
        logger.error(
            "thread %s (agent %s): the run failed: the runtime shut down before it"
            " finished; settled failed/aborted",
            tid,
            run.agent.name,
            extra=RUN_FAILED,
        )
    await results.finish(manager, run.row, prepared)
    if run.listened:
        run.publish_telemetry("stopped", reason=reason, side=run.side)
    if reason == "aborted_by_user":
        manager.hub.publish(tid, "stopped_by_user", None, {})
    if reason == "interrupted" and await manager.start(tid, keep_status=True) is None:
        async with manager.hub.lock(tid):
            event = await manager.hub.store.set_status(
                tid, ThreadStatus.settled("interrupted", manager.hub.clock())
            )
            await manager.hub.publish_events([event])


class Lost(NamedTuple):
    """A lost run settled (``settle_lost``): the thread as it was, what ``results.finish``
    then delivers, and the number of the resume it gets (spec 16; 0: none)."""

    row: Any
    prepared: results.Prepared | None
    resume: int = 0


async def settle_lost(manager: Runs, thread_id: str, reason: str = "execution_lost") -> Lost | None:
    """Settle the thread's run when no live node runs it (spec 12 §12.6.3), taking
    its lease: ``execution_lost``, or the abort a user asked for (spec 12 §12.5 rule
    4); returns what ``results.finish`` then delivers, ``None`` when nothing was
    settled (not running, a live node holds it, or this node runs it after all). A
    run lost by an agent with ``on_lost="resume"`` is left to be resumed (spec 16):
    ``Lost.resume`` says so, and the caller starts it (``RunManager.resume``)."""
    async with manager.gate(thread_id):  # no run of this node starts meanwhile
        if manager.owns(thread_id):
            return None  # this node runs it (or is starting it): not lost
        return await _settle_lost(manager, thread_id, reason)


async def _settle_lost(manager: Runs, thread_id: str, reason: str) -> Lost | None:
    row = await manager.hub.store.get_thread(thread_id)
    if row is None:
        return None
    agent = manager.hub.definitions.agent(row.agent_id)
    if reason == "execution_lost" and agent is not None and agent.on_lost == "resume":
        return await _settle_resumable(manager, row, agent)
    settlement = LOST_RUN
    if reason != "execution_lost":
        kind = ABORTS[reason]
        settlement = replace(
            LOST_RUN,
            tool_result_text=kind.note,
            log_error=kind.log_error,
            log_error_type=kind.log_error_type,
            note=kind.note if kind.write_note else None,
            note_status_kind=kind.status_kind,
            reason=reason,
        )
    beat = await _last_heartbeat(manager, thread_id)
    # a lost child run's session result reaches its parent (spec 06 §6.11)
    prepared = await results.prepare(manager, row, results.abort_result(reason))
    delivery = prepared.delivery if prepared is not None else None
    async with manager.hub.lock(thread_id):
        events = await manager.hub.store.settle_run(
            thread_id, replace(settlement, delivery=delivery)
        )
        await manager.hub.publish_events(events)
    if not events:
        return None
    manager.metrics.run_ended(reason, reason in FAILED_REASONS)
    manager.metrics.lost_run(reason, None if beat is None else time.time() - beat)
    if reason == "execution_lost":
        logger.error(
            "thread %s (agent %s): the run failed: it was lost when the process running"
            " it stopped; settled failed/execution_lost",
            thread_id,
            row.agent_id,
            extra=RUN_FAILED,
        )
    if reason == "aborted_by_user":
        manager.hub.publish(thread_id, "stopped_by_user", None, {})
    return Lost(row, prepared)


async def _last_heartbeat(manager: Runs, thread_id: str) -> float | None:
    """When the node holding the lost run's lease last heartbeat (seconds since the epoch,
    the database's clock), for the settle time of lost runs (spec 17 §17.1); None where
    nodes keep no heartbeat (SQLite) or it cannot be read."""
    try:
        return await manager.hub.store.lease_heartbeat(thread_id)
    except Exception:  # a metric is never a reason not to settle
        return None


async def _settle_resumable(manager: Runs, row: Any, agent: Any) -> Lost | None:
    """Settle a lost run of an agent that resumes (spec 16 §16.3): ``failed`` /
    ``execution_lost`` as any lost run, its top-level tool calls left open for the
    resumed run; settled for good once ``max_resumes`` resumes in a row were lost."""
    thread_id = row.id
    beat = await _last_heartbeat(manager, thread_id)
    prepared = await results.prepare(manager, row, results.abort_result("execution_lost"))
    settlement = replace(
        LOST_RUN,
        resume_limit=agent.max_resumes,
        delivery=prepared.delivery if prepared is not None else None,
    )
    async with manager.hub.lock(thread_id):
        settled = await manager.hub.store.settle_resumable(thread_id, settlement)
        await manager.hub.publish_events(settled.events)
    if not settled.events:
        return None
    manager.metrics.run_ended("execution_lost", True)
    manager.metrics.lost_run("execution_lost", None if beat is None else time.time() - beat)
    if settled.resume:
        logger.warning(
            "thread %s (agent %s): the run was lost when the process running it stopped;"
            " settled failed/execution_lost and resumed (%d of at most %d in a row)",
            thread_id,
            row.agent_id,
            settled.resume,
            agent.max_resumes,
        )
        return Lost(row, None, settled.resume)
    logger.error(
        "thread %s (agent %s): the run failed: it was lost when the process running"
        " it stopped; settled failed/execution_lost%s",
        thread_id,
        row.agent_id,
        ""
        if row.stopped or row.terminated
        else f" ({agent.max_resumes} resumes in a row: not resumed)",
        extra=RUN_FAILED,
    )
    return Lost(row, prepared)


MEND_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
"""Waits between attempts to settle a broken run (the last one repeats)."""

BROKEN = Settlement(
    tool_result_text="Execution failed: the run's writes failed before this tool call finished.",
    log_error="Request failed: the run's writes failed before its response was stored.",
    log_error_type="interrupted_incomplete",
    reason="step_error",
    only_if_running=True,
)
"""The settlement of a broken run (spec 04 §4.21.1)."""


def broken(manager: Runs, run: Run, exc: BaseException) -> None:
    """``run``'s task ended with an exception that its own handling could not record —
    the end-of-run commit failed, most often because the store is unreachable (a database
    restart) — so its status is still ``running`` under this node's lease. It stays
    registered (nothing starts over it; sends queue behind it) and is settled
    ``failed``/``step_error`` as soon as the store takes the writes, with the error that
    broke it; then its queue is delivered (spec 04 §4.21.1)."""
    if run.failure is None:
        run.failure = StatusError.of_exception(exc, None)
    logger.error(
        "thread %s (agent %s): the run broke: %s: %s; it is settled failed/step_error once"
        " the store takes writes again",
        run.thread_id,
        run.agent.name,
        type(exc).__name__,
        exc,
        extra=RUN_FAILED,
    )
    task = asyncio.get_running_loop().create_task(_mend(manager, run))
    manager.background.add(task)
    task.add_done_callback(manager.background.discard)


async def _mend(manager: Runs, run: Run) -> None:
    """Try to settle the broken ``run`` until it is settled (here or by anyone else), its
    lease is lost, or the node drops it (fenced, closing)."""
    attempt = 0
    while not (run.settled or run.finished) and manager.active.get(run.thread_id) is run:
        try:
            if await _settle_broken(manager, run):
                return
        except LeaseLost:
            lease_lost(manager, run)
            return
        except Exception as exc:
            if attempt == 0:
                logger.warning("thread %s: settling the broken run failed: %s", run.thread_id, exc)
        await asyncio.sleep(MEND_BACKOFF_S[min(attempt, len(MEND_BACKOFF_S) - 1)])
        attempt += 1


async def _settle_broken(manager: Runs, run: Run) -> bool:
    """One attempt: the step error's log row if it was not written, then the settlement,
    then the delivery of the thread's queue; ``False`` when the store refused a write."""
    hub, tid = manager.hub, run.thread_id
    store = run.store  # the owner's writes, from this task: fenced
    if run.unwritten_row is not None:
        stored = await hub.write_runtime_log(
            tid, run.unwritten_row, run.root_message_id, fence=run.fence
        )
        if stored is None:
            return False
        run.unwritten_row = None
        if run.failure is not None and run.failure.log_id is None:
            run.failure = run.failure.model_copy(update={"log_id": stored.id})
    prepared = await results.prepare(manager, run.row, run.session_result("step_error"))
    await store.set_session_turns(tid, run.session["a"], run.session["b"])
    settlement = replace(
        BROKEN,
        since=run.started_at,
        partial_text=run.partial_texts(),
        error=run.failure,
        delivery=prepared.delivery if prepared is not None else None,
    )
    async with hub.lock(tid):
        async with _parent_lock(manager, prepared):
            if run.settled or run.finished:
                return True
            events = await store.settle_run(tid, settlement)
            run.settled = True
            await hub.publish_events(events)
        if events:
            manager.metrics.run_ended("step_error", True)
        if manager.active.get(tid) is run:
            del manager.active[tid]
    await results.finish(manager, run.row, prepared if events else None)
    manager.wake(tid)  # what was sent meanwhile
    return True


def lease_lost(manager: Runs, run: Run) -> None:
    """A fenced write of ``run`` found its lease gone (spec 12 §12.3.3): another node
    took the thread over, or it was deleted. The run ends here, writing nothing more."""
    logger.warning("thread %s: lease lost, its execution stops here", run.thread_id)
    run.finished = True
    if manager.active.get(run.thread_id) is run:
        del manager.active[run.thread_id]


def drop_all(manager: Runs) -> None:
    """Self-fencing (spec 12 §12.2 rule 4): cancel every run without settling it (the
    node cannot write; another node settles it as lost) and start none until
    ``fenced`` is lifted."""
    manager.fenced = True
    for run in list(manager.active.values()):
        run.finished = True
        if run.task is not None:
            run.task.cancel()
    manager.active.clear()


async def terminate_hook(manager: Runs, thread_id: str, reason: str, from_inside: bool) -> None:
    run = manager.active.get(thread_id)
    if run is None:
        if manager.hub.store.shared and manager.peers is not None:
            await manager.peers.remote_abort(thread_id, reason)
        return
    if from_inside:
        run.terminate_requested = True  # the run ends at its next checkpoint
        return
    await abort(manager, thread_id, reason)
