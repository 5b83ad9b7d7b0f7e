"""The headers a thread's file is served with (spec 08 §8.8).

A file's bytes and MIME type are whatever a user uploaded, and they are served from the
API's own origin, next to the session cookie. So every answer with a file's bytes (or
its thumbnail) carries ``Content-Security-Policy: sandbox`` (the browser treats the
document as coming from an opaque origin and runs none of its scripts, whatever it is), and
``X-Content-Type-Options: nosniff``, which the pipeline sets on every answer, keeps the
declared type the only type. On top of that, a file is shown inline only
when its type is one a browser displays passively — raster images, audio, video, PDF, plain
text, CSV, Markdown, CSS, JSON — and is an ``attachment`` download otherwise: HTML, XHTML,
SVG, any XML (which a browser renders, with XSLT and XHTML script), JavaScript, and every
type not on that list.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from threadloom.thread.filetypes import base_mime

USER_CONTENT_HEADERS = {"Content-Security-Policy": "sandbox"}
"""Added to every answer that carries a file's bytes. ``X-Content-Type-Options: nosniff``
is not here because ``server/pipeline.py`` puts it on every answer of the server (a second
copy would repeat the header)."""

INLINE_TYPES = frozenset(
    {
        "application/pdf",
        "application/json",
        "application/octet-stream",  # never rendered; with nosniff, never sniffed either
        "text/plain",
        "text/markdown",
        "text/x-markdown",
        "text/csv",
        "text/tab-separated-values",
        "text/css",
    }
)
_MEDIA = ("image", "audio", "video")
_UNSAFE_NAME = re.compile(r'["\\\r\n]')


def shown_inline(mime: str) -> bool:
    """Whether a file of this MIME type may be displayed in the browser rather than
    downloaded. Unknown types are downloaded."""
    base = base_mime(mime)
    if base in INLINE_TYPES:
        return True
    top, _, sub = base.partition("/")
    if top in _MEDIA:
        return "xml" not in sub and "svg" not in sub
    return top == "application" and sub.endswith("+json")


def content_disposition(name: str, mime: str) -> str:
    """``inline`` or ``attachment`` (:func:`shown_inline`), with ``"``, ``\\``, CR and LF in
    the name replaced by ``_``; a name that is not plain ASCII also gets an RFC 6266
    ``filename*`` with its UTF-8 form, the ASCII fallback using ``_`` for the rest."""
    kind = "inline" if shown_inline(mime) else "attachment"
    safe = _UNSAFE_NAME.sub("_", name)
    if safe.isascii() and safe.isprintable():
        return f'{kind}; filename="{safe}"'
    fallback = "".join(c if c.isascii() and c.isprintable() else "_" for c in safe)
    encoded = quote(name, safe="!#$&+-.^_`|~")
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
