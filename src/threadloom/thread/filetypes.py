"""Pure helpers of the thread file system: path normalisation (spec 07 §7.2), MIME types
and text detection (§7.4), image dimensions (§7.7.3), the literal prefix of find patterns
and grep snippets (§7.5; the globs themselves are matched by ``pathglob.py``).

No I/O here: ``thread/files.py`` uses these before and after it talks to the store.
"""

from __future__ import annotations

import mimetypes
import re
import struct
from collections.abc import Callable

from threadloom.errors import InvalidPath
from threadloom.wire.patterns import valid_mime

MAX_PATH = 1024
MAX_SEGMENT = 255

_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")


def normalize_path(path: object) -> str:
    """The absolute, normalised form of ``path`` (spec 07 §7.2), else ``InvalidPath``.

    Segments ``.`` and ``..`` are refused rather than resolved, so no path can climb out
    of the thread's space; runs of ``/`` collapse and a trailing ``/`` is dropped."""
    if not isinstance(path, str):
        raise InvalidPath(f"Path must be a string, not {type(path).__name__}")
    if _FORBIDDEN.search(path):
        raise InvalidPath(f"Invalid character in path: {path!r}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not storable text
        raise InvalidPath(f"Invalid character in path: {path!r}") from None
    segments = [s for s in path.split("/") if s]
    if any(s in (".", "..") for s in segments):
        raise InvalidPath(f"Path must not contain '.' or '..' segments: {path}")
    normalized = "/" + "/".join(segments)
    if len(normalized) > MAX_PATH:
        raise InvalidPath(f"Path too long: {len(normalized)} characters")
    for segment in segments:
        if len(segment) > MAX_SEGMENT:
            raise InvalidPath(f"Path segment too long: {segment}")
    return normalized


# -- MIME types (spec 07 §7.4) ---------------------------------------------------------------

MIME_BY_EXTENSION: dict[str, str] = {
    "txt": "text/plain",
    "md": "text/markdown",
    "html": "text/html",
    "htm": "text/html",
    "css": "text/css",
    "csv": "text/csv",
    "js": "text/javascript",
    "ts": "application/typescript",
    "py": "application/x-python",
    "json": "application/json",
    "xml": "application/xml",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
    "svg": "image/svg+xml",
    "ico": "image/x-icon",
    "pdf": "application/pdf",
    "zip": "application/zip",
    "tar": "application/x-tar",
    "gz": "application/gzip",
    # beyond spec 07's first table: where Python's table has nothing or the wrong type
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "toml": "application/toml",
    "jsonl": "application/jsonl",
    "ndjson": "application/x-ndjson",
    "sql": "application/sql",
    "sh": "application/x-sh",
    "rs": "text/x-rust",
    "go": "text/x-go",
    "log": "text/plain",
}
OCTET_STREAM = "application/octet-stream"
TEXT_DEFAULT = "text/plain; charset=utf-8"

EXTENSION_BY_MIME: dict[str, str] = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/bmp": "bmp",
    "image/svg+xml": "svg",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/csv": "csv",
    "text/html": "html",
    "application/json": "json",
    "application/pdf": "pdf",
}

_TEXT_TYPES = frozenset(
    (
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/typescript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/sql",
        "application/graphql",
        "application/x-sh",
        "application/x-shellscript",
        "application/x-python",
        "application/x-www-form-urlencoded",
        "application/x-tex",
        "application/x-latex",
        "application/rtf",
        "application/jsonl",
        "application/x-ndjson",
    )
)
_SHORT_SUBTYPE = re.compile(r"[a-z0-9]{1,10}")
_NAME_EXTENSION = re.compile(r"[A-Za-z0-9]{1,10}")


def extension_of(name: str) -> str | None:
    """The text after the last ``.`` of a file name (``None`` when there is none)."""
    head, dot, tail = name.rpartition(".")
    return tail if dot and head and tail else None


_STDLIB_TYPES = mimetypes.MimeTypes(filenames=())
"""Python's own table of extensions (not the machine's files: the same on every machine),
asked after ``MIME_BY_EXTENSION``, which overrides it where it is wrong for source files
(``.ts`` is TypeScript here, not a Qt translation)."""


def mime_from_name(name: str, default: str = OCTET_STREAM) -> str:
    """The MIME type of a name by its extension, case-insensitively (spec 07 §7.4): the
    table above, else Python's ``mimetypes`` table (``.docx``, ``.mp3``, ``.tsv`` …)."""
    ext = extension_of(name)
    if not ext:
        return default
    ext = ext.lower()
    known = MIME_BY_EXTENSION.get(ext)
    if known is not None:
        return known
    guessed, _ = _STDLIB_TYPES.guess_type(f"file.{ext}", strict=False)
    return guessed or default


_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def sniff_mime(data: bytes) -> str | None:
    """The MIME type the bytes announce themselves, for formats whose first bytes say so
    unambiguously (PNG, JPEG, GIF, WebP, PDF); ``None`` otherwise (spec 07 §7.4)."""
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


