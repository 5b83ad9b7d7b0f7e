"""The HTTP API's route table (spec 08 §8.11.2): for each operation, keyed by its id (its
route's name), its method and path, its query parameters, its request body, its answers —
the 2xx bodies and the error statuses the server really gives, each a named model.

This is the contract written once: ``server/openapi.py`` generates ``/openapi.json`` from
it (and refuses a route missing here, or one whose method or path differ), the
schemathesis test checks the server's answers against that description, and the client
builds its calls on the same models. Adding a route is one model (in its group's module),
one row here and one handler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from threadloom.records import AttachmentRef, CostReport, FileStats
from threadloom.wire import (
    agui,
    approvals,
    auth,
    catalog,
    compaction,
    control,
    files,
    logs,
    markdown,
    messages,
    playground,
    portable,
    search,
    state,
    stream,
    threads,
    webhooks,
)
from threadloom.wire import budgets as B
from threadloom.wire import memory as MEM
from threadloom.wire import schedules as SC
from threadloom.wire import triggers as TR
from threadloom.wire import users as U
from threadloom.wire.files import BINARY, UPLOAD_FORM
from threadloom.wire.stream import EVENT_STREAM

Model = type[BaseModel]
Content = Model | tuple[Model, ...] | Mapping[str, Any] | None
"""A body: a model, one of several models, media types with their schemas (a model as a
schema is put in place), or ``None`` for an empty one."""

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
OWNERS = 405
"""``PATCH``/``DELETE /api/threads/owners``: the owner facet's own path, not a thread id (its
``GET`` only; issue 23 item 10)."""


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    ok: Mapping[int, Content]
    errors: tuple[int, ...]
    query: tuple[dict[str, Any], ...] = ()
    body: Content = None
    body_required: bool = False
    extra: Mapping[int, Model] = field(default_factory=dict)
    """Non-2xx answers with a body other than the error shape (health's 503)."""
    signed: bool | None = None
    """Whether the route needs a principal (its OpenAPI ``security``); by default, when
    its errors have 401. Login answers 401 for bad credentials but needs none."""

    @property
    def needs_principal(self) -> bool:
        return 401 in self.errors if self.signed is None else self.signed


T = "/api/threads/{id}"
"""The path of one thread."""

OPERATIONS: dict[str, Operation] = {
    # threads (§8.3)
    "list_threads": Operation(
        "GET", "/api/threads", {200: threads.ThreadList}, (*SIGNED, *QUERY), threads.LIST_QUERY
    ),
    "create_thread": Operation(
        "POST",
        "/api/threads",
        {200: threads.ThreadCreated},
        (*SIGNED, *BODY, 404),
        body=threads.CreateThread,
        body_required=True,
    ),
    "owners": Operation("GET", "/api/threads/owners", {200: threads.OwnerList}, SIGNED),
    "get_thread": Operation("GET", T, {200: threads.ThreadDetail}, THREAD),
    "patch_thread": Operation(
        "PATCH",
        T,
        {200: threads.ThreadUpdated},
        (*THREAD, *BODY, OWNERS),
        body=threads.PatchThread,
        body_required=True,
    ),
    "delete_thread": Operation("DELETE", T, {200: threads.ThreadDeleted}, (*THREAD, OWNERS)),
    # forks (§8.3.8)
    "fork_thread": Operation(
        "POST",
        f"{T}/fork",
        {200: threads.ThreadForked},
        (*THREAD, *BODY, 409),
        body=threads.ForkThread,
        body_required=True,
    ),
    "list_forks": Operation("GET", f"{T}/forks", {200: threads.ForkList}, THREAD),
    # threads that move (spec 21 §21.6)
    "export_thread": Operation("GET", f"{T}/export", {200: portable.ThreadExport}, (*THREAD, 409)),
    "import_thread": Operation(
        "POST",
        "/api/threads/import",
        {201: portable.ThreadImported},
        (*SIGNED, *BODY, *QUERY, 409),
        portable.IMPORT_QUERY,
        body=portable.ThreadExport,
        body_required=True,
    ),
    # messages (§8.4)
    "get_messages": Operation(
        "GET", f"{T}/messages", {200: messages.MessagePage}, (*THREAD, *QUERY), messages.PAGE_QUERY
    ),
    "send_message": Operation(
        "POST",
        f"{T}/messages",
        {202: messages.SendAccepted, 200: messages.SendAccepted},
        (*THREAD, *BODY, 409, 423),
        body=messages.SendMessage,
        body_required=True,
    ),
    "patch_message": Operation(
        "PATCH",
        f"{T}/messages/{{message_id}}",
        {200: messages.MessageUpdated},
        (*THREAD, *BODY, 409),
        body=messages.PatchMessage,
        body_required=True,
    ),
    "delete_message": Operation(
        "DELETE", f"{T}/messages/{{message_id}}", {200: messages.MessagesDeleted}, (*THREAD, 409)
    ),
    # execution control (§8.5)
    "continue_thread": Operation(
        "POST",
        f"{T}/continue",
        {202: control.ContinueAccepted},
        (*THREAD, *BODY, 409, 423),
        body=control.ContinueThread,
    ),
    "stop_thread": Operation(
        "POST", f"{T}/stop", {200: control.Stopped}, (*THREAD, *BODY), body=control.Cascade
    ),
    "terminate_thread": Operation(
        "POST", f"{T}/terminate", {200: control.Terminated}, (*THREAD, *BODY), body=control.Cascade
    ),
    # tool-call approvals (spec 14 §14.3)
    "list_approvals": Operation("GET", f"{T}/approvals", {200: approvals.ApprovalList}, THREAD),
    "approval_inbox": Operation(
        "GET",
        "/api/approvals",
        {200: approvals.ApprovalInbox},
        (*SIGNED, *QUERY),
        approvals.INBOX_QUERY,
    ),
    "decide_approval": Operation(
        "POST",
        f"{T}/approvals/{{tool_call_id}}",
        {200: approvals.ApprovalDecided},
        (*THREAD, *BODY, 409),
        body=approvals.DecideApproval,
        body_required=True,
    ),
    # the shared state (spec 02 §2.20, §8.3.7)
    "get_state": Operation("GET", f"{T}/state", {200: state.StateAnswer}, THREAD),
    "put_state": Operation(
        "PUT",
        f"{T}/state",
        {200: state.StateAnswer},
        (*THREAD, *BODY, 409),
        body=state.PutState,
        body_required=True,
    ),
    # compaction (spec 23 §23.6)
    "compact_thread": Operation(
        "POST",
        f"{T}/compact",
        {201: compaction.CompactionItem},
        (*THREAD, *BODY, 409, 502),
        body=compaction.CompactThread,
    ),
    "list_compactions": Operation(
        "GET", f"{T}/compactions", {200: compaction.CompactionList}, THREAD
    ),
    "undo_compaction": Operation(
        "DELETE",
        f"{T}/compactions/{{compaction_id}}",
        {200: compaction.CompactionItem},
        THREAD,
    ),
    # logs, cost, subagents (§8.6, §8.7, §8.9)
    "list_logs": Operation(
        "GET", f"{T}/logs", {200: logs.LogPage}, (*THREAD, *QUERY), logs.LIST_QUERY
    ),
    "get_log": Operation("GET", f"{T}/logs/{{log_id}}", {200: logs.LogDetail}, THREAD),
    "get_cost": Operation("GET", f"{T}/cost", {200: CostReport}, THREAD),
    "get_subagents": Operation("GET", f"{T}/subagents", {200: logs.SubagentList}, THREAD),
    # files (§8.8)
    "list_files": Operation(
        "GET",
        f"{T}/fs",
        {200: (files.FileListing, FileStats, files.FileSearch, files.FileFound)},
        (*THREAD, *QUERY),
        files.LIST_QUERY,
    ),
    "read_path": Operation(
        "GET",
        f"{T}/fs/{{path}}",
        {
            200: {
                "application/json": (files.FileListing, files.FileLink, files.FileAnswer),
                "*/*": {"schema": BINARY},
            }
        },
        (*THREAD, *QUERY, 409),
        files.READ_QUERY,
    ),
    "write_path": Operation(
        "POST",
        f"{T}/fs/{{path}}",
        {201: (AttachmentRef, files.DirectoryMade), 200: AttachmentRef},
        (*THREAD, *BODY, 409),
        body={
            "application/json": (
                files.FileData,
                files.MakeDirectory,
                files.MoveFile,
                files.RenameFile,
            ),
            "application/octet-stream": {"schema": BINARY},
            "multipart/form-data": UPLOAD_FORM,
        },
        body_required=True,
    ),
    "delete_path": Operation(
        "DELETE", f"{T}/fs/{{path}}", {204: None}, (*THREAD, *QUERY, 409), files.DELETE_QUERY
    ),
    # catalog and service (§8.10, §8.11)
    "agents": Operation("GET", "/api/agents", {200: catalog.AgentList}, SIGNED),
    "prompts": Operation("GET", "/api/prompts", {200: catalog.PromptList}, SIGNED),
    "tools": Operation(
        "GET", "/api/tools", {200: catalog.ToolCatalog}, (*SIGNED, *QUERY), catalog.TOOLS_QUERY
    ),
    "call_tool": Operation(
        "POST",
        "/api/tools/{name}/call",
        {200: playground.ToolCallAnswer},
        (*SIGNED, *BODY, 404, 409),
        body=playground.CallTool,
        body_required=True,
    ),
    "models": Operation("GET", "/api/models", {200: catalog.ModelList}, SIGNED),
    "hooks": Operation("GET", "/api/hooks", {200: catalog.HookList}, SIGNED),
    # search (§8.14)
    "search_threads": Operation(
        "GET", "/api/search", {200: search.SearchResults}, (*SIGNED, *QUERY), search.SEARCH_QUERY
    ),
    "render_markdown": Operation(
        "POST",
        "/api/markdown",
        {200: markdown.RenderedMarkdown},
        (*SIGNED, *BODY),
        body=markdown.RenderMarkdown,
        body_required=True,
    ),
    "health": Operation(
        "GET",
        "/api/health",
        {200: catalog.Health},
        (500,),
        extra={503: catalog.HealthUnavailable},
    ),
    # accounts (spec 10 §10.5)
    "login": Operation(
        "POST",
        "/api/auth/login",
        {200: auth.LoggedIn},
        (*ANY, *BODY, 401, 404, 429),
        body=auth.Login,
        body_required=True,
        signed=False,
    ),
    "logout": Operation("POST", "/api/auth/logout", {200: auth.Success}, SIGNED),
    "me": Operation("GET", "/api/auth/me", {200: auth.Me}, SIGNED),
    "config": Operation("GET", "/api/auth/config", {200: auth.AuthConfig}, ANY),
    "websocket_ticket": Operation(
        "POST",
        "/api/auth/websocket-ticket",
        {200: auth.Ticket},
        (*SIGNED, *BODY),
        body=auth.TicketRequest,
        body_required=True,
    ),
    "revoke_current_key": Operation("DELETE", "/api/auth/current-key", {200: auth.Revoked}, SIGNED),
    "list_keys": Operation(
        "GET", "/api/api-keys", {200: auth.ApiKeyList}, (*SIGNED, *QUERY), auth.KEYS_QUERY
    ),
    "create_key": Operation(
        "POST",
        "/api/api-keys",
        {201: auth.ApiKeyCreated},
        (*SIGNED, *BODY, 404),
        body=auth.CreateApiKey,
        body_required=True,
    ),
    "delete_key": Operation(
        "DELETE", "/api/api-keys/{key_id}", {200: auth.Success}, (*SIGNED, 404)
    ),
    "list_oauth_grants": Operation("GET", "/api/oauth/grants", {200: auth.OAuthGrantList}, SIGNED),
    "revoke_oauth_grant": Operation(
        "DELETE", "/api/oauth/grants/{grant_id}", {200: auth.Success}, (*SIGNED, 404)
    ),
    "list_users": Operation("GET", "/api/users", {200: U.UserList}, SIGNED),
    "create_user": Operation(
        "POST",
        "/api/users",
        {201: U.UserAnswer},
        (*SIGNED, *BODY, 409),
        body=U.CreateUser,
        body_required=True,
    ),
    "patch_user": Operation(
        "PATCH",
        "/api/users/{user_id}",
        {200: U.UserAnswer},
        (*SIGNED, *BODY, 404, 409),
        body=U.PatchUser,
    ),
    "delete_user": Operation(
        "DELETE", "/api/users/{user_id}", {200: auth.Success}, (*SIGNED, 404, 409)
    ),
    "get_user_quota": Operation(
        "GET", "/api/users/{user_id}/quota", {200: B.QuotaAnswer}, (*SIGNED, 404)
    ),
    "set_user_quota": Operation(
        "PUT",
        "/api/users/{user_id}/quota",
        {200: B.QuotaAnswer},
        (*SIGNED, *BODY, 404),
        body=B.QuotaBody,
        body_required=True,
    ),
    "delete_user_quota": Operation(
        "DELETE", "/api/users/{user_id}/quota", {200: B.QuotaAnswer}, (*SIGNED, 404)
    ),
    # outbound webhooks (spec 19, admin)
    "list_webhooks": Operation("GET", "/api/webhooks", {200: webhooks.WebhookList}, SIGNED),
    "create_webhook": Operation(
        "POST",
        "/api/webhooks",
        {201: webhooks.Webhook},
        (*SIGNED, *BODY),
        body=webhooks.CreateWebhook,
        body_required=True,
    ),
    "get_webhook": Operation(
        "GET", "/api/webhooks/{webhook_id}", {200: webhooks.Webhook}, (*SIGNED, 404)
    ),
    "patch_webhook": Operation(
        "PATCH",
        "/api/webhooks/{webhook_id}",
        {200: webhooks.Webhook},
        (*SIGNED, *BODY, 404),
        body=webhooks.PatchWebhook,
    ),
    "delete_webhook": Operation(
        "DELETE", "/api/webhooks/{webhook_id}", {200: auth.Success}, (*SIGNED, 404)
    ),
    "list_webhook_deliveries": Operation(
        "GET",
        "/api/webhooks/{webhook_id}/deliveries",
        {200: webhooks.DeliveryList},
        (*SIGNED, *QUERY, 404),
        webhooks.DELIVERIES_QUERY,
    ),
    "list_all_webhook_deliveries": Operation(
        "GET",
        "/api/webhook-deliveries",
        {200: webhooks.DeliveryList},
        (*SIGNED, *QUERY),
        webhooks.DELIVERIES_QUERY,
    ),
    "redeliver_webhook": Operation(
        "POST",
        "/api/webhooks/{webhook_id}/deliveries/{event_id}/redeliver",
        {200: webhooks.Delivery},
        (*SIGNED, 404, 409),
    ),
    # the memory store (spec 20 §20.7): the caller's own memory; admins any scope
    "put_memory_item": Operation(
        "PUT",
        "/api/memory/items",
        {200: MEM.ItemAnswer},
        (*SIGNED, *BODY, 409),
        body=MEM.PutItem,
        body_required=True,
    ),
    "get_memory_item": Operation(
        "GET",
        "/api/memory/items",
        {200: MEM.ItemAnswer},
        (*SIGNED, *QUERY, 404),
        MEM.ITEM_QUERY,
    ),
    "delete_memory_item": Operation(
        "DELETE",
        "/api/memory/items",
        {200: auth.Success},
        (*SIGNED, *QUERY, 404, 409),
        MEM.DELETE_QUERY,
    ),
    "search_memory": Operation(
        "POST",
        "/api/memory/search",
        {200: MEM.ItemList},
        (*SIGNED, *BODY),
        body=MEM.SearchItems,
    ),
    "list_memory_namespaces": Operation(
        "POST",
        "/api/memory/namespaces",
        {200: MEM.NamespaceList},
        (*SIGNED, *BODY),
        body=MEM.ListNamespaces,
    ),
    # schedules (spec 18 §18.7), admins only
    "list_schedules": Operation("GET", "/api/schedules", {200: SC.ScheduleList}, SIGNED),
    "create_schedule": Operation(
        "POST",
        "/api/schedules",
        {201: SC.ScheduleAnswer},
        (*SIGNED, *BODY, 404, 409),
        body=SC.CreateSchedule,
        body_required=True,
    ),
    "get_schedule": Operation(
        "GET", "/api/schedules/{schedule_id}", {200: SC.ScheduleAnswer}, (*SIGNED, 404)
    ),
    "patch_schedule": Operation(
        "PATCH",
        "/api/schedules/{schedule_id}",
        {200: SC.ScheduleAnswer},
        (*SIGNED, *BODY, 404),
        body=SC.PatchSchedule,
    ),
    "delete_schedule": Operation(
        "DELETE", "/api/schedules/{schedule_id}", {200: auth.Success}, (*SIGNED, 404)
    ),
    "fire_schedule": Operation(
        "POST", "/api/schedules/{schedule_id}/fire", {200: SC.FireAnswer}, (*SIGNED, 400, 404)
    ),
    # inbound triggers (spec 22 §22.3, §22.5): managed by admins, called with the secret
    "list_triggers": Operation("GET", "/api/triggers", {200: TR.TriggerList}, SIGNED),
    "create_trigger": Operation(
        "POST",
        "/api/triggers",
        {201: TR.TriggerAnswer},
        (*SIGNED, *BODY, 404, 409),
        body=TR.CreateTrigger,
        body_required=True,
    ),
    "get_trigger": Operation(
        "GET", "/api/triggers/{trigger_id}", {200: TR.TriggerAnswer}, (*SIGNED, 404)
    ),
    "patch_trigger": Operation(
        "PATCH",
        "/api/triggers/{trigger_id}",
        {200: TR.TriggerAnswer},
        (*SIGNED, *BODY, 404),
        body=TR.PatchTrigger,
    ),
    "delete_trigger": Operation(
        "DELETE", "/api/triggers/{trigger_id}", {200: auth.Success}, (*SIGNED, 404)
    ),
    "fire_trigger": Operation(
        "POST",
        "/api/triggers/{trigger_id}/fire",
        {202: TR.TriggerFired},
        (*ANY, 400, 401, 404, 409, 413, 423),
        body={"*/*": {"schema": BINARY}},
        signed=False,
    ),
    # streams (spec 09) and protocols (spec 13)
    "stream_sse": Operation(
        "GET", f"{T}/stream", {200: EVENT_STREAM}, (*THREAD, 400), stream.STREAM_QUERY
    ),
    "events_get": Operation("GET", "/api/events", {}, (*SIGNED, 400), stream.EVENTS_QUERY),
    "agui_run": Operation(
        "POST",
        "/api/agui/{agent}",
        {200: EVENT_STREAM},
        (*SIGNED, *BODY, 404, 409, 423, 501),
        body=agui.RunAgentInput,
        body_required=True,
    ),
}
