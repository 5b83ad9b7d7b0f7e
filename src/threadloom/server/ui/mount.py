"""Mount the UI on the FastAPI app: page routes, static files and the local ``/docs``."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from threadloom.server.settings import ServerSettings
from threadloom.server.ui import docs, pages


def install(app: FastAPI, settings: ServerSettings) -> None:
    """Add the UI's pages and static files to ``app``; ``/docs`` when ``public_docs``."""
    pages.warm()
    app.include_router(pages.router)
    app.mount("/ui/static", StaticFiles(directory=pages.STATIC), name="ui-static")
    if settings.public_docs:
        app.include_router(docs.router)
        app.mount("/docs/assets", StaticFiles(directory=docs.assets()), name="docs-assets")
