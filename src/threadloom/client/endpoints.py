"""One declarative definition per route of spec 08 (spec 11 §11.1): the only place a route is
described. A builder turns a method's arguments into a ``Call`` (method, path, query, body, how to
parse the answer, whether a repeat is safe); ``http.py`` executes calls, sync or async.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from threadloom.client.models import (
    Accepted,
    AgentInfo,
    AttachmentRef,
    CostReport,
    CreatedThread,
    DeletedThreads,
    FileRecord,
    FileStats,
    GrepHit,
    Health,
    HookInfo,
    LogDetail,
    LogPage,
    MessagePage,
    ModelInfo,
    Owner,
    PromptInfo,
    SendResult,
    StopResult,
    SubagentEntry,
    TerminateResult,
    ThreadDetail,
    ThreadPage,
    ThreadUpdated,
    ToolInfo,
)
from threadloom.records import Message

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


Owners = list[Owner]
Subagents = list[SubagentEntry]
Files = list[FileRecord]
GrepHits = list[GrepHit]
DeletedIds = list[str]
Agents = list[AgentInfo]
Prompts = list[PromptInfo]
Models = list[ModelInfo]
Hooks = list[HookInfo]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


class _Auto(enum.Enum):
    AUTO = "AUTO"

    def __repr__(self) -> str:
        return "AUTO"


UNSET = _Unset.UNSET
"""An argument left at this default is not sent."""
AUTO = _Auto.AUTO
"""``client_message_id=AUTO``: a fresh UUID4 per send (spec 11 §11.2.5 rule 2)."""

Retry = Literal["never", "safe"]
"""``never``: only a request that provably never left is repeated; ``safe``: a transport error
or 502/503/504 is repeated too (spec 11 §11.2.5)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    retry: Retry = "safe"
    missing_ok: Callable[[], T] | None = None
    """A repeat of this call answered 404 means the first attempt succeeded: this value."""


@dataclass(frozen=True)
class Batch(Generic[T]):
    """Several calls whose answers merge into one result (``messages.get`` by 200 ids)."""

    calls: Sequence[Call[Any]]
    merge: Callable[[list[Any]], T]


@dataclass(frozen=True)
class Upload:
    """An attachment sent with a message, encoded to spec 08 §8.2.5's upload item."""

    name: str
    mime_type: str
    data: bytes
    width: int | None = None
    height: int | None = None
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "name": self.name,
            "mimeType": self.mime_type,
            "data": base64.b64encode(self.data).decode("ascii"),
        }
        for key, value in (
            ("width", self.width),
            ("height", self.height),
            ("description", self.description),
        ):
            if value is not None:
                item[key] = value
        return item


def _model(cls: type[M], key: str | None = None) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        body = response.json()
        return cls.model_validate(body[key] if key is not None else body)

    return parse


def _list(item: Any, key: str | None) -> Callable[[httpx.Response], Any]:
    adapter: TypeAdapter[Any] = TypeAdapter(list[item])

    def parse(response: httpx.Response) -> Any:
        body = response.json()
        return adapter.validate_python(body[key] if key is not None else body)

    return parse


def _none(response: httpx.Response) -> None:
    return None


def _bytes(response: httpx.Response) -> bytes:
    return response.content


