"""What one node tells the others and hears from them (spec 12 §12.4, §12.5, §12.7).

Where several nodes share a store, each LISTENs (``Cluster.listen``) and:

- ``events``: another node committed event rows of a thread. Its warm history and its
  knowledge of the queue become doubtful (``ThreadHub.note_foreign``); a thread with
  subscribers here has the rows read and delivered in ``seq`` order
  (``node/delivery.py``); a thread whose run here keeps a live history has the changed
  messages read into it.
- ``wake``: work was queued. The owner wakes its run; a node that could not start it
  (draining) says so, and the others try.
- ``chunks``: ephemeral frames (chunks, tool events) of a run on another node, for the
  subscribers here.
- ``registry``: a thread created or updated on another node, for the thread-list
  subscribers (``/api/events``) here; status changes reach them from ``events`` (its
  payload says when a transaction wrote one), deletions from ``control``.
- ``control``: ``abort`` (stop, terminate, delete of a run this node owns), ``result``
  (a child's session result, for a blocking call waiting here), ``catchup``
  (a node opened a socket for a thread running here: send the text so far, and forward
  the run's ephemeral frames), ``deleted`` (close the sockets of a deleted thread) and
  ``joined`` (a node started: notify from now on).

The node that writes a change publishes it to its own subscribers from memory and skips
its own notifications. What the relay asks of the engine goes through ``NodeHost``
(``node/host.py``); what the engine tells the other nodes comes in through ``Peers``, which
the relay implements.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from threadloom.errors import EventOverflow, ThreadNotFound
from threadloom.node.cluster import Cluster
from threadloom.node.delivery import order_delivery
from threadloom.node.host import ChildResult, NodeHost
from threadloom.node.liveness import Liveness
from threadloom.records import AttachmentRef
from threadloom.store.base import Store
from threadloom.thread.events import ThreadEvent
from threadloom.thread.hub import LISTED, ThreadHub
from threadloom.thread.state import ThreadState

logger = logging.getLogger("threadloom.engine")

ABORT_WAIT_S = 10.0
"""How long a node that relayed a stop, terminate or delete waits for the owner."""
POLL_S = 0.05
CATCHUP_WAIT_S = 1.0
COALESCE_S = 0.05
"""``THREADLOOM_CHUNK_COALESCE_MS``' default: deltas of one message sent as one."""
FRAME_LIMIT = 7_000
"""Bytes of chunk text per notification (the payload limit is 8,000)."""
FORWARDED = frozenset(
    (
        "message_chunk",
        "reasoning_chunk",
        "tool_call_started",
        "tool_call_done",
        "event",
        "telemetry",
        "stopped_by_user",
    )
)
"""Ephemeral kinds a run's owner forwards to the nodes with subscribers."""
CHUNKS = ("message_chunk", "reasoning_chunk")
WATCH_BATCH = 150
"""Thread ids per ``watch`` notification (each ~40 bytes of the 8,000 a payload may have)."""
WATCH_SETTLE_S = 1.0
"""After a watch is announced, how long until its threads are read up to their heads."""
RECHECK_S = 5.0
"""How often the streamed threads are read up to their heads (``THREADLOOM_SWEEP_SECONDS``)."""
RESULT_TEXT_LIMIT = 3_000
"""Characters of a session result's fixed text sent to the node whose call waits."""
RESULT_REFS_LIMIT = 3_000
"""Bytes of attachment references sent with it (more: the files are in the parent, the
call's result names none)."""


