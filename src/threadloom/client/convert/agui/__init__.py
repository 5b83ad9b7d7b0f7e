"""Chat messages and stream frames ⇄ AG-UI events (spec 11 §11.7.3), on ``ag_ui.core``.

Needs the optional extra ``threadloom[agui]`` (``ag-ui-protocol``). The rest of the client never
imports this package, so the extra stays optional; importing it without the extra raises an
``ImportError`` that says what to install.
"""

from __future__ import annotations

try:
    import ag_ui.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "threadloom.client.convert.agui needs the AG-UI protocol package (ag-ui-protocol); "
        "install it with: pip install 'threadloom[agui]'"
    ) from exc

from threadloom.client.convert.agui.exporter import AguiExporter, agui_events, encode_sse
from threadloom.client.convert.agui.importer import AguiImporter
from threadloom.client.convert.agui.messages import from_agui_messages, to_agui_messages

__all__ = [
    "AguiExporter",
    "AguiImporter",
    "agui_events",
    "encode_sse",
    "from_agui_messages",
    "to_agui_messages",
]
