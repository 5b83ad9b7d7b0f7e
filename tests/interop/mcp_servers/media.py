"""An MCP server whose tools return files, written with the SDK's own server API: an
image with text (the SDK's ``Image`` helper), audio and an embedded binary resource, and
results a server should not send (data that is not base64, an image whose bytes are not
its type). ``python media.py`` serves over stdio.
"""

from __future__ import annotations

import base64

from mcp.server.mcpserver import Audio, Image, MCPServer
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    TextContent,
)

from threadloom.testing import png

server = MCPServer("media", instructions="Files for the tests")


CHART = png(4, 3)
WAVE = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(28)
REPORT = b"%PDF-1.4\n% a tiny report\n"


@server.tool()
def chart() -> list[TextContent | ImageContent]:
    """Draw a chart: a caption and a PNG image."""
    return [
        TextContent(type="text", text="The chart."),
        Image(data=CHART, format="png").to_image_content(),
    ]


@server.tool()
def recording() -> list[TextContent | AudioContent | EmbeddedResource]:
    """Record: a caption, a WAV sound and a PDF report as an embedded binary resource."""
    blob = BlobResourceContents(
        uri="file:///reports/report.pdf",
        mime_type="application/pdf",
        blob=base64.b64encode(REPORT).decode(),
    )
    return [
        TextContent(type="text", text="The recording."),
        Audio(data=WAVE, format="wav").to_audio_content(),
        EmbeddedResource(type="resource", resource=blob),
    ]


@server.tool()
def garbled() -> list[TextContent | ImageContent]:
    """An image whose data is not base64."""
    return [
        TextContent(type="text", text="Oops."),
        ImageContent(type="image", data="%%% not base64 %%%", mime_type="image/png"),
    ]


@server.tool()
def mislabelled() -> list[ImageContent]:
    """An image said to be PNG whose bytes are text."""
    data = base64.b64encode(b"just some text").decode()
    return [ImageContent(type="image", data=data, mime_type="image/png")]


if __name__ == "__main__":
    server.run()
