"""One declarative definition per route of spec 08 (spec 11 §11.1): the only place a route is
described (the spec 10 routes are in ``endpoints_auth.py``; ``ROUTES`` holds both). A builder
turns a method's arguments into a ``Call`` (method, path, query, body, how to parse the answer,
whether a repeat is safe; ``calls.py``); ``http.py`` executes calls, sync or async.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

import httpx

from threadloom.client.calls import (
    AUTO,
    UNSET,
    Auto,
    Batch,
    Call,
    Retry,
    Unset,
    Upload,
    json_body,
    list_of,
    model_of,
    no_content,
    query_params,
    raw_bytes,
)
from threadloom.client.endpoints_auth import ApiKeysEndpoints, AuthEndpoints, UsersEndpoints
from threadloom.client.endpoints_memory import MemoryEndpoints
from threadloom.client.endpoints_triggers import TriggersEndpoints
from threadloom.client.endpoints_webhooks import WebhooksEndpoints
from threadloom.client.models import (
    Accepted,
    AgentInfo,
    Approval,
    ApprovalList,
    AttachmentRef,
    Compaction,
    CompactionList,
    CostReport,
    CreatedThread,
    DeletedThreads,
    FileRecord,
    FileStats,
    GrepHit,
    Health,
    HookInfo,
    ImportedThreads,
    LogDetail,
    LogPage,
    MessagePage,
    ModelInfo,
    Owner,
    PromptInfo,
    ScheduleFire,
    ScheduleInfo,
    SendResult,
    SharedState,
    StopResult,
    SubagentEntry,
    TerminateResult,
    ThreadDetail,
    ThreadPage,
    ThreadUpdated,
    ToolInfo,
)
from threadloom.records import Message

Owners = list[Owner]
Subagents = list[SubagentEntry]
Files = list[FileRecord]
GrepHits = list[GrepHit]
DeletedIds = list[str]
Agents = list[AgentInfo]
Prompts = list[PromptInfo]
Models = list[ModelInfo]
Hooks = list[HookInfo]


def _thread(thread_id: str) -> str:
    return f"/api/threads/{quote(thread_id, safe='')}"


def fs_path(thread_id: str, path: str) -> str:
    """``/api/threads/<id>/fs/<path>``, percent-encoded segment by segment."""
    segments = [quote(part, safe="") for part in path.strip("/").split("/") if part]
    return f"{_thread(thread_id)}/fs/" + "/".join(segments)


def _approval(thread_id: str, tool_call_id: str) -> str:
    return f"{_thread(thread_id)}/approvals/{quote(tool_call_id, safe='')}"


class ThreadsEndpoints:
    def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        agent_id: str | Unset = UNSET,
        include_children: bool | Unset = UNSET,
        user_id: str | Unset = UNSET,
        search: str | Unset = UNSET,
        tag: str | Unset = UNSET,
        start_date: int | Unset = UNSET,
        end_date: int | Unset = UNSET,
        sort: Literal["activity", "created", "oldest"] | Unset = UNSET,
        executing: bool | Unset = UNSET,
        terminated: bool | Unset = UNSET,
        status: Sequence[str] | Unset = UNSET,
        parent: str | Unset = UNSET,
    ) -> Call[ThreadPage]:
        params = query_params(
            limit=limit,
            offset=offset,
            agent_id=agent_id,
            include_children=include_children,
            user_id=user_id,
            search=search,
            tag=tag,
            startDate=start_date,
            endDate=end_date,
            sort=sort,
            executing=executing,
            terminated=terminated,
            status=status,
            parent=parent,
        )
        return Call("GET", "/api/threads", model_of(ThreadPage), params=params)

    def create(
        self,
        agent_id: str,
        *,
        user_id: str | Unset | None = UNSET,
        tags: Sequence[str] | Unset = UNSET,
        arguments: Mapping[str, Any] | Unset = UNSET,
        initial_messages: Sequence[Mapping[str, Any]] | Unset = UNSET,
        env: Mapping[str, str] | Unset = UNSET,
        env_types: Mapping[str, str] | Unset = UNSET,
        properties: Mapping[str, Any] | Unset = UNSET,
        overlap: str | Unset | None = UNSET,
        budget: Mapping[str, Any] | Sequence[Mapping[str, Any]] | Unset | None = UNSET,
    ) -> Call[CreatedThread]:
        body = json_body(
            agent_id=agent_id,
            user_id=user_id,
            tags=tags if tags is UNSET else list(tags),
            arguments=arguments if arguments is UNSET else dict(arguments),
            initial_messages=(
                initial_messages if initial_messages is UNSET else list(initial_messages)
            ),
            env=env if env is UNSET else dict(env),
            env_types=env_types if env_types is UNSET else dict(env_types),
            properties=properties if properties is UNSET else dict(properties),
            overlap=overlap,
            budget=(
                budget
                if budget is UNSET or budget is None or isinstance(budget, Mapping)
                else [dict(b) for b in budget]
            ),
        )
        return Call("POST", "/api/threads", model_of(CreatedThread), json=body, retry="never")

    def get(self, thread_id: str) -> Call[ThreadDetail]:
        return Call("GET", _thread(thread_id), model_of(ThreadDetail))

    def update(
        self,
        thread_id: str,
        *,
        tags: Sequence[str] | Unset = UNSET,
        agent_id: str | Unset = UNSET,
        env: Mapping[str, str] | Unset | None = UNSET,
        env_types: Mapping[str, str] | Unset = UNSET,
        env_patch: Mapping[str, str] | Unset = UNSET,
        env_type_patch: Mapping[str, str] | Unset = UNSET,
        env_delete: Sequence[str] | Unset = UNSET,
        overlap: str | Unset | None = UNSET,
    ) -> Call[ThreadUpdated]:
        body = json_body(
            tags=tags if tags is UNSET else list(tags),
            agent_id=agent_id,
            env=env,
            env_types=env_types,
            env_patch=env_patch,
            env_type_patch=env_type_patch,
            env_delete=env_delete if env_delete is UNSET else list(env_delete),
            overlap=overlap,
        )
        return Call("PATCH", _thread(thread_id), model_of(ThreadUpdated), json=body)

    def delete(self, thread_id: str) -> Call[DeletedThreads]:
        # not safe to repeat: a repeat answers 404 and the ids of the first answer are lost
        return Call("DELETE", _thread(thread_id), model_of(DeletedThreads), retry="never")

    def export(self, thread_id: str) -> Call[bytes]:
        """The thread with its child threads as a portable file (spec 21): its bytes, as
        ``threadloom.records.portable.parse_export`` reads them."""
        return Call("GET", f"{_thread(thread_id)}/export", raw_bytes)

    def import_(
        self, file: bytes | str | Mapping[str, Any], *, new_ids: bool = False
    ) -> Call[ImportedThreads]:
        """Store a portable thread file as history (spec 21 §21.6); ``new_ids``: under new
        thread, message and log ids. Not repeated: a repeat would be a 409 (or a copy)."""
        body = dict(file) if isinstance(file, Mapping) else json.loads(file)
        params = query_params(ids="new") if new_ids else None
        return Call(
            "POST", "/api/threads/import", model_of(ImportedThreads), params, body, retry="never"
        )

    def owners(self) -> Call[Owners]:
        return Call("GET", "/api/threads/owners", list_of(Owner, "owners"))

    def continue_(self, thread_id: str, side: Literal["a", "b"] | str = "a") -> Call[Accepted]:
        path = f"{_thread(thread_id)}/continue"
        return Call("POST", path, model_of(Accepted), json={"side": side}, retry="never")

    def stop(self, thread_id: str, *, cascade: bool = False) -> Call[StopResult]:
        path = f"{_thread(thread_id)}/stop"
        return Call("POST", path, model_of(StopResult), json={"cascade": cascade})

    def terminate(self, thread_id: str, *, cascade: bool = False) -> Call[TerminateResult]:
        path = f"{_thread(thread_id)}/terminate"
        return Call("POST", path, model_of(TerminateResult), json={"cascade": cascade})

    def cost(self, thread_id: str) -> Call[CostReport]:
        return Call("GET", f"{_thread(thread_id)}/cost", model_of(CostReport))

    def subagents(self, thread_id: str) -> Call[Subagents]:
        path = f"{_thread(thread_id)}/subagents"
        return Call("GET", path, list_of(SubagentEntry, "subagents"))

    # -- the shared state (spec 02 §2.20, spec 08 §8.3.7) ----------------------------------

    def state(self, thread_id: str) -> Call[SharedState]:
        """The thread's shared state: ``state`` (a JSON object), ``version``, ``updated_at``."""
        return Call("GET", f"{_thread(thread_id)}/state", model_of(SharedState))

    def set_state(
        self, thread_id: str, state: Mapping[str, Any], *, version: int | None = None
    ) -> Call[SharedState]:
        """Replace the thread's shared state; with ``version``, only if it is still the
        stored one (else ``ConflictError``, code ``state_conflict``)."""
        body: dict[str, Any] = {"state": dict(state)}
        if version is not None:
            body["version"] = version
        return Call("PUT", f"{_thread(thread_id)}/state", model_of(SharedState), json=body)

    # -- compaction (spec 23 §23.6) ------------------------------------------------------------

    def compact(self, thread_id: str, *, keep_messages: int | None = None) -> Call[Compaction]:
        """Compact the thread's history now: the record (its summary stands for the older
        messages in later requests; they stay stored). ``ConflictError``
        (``nothing_to_compact``) when nothing lies before the kept messages. Not repeated:
        a repeat would compact again."""
        body = {} if keep_messages is None else {"keep_messages": keep_messages}
        path = f"{_thread(thread_id)}/compact"
        return Call("POST", path, model_of(Compaction), json=body, retry="never")

    def compactions(self, thread_id: str) -> Call[CompactionList]:
        """The thread's compactions, oldest first, and the id of the active one."""
        return Call("GET", f"{_thread(thread_id)}/compactions", model_of(CompactionList))

    def undo_compaction(self, thread_id: str, compaction_id: str) -> Call[Compaction]:
        """Undo a compaction: the record, undone (once; a repeat answers it as it is)."""
        path = f"{_thread(thread_id)}/compactions/{quote(compaction_id, safe='')}"
        return Call("DELETE", path, model_of(Compaction))

    # -- tool-call approvals (spec 14 §14.3) ---------------------------------------------------

    def approvals(self, thread_id: str) -> Call[ApprovalList]:
        """Every approval of the thread, oldest first, and how many are pending."""
        return Call("GET", f"{_thread(thread_id)}/approvals", model_of(ApprovalList))

    def approve(
        self,
        thread_id: str,
        tool_call_id: str,
        arguments_hash: str,
        *,
        arguments: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> Call[Approval]:
        """Approve a pending call, naming the ``arguments_hash`` of the approval that was
        shown; ``arguments`` (edited) are what the tool then runs with."""
        body: dict[str, Any] = {"approve": True, "arguments_hash": arguments_hash}
        if arguments is not None:
            body["arguments"] = dict(arguments)
        if reason is not None:
            body["reason"] = reason
        # a repeat of a decision that was made answers 409: never repeated blindly
        path = _approval(thread_id, tool_call_id)
        return Call("POST", path, model_of(Approval, "approval"), json=body, retry="never")

    def reject(
        self, thread_id: str, tool_call_id: str, *, reason: str | None = None
    ) -> Call[Approval]:
        """Reject a pending call: it never runs; its result is an error with ``reason``."""
        body: dict[str, Any] = {"approve": False}
        if reason is not None:
            body["reason"] = reason
        path = _approval(thread_id, tool_call_id)
        return Call("POST", path, model_of(Approval, "approval"), json=body, retry="never")


ID_BATCH = 200


def _merge_pages(pages: list[MessagePage]) -> MessagePage:
    seen: dict[str, Message] = {}
    for page in pages:
        for record in page.messages:
            seen.setdefault(record.id, record)
    records = list(seen.values())
    # canonical order: stored messages by created_at, pending queue entries last (spec 08 §8.2.4)
    records.sort(key=lambda m: (bool((m.metadata or {}).get("queued")), m.created_at))
    seq = max((page.seq for page in pages), default=0)
    return MessagePage.model_validate(
        {"messages": records, "total": len(records), "hasMore": False, "seq": seq}
    )


class MessagesEndpoints:
    def list(
        self,
        thread_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "desc",
        depth: int = 0,
        include_silent: bool = False,
    ) -> Call[MessagePage]:
        params = query_params(
            limit=limit, offset=offset, order=order, depth=depth, includeSilent=include_silent
        )
        return Call("GET", f"{_thread(thread_id)}/messages", model_of(MessagePage), params=params)

    def get(
        self,
        thread_id: str,
        ids: Iterable[str],
        *,
        include_workblocks: bool = False,
        include_silent: bool = False,
        depth: int = 0,
    ) -> Batch[MessagePage]:
        wanted = list(dict.fromkeys(ids))
        calls = [
            Call(
                "GET",
                f"{_thread(thread_id)}/messages",
                model_of(MessagePage),
                params=query_params(
                    ids=wanted[i : i + ID_BATCH],
                    includeWorkblocks=include_workblocks,
                    includeSilent=include_silent,
                    depth=depth,
                ),
            )
            for i in range(0, len(wanted), ID_BATCH)
        ]
        return Batch(calls, _merge_pages)

    def send(
        self,
        thread_id: str,
        content: str | None = "",
        *,
        role: Literal["user", "assistant", "system"] = "user",
        attachments: Sequence[Upload] = (),
        silent: bool = False,
        metadata: Mapping[str, Any] | None = None,
        client_message_id: str | Auto | None = AUTO,
    ) -> Call[SendResult]:
        meta = dict(metadata or {})
        if client_message_id is AUTO:
            meta.setdefault("client_message_id", str(uuid.uuid4()))
        elif client_message_id is not None:
            meta["client_message_id"] = client_message_id
        body: dict[str, Any] = {"content": content, "role": role, "silent": silent}
        if attachments:
            body["attachments"] = [a.to_wire() for a in attachments]
        if meta:
            body["metadata"] = meta
        # with a client_message_id the server stores at most one message per id: safe to repeat
        retry: Retry = "safe" if "client_message_id" in meta else "never"
        path = f"{_thread(thread_id)}/messages"
        return Call("POST", path, model_of(SendResult), json=body, retry=retry)

    def update(
        self,
        thread_id: str,
        message_id: str,
        *,
        content: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        silent: bool | Unset = UNSET,
    ) -> Call[Message]:
        body = json_body(
            content=content,
            metadata=metadata if not isinstance(metadata, Mapping) else dict(metadata),
            silent=silent,
        )
        path = f"{_thread(thread_id)}/messages/{quote(message_id, safe='')}"
        return Call("PATCH", path, model_of(Message, "message"), json=body)

    def delete(self, thread_id: str, message_id: str) -> Call[DeletedIds]:
        path = f"{_thread(thread_id)}/messages/{quote(message_id, safe='')}"
        return Call(
            "DELETE",
            path,
            list_of(str, "deletedIds"),
            missing_ok=lambda: [message_id],
        )


class LogsEndpoints:
    def list(
        self,
        thread_id: str,
        *,
        limit: int = 100,
        offset: int = 0,
        order: Literal["asc", "desc"] = "asc",
        kind: Sequence[str] | Unset = UNSET,
        error: bool | Unset = UNSET,
        ids: Sequence[str] | Unset = UNSET,
        message_ids: Sequence[str] | Unset = UNSET,
        include_workblocks: bool = False,
        include_descendants: bool = False,
    ) -> Call[LogPage]:
        params = query_params(
            limit=limit,
            offset=offset,
            order=order,
            kind=kind,
            error=error,
            ids=ids,
            messageIds=message_ids,
            includeWorkblocks=include_workblocks,
            includeDescendants=include_descendants,
        )
        return Call("GET", f"{_thread(thread_id)}/logs", model_of(LogPage), params=params)

    def get(self, thread_id: str, log_id: str) -> Call[LogDetail]:
        path = f"{_thread(thread_id)}/logs/{quote(log_id, safe='')}"
        return Call("GET", path, model_of(LogDetail))


class FilesEndpoints:
    def list(self, thread_id: str, path: str = "/") -> Call[Files]:
        url = f"{_thread(thread_id)}/fs" if path.strip("/") == "" else fs_path(thread_id, path)
        return Call("GET", url, list_of(FileRecord, "files"))

    def stats(self, thread_id: str, path: str = "/") -> Call[FileStats]:
        return Call("GET", f"{_thread(thread_id)}/fs", model_of(FileStats), params={"stats": ""})

    def find(
        self,
        thread_id: str,
        pattern: str,
        *,
        type: Literal["file", "directory", "all"] = "all",
        limit: int = 100,
    ) -> Call[Files]:
        params = query_params(find=pattern, type=type, limit=limit)
        return Call("GET", f"{_thread(thread_id)}/fs", list_of(FileRecord, "files"), params=params)

    def grep(
        self, thread_id: str, query: str, *, path: str | None = None, limit: int = 100
    ) -> Call[GrepHits]:
        params = query_params(grep=query, path=path, limit=limit)
        return Call("GET", f"{_thread(thread_id)}/fs", list_of(GrepHit, "results"), params=params)

    def read(self, thread_id: str, path: str) -> Call[bytes]:
        return Call("GET", fs_path(thread_id, path), raw_bytes)

    def info(self, thread_id: str, path: str) -> Call[FileRecord]:
        url = fs_path(thread_id, path)
        return Call("GET", url, model_of(FileRecord, "file"), params={"format": "json"})

    def thumbnail(self, thread_id: str, path: str) -> Call[bytes]:
        return Call("GET", fs_path(thread_id, path), raw_bytes, params={"thumbnail": ""})

    def write(
        self,
        thread_id: str,
        path: str,
        data: bytes,
        *,
        mime_type: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Call[AttachmentRef]:
        body: dict[str, Any] = {"data": base64.b64encode(data).decode("ascii")}
        if mime_type is not None:
            body["mimeType"] = mime_type
        if metadata is not None:
            body["metadata"] = dict(metadata)
        url = fs_path(thread_id, path)
        return Call("POST", url, model_of(AttachmentRef), json=body, retry="never")

    def mkdir(self, thread_id: str, path: str) -> Call[FileRecord]:
        url = fs_path(thread_id, path)
        body = {"type": "directory"}
        return Call("POST", url, model_of(FileRecord, "directory"), json=body, retry="never")

    def move(self, thread_id: str, path: str, destination: str) -> Call[AttachmentRef]:
        body = {"action": "move", "destination": destination}
        url = fs_path(thread_id, path)
        return Call("POST", url, model_of(AttachmentRef), json=body, retry="never")

    def rename(self, thread_id: str, path: str, new_name: str) -> Call[AttachmentRef]:
        body = {"action": "rename", "newName": new_name}
        url = fs_path(thread_id, path)
        return Call("POST", url, model_of(AttachmentRef), json=body, retry="never")

    def delete(self, thread_id: str, path: str, *, recursive: bool = False) -> Call[None]:
        params = query_params(recursive=True) if recursive else None
        url = fs_path(thread_id, path)
        return Call("DELETE", url, no_content, params=params, missing_ok=lambda: None)


def _tools(response: httpx.Response) -> dict[str, ToolInfo]:
    body = response.json()
    return {name: ToolInfo.model_validate(info) for name, info in body.items()}


class CatalogEndpoints:
    def agents(self) -> Call[Agents]:
        return Call("GET", "/api/agents", list_of(AgentInfo, "agents"))

    def prompts(self) -> Call[Prompts]:
        return Call("GET", "/api/prompts", list_of(PromptInfo, "prompts"))

    def tools(
        self, *, type: Literal["tools", "prompts", "agents"] | None = None, schema: bool = False
    ) -> Call[dict[str, ToolInfo]]:
        params = query_params(type=type, schema=schema if schema else UNSET)
        return Call("GET", "/api/tools", _tools, params=params)

    def models(self) -> Call[Models]:
        return Call("GET", "/api/models", list_of(ModelInfo, "models"))

    def hooks(self) -> Call[Hooks]:
        return Call("GET", "/api/hooks", list_of(HookInfo, "hooks"))


def _schedule(schedule_id: str) -> str:
    return f"/api/schedules/{quote(schedule_id, safe='')}"


class SchedulesEndpoints:
    """Schedules (spec 18 §18.7; admins only)."""

    def list(self) -> Call[list[ScheduleInfo]]:
        return Call("GET", "/api/schedules", list_of(ScheduleInfo, "schedules"))

    def create(
        self,
        schedule_id: str,
        message: str,
        *,
        cron: str | Unset | None = UNSET,
        timezone: str | Unset = UNSET,
        interval_s: int | Unset | None = UNSET,
        thread_id: str | Unset | None = UNSET,
        agent: str | Unset | None = UNSET,
        arguments: Mapping[str, Any] | Unset | None = UNSET,
        user_id: str | Unset | None = UNSET,
        enabled: bool | Unset = UNSET,
        overlap: Literal["skip", "queue", "new_thread"] | Unset = UNSET,
        catchup: Literal["once", "skip"] | Unset = UNSET,
    ) -> Call[ScheduleInfo]:
        """A new schedule: one of ``cron`` (with ``timezone``) and ``interval_s``, one of
        ``thread_id`` and ``agent``."""
        body = json_body(
            id=schedule_id,
            message=message,
            cron=cron,
            timezone=timezone,
            interval_s=interval_s,
            thread_id=thread_id,
            agent=agent,
            arguments=arguments if arguments is UNSET or arguments is None else dict(arguments),
            user_id=user_id,
            enabled=enabled,
            overlap=overlap,
            catchup=catchup,
        )
        return Call(
            "POST", "/api/schedules", model_of(ScheduleInfo, "schedule"), json=body, retry="never"
        )

    def get(self, schedule_id: str) -> Call[ScheduleInfo]:
        return Call("GET", _schedule(schedule_id), model_of(ScheduleInfo, "schedule"))

    def update(
        self,
        schedule_id: str,
        *,
        message: str | Unset = UNSET,
        cron: str | Unset | None = UNSET,
        timezone: str | Unset = UNSET,
        interval_s: int | Unset | None = UNSET,
        thread_id: str | Unset | None = UNSET,
        agent: str | Unset | None = UNSET,
        arguments: Mapping[str, Any] | Unset | None = UNSET,
        user_id: str | Unset | None = UNSET,
        enabled: bool | Unset = UNSET,
        overlap: Literal["skip", "queue", "new_thread"] | Unset = UNSET,
        catchup: Literal["once", "skip"] | Unset = UNSET,
    ) -> Call[ScheduleInfo]:
        """Change the fields given (the others stay)."""
        body = json_body(
            message=message,
            cron=cron,
            timezone=timezone,
            interval_s=interval_s,
            thread_id=thread_id,
            agent=agent,
            arguments=arguments if arguments is UNSET or arguments is None else dict(arguments),
            user_id=user_id,
            enabled=enabled,
            overlap=overlap,
            catchup=catchup,
        )
        return Call("PATCH", _schedule(schedule_id), model_of(ScheduleInfo, "schedule"), json=body)

    def delete(self, schedule_id: str) -> Call[None]:
        return Call("DELETE", _schedule(schedule_id), no_content, retry="never")

    def fire(self, schedule_id: str) -> Call[ScheduleFire]:
        """Fire the schedule once now (its next fire time stays)."""
        path = f"{_schedule(schedule_id)}/fire"
        return Call("POST", path, model_of(ScheduleFire, "fire"), retry="never")


def health() -> Call[Health]:
    return Call("GET", "/api/health", model_of(Health))


@dataclass(frozen=True)
class Routes:
    """Every builder, by namespace."""

    threads: ThreadsEndpoints = field(default_factory=ThreadsEndpoints)
    messages: MessagesEndpoints = field(default_factory=MessagesEndpoints)
    logs: LogsEndpoints = field(default_factory=LogsEndpoints)
    files: FilesEndpoints = field(default_factory=FilesEndpoints)
    catalog: CatalogEndpoints = field(default_factory=CatalogEndpoints)
    auth: AuthEndpoints = field(default_factory=AuthEndpoints)
    api_keys: ApiKeysEndpoints = field(default_factory=ApiKeysEndpoints)
    users: UsersEndpoints = field(default_factory=UsersEndpoints)
    webhooks: WebhooksEndpoints = field(default_factory=WebhooksEndpoints)
    schedules: SchedulesEndpoints = field(default_factory=SchedulesEndpoints)
    triggers: TriggersEndpoints = field(default_factory=TriggersEndpoints)
    memory: MemoryEndpoints = field(default_factory=MemoryEndpoints)


ROUTES = Routes()
