"""records' JSON fast paths give exactly what the plain paths give: ``json_compact`` (a
prebuilt C encoder) the text and errors of ``json.JSONEncoder`` with its options, and
``decode_tool_calls`` (pydantic's JSON validation) the records of ``json.loads`` and a
validation per call (spec 01 §1.1.5, §1.4.3)."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from pydantic import ValidationError

from threadloom.records import ToolCall, decode_tool_calls, encode_tool_calls, json_compact
from threadloom.records import message as records


def _plain(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Colour(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


class _Float(float):
    pass


VALUES: list[Any] = [
    {},
    [],
    None,
    True,
    0,
    -1,
    10**40,
    -(10**40),
    1.5,
    -0.0,
    1e-300,
    1.7976931348623157e308,
    0.1 + 0.2,
    _Float(2.5),
    _Colour.RED,
    "",
    "plain",
    'é \u2028 \u2029 \x00 \x1f " \\ / 😀 \ud7ff',
    _Text("sub"),
    {"a": 1, "b": [1, 2.5, None, True, False, "x"], "c": {"d": {"e": []}}},
    {"é": "ü", "k": "v\nw\tz"},
    OrderedDict([("z", 1), ("a", 2)]),
    {7: "int key", 2.5: "float key", True: "bool key", None: "none key"},
    (1, (2, 3), [4]),
    [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}],
    {"nested": [[[[[[{"deep": "😀"}]]]]]]},
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:40] for v in VALUES])
def test_json_compact_is_the_plain_encoder(value: Any) -> None:
    assert records._C_COMPACT is not None  # the fast path is the one under test
    assert json_compact(value) == _plain(value) == records._COMPACT.encode(value)


def _error(fn: Any, value: Any) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as caught:
        fn(value)
    return caught.type, str(caught.value)


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    return loop


REFUSED: list[Any] = [
    math.nan,
    {"x": [math.inf]},
    -math.inf,
    {(1, 2): "tuple key"},
    {"x": {1, 2}},
    [object()],
    b"bytes",
    _cycle(),
]


@pytest.mark.parametrize("value", REFUSED, ids=[type(v).__name__ for v in REFUSED])
def test_json_compact_refuses_what_the_plain_encoder_refuses(value: Any) -> None:
    assert _error(json_compact, value) == _error(_plain, value)


def test_json_compact_can_encode_again_after_a_refusal() -> None:
    with pytest.raises(ValueError):
        json_compact(_cycle())
    shared = [1]
    assert json_compact({"a": shared, "b": shared}) == '{"a":[1],"b":[1]}'


def _reference_decode(text: str) -> list[ToolCall]:
    return [ToolCall.model_validate(item) for item in json.loads(text)]


@pytest.mark.parametrize(
    "calls",
    [
        [ToolCall(id="call_1", function={"name": "echo", "arguments": '{"v":1}'})],
        [
            ToolCall(id="c1", function={"name": "é", "arguments": "not json \n \u2028"}),
            ToolCall(
                id="c2",
                function={"name": "n", "arguments": "{}"},
                extra_content={"sig": "s", "n": [1, 2.5, -3e-7, 10**30, None, True], "d": {}},
            ),
        ],
    ],
)
def test_decode_tool_calls_gives_the_validated_records(calls: list[ToolCall]) -> None:
    text = encode_tool_calls(calls)
    decoded, expected = decode_tool_calls(text), _reference_decode(text)
    assert decoded == expected == calls
    assert [c.model_fields_set for c in decoded] == [c.model_fields_set for c in expected]
    assert [c.function.model_fields_set for c in decoded] == [
        c.function.model_fields_set for c in expected
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        '{"id": "c"}',
        '"text"',
        "[1]",
        '[{"id": "c"}]',
        '[{"id": 1, "function": {"name": "n", "arguments": "{}"}}]',
        '[{"id": "c", "type": "other", "function": {"name": "n", "arguments": "{}"}}]',
    ],
)
def test_decode_tool_calls_refuses_bad_text_with_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        _reference_decode(text)
    with pytest.raises(ValidationError):
        decode_tool_calls(text)


def test_decode_tool_calls_refuses_an_object() -> None:
    """The one text the old decoder took: it iterated an empty object's keys (none). Stored
    ``tool_calls`` are always a non-empty array (``normalize_tool_calls``), so no caller
    ever gave it one."""
    assert _reference_decode("{}") == []
    with pytest.raises(ValidationError):
        decode_tool_calls("{}")
