"""What ``/openapi.json`` says of each operation (spec 08 §8.11.2): its query parameters,
its request body and its answers — the 2xx bodies and the error statuses the server really
gives, each a named schema — keyed by the operation's id, which is its route's name.

FastAPI describes what a route declares; the routes here read bodies and query strings
themselves (spec 08's texts and status 400, never 422), so the generated description is
completed from this table once, when ``/openapi.json`` is first asked for. Every operation
must have an entry (``describe`` refuses the description otherwise), and the schemathesis
test checks the server's answers against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from threadloom.records import AttachmentRef, CostReport, FileStats
from threadloom.server import answers as A
from threadloom.server import schemas as S
from threadloom.server.schemas import (
    FILES_LIMIT,
    LIMIT,
    MAX_DATE_S,
    OFFSET,
    boolean,
    choice,
    choices,
    integer,
    path,
    text,
)

REF = "#/components/schemas/{model}"

Model = type[BaseModel]
Answer = Model | tuple[Model, ...] | Mapping[str, Any] | None
"""A 2xx body: a model, one of several models, media types with their schemas (a model
as a schema is put in place), or ``None`` for an empty answer."""

# -- the error statuses each kind of route can give -----------------------------------------

ANY = (403, 500, 503)
"""Every route but health: the local origin guard (spec 10 §10.8), a fault, the store."""
SIGNED = (*ANY, 401, 429)
"""Routes that need a principal: no or a bad credential, too many bad ones (spec 10)."""
THREAD = (*SIGNED, 404)
"""Routes of one thread: unknown (404) or another user's (403) thread (§8.1.4 step 6)."""
BODY = (400, 413, 415)
"""Routes with a JSON body: invalid (400), too large (413), not JSON (415) (§8.1.1)."""
QUERY = (400,)
"""Routes with typed query parameters (§8.1.5)."""

BINARY = {"type": "string", "format": "binary"}
EVENT_STREAM = {"text/event-stream": A.ServerSentEvent}
"""Server-Sent Events; the schema is each event's (OpenAPI 3.1 has no ``itemSchema``)."""


@dataclass(frozen=True)
class Op:
    ok: Mapping[int, Answer]
    errors: tuple[int, ...]
    query: tuple[dict[str, Any], ...] = ()
    body: Answer = None
    body_required: bool = False
    extra: Mapping[int, Model] = field(default_factory=dict)
    """Non-2xx answers with a body other than the error shape (health's 503)."""


def _json(body: Answer) -> Mapping[str, Any] | None:
    if body is None or isinstance(body, Mapping):
        return body
    return {"application/json": body}


# -- the table -------------------------------------------------------------------------------

_MESSAGE_PAGE = (
    LIMIT,
    OFFSET,
    choice("order", ("asc", "desc"), "Which end the page starts from (default desc)"),
    integer("depth", "Deepest sub-prompt level to include (default 0)"),
    boolean("includeSilent", "Include silent messages"),
    boolean("includeWorkblocks", "With ids: add each tool call's whole work block"),
    text("ids", "Comma-separated message ids (at most 200): those, in history order"),
)
_STREAM = (
    integer("since", "Resume after this seq (spec 09 §9.7)"),
    boolean("logs", "Also log frames (needs the 'logs' permission)"),
    boolean("includeSilent", "Also silent messages"),
    integer("depth", "Deepest sub-prompt level"),
    boolean("reasoning", "Also reasoning chunks"),
    text("ticket", "A WebSocket ticket (POST /api/auth/websocket-ticket)"),
    text("token", "A credential, for clients that cannot send headers"),
)

