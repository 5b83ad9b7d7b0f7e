"""The texts the HTTP API accepts, as JSON Schema patterns (spec 08 §8.11.3 rule 3).

What a route refuses, its model refuses too, where JSON Schema can say it: MIME types,
base64, "not blank" as a pattern (a character that is not whitespace), thread paths. Each
pattern means the same under Python's ``re`` (what schemathesis and ``jsonschema`` judge by)
and ECMA-262 (what JSON Schema specifies); ``tests/server/test_c08_schema_patterns.py``
compares each with the server's own check (C08-147).
"""

from __future__ import annotations

import base64
import binascii
import re

END = r"$(?![\s\S])"
"""A pattern's end of the text, a final newline not excused: Python's ``$`` (which
schemathesis judges by) also matches before one, ECMA-262's does not."""
WHITESPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""Whitespace as ``str.strip`` and ``str.split`` see it, for a pattern's character class
(``\\s`` differs between regular expression engines: ECMA-262's lacks ``\\x1c``-``\\x1f``)."""

NOT_BLANK = f"[^{WHITESPACE}]"
"""Holds a character that is not whitespace (a pattern is a search, not a full match)."""

# -- MIME types and base64 (uploads, spec 08 §8.2.5; files, §8.8) ----------------------------

MIME_TYPE = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*"
MIME_PATTERN = f"^{MIME_TYPE}{END}"
"""A ``type/subtype`` without parameters, as ``/openapi.json`` declares it."""
_MIME = re.compile(MIME_TYPE)


def is_mime_type(text: object) -> bool:
    """A ``type/subtype`` string without parameters (``MIME_PATTERN``'s check)."""
    return isinstance(text, str) and _MIME.fullmatch(text) is not None


FILE_MIME = rf"^ *{MIME_TYPE} *(?:;[ -~]*)?{END}"
"""A file's MIME type: ``type/subtype``, parameters allowed, printable ASCII."""


def valid_mime(mime: object) -> bool:
    """``type/subtype``, optionally with parameters, in printable ASCII (a safe header):
    ``FILE_MIME``'s check."""
    return (
        isinstance(mime, str)
        and mime.isascii()
        and mime.isprintable()
        and is_mime_type(mime.split(";", 1)[0].strip())
    )


_WS = rf"[{WHITESPACE}]*"
_B64_CHAR = rf"[A-Za-z0-9+/]{_WS}"
_B64_LAST = (
    rf"(?:{_B64_CHAR}){{4}}(?:={_WS}){{0,2}}|(?:{_B64_CHAR}){{2}}(?:={_WS}){{0,2}}"
    rf"|(?:{_B64_CHAR}){{3}}(?:={_WS})?"
)
_B64_SOME = rf"(?:(?:{_B64_CHAR}){{4}})*(?:{_B64_LAST})"
BASE64_PATTERN = rf"^{_WS}{_B64_SOME}$"
"""What ``decode_base64`` decodes to at least one byte, as a JSON Schema pattern:
standard base64, whitespace anywhere, the padding optional."""
BASE64_OR_EMPTY_PATTERN = rf"^{_WS}(?:{_B64_SOME})?$"
"""What ``decode_base64`` decodes, the empty text included."""
_B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")


def decode_base64(text: str) -> bytes | None:
    """Standard base64 (padding optional, whitespace ignored), else None."""
    compact = "".join(text.split())
    if not _B64.match(compact):
        return None
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None


# -- names and paths -------------------------------------------------------------------------

FILE_NAME = f"^[^/\\\\\\x00]*[^/\\\\\\x00{WHITESPACE}][^/\\\\\\x00]*$"
"""Not blank, without ``/``, ``\\`` or NUL."""
UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}" + END
"""A canonical UUID (lowercase, hyphenated), as ids are."""

_NAME_CHAR = r"[^/\x00-\x1f\x7f\\]"
SEGMENT = (
    rf"(?:[^/.\x00-\x1f\x7f\\]{_NAME_CHAR}{{0,254}}|\.[^/.\x00-\x1f\x7f\\]{_NAME_CHAR}{{0,253}}"
    rf"|\.\.{_NAME_CHAR}{{1,253}})"
)
"""One segment of a thread path (spec 07 §7.2): 1-255 characters, no control character,
``/`` or ``\\``, not ``.`` or ``..``."""
THREAD_PATH = rf"^/*(?:{SEGMENT}(?:/+{SEGMENT})*)?/*{END}"
"""A thread path (spec 07 §7.2): runs of ``/`` collapse, the whole at most 1,024
characters once normalised (a length JSON Schema cannot measure)."""
BELOW_ROOT = rf"^/*{SEGMENT}(?:/+{SEGMENT})*/*{END}"
"""A thread path other than the root."""

_API_SEGMENT = r"(?:[^/?#.][^/?#]*|\.[^/?#.][^/?#]*|\.\.[^/?#]+)"
API_PATH = rf"^/api(?:/{_API_SEGMENT})+$"
"""A normalized ``/api/*`` path: no empty, ``.`` or ``..`` segment, no ``?``, ``#`` or
trailing ``/`` (spec 10 §10.5.6)."""
_SEGMENT_BAD = ("", ".", "..")


def normalized_api_path(pathname: object) -> bool:
    """Spec 10 §10.5.6: starts with ``/api/``, no ``?`` or ``#``, no empty, ``.`` or ``..``
    segment, no trailing ``/`` (``API_PATH``'s check)."""
    if not isinstance(pathname, str) or not pathname.startswith("/api/"):
        return False
    if "?" in pathname or "#" in pathname:
        return False
    return all(segment not in _SEGMENT_BAD for segment in pathname[1:].split("/"))
