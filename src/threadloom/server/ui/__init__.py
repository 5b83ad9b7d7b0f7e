"""The web UI (docs/ui.md): the pages ``/``, ``/threads/{id}`` and ``/login``, their static
files under ``/ui/static/``, and ``/docs`` with Swagger UI served from an installed package.

Jinja2 renders each page's shell (layout, navigation, forms, labelled controls); small ES
modules of our own, loaded as they are (no build step), fill it from the public API under
``/api`` and keep it live over the WebSocket streams. Nothing is loaded from another host.
"""

from threadloom.server.ui.mount import install

__all__ = ["install"]