OPERATIONS: dict[str, Op] = {
    # threads (§8.3)
    "list_threads": Op(
        {200: A.ThreadList},
        (*SIGNED, *QUERY),
        (
            LIMIT,
            OFFSET,
            integer("startDate", "Created at or after (Unix seconds)", maximum=MAX_DATE_S),
            integer("endDate", "Created at or before (Unix seconds)", maximum=MAX_DATE_S),
            text("parent", "Children of this thread; `none`: top-level threads only"),
            text("user_id", "Owner (admins; ignored for others)"),
            text("agent_id", "Agent"),
            text("tag", "Only threads carrying exactly this tag"),
            boolean("include_children", "Include child threads"),
            text("search", "Text in the id, tags or preview"),
            boolean("executing", "Running or not"),
            boolean("terminated", "Terminated or not"),
            choices("status", ("idle", "running", "failed"), "Comma-separated run states"),
            choice("sort", ("activity", "created", "oldest"), "Order (default activity)"),
        ),
    ),
    "create_thread": Op(
        {200: A.ThreadCreated}, (*SIGNED, *BODY, 404), body=S.CreateThread, body_required=True
    ),
    "owners": Op({200: A.OwnerList}, SIGNED),
    "get_thread": Op({200: A.ThreadDetail}, THREAD),
    "patch_thread": Op(
        {200: A.ThreadUpdated}, (*THREAD, *BODY), body=S.PatchThread, body_required=True
    ),
    "delete_thread": Op({200: A.ThreadDeleted}, THREAD),
    # messages (§8.4)
    "get_messages": Op({200: A.MessagePage}, (*THREAD, *QUERY), _MESSAGE_PAGE),
    "send_message": Op(
        {202: A.SendAccepted, 200: A.SendAccepted},
        (*THREAD, *BODY, 409, 423),
        body=S.SendMessage,
        body_required=True,
    ),
    "patch_message": Op(
        {200: A.MessageUpdated}, (*THREAD, *BODY, 409), body=S.PatchMessage, body_required=True
    ),
    "delete_message": Op({200: A.MessagesDeleted}, (*THREAD, 409)),
    # execution control (§8.5)
    "continue_thread": Op(
        {202: A.ContinueAccepted}, (*THREAD, *BODY, 409, 423), body=S.ContinueThread
    ),
    "stop_thread": Op({200: A.Stopped}, (*THREAD, *BODY), body=S.Cascade),
    "terminate_thread": Op({200: A.Terminated}, (*THREAD, *BODY), body=S.Cascade),
    # logs, cost, subagents (§8.6, §8.7, §8.9)
    "list_logs": Op(
        {200: A.LogPage},
        (*THREAD, *QUERY),
        (
            LIMIT,
            OFFSET,
            choice("order", ("asc", "desc"), "Default asc"),
            text("kind", "Comma-separated kinds: llm, app, runtime …"),
            boolean("error", "Only rows with (or without) an error"),
            text("ids", "Comma-separated log ids (at most 200)"),
            text("messageIds", "Comma-separated message ids (at most 200)"),
            boolean("includeWorkblocks", "With messageIds: their work blocks' rows too"),
            boolean("includeDescendants", "With ids: the rows' ancestors and descendants"),
            boolean("timing", "Add latency_ms, time_to_first_token_ms, finish_reason"),
        ),
    ),
    "get_log": Op({200: A.LogDetail}, THREAD),
    "get_cost": Op({200: CostReport}, THREAD),
    "get_subagents": Op({200: A.SubagentList}, THREAD),
    # files (§8.8)
    "list_files": Op(
        {200: (A.FileListing, FileStats, A.FileSearch, A.FileFound)},
        (*THREAD, *QUERY),
        (
            boolean("stats", "Total size and file count at or below `path`"),
            path("path", "With stats or grep: the directory"),
            text("grep", "Files whose text contains this (not empty)", min_length=1),
            text("find", "Entries whose name matches this glob (not empty)", min_length=1),
            choice("type", ("file", "directory", "all"), "With find: which entries"),
            integer("limit", "With grep or find: 1 to 1000 (default 100)", 1, FILES_LIMIT),
        ),
    ),
    "read_path": Op(
        {
            200: {
                "application/json": (A.FileListing, A.FileLink, A.FileAnswer),
                "*/*": {"schema": BINARY},
            }
        },
        (*THREAD, *QUERY, 409),
        (
            boolean("thumbnail", "The image's thumbnail (image/jpeg)"),
            choice("format", ("json",), "The file's record instead of its bytes"),
        ),
    ),
    "write_path": Op(
        {201: (AttachmentRef, A.DirectoryMade), 200: AttachmentRef},
        (*THREAD, *BODY, 409),
        body={
            "application/json": (S.FileData, S.MakeDirectory, S.MoveFile, S.RenameFile),
            "application/octet-stream": {"schema": BINARY},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": BINARY},
                }
            },
        },
        body_required=True,
    ),
    "delete_path": Op(
        {204: None},
        (*THREAD, *QUERY, 409),
        (boolean("recursive", "Delete a directory with what it holds"),),
    ),
    # catalog and service (§8.10, §8.11)
    "agents": Op({200: A.AgentList}, SIGNED),
    "prompts": Op({200: A.PromptList}, SIGNED),
    "tools": Op(
        {200: A.ToolCatalog},
        (*SIGNED, *QUERY),
        (
            choice("type", ("tools", "prompts", "agents"), "Only this kind"),
            boolean("schema", "Include each entry's parameter schema"),
        ),
    ),
    "models": Op({200: A.ModelList}, SIGNED),
    "hooks": Op({200: A.HookList}, SIGNED),
    "health": Op({200: A.Health}, (500,), extra={503: A.HealthUnavailable}),
    # accounts (spec 10 §10.5)
    "login": Op({200: A.LoggedIn}, (*ANY, *BODY, 401, 404, 429), body=S.Login, body_required=True),
    "logout": Op({200: A.Success}, SIGNED),
    "me": Op({200: A.Me}, SIGNED),
    "config": Op({200: A.AuthConfig}, ANY),
    "websocket_ticket": Op(
        {200: A.Ticket}, (*SIGNED, *BODY), body=S.TicketRequest, body_required=True
    ),
    "revoke_current_key": Op({200: A.Revoked}, SIGNED),
    "list_keys": Op(
        {200: A.ApiKeyList}, (*SIGNED, *QUERY), (boolean("all", "Admins: every user's keys"),)
    ),
    "create_key": Op(
        {201: A.ApiKeyCreated}, (*SIGNED, *BODY, 404), body=S.CreateApiKey, body_required=True
    ),
    "delete_key": Op({200: A.Success}, (*SIGNED, 404)),
    "list_users": Op({200: A.UserList}, SIGNED),
    "create_user": Op(
        {201: A.UserAnswer}, (*SIGNED, *BODY, 409), body=S.CreateUser, body_required=True
    ),
    "patch_user": Op({200: A.UserAnswer}, (*SIGNED, *BODY, 404, 409), body=S.PatchUser),
    "delete_user": Op({200: A.Success}, (*SIGNED, 404, 409)),
    # streams (spec 09) and protocols (spec 13)
    "stream_sse": Op({200: EVENT_STREAM}, (*THREAD, 400), _STREAM),
    "events_get": Op(
        {},
        (*SIGNED, 400),
        (
            choice("scope", ("user", "all"), "all: every user's threads (admins)"),
            text("ticket", "A WebSocket ticket"),
            text("token", "A credential, for clients that cannot send headers"),
        ),
    ),
    "agui_run": Op(
        {200: EVENT_STREAM},
        (*SIGNED, *BODY, 404, 409, 423, 501),
        body=S.RunAgentInput,
        body_required=True,
    ),
}

