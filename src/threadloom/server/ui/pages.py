"""The UI's pages. Each renders a shell template; the page's ES module fills it from the
public API. A page needs the same credential as the API (spec 10): without one it
redirects to ``/login`` (a server in local development mode needs none)."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

import threadloom
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
router = APIRouter(include_in_schema=False)

# Only this origin: scripts, styles, images, sockets. Nothing inline, nothing from elsewhere.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


@cache
def _version(name: str) -> str:
    return hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:12]


def static_url(name: str) -> str:
    """The URL of a static file with its content hash, so a new release is fetched anew."""
    return f"/ui/static/{name}?v={_version(name)}"


_env.globals["static"] = static_url
_env.globals["version"] = threadloom.__version__


def render(template: str, status: int = 200, **values: Any) -> HTMLResponse:
    html = _env.get_template(template).render(**values)
    return HTMLResponse(html, status_code=status, headers=HEADERS)


async def viewer(request: Request) -> Principal | None:
    """The principal of this page request, or None when it has no valid credential."""
    try:
        return await deps.principal(request)
    except ApiError as exc:
        if exc.status in (401, 403):
            return None
        raise


def to_login(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


def _who(who: Principal) -> dict[str, Any]:
    return {
        "id": who.id,
        "name": who.display_name or who.username or who.id,
        "admin": who.is_admin,
        "auth_type": who.auth_type,
        "logs": who.has_permission("logs"),
    }


@router.get("/")
async def threads_page(request: Request) -> Response:
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render("threads.html", who=_who(who), page="threads")


@router.get("/agents")
async def agents_page(request: Request) -> Response:
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render("agents.html", who=_who(who), page="agents")


@router.get("/approvals")
async def approvals_page(request: Request) -> Response:
    """The approvals inbox (spec 14 §14.9)."""
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render("inbox.html", who=_who(who), page="approvals")


@router.get("/playground")
async def playground_page(request: Request) -> Response:
    """The tool playground (spec 08 §8.10.7): admins only, as ``/api/tools`` is."""
    who = await viewer(request)
    if who is None:
        return to_login(request)
    if not who.is_admin:
        raise ApiError(403, "admin_required", "Forbidden: Admin access required")
    return render("playground.html", who=_who(who), page="playground")


@router.get("/automation")
async def automation_page(request: Request) -> Response:
    """Schedules, triggers and webhooks (spec 08 §8.15): their routes are admin-only, so
    another user's page says so and loads nothing."""
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render("automation.html", who=_who(who), page="automation")


@router.get("/threads/{thread_id}")
async def thread_page(thread_id: str, request: Request) -> Response:
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render("thread.html", who=_who(who), page="thread", thread_id=thread_id)


def _safe_next(value: str | None) -> str:
    """Only a path of this server (never ``//host`` or a scheme) is followed after login."""
    if value and value.startswith("/") and not value.startswith(("//", "/\\")):
        return value
    return "/"


@router.get("/login")
async def login_page(request: Request) -> Response:
    target = _safe_next(request.query_params.get("next"))
    if await viewer(request) is not None:
        return RedirectResponse(target, status_code=303)
    ctx = deps.context(request)
    return render(
        "login.html",
        who=None,
        page="login",
        next=target,
        password_login=ctx.settings.password_login,
    )