def _query(**values: Any) -> dict[str, Any]:
    """Query parameters: UNSET dropped, booleans as ``true``/``false``, lists comma-joined."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is UNSET or value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            out[name] = ",".join(str(v) for v in value)
        else:
            out[name] = value
    return out


def _body(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not UNSET}


def _thread(thread_id: str) -> str:
    return f"/api/threads/{quote(thread_id, safe='')}"


def fs_path(thread_id: str, path: str) -> str:
    """``/api/threads/<id>/fs/<path>``, percent-encoded segment by segment."""
    segments = [quote(part, safe="") for part in path.strip("/").split("/") if part]
    return f"{_thread(thread_id)}/fs/" + "/".join(segments)


class ThreadsEndpoints:
    def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        agent_id: str | _Unset = UNSET,
        include_children: bool | _Unset = UNSET,
        user_id: str | _Unset = UNSET,
        search: str | _Unset = UNSET,
        start_date: int | _Unset = UNSET,
        end_date: int | _Unset = UNSET,
        sort: Literal["activity", "created", "oldest"] | _Unset = UNSET,
        executing: bool | _Unset = UNSET,
        terminated: bool | _Unset = UNSET,
        status: Sequence[str] | _Unset = UNSET,
        parent: str | _Unset = UNSET,
    ) -> Call[ThreadPage]:
        params = _query(
            limit=limit,
            offset=offset,
            agent_id=agent_id,
            include_children=include_children,
            user_id=user_id,
            search=search,
            startDate=start_date,
            endDate=end_date,
            sort=sort,
            executing=executing,
            terminated=terminated,
            status=status,
            parent=parent,
        )
        return Call("GET", "/api/threads", _model(ThreadPage), params=params)

    def create(
        self,
        agent_id: str,
        *,
        user_id: str | _Unset | None = UNSET,
        tags: Sequence[str] | _Unset = UNSET,
        arguments: Mapping[str, Any] | _Unset = UNSET,
        initial_messages: Sequence[Mapping[str, Any]] | _Unset = UNSET,
        env: Mapping[str, str] | _Unset = UNSET,
        env_types: Mapping[str, str] | _Unset = UNSET,
        properties: Mapping[str, Any] | _Unset = UNSET,
        overlap: str | _Unset | None = UNSET,
    ) -> Call[CreatedThread]:
        body = _body(
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
        )
        return Call("POST", "/api/threads", _model(CreatedThread), json=body, retry="never")

    def get(self, thread_id: str) -> Call[ThreadDetail]:
        return Call("GET", _thread(thread_id), _model(ThreadDetail))

    def update(
        self,
        thread_id: str,
        *,
        tags: Sequence[str] | _Unset = UNSET,
        agent_id: str | _Unset = UNSET,
        env: Mapping[str, str] | _Unset | None = UNSET,
        env_types: Mapping[str, str] | _Unset = UNSET,
        env_patch: Mapping[str, str] | _Unset = UNSET,
        env_type_patch: Mapping[str, str] | _Unset = UNSET,
        env_delete: Sequence[str] | _Unset = UNSET,
        overlap: str | _Unset | None = UNSET,
    ) -> Call[ThreadUpdated]:
        body = _body(
            tags=tags if tags is UNSET else list(tags),
            agent_id=agent_id,
            env=env,
            env_types=env_types,
            env_patch=env_patch,
            env_type_patch=env_type_patch,
            env_delete=env_delete if env_delete is UNSET else list(env_delete),
            overlap=overlap,
        )
        return Call("PATCH", _thread(thread_id), _model(ThreadUpdated), json=body)

    def delete(self, thread_id: str) -> Call[DeletedThreads]:
        # not safe to repeat: a repeat answers 404 and the ids of the first answer are lost
        return Call("DELETE", _thread(thread_id), _model(DeletedThreads), retry="never")

    def owners(self) -> Call[Owners]:
        return Call("GET", "/api/threads/owners", _list(Owner, "owners"))

    def continue_(self, thread_id: str, side: Literal["a", "b"] | str = "a") -> Call[Accepted]:
        path = f"{_thread(thread_id)}/continue"
        return Call("POST", path, _model(Accepted), json={"side": side}, retry="never")

    def stop(self, thread_id: str, *, cascade: bool = False) -> Call[StopResult]:
        path = f"{_thread(thread_id)}/stop"
        return Call("POST", path, _model(StopResult), json={"cascade": cascade})

    def terminate(self, thread_id: str, *, cascade: bool = False) -> Call[TerminateResult]:
        path = f"{_thread(thread_id)}/terminate"
        return Call("POST", path, _model(TerminateResult), json={"cascade": cascade})

    def cost(self, thread_id: str) -> Call[CostReport]:
        return Call("GET", f"{_thread(thread_id)}/cost", _model(CostReport))

    def subagents(self, thread_id: str) -> Call[Subagents]:
        path = f"{_thread(thread_id)}/subagents"
        return Call("GET", path, _list(SubagentEntry, "subagents"))


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
        params = _query(
            limit=limit, offset=offset, order=order, depth=depth, includeSilent=include_silent
        )
        return Call("GET", f"{_thread(thread_id)}/messages", _model(MessagePage), params=params)

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
                _model(MessagePage),
                params=_query(
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
        client_message_id: str | _Auto | None = AUTO,
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
        return Call("POST", path, _model(SendResult), json=body, retry=retry)

    def update(
        self,
        thread_id: str,
        message_id: str,
        *,
        content: str | _Unset | None = UNSET,
        metadata: Mapping[str, Any] | _Unset | None = UNSET,
        silent: bool | _Unset = UNSET,
    ) -> Call[Message]:
        body = _body(
            content=content,
            metadata=metadata if not isinstance(metadata, Mapping) else dict(metadata),
            silent=silent,
        )
        path = f"{_thread(thread_id)}/messages/{quote(message_id, safe='')}"
        return Call("PATCH", path, _model(Message, "message"), json=body)

    def delete(self, thread_id: str, message_id: str) -> Call[DeletedIds]:
        path = f"{_thread(thread_id)}/messages/{quote(message_id, safe='')}"
        return Call(
            "DELETE",
            path,
            _list(str, "deletedIds"),
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
        kind: Sequence[str] | _Unset = UNSET,
        error: bool | _Unset = UNSET,
        ids: Sequence[str] | _Unset = UNSET,
        message_ids: Sequence[str] | _Unset = UNSET,
        include_workblocks: bool = False,
        include_descendants: bool = False,
    ) -> Call[LogPage]:
        params = _query(
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
        return Call("GET", f"{_thread(thread_id)}/logs", _model(LogPage), params=params)

    def get(self, thread_id: str, log_id: str) -> Call[LogDetail]:
        path = f"{_thread(thread_id)}/logs/{quote(log_id, safe='')}"
        return Call("GET", path, _model(LogDetail))


class FilesEndpoints:
    def list(self, thread_id: str, path: str = "/") -> Call[Files]:
        url = f"{_thread(thread_id)}/fs" if path.strip("/") == "" else fs_path(thread_id, path)
        return Call("GET", url, _list(FileRecord, "files"))

    def stats(self, thread_id: str, path: str = "/") -> Call[FileStats]:
        return Call("GET", f"{_thread(thread_id)}/fs", _model(FileStats), params={"stats": ""})

    def find(
        self,
        thread_id: str,
        pattern: str,
        *,
        type: Literal["file", "directory", "all"] = "all",
        limit: int = 100,
    ) -> Call[Files]:
        params = _query(find=pattern, type=type, limit=limit)
        return Call("GET", f"{_thread(thread_id)}/fs", _list(FileRecord, "files"), params=params)

    def grep(
        self, thread_id: str, query: str, *, path: str | None = None, limit: int = 100
    ) -> Call[GrepHits]:
        params = _query(grep=query, path=path, limit=limit)
        return Call("GET", f"{_thread(thread_id)}/fs", _list(GrepHit, "results"), params=params)

    def read(self, thread_id: str, path: str) -> Call[bytes]:
        return Call("GET", fs_path(thread_id, path), _bytes)

    def info(self, thread_id: str, path: str) -> Call[FileRecord]:
        url = fs_path(thread_id, path)
        return Call("GET", url, _model(FileRecord, "file"), params={"format": "json"})

    def thumbnail(self, thread_id: str, path: str) -> Call[bytes]:
        return Call("GET", fs_path(thread_id, path), _bytes, params={"thumbnail": ""})

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
        return Call("POST", url, _model(AttachmentRef), json=body, retry="never")

    def mkdir(self, thread_id: str, path: str) -> Call[FileRecord]:
        url = fs_path(thread_id, path)
        body = {"type": "directory"}
        return Call("POST", url, _model(FileRecord, "directory"), json=body, retry="never")

    def move(self, thread_id: str, path: str, destination: str) -> Call[AttachmentRef]:
        body = {"action": "move", "destination": destination}
        url = fs_path(thread_id, path)
        return Call("POST", url, _model(AttachmentRef), json=body, retry="never")

    def rename(self, thread_id: str, path: str, new_name: str) -> Call[AttachmentRef]:
        body = {"action": "rename", "newName": new_name}
        url = fs_path(thread_id, path)
        return Call("POST", url, _model(AttachmentRef), json=body, retry="never")

    def delete(self, thread_id: str, path: str, *, recursive: bool = False) -> Call[None]:
        params = _query(recursive=True) if recursive else None
        url = fs_path(thread_id, path)
        return Call("DELETE", url, _none, params=params, missing_ok=lambda: None)


def _tools(response: httpx.Response) -> dict[str, ToolInfo]:
    body = response.json()
    return {name: ToolInfo.model_validate(info) for name, info in body.items()}


class CatalogEndpoints:
    def agents(self) -> Call[Agents]:
        return Call("GET", "/api/agents", _list(AgentInfo, "agents"))

    def prompts(self) -> Call[Prompts]:
        return Call("GET", "/api/prompts", _list(PromptInfo, "prompts"))

    def tools(
        self, *, type: Literal["tools", "prompts", "agents"] | None = None, schema: bool = False
    ) -> Call[dict[str, ToolInfo]]:
        params = _query(type=type, schema=schema if schema else UNSET)
        return Call("GET", "/api/tools", _tools, params=params)

    def models(self) -> Call[Models]:
        return Call("GET", "/api/models", _list(ModelInfo, "models"))

    def hooks(self) -> Call[Hooks]:
        return Call("GET", "/api/hooks", _list(HookInfo, "hooks"))


def _json(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    return body


class AuthEndpoints:
    def me(self) -> Call[dict[str, Any]]:
        return Call("GET", "/api/auth/me", _json)

    def config(self) -> Call[dict[str, Any]]:
        return Call("GET", "/api/auth/config", _json)


def health() -> Call[Health]:
    return Call("GET", "/api/health", _model(Health))


@dataclass(frozen=True)
class Routes:
    """Every builder, by namespace."""

    threads: ThreadsEndpoints = field(default_factory=ThreadsEndpoints)
    messages: MessagesEndpoints = field(default_factory=MessagesEndpoints)
    logs: LogsEndpoints = field(default_factory=LogsEndpoints)
    files: FilesEndpoints = field(default_factory=FilesEndpoints)
    catalog: CatalogEndpoints = field(default_factory=CatalogEndpoints)
    auth: AuthEndpoints = field(default_factory=AuthEndpoints)


ROUTES = Routes()