class Relay:
    """One node's side of the notifications; the engine's ``Peers``."""

    def __init__(
        self,
        host: NodeHost,
        hub: ThreadHub,
        cluster: Cluster,
        coalesce_s: float = COALESCE_S,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self.host = host
        self.coalesce_s = coalesce_s
        """How long deltas of one message are gathered before they are sent."""
        self.recheck_s = recheck_s
        """How often the streamed threads are read up to their heads (missed notices)."""
        self._watching: set[str] = set()
        """Threads this node told the others it streams (spec 12 §12.7.6)."""
        self._listing = False
        """Whether this node told the others it has thread-list sockets."""
        self.hub = hub
        self.store: Store = hub.store
        self.cluster = cluster
        self.node_id = cluster.node_id
        self.liveness: Liveness | None = None
        """The node's liveness, where it has one: nothing of its runs is relayed while it
        is fenced, and a reconnection runs its sweep at once."""
        self.delivery = order_delivery(hub, lambda: not cluster.peers)
        self.delivery.built = self._relayed
        self._tasks: set[asyncio.Task[Any]] = set()
        self._forwarders: dict[str, asyncio.Task[None]] = {}
        self.delivery_hook()

    def delivery_hook(self) -> None:
        bus = self.hub.bus
        first, last = bus.on_first_subscriber, bus.on_last_subscriber

        def subscribed(thread_id: str) -> None:
            if first is not None:
                first(thread_id)
            if thread_id not in self._forwarders:  # a socket here, not this node's forwarder
                self._watching.add(thread_id)
                self._spawn(self._announce([thread_id], True))

        def unsubscribed(thread_id: str) -> None:
            if last is not None:
                last(thread_id)
            if thread_id in self._watching:
                self._watching.discard(thread_id)
                self._spawn(self._announce([thread_id], False))

        bus.on_first_subscriber = subscribed
        bus.on_last_subscriber = unsubscribed
        bus.on_listeners = self._listeners

    async def start(self) -> None:
        self.hub.on_listed = self._listed
        await self.cluster.listen(self._notice, self._connected)
        await self.cluster.notify("control", {"a": "joined", "n": self.node_id})
        self._spawn(self._rechecking())

    async def close(self) -> None:
        for task in [*self._tasks, *self._forwarders.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._forwarders.values(), return_exceptions=True)
        self._tasks.clear()
        self._forwarders.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("relay task failed: %s", task.exception())

    # -- hearing -----------------------------------------------------------------------
    def _notice(self, topic: str, payload: dict[str, Any]) -> None:
        if payload.get("n") == self.node_id:
            return  # this node's own: published from memory already
        if not self.cluster.peers:  # another node writes: tell it what this one writes,
            self.cluster.peers = True  # and what this one watches (its thread and list
            self._spawn(self._announce_all())  # sockets opened while it knew of no peer)
        tid = str(payload.get("t") or "")
        if topic == "events":
            self.hub.note_foreign(tid)
            first, last = int(payload.get("f", 0)), int(payload.get("s", 0))
            if self.hub.bus.has_thread_subscribers(tid):
                self.delivery.expect(tid, first, last)  # thread-list subscribers too
                return
            if self.hub.has_live_history(tid):
                self._spawn(self._reflect(tid, first, last))
            shown = payload.get("a")
            if shown and self.hub.bus.wants(tid):  # a status change, listed here
                if isinstance(shown, dict):  # as committed: a quick run's "running" too
                    event = ThreadEvent(tid, "status", None, shown, self.hub.clock())
                    self.hub.bus.publish(event)
                else:
                    self._spawn(self._relay_status(tid, first, last))
        elif topic == "registry":
            kind = payload.get("k")
            if kind in LISTED and self.hub.bus.wants(tid):
                self.hub.bus.publish(ThreadEvent(tid, str(kind), None, {}, self.hub.clock()))
        elif topic == "wake":
            if self.host.run_of(tid) is not None or payload.get("d"):
                self.host.wake(tid)
        elif topic == "chunks":
            frame = payload.get("f") or {}
            kind, data = frame.get("k"), frame.get("d")
            if isinstance(kind, str) and isinstance(data, dict):
                self.delivery.offer(ThreadEvent(tid, kind, None, data, self.hub.clock()))
        elif topic == "control":
            self._control(tid, payload)

    def _control(self, tid: str, payload: dict[str, Any]) -> None:
        action = payload.get("a")
        host = self.host
        if action == "abort":
            if host.run_of(tid) is not None:
                terminated = payload.get("at")
                if isinstance(terminated, int):
                    self.hub.set_terminated(tid, terminated)
                self._spawn(host.abort(tid, str(payload.get("r") or "aborted_by_user")))
        elif action == "result":
            if str(payload.get("c") or "") in host.waiting():
                self._spawn(self._take_result(tid, payload))
        elif action == "watch":  # a node streams these threads: tell it their events
            threads = [str(t) for t in payload.get("ts") or ()]
            self.cluster.watch(str(payload.get("n")), threads, bool(payload.get("on")))
            if payload.get("on"):
                for thread_id in threads:  # its text so far, if it runs here
                    self._spawn(self._catchup_requested(thread_id))
        elif action == "lists":
            self.cluster.watch_lists(str(payload.get("n")), bool(payload.get("on")))
        elif action == "joined":  # it knows nothing of what this node watches yet
            self._spawn(self._announce_all())
        elif action == "catchup":
            self._spawn(self._catchup_requested(tid))
        elif action == "deleted":
            run = host.run_of(tid)
            if run is not None and run.task is not None:
                run.task.cancel()  # its writes would find no thread row anyway
            self.hub.forget(tid)
            data = {"thread_id": tid, "user_id": payload.get("u")}
            self.hub.publish(tid, "thread_deleted", None, data)

    async def _connected(self, first: bool) -> None:
        """After a reconnection: deliver what was missed, ask for catch-up text, and run
        the queue's safety net at once (spec 12 §12.7.4)."""
        if first:
            return
        for child_id in self.host.waiting():  # its ``result`` may have been missed
            self._spawn(self._recheck_waiter(child_id))
        self.delivery.resync()
        await self._announce_all()  # the others may have missed a watch meanwhile
        for tid in self.delivery.threads:
            await self._ask_catchup(tid)
        if self.liveness is not None:
            await self.liveness.sweep()

    async def _relay_status(self, tid: str, first: int, last: int) -> None:
        """Another node changed the status of a thread nobody here streams: the
        thread-list subscribers here see it (``thread_activity``, spec 12 §12.7.5)."""
        for stored in await self.store.read_events(tid, first - 1, last - first + 1):
            if stored.kind == "status":
                self.hub.bus.publish(await self.hub.relayed_event(stored))

    def _listed(self, tid: str, kind: str, data: dict[str, Any]) -> None:
        """This node published a thread-list event: the other nodes' ``/api/events``
        subscribers read the row (spec 12 §12.7.5)."""
        if self.cluster.peers:
            self._spawn(self.cluster.notify("registry", {"t": tid, "k": kind, "n": self.node_id}))

    async def _reflect(self, tid: str, first: int, last: int) -> None:
        """Read another node's changes of messages into this node's live history."""
        for stored in await self.store.read_events(tid, first - 1, last - first + 1):
            if stored.kind in ("message", "message_deleted"):
                await self.hub.relayed_event(stored)

    def _relayed(self, event: ThreadEvent) -> None:
        """A relayed event is delivered here: a run that started on another node is asked
        for its text so far and its ephemeral frames (spec 12 §12.7.3)."""
        if event.kind == "status" and (event.data.get("status") or {}).get("state") == "running":
            self._spawn(self._ask_catchup(event.thread_id))

    def refused_wake(self, thread_id: str) -> None:
        """This node could not start the thread's run (draining): another node should."""
        self._spawn(self.cluster.notify("wake", {"t": thread_id, "n": self.node_id, "d": 1}))

    # -- what this node watches (spec 12 §12.7.6) ----------------------------------------
    async def _announce(self, threads: list[str], on: bool) -> None:
        """Tell the other nodes this node streams ``threads`` (or no longer does), so
        they notify their events; the rows of a watched thread are read again a moment
        later, for what was committed before every node had heard."""
        if not self.cluster.peers or not threads:
            return
        for start in range(0, len(threads), WATCH_BATCH):
            batch = threads[start : start + WATCH_BATCH]
            await self.cluster.notify(
                "control", {"a": "watch", "ts": batch, "on": on, "n": self.node_id}
            )
        if on:
            await asyncio.sleep(WATCH_SETTLE_S)
            for tid in threads:
                self.delivery.resync_thread(tid)

    async def _announce_all(self) -> None:
        await self._announce(sorted(self._watching), True)
        if self._listing:
            await self.cluster.notify("control", {"a": "lists", "on": True, "n": self.node_id})

    def _listeners(self, present: bool) -> None:
        """Thread-list sockets opened here (the first) or all closed: the others notify
        status changes of every thread while some node has them (spec 12 §12.7.5)."""
        self._listing = present
        if self.cluster.peers:
            payload = {"a": "lists", "on": present, "n": self.node_id}
            self._spawn(self.cluster.notify("control", payload))

    async def _rechecking(self) -> None:
        """Every ``recheck_s``, the streamed threads are read up to their heads: what a
        lost or late notification left out reaches the subscribers within that time."""
        while True:
            await asyncio.sleep(self.recheck_s)
            if self.cluster.peers and self.delivery.threads:
                self.delivery.resync()

    async def _ask_catchup(self, tid: str) -> None:
        if self.cluster.peers and self.host.run_of(tid) is None:
            await self.cluster.notify("control", {"t": tid, "a": "catchup", "n": self.node_id})

    # -- the owner's forwarding of ephemeral frames (spec 12 §12.7.2, §12.7.3) ----------
    async def _catchup_requested(self, tid: str) -> None:
        """Forward the thread's run if it runs here, or starts within ``CATCHUP_WAIT_S``
        (a node that saw its ``running`` status may ask before the run is registered)."""
        host = self.host
        if host.run_of(tid) is None:
            if await self.cluster.live_owner(tid) not in (None, self.node_id):
                return  # another node's run: its owner answers
            deadline = time.monotonic() + CATCHUP_WAIT_S
            while host.run_of(tid) is None:
                if time.monotonic() >= deadline:
                    return
                await asyncio.sleep(POLL_S)
        self._forward(tid)

    def _forward(self, tid: str) -> None:
        task = self._forwarders.get(tid)
        if task is None or task.done():
            subscription = self.hub.bus.subscribe(tid, kinds=FORWARDED, max_queue=10_000)
            self._forwarders[tid] = asyncio.get_running_loop().create_task(
                self._forwarding(tid, subscription)
            )
        self._spawn(self._send_catchup(tid))

    async def _send_catchup(self, tid: str) -> None:
        """One chunk with offset 0 and the text so far, per message being generated."""
        run = self.host.run_of(tid)
        if run is None:
            return
        for message_id in list(run.partial):
            message = await self.store.get_message(tid, message_id)
            depth = message.depth if message is not None else 0
            for kind, text in (
                ("reasoning_chunk", run.partial_reasoning.get(message_id, "")),
                ("message_chunk", run.partial.get(message_id, "")),
            ):
                if text:
                    data = {"message_id": message_id, "depth": depth, "chunk": text, "offset": 0}
                    await self._send_chunk(tid, kind, data)

    async def _forwarding(self, tid: str, subscription: Any) -> None:
        """Forward the run's ephemeral frames while it runs here, deltas of one message
        coalesced for ``coalesce_s``."""
        pending: dict[str, Any] | None = None
        pending_kind = ""
        flush_at = 0.0
        try:
            while self.host.run_of(tid) is not None or subscription.pending():
                timeout = max(0.0, flush_at - time.monotonic()) if pending else 1.0
                try:
                    event = await subscription.get(timeout)
                except TimeoutError:
                    if pending is not None:
                        await self._send_chunk(tid, pending_kind, pending)
                        pending = None
                    continue
                except EventOverflow:  # the notifications fell behind: their text is
                    logger.warning("thread %s: forwarding fell behind, stopped", tid)
                    return  # repaired by the completing message_data (spec 12 §12.7.2)
                if event.seq is not None or event.kind not in FORWARDED:
                    continue
                data = dict(event.data)
                if (
                    pending is not None
                    and event.kind == pending_kind
                    and event.kind in CHUNKS
                    and data.get("message_id") == pending.get("message_id")
                    and data.get("offset") == pending["offset"] + len(pending["chunk"])
                ):
                    pending["chunk"] += data.get("chunk", "")
                    continue
                if pending is not None:
                    await self._send_chunk(tid, pending_kind, pending)
                    pending = None
                if event.kind in CHUNKS and isinstance(data.get("chunk"), str):
                    pending, pending_kind = data, event.kind
                    flush_at = time.monotonic() + self.coalesce_s
                else:
                    await self._send(tid, event.kind, data)
            if pending is not None:
                await self._send_chunk(tid, pending_kind, pending)
        finally:
            subscription.close()
            if self._forwarders.get(tid) is asyncio.current_task():
                del self._forwarders[tid]

    async def _send_chunk(self, tid: str, kind: str, data: dict[str, Any]) -> None:
        text = str(data.get("chunk", ""))
        offset = int(data.get("offset", 0))
        for start in range(0, max(len(text), 1), FRAME_LIMIT // 4):  # ≤ 4 bytes a char
            part = text[start : start + FRAME_LIMIT // 4]
            await self._send(tid, kind, {**data, "chunk": part, "offset": offset + start})

    async def _send(self, tid: str, kind: str, data: dict[str, Any]) -> None:
        liveness = self.liveness
        if liveness is not None and liveness.fenced_now():
            return  # its runs may be another node's now: nothing of them is relayed
        await self.cluster.notify(
            "chunks", {"t": tid, "n": self.node_id, "f": {"k": kind, "d": data}}
        )

    # -- blocking calls whose child ran on another node ---------------------------------
    def unwaited(self, result: ChildResult) -> None:
        """A child's run of a blocking relationship ended here and no call here waits for
        it: the node that runs the parent may. The result was delivered durably already
        (the parent's queue entry, or its registry status); this tells that node, which
        takes the queue entry back and answers its call instead."""
        if not self.cluster.peers:
            return
        payload: dict[str, Any] = {
            "t": result.parent_id,
            "a": "result",
            "c": result.child_id,
            "q": result.queued_id,
            "s": result.success,
            "r": result.reason,
            "m": result.message_id,
            "n": self.node_id,
        }
        if result.message_id is None:  # a fixed text (an abort, a stop): short
            payload["x"] = result.text[:RESULT_TEXT_LIMIT]
        refs = [ref.model_dump() for ref in result.refs]
        if len(json.dumps(refs)) <= RESULT_REFS_LIMIT:
            payload["p"] = refs
        self._spawn(self.cluster.notify("control", payload))

    async def _take_result(self, parent_id: str, payload: dict[str, Any]) -> None:
        """The session result a blocking call here waits for came from another node: take
        its queue entry out of the parent's queue (so the parent does not get it twice)
        and answer the call, as if the child had ended here (spec 06 §6.8.2)."""
        child_id = str(payload.get("c"))
        queued = payload.get("q")
        if isinstance(queued, str):
            row = await self.store.get_thread(parent_id)
            if row is None or not await ThreadState(self.hub, row).delete_message(queued):
                return  # the parent has it as a message already: not twice
        text = payload.get("x")
        message_id = payload.get("m")
        if not isinstance(text, str):
            found = None
            if isinstance(message_id, str):
                found = await self.store.get_message(child_id, message_id)
            text = (found.content or "") if found is not None else ""
        result = ChildResult(
            child_id,
            parent_id,
            bool(payload.get("s")),
            text,
            str(payload.get("r") or ""),
            message_id=message_id if isinstance(message_id, str) else None,
            refs=[AttachmentRef.model_validate(ref) for ref in payload.get("p") or []],
        )
        self.host.answer(result)

    async def _recheck_waiter(self, child_id: str) -> None:
        """After notifications were missed: a result the child's node delivered to the
        parent's queue meanwhile answers the call waiting here (implicit communication;
        with explicit communication only the missed notification carried it)."""
        child = await self.store.get_thread(child_id)
        if child is None or child.parent_id is None:
            return
        for entry in await self.store.list_queue(child.parent_id):
            metadata = entry.metadata or {}
            if entry.source != "subagent" or metadata.get("subagent_id") != child_id:
                continue
            parsed = self.host.parse_result(child_id, entry.content or "")
            if parsed is None:
                continue
            refs = [a.model_dump() for a in entry.attachments or [] if isinstance(a, AttachmentRef)]
            payload = {"c": child_id, "q": entry.id, "s": parsed[0], "x": parsed[1], "p": refs}
            await self._take_result(child.parent_id, payload)
            return

    # -- stop, terminate and delete of another node's run (spec 12 §12.5) ---------------
    async def remote_abort(self, tid: str, reason: str) -> bool:
        """Have the owner abort the thread's run, or settle it here when the owner is
        dead; ``True`` once the status left ``running`` (within ``ABORT_WAIT_S``)."""
        store, cluster = self.store, self.cluster
        owner = await cluster.live_owner(tid)
        if owner == self.node_id:
            return False  # this node's run has ended meanwhile
        if owner is None:
            return await self._settle_here(tid, reason)
        row = await store.get_thread(tid)
        if row is None:
            raise ThreadNotFound(tid)
        payload: dict[str, Any] = {"t": tid, "a": "abort", "r": reason, "n": self.node_id}
        if row.terminated is not None:
            payload["at"] = row.terminated
        await cluster.notify("control", payload)
        deadline = time.monotonic() + ABORT_WAIT_S
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            row = await store.get_thread(tid)
            if row is None or row.status.state != "running":
                return True
            if await cluster.live_owner(tid) is None:  # died meanwhile: the user's request wins
                return await self._settle_here(tid, reason)
        return False

    async def _settle_here(self, tid: str, reason: str) -> bool:
        row = await self.store.get_thread(tid)
        if row is None or row.status.state != "running":
            return False
        return await self.host.settle_lost(tid, reason)

    async def announce_deleted(self, deleted: list[str], owners: dict[str, str | None]) -> None:
        for tid in deleted:
            payload = {"t": tid, "a": "deleted", "u": owners.get(tid), "n": self.node_id}
            with contextlib.suppress(Exception):
                await self.cluster.notify("control", payload)