MODEL_IMAGE_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types every provider adapter takes as an image part (spec 04 §4.5.4)."""


def attachment_problem(mime_type: object, data: bytes) -> str | None:
    """Why bytes cannot become an attachment a model is shown (spec 04 §4.5.4, spec 13
    §13.2.3), else ``None``: the MIME type must be ``type/subtype`` (parameters allowed);
    an ``image/*`` type must be PNG, JPEG, GIF or WebP, and the bytes of that format."""
    if not valid_mime(mime_type):
        return f"has no valid MIME type ({mime_type!r}, expected one such as image/png)"
    assert isinstance(mime_type, str)
    base = base_mime(mime_type)
    if not base.startswith("image/"):
        return None
    if base not in MODEL_IMAGE_TYPES:
        return f"is an image of type {base}, which models are not given (PNG, JPEG, GIF, WebP)"
    found = sniff_mime(data)
    if found != base:
        said = f"{found} data" if found else "not image data"
        return f"is declared {base} but its bytes are {said}"
    return None


def base_mime(mime_type: str) -> str:
    """``Text/Plain; charset=utf-8`` → ``text/plain``."""
    return mime_type.split(";", 1)[0].strip().lower()


def extension_for_mime(mime_type: str) -> str:
    """The file extension an attachment of this MIME type is named with (spec 07 §7.4)."""
    base = base_mime(mime_type)
    known = EXTENSION_BY_MIME.get(base)
    if known is not None:
        return known
    subtype = base.split("/", 1)[1] if "/" in base else ""
    return subtype if _SHORT_SUBTYPE.fullmatch(subtype) else "bin"


def attachment_extension(name: str, mime_type: str) -> str:
    """The lower-cased extension of ``name`` when it is 1–10 alphanumerics, else the
    extension of the MIME type (spec 07 §7.6)."""
    ext = extension_of(name)
    if ext is not None and _NAME_EXTENSION.fullmatch(ext):
        return ext.lower()
    return extension_for_mime(mime_type)


def is_text_mime(mime_type: str) -> bool:
    """Whether the MIME type names text (spec 07 §7.4); the bytes must also be UTF-8."""
    base = base_mime(mime_type)
    return (
        base.startswith("text/")
        or base in _TEXT_TYPES
        or base.endswith("+json")
        or base.endswith("+xml")
    )


# -- image dimensions (spec 07 §7.7.3) -------------------------------------------------------

IMAGE_TYPES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
_JPEG_SOF = frozenset(
    (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)
)


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR" or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _gif_size(data: bytes) -> tuple[int, int] | None:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the marker segments to the first start-of-frame (SOFn) marker."""
    if data[:2] != b"\xff\xd8":
        return None
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD9)):  # markers without a length
            pos += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no frame header came
            return None
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker in _JPEG_SOF:
            if pos + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return int(width), int(height)
        pos += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


_READERS: dict[str, Callable[[bytes], tuple[int, int] | None]] = {
    "image/png": _png_size,
    "image/jpeg": _jpeg_size,
    "image/gif": _gif_size,
    "image/webp": _webp_size,
}


def image_size(mime_type: str, data: bytes) -> tuple[int | None, int | None]:
    """Pixel width and height read from the image header for PNG, JPEG, GIF and WebP;
    ``(None, None)`` for other types, unreadable headers and zero dimensions."""
    reader = _READERS.get(base_mime(mime_type))
    if reader is None:
        return None, None
    try:
        found = reader(data)
    except (struct.error, IndexError):
        return None, None
    if found is None or found[0] <= 0 or found[1] <= 0:
        return None, None
    return found


# -- find and grep (spec 07 §7.5) ------------------------------------------------------------


def literal_prefix(pattern: str) -> str:
    """The characters every path a ``/``-anchored pattern matches must start with (the
    store narrows its scan to them); ``/`` for unanchored patterns."""
    if not pattern.startswith("/"):
        return "/"
    cut = min((i for i in (pattern.find("*"), pattern.find("?")) if i >= 0), default=-1)
    return pattern if cut < 0 else pattern[:cut]


SNIPPET_CONTEXT = 40


def find_folded(text: str, folded_needle: str) -> tuple[int, int] | None:
    """The span in ``text`` of the first case-insensitive (Unicode casefold) occurrence
    of ``folded_needle``; spans stay in ``text``'s own characters even when folding
    changes lengths (``ß`` → ``ss``)."""
    folded = text.casefold()
    at = folded.find(folded_needle)
    if at < 0:
        return None
    if len(folded) == len(text):  # every character folded to exactly one
        return at, at + len(folded_needle)
    origin: list[int] = []  # folded index → text index
    for index, char in enumerate(text):
        origin.extend([index] * len(char.casefold()))
    return origin[at], origin[at + len(folded_needle) - 1] + 1


def _one_line(text: str) -> str:
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def content_snippet(text: str, span: tuple[int, int]) -> str:
    """Up to 40 characters before and after the match, the match in ``<mark>``, line
    breaks as spaces, ``...`` where the text was cut."""
    start, end = span
    lo, hi = max(start - SNIPPET_CONTEXT, 0), min(end + SNIPPET_CONTEXT, len(text))
    return (
        ("..." if lo > 0 else "")
        + _one_line(text[lo:start])
        + "<mark>"
        + _one_line(text[start:end])
        + "</mark>"
        + _one_line(text[end:hi])
        + ("..." if hi < len(text) else "")
    )


def name_snippet(name: str, span: tuple[int, int]) -> str:
    """The whole name with the occurrence marked."""
    return f"{name[: span[0]]}<mark>{name[span[0] : span[1]]}</mark>{name[span[1] :]}"
