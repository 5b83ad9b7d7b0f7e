"""Pure normalisation of application log entries for ``ThreadState.log()`` (spec 02 §2.11).

Everything here is side-effect free and total: whatever a caller passes, the functions return
well-formed column values that respect the seed's limits, because ``log()`` must never raise.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from threadloom.records import ThreadLogEntry, json_compact

NAME_LIMIT = 120
TEXT_LIMIT = 4096
DATA_LIMIT = 16384
BODY_LIMIT = 65536
MAX_DEPTH = 64

# The eleven keys of ThreadLogEntry (§2.11.2); anything else in an entry is ignored.
ENTRY_KEYS: frozenset[str] = frozenset(ThreadLogEntry.__optional_keys__)
LEVELS: frozenset[str] = frozenset(("debug", "info", "warn", "error"))
STATUSES: frozenset[str] = frozenset(("success", "error", "skipped"))

_ELLIPSIS = "…"
_TRUNCATED = "…[truncated]"
_TRUNCATED_BYTES = len(_TRUNCATED.encode("utf-8"))
_SURROGATE = re.compile("[\ud800-\udfff]")


# --------------------------------------------------------------------------------------
# Small helpers


def _type_name(value: object) -> str:
    """The name of ``value``'s type, used in markers; ``type()`` runs no user code."""
    try:
        name = type(value).__name__
        return name if isinstance(name, str) else "object"
    except Exception:
        return "object"


def _marker(what: str) -> dict[str, Any]:
    """The §2.11.4 replacement object for a value that cannot be JSON-encoded."""
    return {"$unserializable": what}


def _clean(text: str) -> str:
    """A plain ``str`` copy of ``text`` with lone surrogates replaced by U+FFFD.

    Surrogates cannot be encoded as UTF-8, so they would break byte counting and storage.
    """
    plain = str.__str__(text)
    if plain.isascii():
        return plain
    try:
        plain.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", plain)
    return plain


def _utf8_len(text: str) -> int:
    """Byte length of ``text`` in UTF-8."""
    return len(text.encode("utf-8"))


# --------------------------------------------------------------------------------------
# Truncation rules (§2.11.5)


def name_rule(text: str) -> str:
    """At most 120 code points: the first 119 followed by ``…`` when longer."""
    if len(text) <= NAME_LIMIT:
        return text
    return text[: NAME_LIMIT - 1] + _ELLIPSIS


def text_rule(text: str, limit: int = TEXT_LIMIT) -> str:
    """At most ``limit`` UTF-8 bytes: the longest fitting prefix plus ``…[truncated]``."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    # The source is valid UTF-8, so only a character cut at the end can be partial.
    prefix = raw[: limit - _TRUNCATED_BYTES].decode("utf-8", errors="ignore")
    return prefix + _TRUNCATED


def json_rule(text: str, limit: int) -> str:
    """JSON text of at most ``limit`` bytes: unchanged, or the ``$truncated`` preview object.

    The preview is the longest character prefix of ``text`` whose escaped encoding inside
    the marker object still fits; the encoded size grows strictly with the prefix length,
    so a binary search on the length finds it exactly.
    """
    size = _utf8_len(text)
    if size <= limit:
        return text

    def encoded(length: int) -> str:
        return json_compact({"$truncated": True, "bytes": size, "preview": text[:length]})

    low, high = 0, min(len(text), limit)  # encoded(0) always fits; a char is >= 1 byte
    while low < high:
        mid = (low + high + 1) // 2
        if _utf8_len(encoded(mid)) <= limit:
            low = mid
        else:
            high = mid - 1
    return encoded(low)


# --------------------------------------------------------------------------------------
# JSON normalisation (§2.11.4)


def _key(key: object) -> str:
    """A mapping key as JSON object key text, as Python's ``json`` module writes scalars."""
    if isinstance(key, str):
        return _clean(key)
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        try:
            return int.__repr__(key)
        except ValueError:  # more digits than the interpreter will print
            return "$unserializable:int"
    if isinstance(key, float):
        number = float.__float__(key)
        if math.isfinite(number):
            return float.__repr__(number)
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return "$unserializable:" + _type_name(key)


def _convert(value: object, depth: int, path: set[int]) -> Any:
    """One value converted to plain JSON data; never raises (failures become markers)."""
    try:
        return _convert_unsafe(value, depth, path)
    except Exception:
        return _marker(_type_name(value))


