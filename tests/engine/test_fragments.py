"""What the model-request path writes without the generic machinery is what that machinery
gives (spec 04 §4.25): a request body's message fragments, the response body and
``tools_called`` written as JSON directly are byte for byte ``model_dump`` +
``json_compact``; a body's ``Fragments`` view reads as its list; a log row built without
validation (``records.trusted``) is the validated row, and ``trusted`` refuses
what it cannot build as validation would."""

from __future__ import annotations

import pytest
from pydantic import ValidationError, field_validator

from threadloom.engine.request.fragments import _generic_fragment, fragment
from threadloom.engine.request.request_body import Fragments
from threadloom.engine.step.model_call import (
    ModelResult,
    _generic_response_body,
    _names,
    _new_row,
    _response_body,
)
from threadloom.providers.types import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCallSpec,
    ToolMessage,
    Usage,
    UserMessage,
    trusted,
)
from threadloom.records import LogRow, copy_with, json_compact

TEXTS = [
    "",
    "plain",
    'quotes " and \\ backslash',
    "new\nline\ttab\r\x00\x1f\x7f",
    "non-ASCII é ü 漢字 🙂",
    "\u2028\u2029 separators",
    "lone surrogate \ud800",
    "</script>",
]

MESSAGES = [
    *(UserMessage(content=t) for t in TEXTS),
    *(SystemMessage(content=t) for t in TEXTS),
    UserMessage(content=[TextPart(text="a"), ImagePart(media_type="image/png", data="QUJD")]),
    AssistantMessage(),
    AssistantMessage(content=""),
    *(AssistantMessage(content=t, reasoning_content=t) for t in TEXTS),
    AssistantMessage(
        content=None,
        tool_calls=[
            ToolCallSpec(id="call_1", name="echo", arguments='{"v":1}'),
            ToolCallSpec(id="call_ü", name='na"me', arguments="not json \n"),
        ],
    ),
    AssistantMessage(
        content="x", tool_calls=[ToolCallSpec(id="c", name="n", extra_content={"sig": "é"})]
    ),
    AssistantMessage(content="x", reasoning_details=[{"type": "reasoning.text", "text": "t"}]),
    *(ToolMessage(tool_call_id="call_1", name="echo", content=t) for t in TEXTS),
    ToolMessage(tool_call_id="c", name="n", content="bad", is_error=True),
    ToolMessage(
        tool_call_id="c",
        name="n",
        content="img",
        images=[ImagePart(media_type="image/png", data="QUJD", name="a.png")],
    ),
    trusted(ToolMessage, {"tool_call_id": "c", "name": "n", "content": "t"}),
    trusted(AssistantMessage, {"content": None, "tool_calls": []}),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: f"{m.role}")
def test_a_fragment_is_the_generic_json_of_its_message(message: object) -> None:
    assert fragment(message) == _generic_fragment(message)


def test_images_are_omitted_from_fragments() -> None:
    user = UserMessage(content=[ImagePart(media_type="image/png", data="QUJD")])
    tool = ToolMessage(
        tool_call_id="c", name="n", content="", images=[ImagePart(media_type="image/png", data="x")]
    )
    assert "QUJD" not in fragment(user) and "[base64 omitted]" in fragment(user)
    assert '"data":"[base64 omitted]"' in fragment(tool)


def _result(**kw: object) -> ModelResult:
    values: dict[str, object] = {
        "content": "",
        "tool_calls": [],
        "reasoning_content": "",
        "reasoning_details": None,
        "finish_reason": "stop",
        "usage": Usage(input_tokens=10, output_tokens=5, total_tokens=15),
        "log_id": "",
        "model_name": "",
    }
    values.update(kw)
    return ModelResult(**values)  # type: ignore[arg-type]


RESULTS = [
    _result(),
    *(_result(content=t, reasoning_content=t) for t in TEXTS),
    _result(
        tool_calls=[
            ToolCallSpec(id="call_1", name="echo", arguments='{"v":1}'),
            ToolCallSpec(id="call_2", name="é", arguments=""),
        ],
        finish_reason="tool_calls",
    ),
    _result(tool_calls=[ToolCallSpec(id="c", name="n", extra_content={"id": "rs_1"})]),
    _result(reasoning_details=[{"type": "reasoning.text", "text": "t"}]),
    _result(usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5, cost=0.0001)),
    _result(usage=Usage(cached_tokens=7, reasoning_tokens=2), finish_reason="length"),
]


@pytest.mark.parametrize("result", RESULTS)
def test_a_response_body_is_the_generic_json_of_the_response(result: ModelResult) -> None:
    assert _response_body(result) == _generic_response_body(result)
    assert _names(result.tool_calls) == json_compact([c.name for c in result.tool_calls])


def test_a_row_built_without_validation_is_the_validated_row() -> None:
    values: dict[str, object] = {
        "id": "log_1",
        "kind": None,
        "message_id": "m",
        "provider": "scripted",
        "model": "M",
        "model_name": "bench",
        "endpoint": "chat.completions",
        "prompt_name": "P",
        "request_body": "{}",
        "system_prompt": None,
        "tools_available": 1,
        "is_complete": False,
        "created_at": 0,
    }
    row = _new_row(values)
    expected = LogRow(**values)  # type: ignore[arg-type]
    assert row == expected and repr(row) == repr(expected)
    assert row.model_fields_set == expected.model_fields_set
    assert list(vars(row)) == list(vars(expected))
    update = {"response_body": "[]", "input_tokens": 3, "is_complete": True}
    copied, reference = copy_with(row, update), expected.model_copy(update=update)
    assert copied == reference and copied.model_fields_set == reference.model_fields_set
    assert row.response_body is None and not row.is_complete  # the original is unchanged
    with pytest.raises(ValidationError):  # a column of the wrong type is still refused
        _new_row({**values, "provider": 3})


@pytest.mark.parametrize(
    ("head", "prefix", "shared", "tail"),
    [
        ([], [], 0, []),
        (["s"], ["a", "b", "c"], 2, ["t1", "t2"]),
        ([], ["a"], 1, []),
        (["s"], [], 0, ["t"]),
    ],
)
def test_a_fragments_view_reads_as_its_list(
    head: list[str], prefix: list[str], shared: int, tail: list[str]
) -> None:
    view = Fragments(head, prefix, shared, tail)
    expected = [*head, *prefix[:shared], *tail]
    prefix.append("later")  # the cache's list grows after the request: not part of it
    n = len(expected)
    assert len(view) == n and list(view) == expected and view.copy() == expected
    for i in range(-n, n):
        assert view[i] == expected[i]
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            view[bad]
    for start in range(-n - 2, n + 3):
        for stop in [*range(-n - 2, n + 3), None]:
            assert view[start:stop] == expected[start:stop]
    assert view[::-1] == expected[::-1]


def test_trusted_refuses_what_validation_would_not_skip() -> None:
    with pytest.raises(TypeError, match="missing"):
        trusted(ToolMessage, {"name": "n", "content": "c"})  # tool_call_id is required

    class Checked(AssistantMessage):
        @field_validator("content")
        @classmethod
        def _strip(cls, value: str | None) -> str | None:
            return value

    with pytest.raises(TypeError, match="without validation"):
        trusted(Checked, {"content": "x"})
    made = trusted(AssistantMessage, {"content": "x"})  # defaults: fresh factory values
    assert made.tool_calls == [] and made.tool_calls is not trusted(AssistantMessage, {}).tool_calls
