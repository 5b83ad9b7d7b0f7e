"""``ThreadState``: the one object through which code acts on a thread (spec 02).

The class is a façade: each method validates its input and hands off to the module that
owns the concept (``messages``, ``queue``, ``logs``, ``family``, ``files``). A ThreadState
is either *at rest* (``execution is None``) or *in execution*, bound to a running execution
whose depth, parent message, active prompt and live history its writes inherit.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from threadloom.errors import InvalidArgument, ThreadNotFound
from threadloom.records import (
    Approval,
    ApprovalDecision,
    AttachmentRef,
    Compaction,
    CostReport,
    FileChunk,
    FileRecord,
    FileStats,
    GrepResult,
    LogRow,
    Message,
    MessagesPage,
    ReaddirResult,
    SharedState,
    SubagentRegistryEntry,
    ThreadStatus,
    UserHandle,
)
from threadloom.store.base import Fence, Store, ThreadRow
from threadloom.thread import approvals, family, files, logs, messages, queue, shared_state
from threadloom.thread.lognorm import to_json_safe
from threadloom.thread.memory import Memory

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub


_NO_ARGUMENTS: Mapping[str, Any] = MappingProxyType({})
"""The arguments of every state without any: read-only, so one object serves them all."""


class FenceHolder(Protocol):
    """What holds an execution's fence (the engine's run): read at each write, so the
    writes after the run released its lease are checked no more."""

    @property
    def fence(self) -> Fence | None: ...


class ThreadState:
    """A thread's messages, queue, status, logs, files, family and identity (spec 02)."""

    def __init__(
        self,
        hub: ThreadHub,
        row: ThreadRow,
        children: Sequence[SubagentRegistryEntry] = (),
        *,
        execution: Any = None,
        context: dict[str, Any] | None = None,
        arguments: Mapping[str, Any] | None = None,
        fenced_by: FenceHolder | None = None,
    ) -> None:
        self._hub = hub
        self._fenced_by = fenced_by
        self.thread_id = row.id
        self.agent_id = row.agent_id
        self.user_id = row.user_id
        self.parent_thread_id = row.parent_id
        self._terminated = row.terminated
        self._children = tuple(children)
        source = row.arguments if arguments is None else arguments
        self._arguments: Mapping[str, Any] = (
            MappingProxyType(copy.deepcopy(dict(source))) if source else _NO_ARGUMENTS
        )
        self.context: dict[str, Any] = {} if context is None else context
        self.execution = execution
        hub.note_thread(row)

    def __repr__(self) -> str:
        mode = "in execution" if self.execution is not None else "at rest"
        return f"<ThreadState {self.thread_id} agent={self.agent_id!r} {mode}>"

    # -- properties (spec 02 §2.3) ---------------------------------------------------
    @property
    def hub(self) -> ThreadHub:
        return self._hub

    @property
    def fence(self) -> Fence | None:
        """The lease this state's writes of its thread are checked against: its running
        execution's, where several nodes share the store (spec 12 §12.3.3)."""
        holder = self._fenced_by
        return holder.fence if holder is not None else None

    @property
    def store(self) -> Store:
        """The store this state writes through: fenced by its execution's lease, if any."""
        return self._hub.store.fenced(self.fence)

    @property
    def terminated(self) -> int | None:
        """µs of termination, updated in-process by any ``terminate()`` (spec 02 §2.3.1)."""
        live = self._hub.terminated_of(self.thread_id)
        return live if live is not None else self._terminated

    @property
    def children(self) -> tuple[SubagentRegistryEntry, ...]:
        """A snapshot of the child registry; ``await get_children()`` reads it fresh."""
        return tuple(e.model_copy() for e in self._children)

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Read-only creation (or sub-prompt call) arguments (spec 02 §2.3.3)."""
        return self._arguments

    # The execution binding: what writes made in execution inherit (spec 02 §2.1.1).
    @property
    def depth(self) -> int:
        return int(getattr(self.execution, "depth", 0) or 0)

    @property
    def parent_message_id(self) -> str | None:
        return getattr(self.execution, "parent_id", None)

    @property
    def prompt_name(self) -> str | None:
        return getattr(self.execution, "prompt_name", None)

    @property
    def prompt_hooks(self) -> Sequence[str]:
        return tuple(getattr(self.execution, "prompt_hooks", ()) or ())

    @property
    def root_message_id(self) -> str | None:
        return getattr(self.execution, "root_message_id", None)

    # -- messages (spec 02 §2.4–§2.8) -------------------------------------------------
    async def get_messages(
        self,
        *,
        limit: int | None = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "desc",
        include_silent: bool = False,
        max_depth: int | None = 0,
        ids: Sequence[str] | None = None,
        include_workblocks: bool = False,
        from_replica: bool = False,
    ) -> MessagesPage:
        """A page of messages with queued entries as pending views (spec 02 §2.4.1).
        ``from_replica``: read by the store's read replica where it has one (spec 17
        §17.5.4: as fresh as the primary when the call began)."""
        await self._hub.commit_deferred(self.thread_id)  # a held pending message
        store = self._hub.store
        return await messages.get_messages(
            self,
            store.replica() if from_replica else store,
            limit=limit,
            offset=offset,
            order=order,
            include_silent=include_silent,
            max_depth=max_depth,
            ids=ids,
            include_workblocks=include_workblocks,
        )

    async def get_wire_page(
        self,
        *,
        limit: int | None = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "desc",
        include_silent: bool = False,
        max_depth: int | None = 0,
        from_replica: bool = False,
    ) -> messages.WirePage:
        """``get_messages`` (without ``ids``) as wire records, in the order read: what
        ``GET …/messages`` encodes (issue 40: built from the rows, no records between)."""
        await self._hub.commit_deferred(self.thread_id)  # a held pending message
        store = self._hub.store
        return await messages.get_wire_page(
            self,
            store.replica() if from_replica else store,
            limit=limit,
            offset=offset,
            order=order,
            include_silent=include_silent,
            max_depth=max_depth,
        )

    async def get_message(self, message_id: str) -> Message | None:
        """A stored message at any depth, else a queue entry's pending view, else None."""
        await self._hub.commit_deferred(self.thread_id)
        return await messages.get_message(self, message_id)

    async def inject_message(
        self, message: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> Message:
        """Persist a message now, with the create hooks (spec 02 §2.5)."""
        return await messages.inject_message(self, message, fields)

    async def queue_message(
        self, message: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> Message:
        """Queue a message for delivery before the next model request (spec 02 §2.6)."""
        return await queue.queue_message(self, message, fields)

    async def update_message(
        self, message_id: str, updates: Mapping[str, Any] | None = None, /, **fields: Any
    ) -> Message:
        """Update a stored message (with hooks) or edit a waiting entry (spec 02 §2.7)."""
        return await messages.update_message(self, message_id, updates, fields)

    async def delete_message(self, message_id: str) -> bool:
        """Delete a message with its cascade, or cancel a waiting entry (spec 02 §2.8)."""
        return await messages.delete_message(self, message_id)

    # -- shared state (spec 02 §2.20) ---------------------------------------------------
    async def get_shared_state(self) -> dict[str, Any]:
        """The thread's shared state now: a copy of its JSON object (``{}`` when never
        written); ``read_shared_state()`` gives its version too."""
        return dict((await shared_state.read(self)).value)

    async def read_shared_state(self) -> SharedState:
        """The thread's shared state with its version and the time of its last change."""
        return await shared_state.read(self)

    async def set_shared_state(
        self, value: Mapping[str, Any], *, version: int | None = None
    ) -> SharedState:
        """Replace the shared state with ``value`` (a JSON object); with ``version``, only
        if it is still the stored version (else ``StateConflict``). Published as a
        ``shared_state`` event unless it changes nothing (spec 02 §2.20)."""
        return await shared_state.replace(self, value, version)

    async def update_shared_state(
        self,
        changes: Mapping[str, Any] | None = None,
        /,
        *,
        remove: Iterable[str] = (),
        version: int | None = None,
    ) -> SharedState:
        """Set the top-level keys of ``changes`` and drop those of ``remove``, the others
        kept, in one transaction (two concurrent updates of different keys both land)."""
        return await shared_state.update(self, changes or {}, remove, version)

    # -- compaction (spec 23) -----------------------------------------------------------
    async def compact(
        self, *, keep_messages: int | None = None, model: str | None = None
    ) -> Compaction:
        """Compact the thread's history now (spec 23 §23.2): a summary written by the model
        (``model``, else the thread's agent's) stands for the older messages in later
        requests; ``keep_messages`` recent ones stay live (default: what the model's
        ``compact_keep`` allows). The messages are kept; the record is returned."""
        compactor = self._hub.compactor
        if compactor is None:
            raise InvalidArgument("compaction needs a runtime")
        history = next(iter(self._hub.live_histories(self.thread_id)), None)
        return cast(
            Compaction,
            await compactor.compact(
                self.thread_id,
                keep_messages=keep_messages,
                model_name=model,
                history=history,
                fence=self.fence,
            ),
        )

    async def compactions(self) -> list[Compaction]:
        """The thread's compactions, oldest first, undone ones included (spec 23 §23.6)."""
        return await self._hub.store.list_compactions(self.thread_id)

    async def undo_compaction(self, compaction_id: str) -> Compaction:
        """Undo a compaction (spec 23 §23.5): later requests use the originals again."""
        compactor = self._hub.compactor
        if compactor is None:
            raise InvalidArgument("compaction needs a runtime")
        return cast(Compaction, await compactor.undo(self.thread_id, compaction_id))

    # -- memory across threads (spec 20) ----------------------------------------------
    @property
    def memory(self) -> Memory:
        """The memory of the thread's user (spec 20 §20.1): what any thread of that user,
        of any agent, put there; threads without a user share one."""
        return Memory(self._hub.store, "user", self.user_id)

    @property
    def agent_memory(self) -> Memory:
        """The memory of the thread's agent (spec 20 §20.1): shared by every thread of
        the agent, whoever's; no other agent sees it."""
        return Memory(self._hub.store, "agent", self.agent_id)

    # -- status, logs, cost -----------------------------------------------------------
    async def status(self) -> ThreadStatus:
        """The thread's authoritative run status (spec 02 §2.9)."""
        row = await self._hub.store.get_thread(self.thread_id)
        if row is None:
            raise ThreadNotFound(self.thread_id)
        return row.status

    async def set_status(self, label: str) -> None:
        """Write a label into this thread's entry in its parent's registry (spec 02 §2.10)."""
        await family.set_status(self, label)

    async def log(self, *args: Any, **fields: Any) -> LogRow | None:
        """Record an application log entry; never raises (spec 02 §2.11)."""
        return await logs.log(self, args[0] if args else None, fields)

    async def cost(self) -> CostReport:
        """The cost report of this thread and its descendants (spec 01 §1.10.3)."""
        await self._hub.commit_deferred(self.thread_id)
        return await logs.cost_report(self._hub, self.thread_id)

    async def user(self) -> UserHandle | None:
        """The owner's identity, read on every call (spec 02 §2.12)."""
        if self.user_id is None or self._hub.users is None:
            return None
        return await self._hub.users.get_user(self.user_id)

    async def terminate(self) -> int:
        """Soft shutdown: returns the termination µs (spec 02 §2.13)."""
        return await family.terminate(self)

    # -- approvals (spec 14) ------------------------------------------------------------
    async def get_approvals(self, *, pending_only: bool = False) -> list[Approval]:
        """The thread's tool-call approvals, oldest first (spec 14 §14.3)."""
        return await approvals.list_approvals(self, pending_only=pending_only)

    async def decide_approval(
        self,
        tool_call_id: str,
        *,
        approve: bool,
        arguments_hash: str | None = None,
        reason: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        decided_by: str | None = None,
    ) -> Approval:
        """Approve or reject a pending tool call (spec 14 §14.3). Approving names the
        ``arguments_hash`` of the approval that was shown (``Approval.arguments_hash``)
        and may give edited ``arguments`` for the tool to run with. A decision that
        cannot apply raises ``ApprovalNotFound`` / ``ApprovalConflict`` /
        ``InvalidArgument`` and changes nothing."""
        if not isinstance(approve, bool):
            raise InvalidArgument("approve must be true or false")
        decision = ApprovalDecision(
            approve=approve,
            arguments_hash=arguments_hash,
            reason=reason,
            arguments=dict(arguments) if arguments is not None else None,
            decided_by=decided_by,
        )
        return await approvals.decide(self, tool_call_id, decision)

    # -- parent and child (spec 02 §2.14) ---------------------------------------------
    async def get_children(self) -> list[SubagentRegistryEntry]:
        """The registry read fresh (and reconciled, spec 06 §6.11)."""
        entries = await family.reconcile_registry(self._hub, self.thread_id, fence=self.fence)
        self._children = tuple(entries)
        return [e.model_copy() for e in entries]

    async def get_parent_thread(self) -> ThreadState | None:
        if self.parent_thread_id is None:
            return None
        return await load_state(self._hub, self.parent_thread_id, missing_ok=True)

    async def get_child_thread(self, reference_id: str) -> ThreadState | None:
        return await family.get_child_thread(self, reference_id)

    async def notify_parent(self, content: str) -> None:
        """Send a message to the parent thread (spec 02 §2.14.5)."""
        await family.notify_parent(self, content)

    async def stop_session(
        self,
        result: str | None = None,
        *,
        notify_parent: str | None = None,
        status: str | None = None,
    ) -> None:
        """End the session after the current step's tool calls (spec 04 §4.16.2)."""
        if self.execution is None:
            raise RuntimeError("stop_session requires active execution")
        if notify_parent is not None and (
            not isinstance(notify_parent, str) or not notify_parent.strip()
        ):
            raise InvalidArgument("stop_session notify_parent requires non-empty content")
        if status is not None and (not isinstance(status, str) or not status.strip()):
            raise InvalidArgument("stop_session status requires non-empty status")
        if notify_parent is not None:
            await self.notify_parent(notify_parent)
        if status is not None:
            await self.set_status(status)
        text = result.strip() if isinstance(result, str) else ""
        self.execution.stop_session_result = text or "Session stopped."
        self.execution.stop_session_requested = True

    # -- tools started by code (spec 04 §4.14.6) --------------------------------------
    async def invoke_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Run one tool now and return its ``ToolResult``; nothing is stored, no tool hooks
        run, the prompt's allow-list does not apply."""
        invoker = self._hub.tool_invoker
        if invoker is None:
            raise RuntimeError("invoke_tool needs a Runtime that runs threads")
        return await invoker.invoke(self, name, dict(arguments or {}))

    async def queue_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """In a run: add a call to the current step (run after the model's calls, its result
        stored); at rest: run it in the background, result not stored. Returns the call id."""
        invoker = self._hub.tool_invoker
        if invoker is None:
            raise RuntimeError("queue_tool needs a Runtime that runs threads")
        call_id: str = invoker.queue(self, name, dict(arguments or {}))
        return call_id

    # -- files (spec 02 §2.15; semantics, errors and events: spec 07 §7.5) -------------
    # Thin delegations to ``thread/files.py``. They work in every mode, also on a
    # terminated thread; every path is normalised first (``InvalidPath`` otherwise).
    async def write_file(
        self,
        path: str,
        data: bytes | str,
        mime_type: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        width: int | None = None,
        height: int | None = None,
        thumbnail: bytes | None = None,
    ) -> FileRecord:
        """Create or overwrite a file (``str`` data is stored as UTF-8)."""
        return await files.write_file(
            self,
            path,
            data,
            mime_type,
            metadata=metadata,
            width=width,
            height=height,
            thumbnail=thumbnail,
        )

    async def link_file(
        self,
        path: str,
        location: str,
        *,
        mime_type: str | None = None,
        size: int = 0,
        metadata: Mapping[str, Any] | None = None,
    ) -> FileRecord:
        """Create or overwrite an external link to an ``http``/``https`` URL."""
        return await files.link_file(
            self, path, location, mime_type=mime_type, size=size, metadata=metadata
        )

    async def read_file(self, path: str) -> bytes | None:
        """The content; None for a missing path, a directory or a link."""
        return await files.read_file(self, path)

    async def read_file_stream(
        self, path: str, *, chunk_size: int = 1048576
    ) -> AsyncIterator[FileChunk] | None:
        """The content as ``FileChunk``s of at most ``chunk_size`` bytes (None as
        ``read_file``); a rewrite while streaming raises ``FileError``."""
        return await files.read_file_stream(self, path, chunk_size=chunk_size)

    async def stat_file(self, path: str) -> FileRecord | None:
        """The record of a file, link or directory (explicit or implicit), else None."""
        return await files.stat_file(self, path)

    async def readdir_file(self, path: str = "/") -> ReaddirResult:
        """Direct children: directories first, then the rest, each by name."""
        return await files.readdir_file(self, path)

    async def unlink_file(self, path: str) -> None:
        """Delete a file or link; nothing there is no error."""
        await files.unlink_file(self, path)

    async def mkdir_file(self, path: str) -> FileRecord:
        """Create an explicit directory (idempotent)."""
        return await files.mkdir_file(self, path)

    async def rmdir_file(self, path: str, *, recursive: bool = False) -> None:
        """Remove a directory; with ``recursive`` everything below it too."""
        await files.rmdir_file(self, path, recursive=recursive)

    async def move_file(self, source: str, destination: str) -> FileRecord:
        """Move a file, link or directory with everything below it."""
        return await files.move_file(self, source, destination)

    async def rename_file(self, path: str, new_name: str) -> FileRecord:
        """Move an entry to ``new_name`` within its directory."""
        return await files.rename_file(self, path, new_name)

    async def get_file_stats(self, path: str = "/") -> FileStats:
        """Total size and number of files and links at or below ``path``."""
        return await files.get_file_stats(self, path)

    async def find_files(
        self,
        pattern: str,
        *,
        type: Literal["file", "directory", "all"] = "all",
        limit: int = 100,
    ) -> list[FileRecord]:
        """Entries whose path matches a glob (``**``, ``*``, ``?``), ordered by path."""
        return await files.find_files(self, pattern, type=type, limit=limit)

    async def grep_files(
        self, pattern: str, *, path: str | None = None, limit: int = 100
    ) -> list[GrepResult]:
        """Files whose text content or name contains ``pattern`` (case-insensitive)."""
        return await files.grep_files(self, pattern, path=path, limit=limit)

    async def get_file_thumbnail(self, path: str) -> bytes | None:
        """The thumbnail stored with a file, or None."""
        return await files.get_file_thumbnail(self, path)

    async def write_attachment(
        self,
        data: bytes,
        *,
        name: str,
        mime_type: str | None = None,
        width: int | None = None,
        height: int | None = None,
        description: str | None = None,
    ) -> AttachmentRef:
        """Store bytes as a new ``/attachments/…`` file; returns a ref to attach."""
        return await files.write_attachment(
            self,
            data,
            name=name,
            mime_type=mime_type,
            width=width,
            height=height,
            description=description,
        )

    # -- ephemeral events (spec 02 §2.16) ---------------------------------------------
    def emit(self, event: str, data: Any = None) -> None:
        """Publish an ephemeral ``event`` to live subscribers; nothing is stored."""
        if not isinstance(event, str) or not event:
            raise InvalidArgument("emit requires a non-empty event name")
        payload = {"event_type": event, "data": to_json_safe(data)}
        self._hub.publish(self.thread_id, "event", None, payload)


async def load_state(
    hub: ThreadHub, thread_id: str, *, missing_ok: bool = False, **options: Any
) -> ThreadState | None:
    """An at-rest ThreadState read from the store (``None`` if missing and allowed)."""
    if not isinstance(thread_id, str):
        raise InvalidArgument("thread_id must be a string")
    row = await hub.store.get_thread(thread_id)
    if row is None:
        if missing_ok:
            return None
        raise ThreadNotFound(thread_id)
    children = await hub.store.get_registry(thread_id)
    return ThreadState(hub, row, children, **options)
