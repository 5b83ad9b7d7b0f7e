"""``/docs``: Swagger UI for ``/openapi.json`` with its script, style and icon served from
the ``swagger-ui-bundle-v2`` package (module ``swagger_ui_bundle``), so the page works
offline and loads nothing from another host (FastAPI's default loads them from a CDN)."""

from __future__ import annotations

from pathlib import Path

from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from threadloom.server.routing import Router

router = Router(include_in_schema=False)

ASSETS = "/docs/assets"


def assets() -> Path:
    """The folder of the installed Swagger UI distribution."""
    from swagger_ui_bundle import swagger_ui_path

    return Path(swagger_ui_path)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Threadloom API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        # no badge from the public validator service: nothing leaves this server
        swagger_ui_parameters={"validatorUrl": None},
    )
