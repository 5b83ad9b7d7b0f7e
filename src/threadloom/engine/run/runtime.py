"""The ``Runtime``: opens a store, hands out ThreadState objects and runs threads
(spec 02 §2.1.2, spec 04 §4.7).

On open it runs start-up recovery: a thread whose status is ``running`` was lost with the
previous process and settles to ``failed`` / ``execution_lost`` (spec 01 §1.7.2 rule 6);
threads that still have queued messages (and are neither stopped nor terminated) then
start a run that delivers them (spec 04 §4.24.1).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from threadloom.define.budget import Budget, budgets_of, owned
from threadloom.define.registry import Definitions
from threadloom.engine.mcp_sessions import MCPSessions, open_sessions
from threadloom.engine.options import EngineOptions
from threadloom.engine.run import results
from threadloom.engine.run.budget import lifetime_budgets
from threadloom.engine.run.client_tools import (
    ClientAnswer,
    ClientTool,
    agent_tool_names,
    answer,
    check_tools,
    pending,
)
from threadloom.engine.run.ending import Lost
from threadloom.engine.run.node_host import EngineHost
from threadloom.engine.run.retention import (
    RetentionPolicy,
    RetentionReport,
    RetentionSweeper,
    apply_retention,
    log_report,
)
from threadloom.engine.run.runs import RunManager
from threadloom.engine.run.schedules import ScheduleOptions, Scheduler
from threadloom.engine.run.triggers import Triggers
from threadloom.engine.telemetry import TracingOptions, open_tracing
from threadloom.errors import (
    AgentNotFound,
    InvalidArgument,
    InvalidField,
    ThreadBusy,
    ThreadNotFound,
)
from threadloom.metrics import Metrics
from threadloom.node.cluster import Cluster, open_cluster
from threadloom.node.liveness import Liveness, NodeTimings
from threadloom.node.relay import Relay
from threadloom.node.webhook_targets import TargetPolicy, check_url
from threadloom.node.webhooks import WebhookWorker
from threadloom.providers.base import MissingCredential, ProviderRegistry
from threadloom.records import (
    Approval,
    Limits,
    Message,
    Spend,
    ThreadRecord,
    ToolCall,
    UserQuota,
    WebhookSubscription,
    is_uuid,
    new_id,
    new_webhook_secret,
)
from threadloom.records.budget import WINDOW_SECONDS
from threadloom.records.portable import ThreadExport
from threadloom.store import open_store
from threadloom.store.base import Clock, NewThread, Store, ThreadPatch, ThreadRow, system_clock_us
from threadloom.store.fork import Fork, fork_thread
from threadloom.store.portable import IdMode, export_thread, import_thread
from threadloom.thread.events import EventBus
from threadloom.thread.family import reconcile_registry, set_registry_status
from threadloom.thread.files import (
    DEFAULT_LIMITS,
    FileLimits,
    Upload,
    configure_file_limits,
    remove_attachments,
    write_attachments,
)
from threadloom.thread.hub import ThreadHub
from threadloom.thread.memory import Memory
from threadloom.thread.retention import EventPruner, EventRetention, PruneReport, prune_events
from threadloom.thread.state import ThreadState, load_state
from threadloom.thread.users import IdentityAuthority, StaticUsers, StoreUsers

logger = logging.getLogger("threadloom.engine")
provider_logger = logging.getLogger("threadloom.providers")


class Runtime:
    """Threads on one store: create, open, list and delete them; the event bus."""

    def __init__(
        self,
        hub: ThreadHub,
        providers: ProviderRegistry | None = None,
        options: EngineOptions | None = None,
    ) -> None:
        self.hub = hub
        self.providers = providers or ProviderRegistry()
        self.runs = RunManager(hub, self.providers, options or EngineOptions())
        self.retention = EventRetention()
        self._pruner: EventPruner | None = None
        self.retention_policy = RetentionPolicy()
        """What the store keeps (spec 17 §17.2): every rule off unless set."""
        self._sweeper: RetentionSweeper | None = None
        self.webhooks: WebhookWorker | None = None
        """This node's outbound-webhook delivery worker (spec 19), when it runs threads."""
        self.schedules = Scheduler(
            hub.store, self, hub.clock, known_agent=self._known_agent, metrics=self.runs.metrics
        )
        """The store's schedules (spec 18, ``engine/run/schedules.py``): managed here, fired
        by the runtime that runs the store's threads."""
        self.triggers = Triggers(hub.store, self, hub.clock, known_agent=self._known_agent)
        """The store's inbound triggers (spec 22, ``engine/run/triggers.py``)."""
        self.cluster: Cluster = open_cluster(hub.store)
        """This node's side of the store: its row, lease reads and notifications
        (``node/cluster.py``)."""
        self.liveness: Liveness | None = None
        """The node's heartbeat and sweeper, on a store several processes share."""
        self.failover_forgets: list[Callable[[], None]] = []
        """Called when the node finds the database failed over, after its runs were
        dropped: each forgets a cache of the store's rows kept beside the engine's (the
        server's page cache; spec 17 §17.5.3 rule 4)."""
        self.relay: Relay | None = None
        """Where several nodes share the store: the notifications (``node/relay.py``)."""
        self._closed = False
        self.mcp: MCPSessions | None = None
        """The sessions with the project's MCP servers (``engine/mcp_sessions.py``)."""
        self.missing_credentials: list[MissingCredential] = []
        """The models whose provider had no credential when the definitions were loaded
        (each was logged as a warning on ``threadloom.providers``)."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        definitions: Definitions | None = None,
        project: str | Path | None = None,
        providers: Mapping[str, Any] | None = None,
        hooks: Iterable[Callable[..., Any]] = (),
        users: IdentityAuthority | Iterable[Any] | None = None,
        hook_timeout_s: float | None = 60.0,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        write_mode: str = "auto",
        store: Store | None = None,
        options: EngineOptions | None = None,
        max_file_size: int = DEFAULT_LIMITS.max_file_size,
        max_thread_file_bytes: int | None = None,
        max_subagent_depth: int | None = None,
        exclusive: bool = True,
        warm_messages: int | None = None,
        event_retention: EventRetention | None = None,
        node_id: str | None = None,
        node_timings: NodeTimings | None = None,
        tracing: TracingOptions | bool | None = None,
        retention: RetentionPolicy | None = None,
        schedules: ScheduleOptions | None = None,
    ) -> Runtime:
        """Open (and migrate) the store at ``url``, validate definitions, recover lost runs.

        ``synchronous`` and ``write_mode`` tune the SQLite store (see
        ``threadloom.store.sqlite.store``): FULL durability and ``auto`` writes by default.
        ``max_subagent_depth`` (default 8) caps how deep child threads nest (spec 06 §6.1).
        ``warm_messages`` (default 100,000) bounds the messages kept in memory across the
        histories of recently run threads, about 3 KiB each; a thread beyond it reloads
        its history from the store at its next run. ``event_retention`` (default
        ``EventRetention()``: one hour, 10,000 rows a thread, a pass a minute) bounds the
        event rows kept for stream resumption (spec 09 §9.6.1, ``thread/retention.py``);
        the pruner runs in the runtime that claims the store. ``retention`` (default
        ``RetentionPolicy()``: every rule off) bounds the threads and log bodies kept
        (spec 17 §17.2, ``engine/run/retention.py``); a runtime that claims the store runs
        a pass every ``retention.interval_s`` seconds, on one node at a time.
        ``schedules`` (default: ``THREADLOOM_SCHEDULE_*``, else a look every second) sets
        how a runtime that runs the store's threads fires its schedules (spec 18); it
        applies the project's declared schedules to the store at its start.

        On a store several processes share (PostgreSQL), the runtime is a node (spec 12):
        ``node_id`` (default ``<hostname>-<8 hex>``) names it in its leases and heartbeats,
        and ``node_timings`` (default: ``THREADLOOM_NODE_HEARTBEAT_SECONDS``,
        ``THREADLOOM_NODE_TTL_SECONDS``, ``THREADLOOM_SWEEP_SECONDS``, else 5, 15 and 5 s)
        set its liveness loop (``node/liveness.py``); recovery then settles only the
        runs of dead nodes.

        The runtime claims the store for this process first (``Store.claim_runner``: on an
        SQLite file, a lock that a second process is refused with ``StoreLocked``), then
        settles the runs a dead process left ``running`` and starts runs for threads with
        queued messages. ``exclusive=False`` shares the file with the process that runs
        its threads instead: no claim, no recovery, and no run started ever — for tools and
        tests that only add to threads (queue or inject a message); what it sends to an
        idle thread waits in the queue until the owning process next runs that thread (at
        its next send there, or its next start); ``continue_thread`` refuses (spec 12 §12.1
        rule 4).
        """
        if warm_messages is not None and warm_messages < 0:
            raise InvalidArgument("warm_messages must not be negative")
        if max_subagent_depth is not None:
            if max_subagent_depth < 1:
                raise InvalidArgument("max_subagent_depth must be at least 1")
            options = replace(options or EngineOptions(), max_subagent_depth=max_subagent_depth)
        defs = definitions if definitions is not None else Definitions()
        if project is not None:
            defs.load_project(project)
        for fn in hooks:
            defs.add(fn)
        registry = ProviderRegistry(dict(providers or {}))
        defs.validate(providers=registry.names())
        tracer = open_tracing(tracing)  # decided once; None: the engine never calls it
        missing = registry.missing_credentials(defs.models())
        for problem in missing:  # reported now; the first request fails with the same words
            provider_logger.warning("%s", problem)
        if users is not None and not isinstance(users, IdentityAuthority):
            users = StaticUsers(users)
        the_clock = clock or system_clock_us
        timings = node_timings or NodeTimings.from_env(os.environ)
        timings.check()
        opened = store or await open_store(
            url,
            clock=the_clock,
            synchronous=synchronous,
            write_mode=write_mode,
            node_id=node_id,
            node_ttl_s=timings.ttl_s,
        )
        if exclusive:
            try:  # before recovery: it would settle the live runs of another process
                await opened.claim_runner()
            except BaseException:
                if store is None:
                    await opened.close()
                raise
        hub = ThreadHub(
            opened,
            definitions=defs,
            users=users if users is not None else StoreUsers(opened),
            hook_timeout_s=hook_timeout_s,
            clock=the_clock,
        )
        if warm_messages is not None:
            hub.warm_messages = warm_messages
        configure_file_limits(hub, FileLimits(max_file_size, max_thread_file_bytes))
        runtime = cls(hub, registry, options)
        cluster = runtime.cluster
        runtime.runs.tracing = tracer
        runtime.runs.compactor.tracing = tracer
        try:  # MCP servers: one session each, their tools bound, then validated
            runtime.mcp = await open_sessions(defs, lambda: defs.validate(registry.names()))
        except BaseException:
            if store is None:
                await opened.close()
            raise
        runtime.missing_credentials = missing
        runtime.runs.runs_threads = exclusive
        if event_retention is not None:
            runtime.retention = event_retention
        if retention is not None:
            runtime.retention_policy = retention
        runtime.schedules.options = schedules or ScheduleOptions.from_env(os.environ)
        # what the node asks of the runs
        host = EngineHost(runtime.runs, runtime.recover, runtime.failover_forgets)
        if opened.shared:  # hear the other nodes before acting (spec 12 §12.7)
            runtime.relay = Relay(
                host,
                hub,
                cluster,
                coalesce_s=timings.chunk_coalesce_ms / 1000,
                recheck_s=timings.sweep_s,
            )
            runtime.runs.peers = runtime.relay
            await runtime.relay.start()
        if exclusive:
            if opened.shared:  # a node: live before it settles the runs of dead ones
                runtime.liveness = Liveness(host, cluster, timings)
                if runtime.relay is not None:
                    runtime.relay.liveness = runtime.liveness
                await runtime.liveness.start()
            await runtime.recover(mine=True)  # a process that died with this node id
            for parent_id in await opened.threads_with_open_children():
                await reconcile_registry(hub, parent_id, force=True)
            for thread_id in await cluster.claimable_queues(limit=1_000_000):
                runtime.runs.wake(thread_id)
            await runtime.runs.resume_parked()  # decided while no run could start
            runtime._pruner = EventPruner(opened, runtime.retention, the_clock)
            runtime._pruner.start()
            runtime._sweeper = RetentionSweeper(
                opened, cluster, runtime.retention_policy, the_clock, runtime._forget_deleted
            )
            runtime._sweeper.start()
            await runtime.schedules.sync_project(defs.schedules())
            runtime.schedules.start()
            runtime.webhooks = WebhookWorker(
                opened,
                cluster.node_id or f"local-{new_id()}",
                clock=the_clock,
                metrics=runtime.metrics,
            )
            runtime.webhooks.start()  # beside the runs, never on their path (spec 19)
        return runtime

    @property
    def store(self) -> Store:
        return self.hub.store

    @property
    def events(self) -> EventBus:
        return self.hub.bus

    @property
    def definitions(self) -> Definitions:
        return self.hub.definitions

    @property
    def metrics(self) -> Metrics:
        """This runtime's Prometheus instruments, on a registry of their own
        (``threadloom/metrics.py``; the server exposes them at ``/metrics``)."""
        return self.runs.metrics

    def _known_agent(self, agent_id: str) -> bool:
        return not self.definitions.has_agents or self.definitions.agent(agent_id) is not None

    def register_hook(self, fn: Callable[..., Any]) -> None:
        """Register a ``@hook`` function (the same one twice is a no-op)."""
        self.hub.definitions.add(fn)

    async def recover(
        self, *, mine: bool = False, threads: Collection[str] | None = None
    ) -> list[str]:
        """Settle every ``running`` thread that no live execution owns (no live node's,
        where several share the store; ``mine``: this node's too, those it does not run:
        at start-up, or after it fenced itself); ``threads``: these, found lost by the
        caller (this node's runs with no execution here), instead of reading them; returns
        the ids settled."""
        settled: list[str] = []
        delivered: list[Lost] = []
        if threads is None:
            threads = await self.cluster.lost_runs(limit=1_000_000, mine=mine)
        for thread_id in threads:
            done = await self.runs.settle_lost(thread_id)
            if done is not None:
                settled.append(thread_id)
                delivered.append(done)
        # only once every lost run is settled: waking a parent earlier could start a run
        # that the settlement of the parent's own lost run would then fail
        for lost in delivered:
            await results.finish(self.runs, lost.row, lost.prepared)
        # the runs of agents that resume (spec 16 §16.4), and those a process settled to
        # be resumed but stopped before it started them
        resumes = [lost.row.id for lost in delivered if lost.resume]
        if self.runs.runs_threads:
            resumes += [t for t in await self.store.pending_resumes() if t not in resumes]
        for thread_id in resumes:
            await self.runs.resume(thread_id)
        return settled

    async def _node_step(self, step: Callable[[], Awaitable[None]], what: str) -> None:
        """A write of the node's own row at shutdown: one that fails (the database went
        away first) is logged, and the shutdown goes on."""
        try:
            await step()
        except Exception as exc:
            logger.warning("node %s: %s failed: %s", self.store.node_id, what, exc)

    async def prune_events(self) -> PruneReport:
        """Prune the event rows the replay window no longer holds, now (one pass; the
        runtime's pruner does this every ``event_retention.interval`` seconds)."""
        return await prune_events(self.hub.store, self.retention, self.hub.clock)

    def memory(self, *, user_id: str | None = None, agent_id: str | None = None) -> Memory:
        """The memory store across threads (spec 20): ``agent_id``'s memory when given,
        else ``user_id``'s (None: the memory of threads without a user) — what a tool of
        such a thread sees as ``state.agent_memory`` / ``state.memory``."""
        if agent_id is not None:
            if user_id is not None:
                raise InvalidArgument("memory: give user_id or agent_id, not both")
            return Memory(self.hub.store, "agent", agent_id)
        return Memory(self.hub.store, "user", user_id)

    async def apply_retention(self, *, dry_run: bool = False) -> RetentionReport:
        """One pass of the runtime's retention policy now (spec 17 §17.2; the sweeper
        runs one every ``retention.interval_s`` seconds): what each rule deleted, or with
        ``dry_run`` would delete, deleting nothing. A real pass is refused (``ran`` False)
        while another node runs one, and (``InvalidArgument``) by a runtime opened with
        ``exclusive=False`` on a store one process runs: that process runs the passes."""
        if not dry_run and not self.runs.runs_threads and not self.store.shared:
            raise InvalidArgument(
                "a runtime opened with exclusive=False does not delete: the process that"
                " runs the store applies its retention (a dry run only reads)"
            )
        report = await apply_retention(
            self.store,
            self.cluster,
            self.retention_policy,
            self.hub.clock,
            dry_run=dry_run,
            on_deleted=self._forget_deleted,
        )
        log_report(report)
        return report

    async def drain(self, grace: float | None = None) -> None:
        """Stop taking work and let running steps finish for ``grace`` seconds (default
        ``EngineOptions.drain_seconds``), then settle the runs left ``failed``/``aborted``
        (spec 04 §4.20.5); on a shared store the node is marked draining first (spec 12
        §12.6.4), so other nodes run what is queued. The runtime stays open (reads,
        writes); ``close`` ends it."""
        if self.liveness is not None and not self.runs.closing:
            await self._node_step(self.cluster.set_draining, "marking the node draining")
        await self.runs.close(grace)
        if self.relay is not None and self.liveness is not None:
            # the queues this node let go of: a live node picks them up at once (§12.6.4)
            await self._node_step(self._hand_over, "handing queued work over")

    async def _hand_over(self) -> None:
        for thread_id in await self.cluster.claimable_queues():
            await self.cluster.notify("wake", {"t": thread_id, "n": self.cluster.node_id, "d": 1})

    async def close(self, drain: float | None = None) -> None:
        """Graceful shutdown: running steps get ``drain`` seconds (default 30) to finish;
        runs still running then settle ``failed``/``aborted`` (spec 04 §4.20.5)."""
        if not self._closed:
            self._closed = True
            if self._pruner is not None:
                await self._pruner.stop()
            if self._sweeper is not None:
                await self._sweeper.stop()
            if self.webhooks is not None:
                await self.webhooks.stop()
            await self.schedules.stop()
            await self.drain(drain)  # the node still beats while it drains
            if self.mcp is not None:
                await self.mcp.aclose()
            if self.liveness is not None:
                await self.liveness.stop()
                await self._node_step(self.cluster.remove_node, "removing the node's row")
            if self.relay is not None:
                await self.relay.close()
            await self.cluster.close()
            await self.providers.aclose()
            await self.store.close()

    # -- running threads (spec 04 §4.7.2) ----------------------------------------------
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
        """Send a message: the overlap policy, then the durable queue; starts a run when
        the thread is idle. Returns the pending view of the queued message.

        ``trace_headers``: the W3C trace context of the request that sent it (a mapping
        holding ``traceparent``, e.g. the HTTP request's headers); when the runtime traces,
        the run this send starts is a child of that span, and a run it joins gets a link to
        it (spec 13 §13.6). ``client_tools``: tools the sender offers and runs itself
        (AG-UI's frontend tools, spec 13 §13.7), checked with :meth:`check_client_tools`:
        the run this send starts (or joins) offers them; a call of one ends the run
        ``awaiting_client_tool`` and :meth:`answer_client_calls` goes on."""
        return await self.runs.send_message(
            thread_id,
            content,
            role=role,
            attachments=attachments,
            silent=silent,
            metadata=metadata,
            trace_headers=trace_headers,
            client_tools=client_tools,
        )

    def check_client_tools(
        self, agent: str, tools: Sequence[ClientTool], where: str = "tools"
    ) -> list[ClientTool]:
        """``tools`` when a run of ``agent`` may offer them (spec 13 §13.7); else
        ``InvalidField`` naming the first bad one (``tools[i].name``)."""
        return check_tools(self.definitions, agent, tools, where)

    async def client_calls(self, thread_id: str) -> list[ToolCall]:
        """The thread's calls that wait for the client's result (spec 13 §13.7)."""
        state = await self.thread(thread_id)
        return await pending(state, agent_tool_names(self.definitions, state.agent_id))

    async def answer_client_calls(
        self,
        thread_id: str,
        answers: Sequence[ClientAnswer],
        client_tools: Sequence[ClientTool] | None = None,
    ) -> tuple[int, bool]:
        """Store the client's results of its pending calls (spec 13 §13.7) and, once none
        waits, start the run (offering ``client_tools``): how many were stored and
        whether a run started."""
        state = await self.thread(thread_id)
        own = agent_tool_names(self.definitions, state.agent_id)
        return await answer(self.runs, state, own, answers, client_tools)

    async def send_with_uploads(
        self,
        state: ThreadState,
        content: str,
        uploads: Sequence[Upload],
        *,
        role: str = "user",
        silent: bool = False,
        metadata: Mapping[str, Any] | None = None,
        trace_headers: Mapping[str, str] | None = None,
        client_tools: Sequence[ClientTool] | None = None,
    ) -> Message:
        """A send whose attachments are written as files first (spec 08 §8.4.2): a thread
        running here whose overlap policy is ``reject`` refuses it before any write
        (``ThreadBusy``), and the files written are removed again when the send fails
        (``DuplicateMessage`` included). ``state`` is the thread at rest; ``client_tools``
        as for :meth:`send_message`."""
        thread_id = state.thread_id
        if uploads and await self.runs.overlap_policy(thread_id) == "reject":
            raise ThreadBusy("Thread is running (overlap policy: reject)", thread_id)
        refs = await write_attachments(state, uploads)
        try:
            return await self.send_message(
                thread_id,
                content,
                role=role,
                attachments=refs or None,
                silent=silent,
                metadata=metadata,
                trace_headers=trace_headers,
                client_tools=client_tools,
            )
        except BaseException:
            await remove_attachments(state, refs)
            raise

    async def continue_thread(
        self, thread_id: str, side: str = "a", *, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        """Start a run on ``side`` without a new message (``ThreadBusy`` while running);
        ``trace_headers`` as for :meth:`send_message`."""
        if side not in ("a", "b"):
            raise InvalidArgument("side must be 'a' or 'b'")
        await self.runs.continue_thread(thread_id, side, trace_headers)

    async def stop(self, thread_id: str, *, cascade: bool = False) -> bool:
        """Stop a thread: set its stop flag and abort a running execution."""
        return await self.runs.stop(thread_id, cascade=cascade)

    async def terminate(self, thread_id: str, *, cascade: bool = False) -> int:
        """Terminate a thread (``ThreadState.terminate``); with ``cascade`` also every
        descendant, after it (spec 08 §8.5.3; ``terminate()`` alone leaves children live,
        spec 06 §6.10). Returns the thread's termination timestamp."""
        at = await (await self.thread(thread_id)).terminate()
        if cascade:
            for row in await self.store.descendants(thread_id):
                child = await load_state(self.hub, row.id, missing_ok=True)
                if child is not None:
                    await child.terminate()
        return at

    def running(self, thread_id: str) -> bool:
        return self.runs.running(thread_id)

    async def wait_idle(self, thread_id: str, timeout: float | None = None) -> None:
        """Wait until the thread has no run starting or running (tests, CLIs)."""
        if timeout is None:  # no wait_for wrapper around the wait
            await self.runs.wait_idle(thread_id)
        else:
            await asyncio.wait_for(self.runs.wait_idle(thread_id), timeout)

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- threads -----------------------------------------------------------------------
    async def create_thread(
        self,
        agent_id: str,
        *,
        user_id: str | None = None,
        tags: Sequence[str] = (),
        parent: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        overlap: str | None = None,
        thread_id: str | None = None,
        budget: Budget | Sequence[Budget] | None = None,
    ) -> ThreadState:
        """Create a thread (status idle), run ``after_thread_created``, return it at rest;
        ``thread_id`` is its id when the caller chose one (a UUID, canonical form);
        ``budget``: one or several budgets of the thread's runs or lifetime (spec 15)."""
        if not isinstance(agent_id, str) or not agent_id:
            raise InvalidArgument("agent_id must be a non-empty string")
        if thread_id is not None and not is_uuid(thread_id):
            raise InvalidArgument("thread_id must be a UUID in canonical form")
        if self.definitions.has_agents and self.definitions.agent(agent_id) is None:
            raise AgentNotFound(agent_id)
        if user_id is not None and not isinstance(user_id, str):
            raise InvalidArgument("user_id must be a string or None")
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise InvalidArgument("tags must be a list of strings")
        for name, (prompt, description) in self.definitions.required_arguments(agent_id).items():
            if arguments is None or not isinstance(arguments, Mapping) or name not in arguments:
                raise InvalidField(
                    f"arguments.{name}",
                    f"is required: prompt {prompt!r} uses {{{{{name}}}}} ({description})",
                )
        if arguments is not None:
            if not isinstance(arguments, Mapping):
                raise InvalidArgument("arguments must be a mapping")
            try:
                arguments = json.loads(json.dumps(dict(arguments), allow_nan=False))
            except (TypeError, ValueError):
                raise InvalidArgument("arguments must be JSON-encodable") from None
        if overlap not in (None, "enqueue", "reject", "interrupt"):
            raise InvalidArgument("overlap must be 'enqueue', 'reject', 'interrupt' or None")
        budgets = budgets_of(budget)
        if not isinstance(budgets, tuple) or not all(isinstance(b, Budget) for b in budgets):
            raise InvalidArgument("budget must be a Budget or a list of Budgets")
        new_id_ = thread_id or new_id()
        kept = owned(budgets, new_id_)
        if parent is not None:  # the parent agent's lifetime budgets count this thread too
            parent_row = await self.store.get_thread(parent)
            parent_agent = self.definitions.agent(parent_row.agent_id) if parent_row else None
            if parent_agent is not None:
                kept += lifetime_budgets(parent_agent.budget, parent)
        row = await self.store.create_thread(
            NewThread(
                id=new_id_,
                agent_id=agent_id,
                user_id=user_id,
                tags=tuple(tags),
                parent_id=parent,
                arguments=dict(arguments) if arguments else None,
                overlap=overlap,
                budgets=kept,
            )
        )
        self.hub.publish(row.id, "thread_created", None, {"thread": row.record().model_dump()})
        state = ThreadState(self.hub, row)
        hooks = self.hub.resolve_hooks("after_thread_created", agent_id, None, ())
        if hooks:
            await self.hub.hooks.run_event(hooks, state)
        return state

    # -- outbound webhooks (spec 19) ---------------------------------------------------
    def webhook_policy(self) -> TargetPolicy:
        """Which addresses a webhook may reach: this node's worker's, else the settings'."""
        if self.webhooks is not None:
            return self.webhooks.options.policy
        return TargetPolicy.from_env()

    async def create_webhook(
        self,
        url: str,
        event_types: Sequence[str] = (),
        *,
        secret: str | None = None,
        enabled: bool = True,
        description: str | None = None,
    ) -> WebhookSubscription:
        """Subscribe ``url`` to ``event_types`` (none: every type). The URL must resolve to
        addresses the settings allow (``TargetRefused`` otherwise, spec 19 §19.6); the
        secret, when not given, is made (``whsec_…``)."""
        await check_url(url, self.webhook_policy())
        return await self.store.create_webhook(
            WebhookSubscription(
                id=new_id(),
                url=url,
                secret=secret or new_webhook_secret(),
                event_types=tuple(event_types),
                enabled=enabled,
                description=description,
            )
        )

    async def update_webhook(
        self, webhook_id: str, changes: Mapping[str, Any]
    ) -> WebhookSubscription | None:
        """Change a subscription's ``url``, ``secret``, ``event_types``, ``enabled`` or
        ``description`` (a new URL is checked as at creation); ``None``: no such one."""
        if "url" in changes:
            await check_url(str(changes["url"]), self.webhook_policy())
        return await self.store.update_webhook(webhook_id, dict(changes))

    # -- budgets and quotas (spec 15) ---------------------------------------------------
    async def set_user_quota(self, user_id: str, quota: Limits | None) -> UserQuota | None:
        """Set the quota of ``user_id`` (``UserQuota``, or ``Limits`` with a ``window``
        given as a ``UserQuota``), or remove it with ``None``; runs that begin from now on
        are checked against it."""
        if not isinstance(user_id, str) or not user_id:
            raise InvalidArgument("user_id must be a non-empty string")
        found: UserQuota | None = None
        if quota is not None:
            fields = quota.model_dump(exclude={"user_id"})
            found = UserQuota(user_id=user_id, **fields)
        await self.store.set_user_quota(user_id, found)
        self.runs.quotas.changed(user_id, found)
        return found

    async def user_quota(self, user_id: str) -> tuple[UserQuota | None, Spend | None]:
        """The quota of ``user_id`` and what their threads spent in its window now."""
        quota = await self.store.get_user_quota(user_id)
        if quota is None:
            return None, None
        since = self.hub.clock() - WINDOW_SECONDS[quota.window] * 1_000_000
        return quota, await self.store.user_spend(user_id, since)

    async def thread_spend(self, thread_id: str) -> Spend:
        """What the thread and its descendants spent in their lifetime (spec 15 §15.5)."""
        return await self.store.thread_spend(thread_id)

    async def thread(self, thread_id: str) -> ThreadState:
        """An at-rest ThreadState; unknown id → ``ThreadNotFound``."""
        state = await load_state(self.hub, thread_id)
        assert state is not None
        return state

    async def approvals(self, thread_id: str, *, pending_only: bool = False) -> list[Approval]:
        """The thread's tool-call approvals, oldest first (spec 14 §14.3)."""
        return await (await self.thread(thread_id)).get_approvals(pending_only=pending_only)

    async def decide_approval(
        self,
        thread_id: str,
        tool_call_id: str,
        *,
        approve: bool,
        arguments_hash: str | None = None,
        reason: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        decided_by: str | None = None,
    ) -> Approval:
        """``ThreadState.decide_approval`` of the thread (spec 14 §14.3)."""
        state = await self.thread(thread_id)
        return await state.decide_approval(
            tool_call_id,
            approve=approve,
            arguments_hash=arguments_hash,
            reason=reason,
            arguments=arguments,
            decided_by=decided_by,
        )

    async def get_thread_record(self, thread_id: str) -> ThreadRecord:
        row = await self.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        return row.record()

    async def update_thread(self, thread_id: str, patch: ThreadPatch) -> ThreadRow:
        """Change a thread's tags, variables, overlap policy and agent in one transaction,
        then publish ``thread_updated`` (spec 08 §8.3.5, spec 09 §9.14).

        A new ``patch.agent_id`` must be defined (``AgentNotFound``) and have a human-backed
        side (``InvalidField`` on ``agent_id``); naming the thread's own agent changes
        nothing and is not checked."""
        agent_id = patch.agent_id
        if agent_id is not None:
            row = await self.store.get_thread(thread_id)
            if row is None:
                raise ThreadNotFound(thread_id)
            if agent_id == row.agent_id:
                patch = replace(patch, agent_id=None)
            else:
                agent = self.definitions.agent(agent_id)
                if agent is None:
                    raise AgentNotFound(agent_id)
                if not (agent.side_a.is_human or agent.side_b is None or agent.side_b.is_human):
                    raise InvalidField(
                        "agent_id",
                        "must name an agent with a human-backed side",
                        "Only agents with a human-backed side can be assigned to threads",
                    )
        updated = await self.store.update_thread(thread_id, patch)
        self.hub.publish(
            thread_id, "thread_updated", None, {"thread": updated.record().model_dump()}
        )
        return updated

    async def list_threads(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        parent: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[ThreadRecord], int]:
        """Thread records newest first, with the number matching the filters."""
        rows, total = await self.store.list_threads(
            user_id=user_id, agent_id=agent_id, parent_id=parent, limit=limit, offset=offset
        )
        return [r.record() for r in rows], total

    async def _forget_deleted(self, owners: dict[str, str | None]) -> None:
        """After the store deleted these threads (ids deepest first, with their owners):
        drop them from memory, tell their subscribers and the other nodes."""
        deleted = list(owners)
        for tid in deleted:
            self.hub.forget(tid)
            data = {"thread_id": tid, "user_id": owners[tid]}
            self.hub.publish(tid, "thread_deleted", None, data)
        if self.relay is not None:
            await self.relay.announce_deleted(deleted, owners)

    async def export_thread(self, thread_id: str) -> ThreadExport:
        """The thread and its descendants as a portable file (spec 21): ``.dump()`` gives
        its bytes. ``ThreadNotFound``; ``ThreadBusy`` while a thread of the tree runs."""
        return await export_thread(self.store, thread_id)

    async def import_thread(self, doc: ThreadExport, ids: IdMode = "keep") -> ThreadExport:
        """Store a portable file's threads as history (spec 21 §21.4): no run starts; the
        document as stored (under new ids with ``ids="new"``). ``ThreadExists`` names an
        id already stored (``ids="keep"``); nothing is written then."""
        return await import_thread(self.store, doc, ids)

    async def fork_thread(
        self, thread_id: str, message_id: str, content: str | None = None
    ) -> Fork:
        """Fork the thread at one of its messages into a new thread, optionally replacing
        that message's text in the copy (spec 08 §8.3.8): no run starts, the original is
        not changed; ``thread_created`` is published for the new thread. Errors:
        ``ThreadNotFound``, ``MessageNotFound``, ``ForkPointUnfinished``,
        ``InvalidField`` (``content`` on a tool result)."""
        fork = await fork_thread(
            self.store, thread_id, message_id, content, now_us=self.hub.clock()
        )
        row = fork.row
        self.hub.publish(row.id, "thread_created", None, {"thread": row.record().model_dump()})
        return fork

    async def list_forks(self, thread_id: str) -> list[ThreadRow]:
        """The threads forked from ``thread_id`` (which may be deleted), oldest first."""
        return await self.store.list_forks(thread_id)

    async def delete_thread(self, thread_id: str) -> list[str]:
        """Delete the thread and its descendants; ids deepest first, the thread last.

        Every execution in the tree is aborted first; when the thread has a parent, the
        parent's registry entry for it becomes ``terminated`` (spec 08 §8.3.6)."""
        row = await self.store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        owners = {thread_id: row.user_id}
        rows = [row, *await self.store.descendants(thread_id)]
        owners.update((d.id, d.user_id) for d in rows)
        for found in rows:  # a run of another node: its owner aborts it (spec 12 §12.5)
            if self.runs.running(found.id) or found.status.state == "running":
                await self.runs.abort(found.id, "aborted")
        deleted = await self.store.delete_thread(thread_id)
        if not deleted:
            raise ThreadNotFound(thread_id)
        await self._forget_deleted({tid: owners.get(tid) for tid in deleted})
        if row.parent_id is not None:
            await set_registry_status(self.hub, row.parent_id, thread_id, "terminated")
        return deleted