def _convert_unsafe(value: object, depth: int, path: set[int]) -> Any:
    """The conversion proper; ``path`` holds ids of the containers being converted."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, int):
        number = int.__int__(value)
        if number.bit_length() > 1000:
            int.__repr__(number)  # raises ValueError past the digit limit -> marker
        return number
    if isinstance(value, float):
        real = float.__float__(value)
        return real if math.isfinite(real) else _marker("float")
    is_container = isinstance(value, Mapping | list | tuple)
    if is_container:
        if id(value) in path:
            return _marker("cycle")
        if depth >= MAX_DEPTH:
            return _marker("too_deep")
    if isinstance(value, BaseModel):
        return _convert(value.model_dump(mode="json"), depth, path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert(dataclasses.asdict(value), depth, path)
    if not is_container:
        return _marker(_type_name(value))
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_key(k): _convert(v, depth + 1, path) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [_convert(item, depth + 1, path) for item in value]
        return _marker(_type_name(value))  # unreachable: containers are handled above
    finally:
        path.discard(id(value))


def to_json_safe(value: object) -> Any:
    """``value`` as plain JSON data (dict/list/str/int/finite float/bool/None), §2.11.4.

    Unencodable parts become ``{"$unserializable": <type name>}``, cycles and nesting past
    64 levels become ``cycle`` / ``too_deep`` markers. Never raises.
    """
    return _convert(value, 0, set())


def _json_column(value: object, limit: int) -> str:
    """Compact JSON text of ``value`` after normalisation, truncated by the JSON rule."""
    try:
        text = json_compact(to_json_safe(value))
    except Exception:  # defensive: to_json_safe output is always encodable
        text = json_compact(_marker(_type_name(value)))
    return json_rule(text, limit)


# --------------------------------------------------------------------------------------
# Field rules (§2.11.2, §2.11.3)


def _collect(source: object) -> dict[str, Any]:
    """The known keys of a mapping as a plain dict; a mapping that fails reads as empty."""
    if not isinstance(source, Mapping):
        return {}
    try:
        return {k: v for k, v in source.items() if isinstance(k, str) and k in ENTRY_KEYS}
    except Exception:
        return {}


def build_entry(entry: object = None, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Assemble the entry from ``log()``'s arguments (§2.11.2); keyword fields win."""
    try:
        if isinstance(entry, str):
            base: dict[str, Any] = {"name": entry}
        else:
            base = _collect(entry)
        base.update(_collect(fields))
        return base
    except Exception:
        return {}


def _name(value: object) -> str | None:
    """The stripped, name-ruled name, or ``None`` when not a non-blank ``str``."""
    if not isinstance(value, str):
        return None
    text = str.strip(_clean(value))
    return name_rule(text) if text else None


def _text(value: object) -> str | None:
    """A ``str`` under the text rule, or ``None`` for any other type."""
    return text_rule(_clean(value)) if isinstance(value, str) else None


def _choice(value: object, allowed: frozenset[str]) -> str | None:
    """``value`` as a plain ``str`` when it is exactly one of ``allowed``."""
    if isinstance(value, str):
        plain = str.__str__(value)
        if plain in allowed:
            return plain
    return None


def _error(value: object) -> str | None:
    """An error string, or an exception as ``"<TypeName>: <message>"``, text-ruled."""
    if isinstance(value, BaseException):
        name = _type_name(value)
        try:
            message = str(value)
        except Exception:
            message = ""
        text = f"{name}: {message}" if message else name
        return text_rule(_clean(text))
    return _text(value)


def _amount(value: object) -> float | None:
    """A finite non-negative ``int``/``float`` (never ``bool``) as ``float``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float.__float__(value) if isinstance(value, float) else float(int.__int__(value))
    if not math.isfinite(number) or number < 0:
        return None
    return number if number != 0 else 0.0  # fold -0.0 into 0.0


def _trigger(value: object) -> str | None:
    """``{"kind", "id"?, "summary"?}`` as JSON text, or ``None`` without a usable kind."""
    if not isinstance(value, Mapping):
        return None
    kind = value.get("kind")
    if not isinstance(kind, str) or not kind:
        return None
    out: dict[str, str] = {"kind": name_rule(_clean(kind))}
    ident = value.get("id")
    if isinstance(ident, str):
        out["id"] = name_rule(_clean(ident))
    summary = value.get("summary")
    if isinstance(summary, str):
        out["summary"] = text_rule(_clean(summary))
    return json_compact(out)


def _guard(rule: Callable[[Any], Any], value: object) -> Any:
    """Apply a field rule; ``None`` (absent) in, or any failure, gives ``None``."""
    if value is None:
        return None
    try:
        return rule(value)
    except Exception:
        return None


def normalize_log_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The ``model`` and ``app_*`` column values of an application log row (§2.11.3–5).

    Wrongly typed fields are dropped, ``None`` counts as absent; never raises.
    """
    fields = build_entry(entry)
    status = _guard(lambda v: _choice(v, STATUSES), fields.get("status"))
    level = _guard(lambda v: _choice(v, LEVELS), fields.get("level"))
    return {
        "model": _guard(_name, fields.get("name")) or "unnamed",
        "app_level": level or ("error" if status == "error" else "info"),
        "app_message": _guard(_text, fields.get("message")),
        "app_status": status,
        "app_error": _guard(_error, fields.get("error")),
        "app_duration_ms": _guard(_amount, fields.get("duration_ms")),
        "app_cost": _guard(_amount, fields.get("cost")),
        "app_request": _guard(lambda v: _json_column(v, BODY_LIMIT), fields.get("request")),
        "app_response": _guard(lambda v: _json_column(v, BODY_LIMIT), fields.get("response")),
        "app_trigger": _guard(_trigger, fields.get("trigger")),
        "app_data": _guard(lambda v: _json_column(v, DATA_LIMIT), fields.get("data")),
    }
