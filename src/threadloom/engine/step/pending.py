"""A step's pending model message, held back from the store while its request is young.

Spec 04 §4.12.1 stores the pending message (with the LLM row of its first request) just
before the request is sent, and §4.13 finalises it when the answer is in: two commits a
model call. When the answer comes quickly — a local model, a cached reply, the scripted
model — nobody can have seen the pending message in between, and the first commit is
pure cost. So a step *holds* it: the message and its row stay in memory, registered as the
thread's deferred write (``ThreadHub.defer_write``), and are committed as before
(``durable=False``, published, their held chunks after them) at the first of

- ``EngineOptions.pending_hold_s`` after the request was sent (a timer);
- any other write to the thread: acquiring the thread's write lock runs the deferred
  write first, so commit order stays the order of the calls (a message injected during
  the request is stored after the pending message, as without the hold);
- a chunk or event of the step published while someone watches the thread's bus;
- a failure of the request (before its retry), a stop or a terminate of the step
  (``release``): the row's error and the settlement find the pair as they would have.

If none comes first, finalisation claims the held pair back (``ThreadHub.take_deferred``)
and inserts the completed message and its completed row in one transaction
(``finalise``): one commit a model call instead of two, and no ``pending`` event.

A model whose last answer outlasted the hold (a remote model, typically) is not held: its
next request's pending message is committed at once, as without the hold, until an answer
of it comes quicker. A step holds its pending message only when nothing could tell the
difference: no hook
that sees messages created or updated (``before_``/``after_create_message``,
``before_``/``after_update_message``), no subscriber on the thread's bus when the request
starts, and not a nested (sub-prompt) step. A crash while the pair is held loses it, as an
operating-system crash loses a pending message committed ``durable=False``
(docs/engine.md, "Durability"): recovery settles the run ``failed``/``execution_lost``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from threadloom.engine.env import StepEnv
from threadloom.records import LogRow, Message, copy_with
from threadloom.thread import messages as thread_messages

HOOKS_THAT_SEE_STORAGE = (
    "before_create_message",
    "after_create_message",
    "before_update_message",
    "after_update_message",
)


def may_hold(env: StepEnv, model: str) -> bool:
    """True when the step's pending message may be held back (see the module text) for a
    request to ``model``: not when the model's last answer outlasted the hold, where a
    hold would be bookkeeping for nothing."""
    if env.run.options.pending_hold_s <= 0 or env.nested is not None:
        return False
    if model in env.run.manager.slow_models:
        return False
    hub = env.state.hub
    if hub.holds_deferred(env.state.thread_id):  # an earlier step's, not yet run: one a thread
        return False
    if hub.bus.wants(env.state.thread_id):
        return False
    return env.run.hookless(env.execution) or not any(
        env.run.hooks_for(name, env.execution) for name in HOOKS_THAT_SEE_STORAGE
    )


class HeldPending:
    """The pending message and first LLM row of one step, not yet committed."""

    __slots__ = (
        "_task",
        "_timer",
        "env",
        "error",
        "held",
        "message",
        "publishes",
        "row",
        "stored_row",
        "writing",
    )

    def __init__(self, env: StepEnv, message: Message, row: LogRow) -> None:
        self.env = env
        self.message = message
        self.row = row
        self.held = True
        """Still held: neither committed nor claimed back."""
        self.writing = False
        """The pair is being committed: what the step publishes meanwhile still waits."""
        self.stored_row: LogRow | None = None
        """The row as committed, once the pair was."""
        self.error: BaseException | None = None
        """What committing the pair raised: the step raises it at its next store call."""
        self.publishes: list[tuple[str, dict[str, Any]]] = []
        """Chunks and events of the step published while held: sent after the pair."""
        # No reference cycle outlives the hold (a thousand held steps at once would leave
        # the garbage collector the whole of each step): the timer is dropped once it
        # fired or was cancelled, the task once it ended, and the hub keeps this object
        # itself (a bound method stored here would point back at it).
        self._task: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = loop.call_later(
            env.run.options.pending_hold_s, self._expired
        )
        env.state.hub.defer_write(env.state.thread_id, self)

    def _expired(self) -> None:
        self._timer = None
        self.commit_soon()

    def commit_soon(self) -> None:
        """Commit the pair from a task of its own (the timer, a watched publish)."""
        if self.held and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._commit())

    async def _commit(self) -> None:
        try:
            await self.release()
        finally:
            self._task = None

    async def release(self) -> bool:
        """Commit the pair now if it is still held, and wait for a commit of it under way
        (the lock is taken either way): ``True`` when the pair is stored; otherwise its
        commit failed with ``error``."""
        async with self.env.state.hub.lock(self.env.state.thread_id):
            pass  # acquiring the lock runs the deferred write, or waits for its runner
        return self.stored_row is not None

    def publish(self, kind: str, data: dict[str, Any]) -> bool:
        """Hold a publish of the step back until the pair is committed and published:
        ``True`` when it was held (the caller then does not publish it). A chunk that
        comes while the pair is being written waits too, or it would reach subscribers
        before the message it belongs to (spec 09 §9.8 rule 2)."""
        if not self.held and not self.writing:
            return False
        self.publishes.append((kind, data))
        self.commit_soon()
        return True

    def current(self, row: LogRow) -> LogRow:
        """``row`` (the step's first LLM row as handed out) as committed, if it was."""
        stored = self.stored_row
        return stored if stored is not None and stored.id == row.id else row

    async def write(self) -> None:
        """The deferred write, run under the thread's write lock: commit the pending
        message and its row as an unheld step would have, then publish what was held.
        Raises only a cancellation: a failure is kept for the step (``error``). It runs
        in a task of its own (``ThreadLock``), which no lock holder's cancellation cuts."""
        self._end_hold()
        env = self.env
        self.writing = True
        try:
            stored, row = await thread_messages.insert_locked(
                env.state, self.message, self.row, new_log=True, durable=False
            )
        except BaseException as exc:  # kept for the step; a cancellation (the loop closing)
            self.error = exc  # also goes on up
            self.writing = False
            self.publishes.clear()  # chunks of a message that was not stored
            if not isinstance(exc, Exception):
                raise
            return
        self.writing = False
        env.pending = stored
        self.stored_row = row
        current = env.current_log
        # A row the step completed meanwhile is newer than the one committed here.
        if current is not None and row is not None and current.id == row.id:
            env.current_log = current if current.is_complete else row
        hub, tid = env.state.hub, env.state.thread_id
        for kind, data in self.publishes:
            hub.publish(tid, kind, None, data)
        self.publishes.clear()

    async def finalise(
        self, fields: Mapping[str, Any], log: LogRow, reason: str | None
    ) -> Message | None:
        """Commit the completed message (the pending one with ``fields``) and its completed
        row ``log`` in one transaction instead of the pair, with the end-of-run check when
        ``reason`` ends the run; ``None`` when the pair is no longer held (committed:
        finalise it as usual)."""
        env = self.env
        hub, tid = env.state.hub, env.state.thread_id
        async with hub.lock(tid, run_deferred=False):
            if not hub.take_deferred(tid, self):
                return None
            self._end_hold()
            if not self.publishes:
                message = copy_with(self.message, fields)
                try:
                    if reason is not None:
                        return await env.run.finish_run_locked(message, log, reason, new=True)
                    stored, _ = await thread_messages.insert_locked(
                        env.state, message, log, new_log=True
                    )
                    return stored
                except Exception:
                    await self.write()  # what an unheld step had stored: the pair
                    raise
            # a watcher saw chunks of it: store the pair they imply, finalise it as usual
            await self.write()
            if self.error is not None:
                raise self.error
            return None

    __call__ = write
    """The hub runs the deferred write by calling this object."""

    def _end_hold(self) -> None:
        self.held = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def begin_attempt(env: StepEnv, row: LogRow) -> LogRow:
    """Store an attempt's LLM row; the first one together with the pending message."""
    if env.pending is None and env.pending_candidate is not None:
        if may_hold(env, row.model):  # committed later or with the answer (see above)
            env.pending = env.pending_candidate
            env.held = HeldPending(env, env.pending_candidate, row)
            return row
        # a pending placeholder and the row of a request not yet sent: state crash
        # recovery repairs, so its commit need not wait for the disk (docs/engine.md)
        env.pending, stored = await thread_messages.create_with_log(
            env.state, env.pending_candidate, row, durable=False
        )
        env.pending_candidate = None  # the stored copy is the step's from here on
        return stored
    # a retry: its request failed, which committed the held pair first (call_model)
    return await env.state.hub.insert_log(env.state.thread_id, row, fence=env.state.fence)


async def release_hold(env: StepEnv, *, raising: bool = True) -> None:
    """Commit the step's held pending message and its row now (a failure, a stop). When
    that commit failed the step has no pending message, and (``raising``) what it raised
    is raised here, as ``begin_attempt`` would have raised it without the hold."""
    held = env.held
    if held is None or await held.release():
        return
    env.pending = None
    if raising:
        assert held.error is not None
        raise held.error


def row_as_stored(env: StepEnv, row: LogRow) -> LogRow:
    """The step's LLM row ``row`` as committed, if its held pair was meanwhile."""
    return env.held.current(row) if env.held is not None else row


def publish_chunk(env: StepEnv, kind: str, message_id: str, chunk: str, offset: int) -> None:
    """Publish a chunk of the step's message (after its pending message if held)."""
    _publish(
        env, kind, {"message_id": message_id, "depth": env.depth, "chunk": chunk, "offset": offset}
    )


def publish_event(env: StepEnv, event_type: str, data: dict[str, Any]) -> None:
    """Publish an ephemeral event of the step (after its pending message if held)."""
    _publish(env, "event", {"event_type": event_type, "data": data})


def _publish(env: StepEnv, kind: str, data: dict[str, Any]) -> None:
    """Publish an ephemeral event of the step, after its pending message if held."""
    if not env.state.hub.bus.wants(env.state.thread_id):
        return  # an ephemeral event nobody would receive (the bus keeps no history)
    if env.held is not None and env.held.publish(kind, data):
        return
    env.state.hub.publish(env.state.thread_id, kind, None, data)