_STATUS_TEXT = {200: "OK", 201: "Created", 202: "Accepted", 204: "No content"}


# -- the description -------------------------------------------------------------------------


def _models(answer: Answer) -> list[Model]:
    """The models of an answer (a media type's literal content object has none)."""
    if answer is None:
        return []
    if isinstance(answer, Mapping):
        media = answer.values()
        return [m for v in media if not isinstance(v, Mapping) for m in _models(v)]
    if isinstance(answer, tuple):
        return list(answer)
    return [answer]


class _Refs:
    """Every model of the table as a named schema, and the reference to each."""

    def __init__(self) -> None:
        wanted: dict[tuple[Model, JsonSchemaMode], None] = {}
        for op in OPERATIONS.values():
            for answer in (*op.ok.values(), *op.extra.values()):
                for model in _models(answer):
                    wanted[(model, "serialization")] = None
            for model in _models(op.body):
                wanted[(model, "validation")] = None
        wanted[(S.ErrorBody, "serialization")] = None
        keys = list(wanted)
        refs, defs = models_json_schema(keys, ref_template=REF)
        self.refs = refs
        self.schemas: dict[str, Any] = defs.get("$defs", {})

    def schema(self, answer: Answer, mode: JsonSchemaMode) -> dict[str, Any]:
        if isinstance(answer, tuple):
            return {"anyOf": [self.schema(m, mode) for m in answer]}
        if isinstance(answer, Mapping):
            return dict(answer)
        assert answer is not None
        return dict(self.refs[(answer, mode)])

    def content(self, answer: Answer, mode: JsonSchemaMode) -> dict[str, Any]:
        media = _json(answer) or {}
        out: dict[str, Any] = {}
        for kind, value in media.items():
            if isinstance(value, Mapping):
                out[kind] = dict(value)
            else:
                out[kind] = {"schema": self.schema(value, mode)}
        return out


