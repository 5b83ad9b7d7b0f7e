"""The UI's pages. Each renders a shell template; the page's ES module fills it from the
public API. A page needs the same credential as the API (spec 10): without one it
redirects to ``/login`` (a server in local development mode needs none)."""

from __future__ import annotations

import hashlib
import mimetypes
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup, escape

import threadloom
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
router = Router(include_in_schema=False)

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


# a static import of a module of this folder: `import … from "./name.js"` at a line's start
# (a dynamic `import("./x.js")` is not one: what a page loads when first used stays out)
_STATIC_IMPORT = re.compile(r"""^import\s[^"';]*?from\s*["']\./([\w.-]+\.js)["']""", re.M)


@cache
def module_graph(entry: str) -> tuple[str, ...]:
    """The modules that ``js/<entry>`` imports statically, directly or not, each once, in
    the order first met."""
    found: list[str] = []
    todo = [entry]
    while todo:
        source = (STATIC / "js" / todo.pop(0)).read_text(encoding="utf-8")
        for name in _STATIC_IMPORT.findall(source):
            if name != entry and name not in found:
                found.append(name)
                todo.append(name)
    return tuple(found)


def modules(*entries: str) -> Markup:
    """The page's ES modules: each entry's ``<script>``, then a ``modulepreload`` of every
    module their static imports reach. The browser fetches the whole graph at once, while
    the document is read, instead of learning of a module only once the one that imports
    it has arrived (a chain of round trips on a first, cold load). A dependency is
    preloaded at the URL its import resolves to (no content hash)."""
    wanted: list[str] = []
    for entry in entries:
        wanted += [m for m in module_graph(entry) if m not in wanted and m not in entries]
    links = [f'<link rel="modulepreload" href="/ui/static/js/{escape(m)}">' for m in wanted]
    scripts = [
        f'<script type="module" src="{escape(static_url("js/" + e))}"></script>' for e in entries
    ]
    return Markup("\n".join(scripts + links))


_env.globals["static"] = static_url
_env.globals["modules"] = modules


@cache
def warm() -> None:
    """Do at start-up what the first visit would otherwise wait on: compile the
    templates, hash the static files, read the module graphs of the pages and the table
    of media types the static files are served with. Once a process."""
    for name in _env.list_templates(extensions=["html"]):
        _env.get_template(name)
    for path in STATIC.rglob("*"):
        if path.is_file():
            static_url(path.relative_to(STATIC).as_posix())
    for entry in (STATIC / "js").glob("*.js"):
        module_graph(entry.name)
    if not mimetypes.inited:  # what another part added to the table stays
        mimetypes.init()


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


# messages in a page of the thread page (its first read, and each older or newer one)
THREAD_PAGE = 100


def first_reads(thread_id: str) -> list[str]:
    """What the thread page reads first, as ``thread.js`` asks it: the thread, and the
    newest page of its messages. The page preloads both, so they are read while its
    modules load rather than after."""
    base = f"/api/threads/{thread_id}"
    return [base, f"{base}/messages?limit={THREAD_PAGE}&order=desc"]


@router.get("/threads/{thread_id}")
async def thread_page(thread_id: str, request: Request) -> Response:
    who = await viewer(request)
    if who is None:
        return to_login(request)
    return render(
        "thread.html",
        who=_who(who),
        page="thread",
        thread_id=thread_id,
        page_size=THREAD_PAGE,
        reads=first_reads(thread_id),
    )


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
