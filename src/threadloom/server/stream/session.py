"""One subscriber's session on a thread's stream (spec 09 §9.3–§9.10), independent of the
transport: the opening sequence (snapshot, replay from the durable ``thread_events`` rows or
``resync``, catch-up of text being generated), then live frames through the bounded outbox
(the frames and the outbox: ``frames.py``). ``server/stream/stream.py`` serves it over
WebSocket and SSE.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from threadloom.server.auth.principal import Principal
from threadloom.server.deps import ServerContext
from threadloom.server.settings import StreamSettings
from threadloom.server.stream.auth import StreamAuth, recheck
from threadloom.server.stream.frames import (
    SHUTTING_DOWN,
    Close,
    Filters,
    Frame,
    Framer,
    Out,
    Outbox,
)
from threadloom.store.base import StoredEvent
from threadloom.thread.event_data import event_data
from threadloom.thread.events import ThreadEvent

REPLAY_PAGE = 1000

log = logging.getLogger("threadloom.server.stream")


@dataclass(frozen=True)
class Grant:
    """What a successful handshake established."""

    principal: Principal
    auth: StreamAuth
    """The credential to re-check (for a ticket, the one it was minted with)."""
    thread_id: str
    filters: Filters
    since: int | None


class Session:
    """One subscriber's view of a thread: opening sequence, replay, catch-up, live frames."""

    def __init__(self, ctx: ServerContext, grant: Grant, settings: StreamSettings) -> None:
        self.ctx = ctx
        self.grant = grant
        self.settings = settings
        self.runtime = ctx.runtime
        self.thread_id = grant.thread_id
        self.framer = Framer(grant.thread_id, grant.filters, 0)
        self.outbox = Outbox(settings.buffer_frames, settings.buffer_bytes)
        # step 1: frames produced from now on are held for this subscriber (bounded like
        # the outbox) until the opening sequence is sent; then each is framed into the
        # outbox as it is published (``_live``), and nothing waits in the bus
        self.subscription = self.runtime.events.subscribe(
            grant.thread_id, max_queue=settings.buffer_frames, max_bytes=settings.buffer_bytes
        )
        self.subscription.on_overflow = self.slow_consumer
        self.dropped = False
        """Cut off as a slow consumer."""
        self._unregister = ctx.on_shutdown(lambda: self.outbox.put(SHUTTING_DOWN))

    def close(self) -> None:
        self._unregister()
        self.subscription.close()

    def fail(self, code: str, message: str, close: Close) -> None:
        """End the session: no more events, the queue discarded, an ``error`` frame and
        ``close`` next."""
        self.subscription.close()
        self.outbox.fail(self.framer.error(code, message), close)

    def slow_consumer(self) -> None:
        """Cut the subscriber off (§9.10.2): its subscription ends and its queue is
        discarded now, not once a write stuck on its socket times out; the transport
        sends the ``error`` frame and the close after the write in flight."""
        if self.dropped:
            return
        self.dropped = True
        self.fail(
            "slow_consumer",
            f"Send buffer overflow; reconnect with since={self.framer.head}",
            Close(4008, "Slow consumer"),
        )

    async def frames(self) -> AsyncIterator[Out]:
        """Everything this subscriber is sent, in order; ends after a Close."""
        store = self.runtime.store
        row = await store.get_thread(self.thread_id)  # step 2: one snapshot
        if row is None:
            yield Close(1000, "Thread deleted")
            return
        head = row.event_seq
        framer = self.framer
        framer.head = head
        since = self.grant.since
        resync: str | None = None
        if since is not None and since > head:
            resync = "ahead"
        elif since is not None and since < row.events_pruned_through:
            resync = "expired"
        replay: list[ThreadEvent] = []
        if since is not None and resync is None and since < head:
            replay_or_none = await self._replay(since, head)
            if replay_or_none is None:
                resync = "expired"
            else:
                replay = replay_or_none
        start = since if since is not None and resync is None else head
        snapshot = framer.status(start, row.status.model_dump(), row.terminated, snapshot=True)
        snapshot["head"] = head
        yield Frame("thread_status", start, json.dumps(snapshot, separators=(",", ":")))  # 3
        if resync is not None:
            body = {"type": "resync", "seq": head, "since": since, "reason": resync}
            yield Frame("resync", head, json.dumps(body, separators=(",", ":")))
        for event in replay:  # step 4
            if self.outbox.finished:
                break  # cut off (or closing) meanwhile: its queue says how it ends
            item = framer.convert(event.kind, event.seq, event.data, event.at)
            if isinstance(item, Frame):
                yield item
        replay.clear()
        framer.head = head
        if not self.outbox.finished:
            await self._catch_up(head)  # steps 5 and 6, then live
        while True:
            next_item = await self.outbox.get(self.settings.heartbeat_s)
            if next_item is None:
                next_item = framer.heartbeat()
            yield next_item
            if isinstance(next_item, Close):
                return

    async def _replay(self, since: int, head: int) -> list[ThreadEvent] | None:
        """The durable frames after ``since`` up to ``head``, compacted (§9.7.2), built from
        the entities' current state; ``None`` when the rows are no longer all there."""
        store = self.runtime.store
        events: list[StoredEvent] = []
        after = since
        while after < head:
            batch = await store.read_events(self.thread_id, after, REPLAY_PAGE)
            if not batch or batch[0].seq != after + 1:
                return None  # pruned (or never written): the window is gone
            events.extend(e for e in batch if e.seq <= head)
            after = batch[-1].seq
            if len(batch) < REPLAY_PAGE:
                break
        last: dict[tuple[str, str], int] = {}
        for index, event in enumerate(events):
            key = _entity_key(event)
            if key is not None:
                last[key] = index
        out: list[ThreadEvent] = []
        for index, event in enumerate(events):
            key = _entity_key(event)
            if key is not None and last[key] != index:
                continue
            data = await event_data(self.runtime.hub, event)
            out.append(ThreadEvent(self.thread_id, event.kind, event.seq, data, event.created_at))
        return out

    async def _catch_up(self, head: int) -> None:
        """Step 5 (text generated so far) and step 6 (held frames after ``head``) into the
        outbox, then live: from the same moment on, each event is framed into the outbox
        as it is published."""
        run = self.runtime.runs.run_of(self.thread_id)
        known: dict[str, tuple[int, bool]] = {}
        for message_id in list(run.partial) if run is not None else []:
            message = await self.runtime.store.get_message(self.thread_id, message_id)
            if message is not None:
                known[message_id] = (message.depth, message.silent is True)
        # no await from here on: the partial texts and the held frames are one moment
        held = self.subscription.drain()
        if self.outbox.finished:
            return  # cut off (its buffer overflowed) or closing
        partial = dict(run.partial) if run is not None else {}
        reasoning = dict(run.partial_reasoning) if run is not None else {}
        created_live = {
            str((e.data.get("message") or {}).get("id"))
            for e in held
            if e.kind == "message" and e.seq is not None and e.seq > head
        }
        framer = self.framer
        out: list[Out] = []
        covered: set[str] = set()
        for message_id, text in partial.items():
            if message_id in created_live or message_id not in known:
                continue
            depth, silent = known[message_id]
            framer.silent[message_id] = silent
            covered.add(message_id)
            for kind, so_far in (
                ("reasoning_chunk", reasoning.get(message_id, "")),
                ("message_chunk", text),
            ):
                if not so_far:
                    continue
                data = {"message_id": message_id, "depth": depth, "chunk": so_far, "offset": 0}
                item = framer.convert(kind, None, data, 0)
                if item is not None:
                    out.append(item)
        for event in held:
            if event.seq is not None and event.seq <= head:
                continue
            if event.kind in ("message_chunk", "reasoning_chunk"):
                message_id = str(event.data.get("message_id"))
                if message_id in covered:
                    continue  # the catch-up text already holds it
                if message_id not in created_live:
                    continue  # no longer being generated
            item = framer.convert(event.kind, event.seq, event.data, event.at)
            if item is not None:
                out.append(item)
        for item in out:
            if not self.outbox.put(item):
                self.slow_consumer()
                return
        if self.outbox.finished:  # a held Close (the thread was deleted)
            self.subscription.close()
        else:
            self.subscription.forward(self._live)

    def _live(self, event: ThreadEvent) -> None:
        """One live event: framed into the outbox now, in the publisher's call, never
        waiting for the socket (§9.10.2 rule 2); a frame that does not fit cuts the
        subscriber off at once."""
        try:
            item = self.framer.convert(event.kind, event.seq, event.data, event.at)
        except Exception:
            log.exception("stream of thread %s: event %s not framed", self.thread_id, event.kind)
            self.fail("internal_error", "Internal error", Close(1011, "Internal error"))
            return
        if item is None:
            return
        if not self.outbox.put(item):
            self.slow_consumer()
        elif isinstance(item, Close):
            self.subscription.close()  # the last frame: nothing more is wanted

    async def revalidate(self) -> None:
        """Re-check the credential and the access at least every ``revalidate_s``, and at once
        when a route of this node revokes a credential or changes a user (§10.9 rule 5); a
        ticket-opened socket is re-checked against its minting credential. A socket that
        carries log frames also needs the ``logs`` permission still."""
        grant = self.grant
        seen = self.ctx.revocations.generation
        while True:
            seen = await self.ctx.revocations.wait(self.settings.revalidate_s, seen)
            who = await recheck(self.ctx, grant.auth)
            if who is None:
                self.fail("unauthorized", "Credentials expired", Close(4001, "Credentials expired"))
                return
            row = await self.runtime.store.get_thread(self.thread_id)
            lost_logs = grant.filters.logs and not who.has_permission("logs")
            if lost_logs or (row is not None and not who.may_access(row.user_id)):
                self.fail("forbidden", "Access revoked", Close(4003, "Access revoked"))
                return


def _entity_key(event: StoredEvent) -> tuple[str, str] | None:
    """What replay compaction groups by; ``None`` for file events (sent one by one)."""
    entity = event.entity_id or ""
    if event.kind in ("message", "message_deleted"):
        return ("message", entity)
    if event.kind in ("subagent", "subagent_removed"):
        return ("subagent", entity)
    if event.kind == "approval":
        return ("approval", entity)
    if event.kind == "status":
        return ("status", "")
    if event.kind == "shared_state":
        return ("shared_state", "")
    if event.kind == "log":
        return ("log", entity)
    return None
