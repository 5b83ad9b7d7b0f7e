"""Query parameters as ``/openapi.json`` declares them (spec 08 §8.1.5): each a JSON Schema
the server's own reading of the query string (``server.deps.Query``) agrees with. The route
groups' modules list their operations' parameters with these helpers."""

from __future__ import annotations

import re
from typing import Any

from threadloom.wire.patterns import THREAD_PATH, WHITESPACE

MAX_QUERY_INT = 2**63 - 1
"""Integers are below 2^63 (§8.1.5 rule 1)."""
NO_NUL = "^[^\\x00]*$"
"""No NUL character: a query value holding one is a 400, whatever the parameter."""

Param = dict[str, Any]
"""One query parameter as an OpenAPI parameter object."""


def _param(name: str, schema: dict[str, Any], description: str) -> Param:
    """A query parameter. A typed one (integer, boolean, enumeration) may be sent empty,
    which counts as absent (§8.1.5): ``allowEmptyValue``."""
    out: Param = {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }
    if schema.get("type") != "string" or "enum" in schema:
        out["allowEmptyValue"] = True
    return out


def integer(name: str, description: str, minimum: int = 0, maximum: int = MAX_QUERY_INT) -> Param:
    """Decimal digits only, below 2^63 (§8.1.5 rule 1), within the route's bounds."""
    return _param(name, {"type": "integer", "minimum": minimum, "maximum": maximum}, description)


def boolean(name: str, description: str) -> Param:
    """``true``/``false``/``1``/``0`` in any case (§8.1.5 rule 3)."""
    return _param(name, {"type": "boolean"}, description)


def choice(name: str, values: tuple[str, ...], description: str) -> Param:
    """One of ``values``, in any letter case (§8.1.5 rule 4)."""
    return _param(name, {"type": "string", "enum": list(values)}, description)


def any_case(word: str) -> str:
    """A regular expression of ``word`` in any letter case, without flags (JSON Schema
    patterns are ECMA-262: no ``(?i)``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def choices(name: str, values: tuple[str, ...], description: str) -> Param:
    """A comma-separated list of ``values`` in any letter case; items are trimmed and empty
    ones dropped (§8.1.5 rules 4 and 6)."""
    item = f"[{WHITESPACE}]*(?:{'|'.join(any_case(v) for v in values)})?[{WHITESPACE}]*"
    return _param(name, {"type": "string", "pattern": f"^{item}(?:,{item})*$"}, description)


def text(name: str, description: str, min_length: int = 0) -> Param:
    schema: dict[str, Any] = {"type": "string", "pattern": NO_NUL}
    if min_length:
        schema["minLength"] = min_length
    return _param(name, schema, description)


def path(name: str, description: str) -> Param:
    """A thread path (spec 07 §7.2)."""
    return _param(name, {"type": "string", "pattern": THREAD_PATH}, description)


LIMIT = integer("limit", "Page size; values above 1000 read as 1000")
OFFSET = integer("offset", "Items to skip")
