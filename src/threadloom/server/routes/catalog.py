"""The catalog of definitions (spec 08 §8.10), Markdown rendering (§8.10.6) and the service
routes (§8.11)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

import threadloom
from threadloom.define.prompt import Prompt, Subagent, entry_name
from threadloom.server import deps, markdown
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query
from threadloom.server.routing import Router
from threadloom.server.thread_answers import absolute_icon, backing
from threadloom.wire.catalog import (
    AgentEntry,
    AgentList,
    HookEntry,
    HookList,
    McpTool,
    PromptEntry,
    PromptList,
    PromptMcpServer,
    PromptSubagent,
    PromptVariable,
)
from threadloom.wire.markdown import RenderedMarkdown, RenderMarkdown

router = Router(prefix="/api", tags=["catalog"])
LOADED_AT = int(time.time())


def _subagents(defs: Any, prompt_name: str | None) -> list[str]:
    prompt = defs.prompt(prompt_name) if prompt_name else None
    if prompt is None:
        return []
    return [entry_name(e) for e in prompt.tools if isinstance(e, Subagent)]


@router.get("/agents", summary="Agents the caller may start")
async def agents(request: Request, who: Principal = Depends(deps.principal)) -> dict[str, Any]:
    runtime = deps.runtime(request)
    defs = runtime.definitions
    origin = f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"
    primary = {a.name for a in defs.primary_agents()}
    out: list[AgentEntry] = []
    for agent in sorted(defs.agents(), key=lambda a: a.name):
        item: dict[str, Any] = {
            "id": agent.name,
            "name": agent.name,
            "title": agent.title or agent.name,
            "description": agent.description or None,
            "tool_description": agent.tool_description or None,
            "icon": absolute_icon(getattr(agent, "icon", None), origin),
            "side_a_backing": backing(agent.side_a),
            "side_b_backing": backing(agent.side_b),
            "primary": agent.name in primary,
            "parentHooks": [p.hook for p in agent.parent_hooks],
            "created_at": LOADED_AT,
            "packed": False,
            "variables": [
                {"name": name, "description": description, "prompt": prompt}
                for name, (prompt, description) in defs.required_arguments(agent.name).items()
            ],
        }
        if who.is_admin:
            prompt = defs.prompt(agent.side_a.prompt) if agent.side_a.prompt else None
            side_b = agent.side_b
            item.update(
                default_prompt=agent.side_a.prompt,
                default_model=prompt.model if prompt is not None else None,
                tools=[entry_name(e) for e in prompt.tools] if prompt is not None else [],
                side_a_label=agent.side_a.label,
                side_a_agent_prompt=agent.side_a.prompt,
                side_a_handler=None,
                side_a_subagents=_subagents(defs, agent.side_a.prompt),
                side_b_label=side_b.label if side_b else None,
                side_b_agent_prompt=side_b.prompt if side_b else None,
                side_b_handler=None,
                side_b_subagents=_subagents(defs, side_b.prompt if side_b else None),
            )
        out.append(AgentEntry(**item))  # the admins' keys only when given
    return AgentList(agents=out).to_wire()


def _prompt_text(prompt: Prompt) -> str:
    if isinstance(prompt.system, str):
        return prompt.system
    return json.dumps([part.model_dump() for part in prompt.system])


def _schema(prompt: Prompt) -> dict[str, Any] | None:
    schema = prompt.required_schema
    if schema is None:
        return None
    if isinstance(schema, dict):
        return schema
    return schema.model_json_schema()


def _subagent_entries(prompt: Prompt) -> list[PromptSubagent]:
    return [
        PromptSubagent(
            relationship=e.relationship_name,
            agent=e.agent,
            description=e.description,
            blocking=e.blocking,
        )
        for e in prompt.tools
        if isinstance(e, Subagent)
    ]


def _mcp_entries(defs: Any, prompt: Prompt) -> list[PromptMcpServer]:
    out: list[PromptMcpServer] = []
    for entry in prompt.tools:
        found = defs.mcp_entry(entry)
        if found is None:
            continue
        server, only = found
        bound = defs.mcp_tools(server.name)
        tools = (
            None
            if bound is None
            else [
                McpTool.model_validate(
                    {"name": t.name, "description": t.description, "schema": t.parameters}
                )
                for t in bound
                if only is None or getattr(t, "remote_name", None) == only
            ]
        )
        out.append(
            PromptMcpServer(
                name=server.name,
                transport="stdio" if server.command else "http",
                description=server.description,
                only=only,
                tools=tools,
                error=defs.mcp_finding(server.name) if bound is None else None,
            )
        )
    return out


@router.get("/prompts", summary="Prompt definitions (admin)")
async def prompts(request: Request, _: Principal = Depends(deps.admin)) -> dict[str, Any]:
    defs = deps.runtime(request).definitions
    out: list[PromptEntry] = []
    for prompt in sorted(defs.prompts(), key=lambda p: p.name):
        model = defs.model(prompt.model)
        out.append(
            PromptEntry(
                id=prompt.name,
                name=prompt.name,
                tool_description=prompt.tool_description,
                prompt=_prompt_text(prompt),
                required_schema=_schema(prompt),
                model_id=prompt.model,
                model_name=model.model if model is not None else None,
                model_provider=(model.provider_name or "custom") if model else "unknown",
                include_chat=prompt.include_chat,
                include_past_tools=prompt.include_past_tools,
                parallel_tool_calls=prompt.parallel_tool_calls is not False,
                tool_choice=prompt.tool_choice,
                tools=[entry_name(e) for e in prompt.tools],
                reasoning=prompt.reasoning.model_dump() if prompt.reasoning else None,
                created_at=LOADED_AT,
                variables=[
                    PromptVariable(name=name, description=description)
                    for name, description in prompt.variables.items()
                ],
                subagents=_subagent_entries(prompt),
                mcp_servers=_mcp_entries(defs, prompt),
            )
        )
    return PromptList(prompts=out).to_wire()


@router.get("/tools", summary="Tools, prompts and agents callable as tools (admin)")
async def tools(
    request: Request, _: Principal = Depends(deps.admin), q: Query = Depends(deps.query)
) -> dict[str, Any]:
    kind = q.enum("type", ("tools", "prompts", "agents"))
    with_schema = bool(q.bool("schema", False))
    defs = deps.runtime(request).definitions
    out: dict[str, Any] = {}
    if kind in (None, "tools"):
        for tool in sorted(defs.tools(), key=lambda t: t.name):
            problems = list(getattr(tool, "problems", ()) or ())
            entry: dict[str, Any] = {
                "description": tool.description,
                "schema": tool.parameters if with_schema else None,
                "variables": [],
                "hasError": bool(problems),
                "type": "tool",
            }
            if problems:
                entry["error"] = "; ".join(str(p) for p in problems)
            out[tool.name] = entry
    if kind in (None, "prompts"):
        for prompt in sorted(defs.prompts(), key=lambda p: p.name):
            model = defs.model(prompt.model)
            out[prompt.name] = {
                "description": prompt.tool_description,
                "schema": _schema(prompt) if with_schema else None,
                "variables": [],
                "hasError": False,
                "type": "prompt",
                "model": model.model if model is not None else None,
            }
    if kind in (None, "agents"):
        for agent in sorted(defs.agents(), key=lambda a: a.name):
            if agent.expose_as_tool:
                out[agent.name] = {
                    "description": agent.tool_description or agent.description,
                    "schema": None,
                    "variables": [],
                    "hasError": False,
                    "type": "agent",
                }
    return out


@router.get("/models", summary="Model definitions (admin)")
async def models(request: Request, _: Principal = Depends(deps.admin)) -> dict[str, Any]:
    defs = deps.runtime(request).definitions
    out = []
    for model in sorted(defs.models(), key=lambda m: m.name):
        fallbacks = []
        for order, name in enumerate(model.fallbacks, start=1):
            fb = defs.model(name)
            fallbacks.append(
                {
                    "id": name,
                    "name": name,
                    "model": fb.model if fb else None,
                    "provider": fb.provider_name if fb else None,
                    "iconId": None,
                    "order": order,
                }
            )
        out.append(
            {
                "id": model.name,
                "name": model.name,
                "provider": model.provider_name or "custom",
                "provider_id": model.provider_name or "custom",
                "model": model.model,
                "iconId": None,
                "input_price": model.input_price,
                "output_price": model.output_price,
                "cached_price": model.cached_price,
                "pricing_range": None,
                "included_providers": None,
                "fallbacks": fallbacks,
                "fallback_on": list(model.fallback_on),
                "providerTools": [],
                "capabilities": {
                    "tools": model.supports_tools,
                    "images": model.supports_images,
                },
                "created_at": LOADED_AT,
            }
        )
    return {"models": out}


@router.get("/hooks", summary="Registered hooks (admin)")
async def hooks(request: Request, _: Principal = Depends(deps.admin)) -> dict[str, Any]:
    defs = deps.runtime(request).definitions
    items = sorted(((h.name, h.id) for h in defs.hooks), key=lambda t: (t[0], t[1]))
    return HookList(hooks=[HookEntry(id=hook_id, hook=name) for name, hook_id in items]).to_wire()


service = Router(prefix="/api", tags=["service"])


@service.get("/health", summary="Liveness and readiness (public)")
async def health(request: Request) -> JSONResponse:
    ctx = deps.context(request)
    node = ctx.settings.node_id
    store = ctx.runtime.store
    kind = store.kind
    liveness = ctx.runtime.liveness
    if ctx.draining:
        reason = "draining"
    elif liveness is not None and liveness.fenced:
        reason = "fenced: no heartbeat reached the database"
    else:
        try:
            await asyncio.wait_for(store.get_thread("00000000-0000-0000-0000-000000000000"), 2.0)
            reason = None
        except Exception:
            reason = "store unreachable"
    if reason is not None:
        return JSONResponse(
            {"status": "unavailable", "error": reason, "code": "unavailable", "node": node},
            status_code=503,
        )
    return JSONResponse(
        {"status": "ok", "version": threadloom.__version__, "node": node, "store": kind}
    )


@router.post("/markdown", summary="Markdown rendered as sanitized HTML")
async def render_markdown(
    request: Request, _: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    """Spec 08 §8.10.6: each text as sanitized HTML (in a worker thread: a megabyte of
    Markdown takes a while, and the event loop serves every other request meanwhile)."""
    body = await deps.body_of(request, RenderMarkdown)
    html = await asyncio.to_thread(lambda: [markdown.render(text) for text in body.texts])
    return RenderedMarkdown(html=html).to_wire()