def _responses(op: Op, refs: _Refs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, answer in sorted(op.ok.items()):
        item: dict[str, Any] = {"description": _STATUS_TEXT.get(status, "OK")}
        if answer is not None:
            item["content"] = refs.content(answer, "serialization")
        out[str(status)] = item
    for status, model in op.extra.items():
        out[str(status)] = {
            "description": S.ERROR_TEXTS[status],
            "content": refs.content(model, "serialization"),
        }
    error = {"application/json": {"schema": refs.schema(S.ErrorBody, "serialization")}}
    for status in set(op.errors):
        out[str(status)] = {"description": S.ERROR_TEXTS[status], "content": error}
    return dict(sorted(out.items()))


def _media_examples(content: dict[str, Any], refs: _Refs) -> None:
    """A JSON body's examples also on its media type, as ``examples`` the docs page offers
    in "Try it out" (a body schema's own ``examples`` are not shown there): every example
    of each named schema of the body, each one the server accepts (§8.11.3 rule 3)."""
    media = content.get("application/json")
    if media is None:
        return
    schema = media.get("schema", {})
    named = [s.get("$ref", "") for s in schema.get("anyOf", [schema])]
    found: dict[str, Any] = {}
    for ref in named:
        model = ref.rsplit("/", 1)[-1]
        for i, value in enumerate(refs.schemas.get(model, {}).get("examples", ()), 1):
            found[f"{model} {i}"] = {"value": value}
    if found:
        media["examples"] = found


def describe(schema: dict[str, Any]) -> dict[str, Any]:
    """Complete FastAPI's description of the API routes from ``OPERATIONS`` (in place)."""
    refs = _Refs()
    seen: set[str] = set()
    for ops in schema.get("paths", {}).values():
        for operation in ops.values():
            name = operation["operationId"]
            op = OPERATIONS.get(name)
            if op is None:
                raise LookupError(f"operation {name} has no entry in openapi.OPERATIONS")
            seen.add(name)
            path_params = [p for p in operation.get("parameters", ()) if p["in"] == "path"]
            params = [*path_params, *op.query]
            if params:
                operation["parameters"] = params
            else:
                operation.pop("parameters", None)
            operation.pop("requestBody", None)
            if op.body is not None:
                content = refs.content(op.body, "validation")
                _media_examples(content, refs)
                operation["requestBody"] = {"required": op.body_required, "content": content}
            operation["responses"] = _responses(op, refs)
    stale = set(OPERATIONS) - seen
    if stale:
        raise LookupError(f"openapi.OPERATIONS names no route: {sorted(stale)}")
    _tags_required(refs.schemas)
    schema.setdefault("components", {})["schemas"] = dict(sorted(refs.schemas.items()))
    return schema


def _tags_required(schemas: dict[str, Any]) -> None:
    """A union told apart by a ``discriminator`` needs its tag in every body (pydantic
    refuses one without it, default or not): the property is required in each schema
    the mapping names (AG-UI's messages, by ``role``)."""
    found: list[dict[str, Any]] = []
    stack: list[Any] = list(schemas.values())
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("discriminator"), dict):
                found.append(item["discriminator"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    for discriminator in found:
        tag = discriminator.get("propertyName")
        for ref in discriminator.get("mapping", {}).values():
            named = schemas.get(str(ref).rsplit("/", 1)[-1])
            if named is not None and tag and tag not in named.setdefault("required", []):
                named["required"].append(tag)


def operation_id(route: APIRoute) -> str:
    """A route's operation id: its name, stable whatever its path."""
    return route.name


def install(app: FastAPI) -> None:
    """Serve the completed description at ``app.openapi_url``."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
