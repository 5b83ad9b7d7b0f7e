"""The shared machinery behind every ThreadState of one runtime.

The hub owns the store handle, the event bus, the hook registry and runner, the per-thread
FIFO write locks (``thread/lock.py``), the in-memory ``terminated`` value of each live
thread, and the live execution histories. Writes to a thread commit *and publish* under
that thread's lock, so the bus sees each thread's durable events in commit order. Which
hooks run for a name the hub answers as a ``HookResolution`` (``thread/hook_resolution.py``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from threadloom.define.hook import HookContext, HookDefinition
from threadloom.define.registry import Definitions
from threadloom.records import LogRow, Message, new_id, thread_name
from threadloom.store.base import Clock, Fence, Store, StoredEvent, ThreadRow, system_clock_us
from threadloom.thread.event_data import event_data
from threadloom.thread.events import EventBus, ThreadEvent
from threadloom.thread.history import MessageHistory
from threadloom.thread.hook_resolution import HookResolution
from threadloom.thread.hooks import HookRunner, format_hook_error
from threadloom.thread.lock import DeferredWrite, ThreadLock
from threadloom.thread.users import IdentityAuthority

if TYPE_CHECKING:
    from threadloom.thread.state import ThreadState

logger = logging.getLogger("threadloom.thread")


class _Capped(dict[str, int]):
    """A dict that drops its oldest entry when a new key would take it past ``cap``."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def __setitem__(self, key: str, value: int) -> None:
        if key not in self and len(self) >= self.cap:
            del self[next(iter(self))]
        super().__setitem__(key, value)


class Router(Protocol):
    """Where the hub's published events go instead of straight to the bus (the node's
    ordered delivery, ``node/delivery.py``, where several nodes share the store)."""

    def offer(self, event: ThreadEvent) -> None: ...


LISTED = frozenset(("thread_created", "thread_updated"))
"""Thread-list events that have no row of their own in ``thread_events`` (a deletion is
relayed with the thread's end, a status change with its event row)."""


