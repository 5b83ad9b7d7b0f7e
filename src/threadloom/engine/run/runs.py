"""Who runs which thread: the start gate, the entry points (send, continue, stop) and
graceful shutdown (spec 04 §4.7, §4.20).

One asyncio task per running thread, never two (the start gate). Every entry point that
might start a run goes through :meth:`RunManager.start`; an active run satisfies the
request by delivering the queue at its next step. How a run ends — the end-of-run check,
an abort and its settlement, a lost run — is ``ending.py``: the manager's methods of the
same names call its functions, which see the manager through ``ending.Runs``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.define.registry import ResolvedTool
from threadloom.define.tool import ToolResult
from threadloom.engine.options import EngineOptions
from threadloom.engine.request.request_head import Heads
from threadloom.engine.run import ending
from threadloom.engine.run.budget import Quotas
from threadloom.engine.run.client_tools import ClientTool, offered
from threadloom.engine.run.compaction import Compactor
from threadloom.engine.run.loop import Run
from threadloom.engine.step.threads import ToolThreads
from threadloom.engine.step.tools import ToolInvoker
from threadloom.engine.telemetry import Tracing
from threadloom.errors import InvalidArgument, ThreadBusy, ThreadNotFound, ThreadTerminated
from threadloom.metrics import Metrics
from threadloom.node.host import Peers
from threadloom.providers.base import ProviderRegistry
from threadloom.records import LogRow, Message, QueueEntry, ThreadStatus, new_id
from threadloom.store.base import Fence, RunBegin, StoredEvent, ThreadRow
from threadloom.thread.hub import ThreadHub
from threadloom.thread.lock import ThreadLock
from threadloom.thread.queue import enqueue
from threadloom.thread.validate import check_queue


def _wake(waiter: asyncio.Future[None], _task: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _until_done(task: asyncio.Future[Any]) -> None:
    """Wait until ``task`` is done, neither taking on its outcome nor cancelling it when
    the waiter is cancelled: ``asyncio.wait([task])`` without its sets and loops."""
    if task.done():
        return
    waiter: asyncio.Future[None] = task.get_loop().create_future()
    wake = functools.partial(_wake, waiter)
    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)


class RunManager:
    """The runs of one runtime: at most one per thread."""

    def __init__(self, hub: ThreadHub, providers: ProviderRegistry, options: EngineOptions) -> None:
        self.hub = hub
        self.providers = providers
        self.options = options
        self.quotas = Quotas()
        """The user quotas (spec 15 §15.4), read at most every 30 s by the runs."""
        self.request_heads: Heads = {}
        """The constant parts of model requests (``request_head.head_for``)."""
        self.slow_models: set[str] = set()
        """Models whose last answer outlasted ``options.pending_hold_s``: their next
        request's pending message is committed at once (``engine/step/pending.py``)."""
        self.active: dict[str, Run] = {}
        """The runs registered here, by thread id (one a thread)."""
        self._gates: dict[str, list[Any]] = {}  # the start gates, dropped when unused
        self.background: set[asyncio.Task[Any]] = set()
        self._starting: dict[str, asyncio.Task[Any]] = {}
        self.closing = False
        self.fenced = False
        """True while this node has fenced itself (``node/liveness.py``): no run starts."""
        self.runs_threads = True
        """False in a runtime opened ``exclusive=False``: it never starts a run (the process
        that owns the file does); what it queues waits for that process."""
        self.waiters: dict[str, asyncio.Future[ToolResult]] = {}
        """Blocking parent calls waiting for a child's next session result, by child id."""
        hub.wake = self.wake
        hub.abort_run = self._terminate_hook
        hub.resume_decided = self.resume_decided
        self.peers: Peers | None = None
        """Set where several nodes share the store (``node/relay.py``, by the runtime):
        what this node tells the others — a stop of another node's run (spec 12 §12.5), a
        woken thread it will not run (draining), a child's session result for a blocking
        relationship that no call here waits for (one on another node may)."""
        self.threads = ToolThreads()
        """The worker threads of plain ``def`` tools, ended by :meth:`close`."""
        self.tracing: Tracing | None = None
        """The runtime's OpenTelemetry spans; ``None`` (set once, by ``Runtime.open``) when
        it does not trace (``engine/telemetry.py``)."""
        self.metrics = Metrics()
        self.compactor = Compactor(hub, providers)
        """Compaction of threads (spec 23): the threshold trigger and explicit calls."""
        hub.compactor = self.compactor
        """The runtime's Prometheus instruments (``threadloom/metrics.py``): a few counter
        increments where a run, a turn, a model request or a tool call ends."""
        hub.tool_invoker = ToolInvoker(hub, self.threads)
        self.client_tools: dict[str, list[ResolvedTool]] = {}
        """Client tools (spec 13 §13.7) for the next run of a thread launched here, by
        thread id: set by a request that offers them, taken by ``_launch``."""
        self._registry_key: tuple[Any, int, int] | None = None
        self._registry_answers = (False, False)
        """``(an agent can run, a create hook exists)`` for the registry state in
        ``_registry_key`` (definitions object, generation, hooks version)."""

    # -- starting ----------------------------------------------------------------------
    def running(self, thread_id: str) -> bool:
        return thread_id in self.active

    def run_of(self, thread_id: str) -> Run | None:
        return self.active.get(thread_id)

    def owns(self, thread_id: str) -> bool:
        """Whether a run of the thread is registered or starting here."""
        return thread_id in self.active or thread_id in self._starting

    def wake(self, thread_id: str) -> None:
        """A thread has queued work: start a run unless one is active (it will deliver)."""
        if self.closing or self.fenced or not self.runs_threads or thread_id in self._starting:
            if (self.closing or self.fenced) and self.peers is not None:
                self.peers.refused_wake(thread_id)  # another node should run it
            return
        run = self.active.get(thread_id)
        if run is not None:
            if run.ended is not None:  # its end-of-run check is committed: run again after
                run.rewake = True
            return
        task = asyncio.get_running_loop().create_task(self._start_and_run(thread_id))
        self._starting[thread_id] = task
        self.background.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self.background.discard(finished)
            if self._starting.get(thread_id) is finished:
                del self._starting[thread_id]

        task.add_done_callback(done)

    async def _start_and_run(self, thread_id: str) -> None:
        """A woken thread's task: the start gate, then the run in this same task (no
        second task, no extra turn of the event loop before the first step)."""
        run = await self.start(thread_id, spawn=False)
        if self._starting.get(thread_id) is asyncio.current_task():
            del self._starting[thread_id]  # from here on the run stands for the thread
        if run is not None:
            await run.execute()

    async def wait_idle(self, thread_id: str) -> None:
        """Return once the thread has no run starting or running. A task that is done but
        still registered (its run not yet settled or released, which other tasks do) is
        waited out with a short sleep: the loop must get to run them."""
        while True:
            starting = self._starting.get(thread_id)
            if starting is not None and not starting.done():
                await _until_done(starting)
                continue
            run = self.active.get(thread_id)
            if run is not None and run.task is not None and not run.task.done():
                await _until_done(run.task)
                continue
            if run is None:
                return
            await asyncio.sleep(0.001)

    @property
    def open_gates(self) -> int:
        """Start gates held or awaited right now (none are kept for idle threads)."""
        return len(self._gates)

    def gate(self, thread_id: str) -> ThreadLock:
        """The thread's start gate: no run of it starts here while it is held."""
        return ThreadLock(self._gates, thread_id)

    async def start(
        self,
        thread_id: str,
        *,
        side: str = "a",
        force: bool = False,
        keep_status: bool = False,
        spawn: bool = True,
        only_parked: bool = False,
        only_resumed: bool = False,
    ) -> Run | None:
        """Start a run if none is active and there is work (or ``force``: a continue);
        ``spawn=False``: the caller's task runs it (``run.execute()``).

        One transaction checks the thread (not terminated, not stopped, entries waiting,
        a runnable agent), writes the ``running`` status and — when no create hook can
        apply — delivers the waiting entries (spec 04 §4.10 for the run's first step)."""
        if not self.runs_threads or not self._registry()[0]:
            return None  # thread-core use, or a shared runtime: queues just wait
        async with self.gate(thread_id):
            if thread_id in self.active or self.closing or self.fenced:
                return None
            status = (
                None
                if keep_status
                else ThreadStatus(state="running", since=self.hub.clock(), reason=None)
            )
            deliver = not self.create_hooks_registered()
            async with self.hub.lock(thread_id):
                begun = await self.hub.store.begin_run(
                    thread_id,
                    status=status,
                    force=force,
                    deliver=deliver,
                    runnable=self._runnable,
                    only_parked=only_parked,
                    only_resumed=only_resumed,
                )
                if begun is None:
                    return None
                delivered = await self.publish_delivery(thread_id, begun.events, begun.delivered)
                if deliver and not begun.holds_queue:
                    self.hub.note_queue_empty(thread_id)
            return self._launch(
                begun, side, delivered if deliver and not begun.holds_queue else None, spawn
            )

    def _launch(
        self, begun: RunBegin, side: str, delivered: list[Message] | None, spawn: bool
    ) -> Run:
        """Register the run that ``begin_run`` started (inside the start gate)."""
        row = begun.row
        run = Run(self, row, self.hub.definitions.agent(row.agent_id), "b" if side == "b" else "a")
        if begun.lease is not None:
            run.fence = Fence(row.id, begun.lease)
        run.pre_delivered = delivered
        run.client_tools = self.client_tools.pop(row.id, ())
        run.parked = begun.parked
        run.resumed = run.resuming = begun.resumed
        run.started_at = row.status.since
        run.event_seq = row.event_seq
        self.active[row.id] = run
        if spawn:
            run.task = asyncio.get_running_loop().create_task(run.execute())
        else:
            run.task = asyncio.current_task()
        return run

    def _runnable(self, agent_id: str) -> bool:
        """Whether the agent can run (inside ``begin_run``'s transaction: no I/O). Without
        a runnable agent (thread-core use, no prompts) the queue just waits; a validated
        project never gets here."""
        definitions = self.hub.definitions
        agent = definitions.agent(agent_id)
        return agent is not None and definitions.prompt(agent.side_a.prompt or "") is not None

    def create_hooks_registered(self) -> bool:
        """Whether any ``before_create_message`` / ``after_create_message`` hook exists:
        then queue deliveries go through the create lifecycle one entry at a time."""
        return self._registry()[1]

    def _registry(self) -> tuple[bool, bool]:
        """Whether an agent can run and whether a create hook exists, answered once per
        registry state: every send asks, and only ``Definitions.add`` changes the answer
        (definitions are frozen; hooks are only ever added)."""
        definitions = self.hub.definitions
        key = self._registry_key
        if (
            key is None
            or key[0] is not definitions
            or key[1] != definitions.generation
            or key[2] != definitions.hooks.version
        ):
            registry = definitions.hooks
            self._registry_answers = (
                any(self._runnable(agent.name) for agent in definitions.agents()),
                bool(
                    registry.ids_for("before_create_message")
                    or registry.ids_for("after_create_message")
                ),
            )
            self._registry_key = (definitions, definitions.generation, registry.version)
        return self._registry_answers

    async def publish_delivery(
        self, thread_id: str, events: list[StoredEvent], delivered: list[Message]
    ) -> list[Message]:
        """Publish what a delivery committed (under the thread's write lock): a status
        event from its committed data, each delivered message as stored (projected)."""
        projected = await self.hub.project(thread_id, delivered) if delivered else []
        by_id = {m.id: m for m in projected}
        for event in events:
            message = by_id.get(event.entity_id or "") if event.kind == "message" else None
            if message is not None:
                self.hub.publish_message(event, message)
            else:
                await self.hub.publish_events([event])
        return projected

    # -- ending (ending.py) ------------------------------------------------------------
    async def end_of_run(self, run: Run, reason: str) -> bool:
        """The end-of-run check (spec 04 §4.7.3): ``True`` → run again at once."""
        return await ending.end_of_run(self, run, reason)

    def release(self, run: Run) -> None:
        """Forget a run whose end-of-run check settled with its last message."""
        ending.release(self, run)

    async def finish_run(self, run: Run, message: Message, log: LogRow, reason: str) -> Message:
        """Finalise the run's last model message and commit the end-of-run check with it."""
        return await ending.finish_run(self, run, message, log, reason)

    async def finish_run_locked(
        self, run: Run, message: Message, log: LogRow, reason: str, *, new: bool = False
    ) -> Message:
        """``finish_run`` under the thread's write lock, which the caller holds."""
        return await ending.finish_run_locked(self, run, message, log, reason, new=new)

    async def abort(self, thread_id: str, reason: str) -> bool:
        """The abort procedure (spec 04 §4.20.1); ``True`` when a run was settled."""
        return await ending.abort(self, thread_id, reason)

    async def settle(self, run: Run, reason: str) -> None:
        """Commit the settlement of an aborted run: records first, status last."""
        await ending.settle(self, run, reason)

    async def settle_lost(
        self, thread_id: str, reason: str = "execution_lost"
    ) -> ending.Lost | None:
        """Settle the thread's run when no live node runs it (spec 12 §12.6.3)."""
        return await ending.settle_lost(self, thread_id, reason)

    async def resume(self, thread_id: str) -> bool:
        """Start the run that resumes a lost run (spec 16 §16.4) — after its settlement,
        once every lost run found with it is settled; ``True`` when it started here. Any
        start of such a thread is its resumed run (``RunBegin.resumed``): a send that
        came first starts it, and this one then finds nothing to start."""
        if not self.runs_threads:
            return False
        return await self.start(thread_id, force=True, only_resumed=True) is not None

    def lease_lost(self, run: Run) -> None:
        """A fenced write of ``run`` found its lease gone (spec 12 §12.3.3)."""
        ending.lease_lost(self, run)

    def broken(self, run: Run, exc: BaseException) -> None:
        """``run``'s task ended with an exception its own handling could not record."""
        ending.broken(self, run, exc)

    def drop_all(self) -> None:
        """Self-fencing (spec 12 §12.2 rule 4): cancel every run without settling it."""
        ending.drop_all(self)

    async def _cancel_approvals(self, thread_id: str, reason: str) -> None:
        """Stop or terminate of a thread with no active run: approvals that could still
        run are cancelled and their calls answered; a parked thread's status then says
        why (spec 14 §14.5)."""
        status = ThreadStatus.settled(reason, self.hub.clock())
        async with self.hub.lock(thread_id):
            events = await self.hub.store.cancel_approvals(thread_id, reason, status)
            await self.hub.publish_events(events)

    async def _terminate_hook(self, thread_id: str, reason: str, from_inside: bool) -> None:
        await ending.terminate_hook(self, thread_id, reason, from_inside)

    # -- entry points ------------------------------------------------------------------
    async def stop(self, thread_id: str, *, cascade: bool = False) -> bool:
        """Set the stop flag and abort a running execution (spec 04 §4.20.2)."""
        row = await self.hub.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        settled = await self._stop_one(row)
        if cascade:
            for child in await self.hub.store.descendants(thread_id):
                await self._stop_one(child)
        return settled

    async def _stop_one(self, row: ThreadRow) -> bool:
        await self.hub.store.set_stopped(row.id, True)
        settled = await self.abort(row.id, "aborted_by_user")
        if not settled and row.status.reason == "awaiting_approval":  # parked: nothing
            await self._cancel_approvals(row.id, "aborted_by_user")  # runs, they end here
        return settled

    async def resume_decided(self, thread_id: str) -> bool:
        """Start the run of a thread parked for approval when none of its approvals is
        pending any more (spec 14 §14.4): ``True`` when it started here."""
        if not self.runs_threads:
            return False
        approvals = await self.hub.store.list_approvals(thread_id)
        if any(a.state == "pending" for a in approvals):
            return False
        return await self.start(thread_id, force=True, only_parked=True) is not None

    async def resume_parked(self) -> None:
        """Start the runs of parked threads whose approvals were all decided while no run
        could start (at start-up, and from a node's sweep)."""
        for thread_id in await self.hub.store.decided_parked():
            await self.resume_decided(thread_id)

    async def continue_thread(
        self, thread_id: str, side: str = "a", trace_headers: Mapping[str, str] | None = None
    ) -> Run:
        """Clear the stop flag and start a run on ``side`` without a new message;
        ``trace_headers`` as for :meth:`send_message`."""
        if trace_headers is not None and self.tracing is not None:
            with self.tracing.incoming(trace_headers, None):
                return await self.continue_thread(thread_id, side)
        if not self.runs_threads:
            raise InvalidArgument(
                "this runtime shares its store (exclusive=False) and runs no threads"
            )
        row = await self.hub.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        if row.terminated is not None:
            raise ThreadTerminated(thread_id, row.terminated)
        if thread_id in self.active:
            raise ThreadBusy(f"Thread {thread_id} is running", thread_id)
        await self.hub.store.set_stopped(thread_id, False)
        run = await self.start(thread_id, side=side, force=True)
        if run is None:
            raise ThreadBusy(f"Thread {thread_id} is running", thread_id)
        return run

    def offer_client_tools(self, thread_id: str, tools: Sequence[ClientTool] | None) -> None:
        """The client tools of a request (spec 13 §13.7): for the thread's run active
        here (its next steps), and for the next run launched here."""
        if not tools:
            self.client_tools.pop(thread_id, None)
            return
        resolved = offered(tools)
        run = self.active.get(thread_id)
        if run is not None:
            run.client_tools = resolved
        self.client_tools[thread_id] = resolved

    def _forget_client_tools(self, thread_id: str) -> None:
        """After a request that offered client tools: no run is about to take them (a
        run starting here takes them itself)."""
        if thread_id not in self._starting:
            self.client_tools.pop(thread_id, None)

    async def start_continue(self, thread_id: str) -> bool:
        """Start a run without a new message (the client answered its calls, spec 13
        §13.7): ``True`` when it started here."""
        try:
            return await self.start(thread_id, force=True) is not None
        finally:
            self._forget_client_tools(thread_id)

    async def send_message(
        self,
        thread_id: str,
        content: str,
        *,
        role: str = "user",
        attachments: Any = None,
        silent: bool = False,
        metadata: Mapping[str, Any] | None = None,
        trace_headers: Mapping[str, str] | None = None,
        client_tools: Sequence[ClientTool] | None = None,
    ) -> Message:
        """A send (spec 04 §4.7.2): the overlap policy, then the durable queue.
        ``trace_headers``: the W3C trace context of the request that sent it
        (``traceparent``), used when the runtime traces (spec 13 §13.6);
        ``client_tools``: the request's tools that the client runs (spec 13 §13.7)."""
        if client_tools:
            self.offer_client_tools(thread_id, client_tools)
            try:
                return await self.send_message(
                    thread_id,
                    content,
                    role=role,
                    attachments=attachments,
                    silent=silent,
                    metadata=metadata,
                    trace_headers=trace_headers,
                )
            finally:
                self._forget_client_tools(thread_id)
        if trace_headers is not None and self.tracing is not None:
            with self.tracing.incoming(trace_headers, self.active.get(thread_id)):
                return await self.send_message(
                    thread_id,
                    content,
                    role=role,
                    attachments=attachments,
                    silent=silent,
                    metadata=metadata,
                )
        fields = check_queue(
            {
                "role": role,
                "content": content,
                "attachments": attachments,
                "silent": silent,
                "metadata": metadata,
            }
        )
        # on an idle thread the enqueue itself refuses an unknown or terminated thread
        policy = await self.overlap_policy(thread_id)
        running = policy is not None
        if running and policy == "reject":
            raise ThreadBusy("Thread is running (overlap policy: reject)", thread_id)
        if not running and thread_id not in self._starting and self._fast_start():
            return await self._send_and_start(thread_id, fields)
        view = await enqueue(self.hub, thread_id, fields, "api")
        if running and policy == "interrupt":
            await self.abort(thread_id, "interrupted")
        return view

    async def overlap_policy(self, thread_id: str) -> str | None:
        """The overlap policy a send meets (spec 04 §4.7.4): None while the thread does not
        run here (it only matters while it does), else the thread's policy, or its agent's,
        or ``enqueue``."""
        if thread_id not in self.active:
            return None
        row = await self.hub.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        agent = self.hub.definitions.agent(row.agent_id)
        policy = row.overlap or (agent.overlap if agent else "enqueue")
        return policy if thread_id in self.active else None

    def _fast_start(self) -> bool:
        """Whether a send may start its run in its own transaction: not shutting down, an
        agent that can run, no create hook (deliveries then need the create lifecycle)."""
        if self.closing or self.fenced or not self.runs_threads:
            return False
        runnable, create_hooks = self._registry()
        return runnable and not create_hooks

    async def _send_and_start(self, thread_id: str, fields: Mapping[str, Any]) -> Message:
        """A send to a thread with no run here: the queue entry, the ``running`` status and
        the delivery of every waiting entry in one commit (``Store.enqueue_and_begin_run``);
        the entry's pending view is published first, as for any send, then the run's start
        and the delivery, and the run starts on its own task."""
        hub = self.hub
        async with self.gate(thread_id):
            if thread_id in self.active or self.closing or self.fenced:  # a run started meanwhile
                return await enqueue(hub, thread_id, fields, "api")
            status = ThreadStatus(state="running", since=hub.clock(), reason=None)
            # validated construction: about half the cost of model_construct here, and the
            # fields are check_queue's already (the store sets created_at)
            entry = QueueEntry(id=new_id(), source="api", created_at=0, **fields)
            async with hub.lock(thread_id):
                try:
                    stored, event, begun = await hub.store.enqueue_and_begin_run(
                        thread_id, entry, clear_stop=True, status=status, runnable=self._runnable
                    )
                except ThreadTerminated as exc:
                    hub.set_terminated(thread_id, exc.terminated_at)
                    raise
                view = (await hub.project(thread_id, [stored.pending_view()]))[0]
                hub.publish_message(event, view, stored=False)
                if begun is not None:
                    delivered = await self.publish_delivery(
                        thread_id, begun.events, begun.delivered
                    )
                    if not begun.holds_queue:
                        hub.note_queue_empty(thread_id)
            if begun is not None:
                self._launch(begun, "a", None if begun.holds_queue else delivered, spawn=True)
        if begun is None:
            hub.signal_work(thread_id)
        return view

    # -- shutdown ----------------------------------------------------------------------
    async def close(self, drain: float | None = None) -> None:
        """Graceful shutdown (spec 04 §4.20.5): no new runs, let running ones finish for
        ``drain`` seconds, then abort the rest with ``aborted``."""
        self.closing = True
        grace = self.options.drain_seconds if drain is None else drain
        tasks = [r.task for r in self.active.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for thread_id in list(self.active):
            await self.abort(thread_id, "aborted")
        for task in list(self.background):
            task.cancel()
        if self.background:
            await asyncio.wait(list(self.background))
        self.threads.shutdown()
