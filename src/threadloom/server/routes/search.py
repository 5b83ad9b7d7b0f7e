"""Full-text search of threads by their messages' text (spec 08 §8.14): ``GET
/api/search``. The store finds and ranks (SQLite FTS5, PostgreSQL full-text search); this
route reads the parameters, pins a non-admin to their own threads as the thread list does
(spec 10 §10.6), and answers each hit with the thread item of the list."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query
from threadloom.server.errors import bad_field
from threadloom.server.routes.threads import origin_of
from threadloom.server.routing import Router
from threadloom.server.thread_answers import thread_answer
from threadloom.store.base import ThreadQuery, search_terms
from threadloom.wire.search import MAX_LIMIT, MAX_Q, SearchHit, SearchResults, SnippetPart

router = Router(prefix="/api/search", tags=["search"])


@router.get("", summary="Search threads by the text of their messages")
async def search_threads(
    request: Request,
    who: Principal = Depends(deps.principal),
    q: Query = Depends(deps.query),
) -> dict[str, Any]:
    ctx = deps.context(request)
    text = q.raw("q") or ""
    if not text.strip():
        raise bad_field("q", "is required")
    if len(text) > MAX_Q:
        raise bad_field("q", f"must be at most {MAX_Q} characters")
    limit = q.int("limit", 20, cap=MAX_LIMIT)
    parent = q.raw("parent") or None
    tag = q.raw("tag")
    query = ThreadQuery(
        user_id=(q.raw("user_id") or None) if who.is_admin else who.id,
        agent_id=q.raw("agent_id") or None,
        include_children=bool(q.bool("include_children", False)),
        parent_id=None if parent in (None, "none") else parent,
        roots_only=parent == "none",
        tags=(tag,) if tag else (),
        states=tuple(q.enum_list("status", ("idle", "running", "failed"))),
        limit=limit if limit is not None else 20,
        offset=q.int("offset", 0) or 0,
    )
    if not who.is_admin and not who.has_user_row:
        return SearchResults(hits=[], total=0, hasMore=False).to_wire()
    hits, total = await ctx.runtime.store.replica().search_threads(query, search_terms(text))
    origin = origin_of(request)
    defs = ctx.runtime.definitions
    return SearchResults(
        hits=[
            SearchHit(
                thread=thread_answer(h.thread, defs, origin),
                message_id=h.message_id,
                snippet=[SnippetPart(text=t, match=m) for t, m in h.snippet],
                rank=h.rank,
                matches=h.matches,
            )
            for h in hits
        ],
        total=total,
        hasMore=query.offset + len(hits) < total,
    ).to_wire()
