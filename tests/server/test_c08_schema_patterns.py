"""The patterns ``/openapi.json`` declares say what the server's own checks say (spec 08
§8.11.3 rule 3, case C08-147): for each, a property test draws texts from the characters
that matter and compares the server's validator with the pattern — under Python's ``re``
(what schemathesis and ``jsonschema`` judge by) and under ECMA-262 (``jsonschema_rs``, what
JSON Schema specifies)."""

from __future__ import annotations

import re
from collections.abc import Callable

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.engine.run.client_tools import NAME as CLIENT_TOOL_NAME
from threadloom.errors import InvalidPath
from threadloom.thread.filetypes import normalize_path
from threadloom.wire import patterns as P
from threadloom.wire.agui import TOOL_NAME
from threadloom.wire.patterns import (
    BASE64_OR_EMPTY_PATTERN,
    BASE64_PATTERN,
    MIME_PATTERN,
    decode_base64,
    is_mime_type,
    normalized_api_path,
    valid_mime,
)

SPACES = "\t\n\x0b\x0c\r\x1c\x1f \x85\xa0\u2000\u3000\ufeff"
"""Whitespace of every engine's notion, and a character some call whitespace (U+FEFF)."""


def _path_ok(text: str) -> bool:
    try:
        normalize_path(text)
    except InvalidPath:
        return False
    return True


def _decodes(text: str) -> bool:
    return decode_base64(text) is not None


def _decodes_some(text: str) -> bool:
    data = decode_base64(text)
    return data is not None and len(data) > 0


CASES: dict[str, tuple[str, Callable[[str], bool], str]] = {
    "base64": (BASE64_PATTERN, _decodes_some, "Aa0+/=" + SPACES),
    "base64 or empty": (BASE64_OR_EMPTY_PATTERN, _decodes, "Aa0+/=" + SPACES),
    "upload MIME type": (MIME_PATTERN, is_mime_type, "a0/+.;= \n" + SPACES),
    "file MIME type": (P.FILE_MIME, valid_mime, "a0/+.;= \n\x7f" + SPACES),
    "thread path": (P.THREAD_PATH, _path_ok, "a/.\\\x01\x7f \n" + SPACES),
    "path below the root": (P.BELOW_ROOT, lambda t: _path_ok(t) and t.strip("/") != "", "a/."),
    "ticket path": (P.API_PATH, normalized_api_path, "/apia.?#\n"),
    "not blank": (P.NOT_BLANK, lambda t: bool(t.strip()), "a" + SPACES),
    "frontend tool name": (
        TOOL_NAME,
        lambda t: CLIENT_TOOL_NAME.fullmatch(t) is not None,
        "aZ0_-/.! \n" + SPACES,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_c08_147_declared_patterns_agree_with_the_server(name: str) -> None:
    """C08-147: each pattern accepts exactly the texts the server's check accepts, in
    Python's ``re`` and in ECMA-262 alike."""
    pattern, server, alphabet = CASES[name]
    ecma = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    prefix = st.sampled_from(["", "/api", "/api/", "image/", "QUFB"])

    @settings(max_examples=3000, deadline=None, database=None)
    @given(prefix, st.text(alphabet=alphabet, max_size=12))
    def agree(start: str, rest: str) -> None:
        text = start + rest
        expected = server(text)
        assert (re.search(pattern, text) is not None) == expected, (text, expected)
        assert ecma.is_valid(text) == expected, (text, expected, "ECMA-262")

    agree()