class ThreadHub(HookResolution):
    """Store, bus, hooks, locks and live state shared by the ThreadStates of a runtime."""

    def __init__(
        self,
        store: Store,
        *,
        definitions: Definitions | None = None,
        users: IdentityAuthority | None = None,
        hook_timeout_s: float | None = 60.0,
        clock: Clock = system_clock_us,
    ) -> None:
        super().__init__()
        self.store = store
        self.bus = EventBus()
        self.definitions = definitions or Definitions()
        self.users = users
        self.clock = clock
        self.hooks = HookRunner(default_timeout_s=hook_timeout_s, on_failure=self._hook_failed)
        self._locks: dict[str, list[Any]] = {}  # thread id → [asyncio.Lock | None, users]
        self._deferred: dict[str, DeferredWrite] = {}
        self._terminated: dict[str, int | None] = {}
        self._histories: dict[str, list[MessageHistory]] = {}
        self._warm: OrderedDict[str, MessageHistory] = OrderedDict()
        """The warm histories of threads with no run here, least recently run first: the
        only ones eviction may take."""
        self._running: dict[str, MessageHistory] = {}
        """The history each running execution reads (``keep_warm`` → ``warm_grown``):
        counted in the budget, never evicted."""
        self._warm_sizes: dict[str, int] = {}  # messages of each kept history when counted
        self._warm_total = 0
        self.warm_messages = self.WARM_MESSAGES
        self._stale_warm: set[str] = set()  # warm histories that may miss a foreign write
        self._seq: dict[str, int] = {}  # last durable event number published per thread
        self._queue_empty: set[str] = set()
        """Threads whose queue this process knows to be empty: its engine delivered every
        entry and nothing was queued since (see :meth:`queue_known_empty`)."""
        self._seq_cap = self.IDLE_KEPT
        """When ``_seq`` grows past this, the entries of idle threads go (``_evict_idle``)."""
        self.registry_checked: dict[str, int] = _Capped(self.IDLE_KEPT)
        """Parent thread id → when its registry was last reconciled (µs, spec 06 §6.11);
        the oldest entries go past ``IDLE_KEPT`` (a parent reconciled again sooner)."""
        self.children_starting: set[str] = set()
        """Children being created whose first message is not queued yet: the reconciler
        leaves their entries alone (spec 06 §6.6, §6.11)."""
        self.wake: Callable[[str], None] | None = None
        """Set by the engine: called when a thread has new queued work."""
        self.abort_run: Callable[[str, str, bool], Awaitable[None]] | None = None
        self.resume_decided: Callable[[str], Awaitable[bool]] | None = None
        """Set by the engine: start the run of a thread parked for approval once none of
        its approvals is pending (spec 14 §14.4)."""
        """Set by the engine: abort a running execution (thread id, reason, from inside)."""
        self.file_limits: Any = None
        """The thread file system's size limits (``thread.files.FileLimits``)."""
        self.tool_invoker: Any = None
        """Set by the engine: runs ``invoke_tool``/``queue_tool`` (spec 04 §4.14.6)."""
        self.compactor: Any = None
        """Set by the engine: its compactor (spec 23), what ``ThreadState.compact`` calls."""
        self.router: Router | None = None
        """Where several nodes share the store: the per-thread ordering of this node's
        own events and the relayed ones (``route_through``)."""
        self._emit: Callable[[ThreadEvent], None] = self.bus.publish
        self.on_listed: Callable[[str, str, dict[str, Any]], None] | None = None
        """Where several nodes share the store: told of each thread-list event this node
        publishes (``LISTED``), for the other nodes' ``/api/events`` (spec 12 §12.7.5)."""

    def route_through(self, router: Router) -> None:
        """Publish every event through ``router`` from now on, not straight to the bus
        (the node's ordered delivery, ``node/delivery.order_delivery``)."""
        self.router = router
        self._emit = router.offer

    async def relayed_event(self, event: StoredEvent) -> ThreadEvent:
        """The published form of an event another node committed (read from its row)."""
        if event.kind == "message_deleted" and event.entity_id:
            self.reflect_delete(event.thread_id, [event.entity_id])
        data = await self.event_data(event)
        self._track(event.thread_id, event.seq)
        return ThreadEvent(event.thread_id, event.kind, event.seq, data, event.created_at)

    def note_foreign(self, thread_id: str) -> None:
        """Another node wrote to the thread: a warm history may miss the change, and its
        queue may hold entries this node did not write."""
        self._stale_warm.add(thread_id)
        self._queue_empty.discard(thread_id)

    def has_live_history(self, thread_id: str) -> bool:
        return bool(self._histories.get(thread_id))

    # -- locks and live state --------------------------------------------------------
    def lock(self, thread_id: str, *, run_deferred: bool = True) -> ThreadLock:
        """The thread's write lock: FIFO among waiters, forgotten when nobody holds it.
        Acquiring it runs the thread's deferred write first, unless ``run_deferred`` is
        false (the holder then decides with ``take_deferred``)."""
        return ThreadLock(self._locks, thread_id, self._deferred if run_deferred else None)

    def defer_write(self, thread_id: str, write: DeferredWrite) -> None:
        """Hold ``write`` back: the next holder of the thread's write lock runs it before
        its own writes, unless its owner claims it first (``take_deferred``). One per
        thread (a run's held pending message, ``engine/step/pending.py``)."""
        if thread_id in self._deferred:
            raise RuntimeError(f"thread {thread_id} already holds a deferred write")
        self._deferred[thread_id] = write

    def holds_deferred(self, thread_id: str) -> bool:
        """True while a deferred write of the thread waits to run."""
        return thread_id in self._deferred

    async def commit_deferred(self, thread_id: str) -> None:
        """Run the thread's deferred write now, if one is held: someone is about to look
        at the thread (a read of its records, a stream subscription)."""
        if thread_id in self._deferred:
            async with self.lock(thread_id):
                pass  # acquiring the lock runs it

    def take_deferred(self, thread_id: str, write: DeferredWrite) -> bool:
        """Claim ``write`` back, unless it already ran: ``True`` when it was still held."""
        if self._deferred.get(thread_id) is not write:
            return False
        del self._deferred[thread_id]
        return True

    @property
    def active_locks(self) -> int:
        """Threads whose write lock is held or awaited right now."""
        return len(self._locks)

    def note_thread(self, row: ThreadRow) -> None:
        if row.terminated is not None:  # termination is permanent: only those are kept
            self._terminated[row.id] = row.terminated

    def terminated_of(self, thread_id: str) -> int | None:
        return self._terminated.get(thread_id)

    def set_terminated(self, thread_id: str, at: int) -> None:
        self._terminated[thread_id] = at

    # -- what is kept per thread ------------------------------------------------------
    IDLE_KEPT = 1024
    """How many threads' entries of the per-thread maps (event number, known-empty queue,
    stale flag, registry check) are kept beyond those of busy threads before the idle
    ones are dropped (``_evict_idle``)."""

    def _busy(self, thread_id: str) -> bool:
        """True while something of the thread lives here that the per-thread entries
        keep correct: a warm or live history, a held or awaited write lock, a deferred
        write, a subscription to the thread."""
        return (
            thread_id in self._warm
            or thread_id in self._running
            or thread_id in self._histories
            or thread_id in self._locks
            or thread_id in self._deferred
            or self.bus.has_thread_subscribers(thread_id)
        )

    def _evict_idle(self) -> None:
        """Drop the per-thread entries of idle threads: ``_seq`` (a gap can only matter
        to a warm history or a known-empty queue, and both go with it), ``_queue_empty``
        (the next run reads the queue), ``_stale_warm`` (only a warm history reads it)
        and ``registry_checked`` (reconciled again sooner). Runs when ``_seq`` doubled
        since the last pass, so each thread's first event pays for it once."""
        idle = [
            tid
            for tid in {*self._seq, *self._queue_empty, *self._stale_warm, *self.registry_checked}
            if not self._busy(tid)
        ]
        for tid in idle:
            self._seq.pop(tid, None)
            self._queue_empty.discard(tid)
            self._stale_warm.discard(tid)
            self.registry_checked.pop(tid, None)
        self._seq_cap = max(self.IDLE_KEPT, 2 * len(self._seq))

    def forget(self, thread_id: str) -> None:
        self._terminated.pop(thread_id, None)
        self._histories.pop(thread_id, None)
        self._warm.pop(thread_id, None)
        self._running.pop(thread_id, None)
        self._warm_total -= self._warm_sizes.pop(thread_id, 0)
        self._stale_warm.discard(thread_id)
        self._seq.pop(thread_id, None)
        self._queue_empty.discard(thread_id)
        self.registry_checked.pop(thread_id, None)

    def forget_cached(self) -> None:
        """The database failed over (spec 17 §17.5.3 rule 4): an asynchronous standby may
        lack the last commits this hub saw, and its event numbers may later come back with
        other rows under them. So no warm history is used again (each is read anew by the
        thread's next run) and no queue is known empty."""
        self._stale_warm.update(self._warm)
        self._queue_empty.clear()

    # -- warm histories ------------------------------------------------------------------
    WARM_MESSAGES = 100_000
    """The default of ``warm_messages``: how many messages the histories this hub keeps
    (running executions' and the warm ones of recently run threads) may hold in all (each
    costs about 2.8 KiB with its request forms)."""

    async def run_history(self, thread_id: str, event_seq: int) -> MessageHistory:
        """The live history a run of the thread reads from its start (``event_seq``: the
        thread's event number then): the warm one, or one read from the store, whole,
        under the thread's write lock — so no write commits between the read and the
        moment the history is attached (it would be in neither). Kept until the run ends
        (``keep_warm``, ``warm_grown``)."""
        history = self.warm_history(thread_id, event_seq)
        if history is None:
            async with self.lock(thread_id):
                history = MessageHistory(await self.store.top_level_history(thread_id))
                self.attach_history(thread_id, history)
        self.keep_warm(thread_id, history)
        return history

    def warm_history(self, thread_id: str, event_seq: int) -> MessageHistory | None:
        """The live history kept from this thread's last run, if nothing was written to
        the thread since that this process did not see (its event number matches)."""
        history = self._warm.get(thread_id)
        stale = thread_id in self._stale_warm or self._seq.get(thread_id) != event_seq
        if history is None or stale:
            return None
        return history

    def keep_warm(self, thread_id: str, history: MessageHistory) -> None:
        """A run starts on ``history`` (attached): it stays live, whatever the budget,
        until the run ends (``warm_grown``); the warm history it replaces goes."""
        self._stale_warm.discard(thread_id)
        for old in (self._warm.pop(thread_id, None), self._running.get(thread_id)):
            if old is not None and old is not history:
                self.detach_history(thread_id, old)
        self._running[thread_id] = history
        self._count(thread_id, history)
        self._evict(keep=0)

    def warm_grown(self, thread_id: str, history: MessageHistory) -> None:
        """The run on ``history`` ended: keep it warm as the most recently run, count its
        messages now (its run added some) and evict the least recently run warm histories
        while the budget is exceeded. Each size is the one counted at its thread's last
        run start or end: no pass over every kept thread."""
        if self._running.get(thread_id) is not history:
            return  # replaced meanwhile by a later run's (``keep_warm``): not kept
        del self._running[thread_id]
        self._warm[thread_id] = history
        self._count(thread_id, history)
        self._evict(keep=1)

    def _count(self, thread_id: str, history: MessageHistory) -> None:
        self._warm_total += len(history) - self._warm_sizes.get(thread_id, 0)
        self._warm_sizes[thread_id] = len(history)

    def _evict(self, *, keep: int) -> None:
        """Detach the least recently run warm histories while the budget is exceeded and
        more than ``keep`` are warm (1: the one whose run just ended stays, however large).
        A running execution's history is never taken: its run would stop seeing its own
        writes (spec 04 §4.11.2, C04-117); the budget is exceeded by those alone."""
        while self._warm_total > self.warm_messages and len(self._warm) > keep:
            evicted_id, evicted = self._warm.popitem(last=False)
            self.detach_history(evicted_id, evicted)
            self._warm_total -= self._warm_sizes.pop(evicted_id, 0)
            self._stale_warm.discard(evicted_id)

    def attach_history(self, thread_id: str, history: MessageHistory) -> None:
        """Keep ``history`` live: every write through this hub is reflected in it."""
        self._histories.setdefault(thread_id, []).append(history)

    def detach_history(self, thread_id: str, history: MessageHistory) -> None:
        histories = self._histories.get(thread_id)
        if histories is not None and history in histories:
            histories.remove(history)
            if not histories:
                del self._histories[thread_id]

    def live_histories(self, thread_id: str) -> list[MessageHistory]:
        """The thread's live histories (those every write through this hub reaches)."""
        return list(self._histories.get(thread_id, ()))

    def reflect_upsert(self, thread_id: str, message: Message) -> None:
        for history in self._histories.get(thread_id, ()):
            history.upsert(message)

    def reflect_delete(self, thread_id: str, message_ids: Sequence[str]) -> None:
        for history in self._histories.get(thread_id, ()):
            history.remove(message_ids)

    # -- what this process knows of a thread's queue ------------------------------------
    def queue_known_empty(self, thread_id: str) -> bool:
        """True when the thread's queue is empty as far as this process can tell without a
        read: the engine delivered every entry (``note_queue_empty``, under the thread's
        write lock), and since then no entry was queued through this hub and no event of
        another process was seen (a gap in the thread's event numbers). A foreign entry
        the gap check has not seen yet is delivered by a later step or the end-of-run
        check, which reads the queue in its transaction."""
        return thread_id in self._queue_empty

    def note_queue_empty(self, thread_id: str) -> None:
        self._queue_empty.add(thread_id)

    def note_queued(self, thread_id: str) -> None:
        self._queue_empty.discard(thread_id)

    def signal_work(self, thread_id: str) -> None:
        if self.wake is not None:
            self.wake(thread_id)

    # -- publishing ------------------------------------------------------------------
    def publish(self, thread_id: str, kind: str, seq: int | None, data: dict[str, Any]) -> None:
        self._track(thread_id, seq)
        if self.bus.wants(thread_id):
            self._emit(ThreadEvent(thread_id, kind, seq, data, self.clock()))
        if self.on_listed is not None and kind in LISTED:
            self.on_listed(thread_id, kind, data)

    def _track(self, thread_id: str, seq: int | None) -> None:
        """Note a published event number of ``thread_id``."""
        if seq is not None:
            last = self._seq.get(thread_id)
            if last is None:  # the thread's first event here
                if len(self._seq) >= self._seq_cap:
                    self._evict_idle()
            elif seq != last + 1:
                # a gap: another process wrote to the thread (or events of this one were
                # published out of order): the warm history may miss a change, so the
                # next run reloads (a running one keeps its history attached), and the
                # queue may hold entries this process did not write
                self._stale_warm.add(thread_id)
                self._queue_empty.discard(thread_id)
            self._seq[thread_id] = seq

    def publish_message(self, event: StoredEvent, message: Message, *, stored: bool = True) -> None:
        """Publish a committed message (a queue entry's pending view with ``stored=False``);
        live histories see a stored message before subscribers do. The wire form is built
        only when someone subscribes to the thread."""
        tid = event.thread_id
        if stored:
            self.reflect_upsert(tid, message)
        else:
            self._queue_empty.discard(tid)
        self._track(tid, event.seq)
        if self.bus.wants(tid):
            data = {"message": message.to_wire()}
            self._emit(ThreadEvent(tid, "message", event.seq, data, self.clock()))

    def publish_log(self, thread_id: str, seq: int | None, log: LogRow) -> None:
        """Publish a committed log row (its list wire form only when someone listens)."""
        self._track(thread_id, seq)
        if self.bus.wants(thread_id):
            data = {"log": log.to_list_wire()}
            self._emit(ThreadEvent(thread_id, "log", seq, data, self.clock()))

    async def publish_events(self, events: Sequence[StoredEvent]) -> None:
        """Publish committed events, reading each entity's state now (spec 09 §9.6.6), and
        keep live histories in step with the messages they change."""
        for event in events:
            if event.kind == "message_deleted" and event.entity_id:
                self.reflect_delete(event.thread_id, [event.entity_id])
            data = dict(event.data) if event.data is not None else await self.event_data(event)
            self.publish(event.thread_id, event.kind, event.seq, data)

    async def event_data(self, event: StoredEvent) -> dict[str, Any]:
        """``event``'s wire data read now (``thread/event_data.py``); live histories see a
        stored message it reads."""
        return await event_data(self, event, self._read_message)

    def _read_message(self, thread_id: str, message: Message) -> None:
        if not (message.status == "pending" and (message.metadata or {}).get("queued")):
            self.reflect_upsert(thread_id, message)
        else:  # a queue entry (a parent's delivery, a cancelled one after termination)
            self._queue_empty.discard(thread_id)

    # -- projections -----------------------------------------------------------------
    async def project(self, thread_id: str, messages: list[Message]) -> list[Message]:
        """Fill the projected ``subagent_*`` fields from the registry (spec 01 §1.4.11)."""
        for message in messages:
            if message.subagent_id:
                break
        else:  # most writes: nothing to project, no set built
            return messages
        wanted = {m.subagent_id for m in messages if m.subagent_id}
        registry = {e.reference: e for e in await self.store.get_registry(thread_id)}
        missing = [ref for ref in wanted if ref not in registry]
        others = await self.store.get_threads(missing) if missing else {}
        for message in messages:
            ref = message.subagent_id
            if not ref:
                continue
            entry = registry.get(ref)
            if entry is not None:
                message.subagent_relationship = entry.relationship
                message.subagent_name = entry.name
                message.subagent_title = entry.title
                message.subagent_description = entry.description
                message.subagent_status = entry.status
                message.subagent_blocking = entry.blocking
                message.subagent_thread_name = entry.thread_name
                message.subagent_spawn_group_id = entry.spawn_group_id
                continue
            other = others.get(ref)
            if other is None:
                continue
            agent = self.definitions.agent(other.agent_id)
            message.subagent_name = other.agent_id
            message.subagent_title = agent.display_title if agent else None
            message.subagent_description = (agent.description or None) if agent else None
            message.subagent_status = "terminated" if other.terminated is not None else None
            message.subagent_thread_name = thread_name(other.tags)
        return messages

    # -- log rows ----------------------------------------------------------------------
    async def _hook_failed(
        self, state: ThreadState, hook: HookDefinition, context: HookContext, exc: BaseException
    ) -> None:
        """Record a swallowed hook failure as a runtime error log row (spec 03 §3.5.1)."""
        row = LogRow(
            id=new_id(),
            kind=None,
            provider="system",
            model=hook.id,
            endpoint=f"hook.{hook.name}",
            created_at=0,
            is_complete=True,
            error=format_hook_error(exc),
            error_type="hook_error",
            error_origin=f"hook:{hook.id}",
        )
        await self.write_runtime_log(state.thread_id, row, state.root_message_id, fence=state.fence)

    async def insert_log(
        self, thread_id: str, row: LogRow, *, fence: Fence | None = None
    ) -> LogRow:
        """Insert a log row as given (``created_at`` from the store) and publish it;
        ``fence``: the lease of the execution that writes it (``Store.fenced``)."""
        async with self.lock(thread_id):
            stored, event = await self.store.fenced(fence).insert_log(thread_id, row)
            self.publish_log(thread_id, event.seq, stored)
            return stored

    async def update_log(
        self,
        thread_id: str,
        row: LogRow,
        *,
        bodies: Sequence[str] = ("request", "response"),
        fence: Fence | None = None,
    ) -> LogRow:
        """Replace a log row's columns (and the named bodies) and publish the new row."""
        async with self.lock(thread_id):
            event = await self.store.fenced(fence).update_log(thread_id, row, bodies=bodies)
            self.publish_log(thread_id, event.seq, row)
            return row

    async def write_runtime_log(
        self,
        thread_id: str,
        row: LogRow,
        root_message_id: str | None = None,
        *,
        fence: Fence | None = None,
    ) -> LogRow | None:
        """Insert a complete runtime row anchored to the turn's root, else the newest
        top-level message (spec 01 §1.9.6); a failure is logged, never raised."""
        try:
            async with self.lock(thread_id):
                if root_message_id is not None:
                    row = row.model_copy(update={"message_id": root_message_id})
                stored, event = await self.store.fenced(fence).insert_log(
                    thread_id, row, anchor_newest=root_message_id is None
                )
                self.publish_log(thread_id, event.seq, stored)
                return stored
        except Exception as exc:
            logger.warning("could not write log row for thread %s: %s", thread_id, exc)
            return None
