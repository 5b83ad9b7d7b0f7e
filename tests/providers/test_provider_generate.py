"""generate() and ResponseBuilder: folding a stream into a ProviderResponse (spec 05 §5.3.4)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence

import pytest

from threadloom.errors import ProviderError
from threadloom.providers import (
    Finish,
    Provider,
    ProviderRequest,
    ReasoningDelta,
    ResponseBuilder,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    generate,
)

REQ = ProviderRequest(model="model-x")


class Replay:
    """A hand-written provider that replays events (no base class: the protocol is structural)."""

    name = "replay"

    def __init__(self, events: Sequence[StreamEvent], error: Exception | None = None) -> None:
        self.events = list(events)
        self.error = error
        self.closed = False

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        try:
            for event in self.events:
                yield event
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True

    async def aclose(self) -> None:
        pass


def test_a_structural_provider_satisfies_the_protocol() -> None:
    assert isinstance(Replay([]), Provider)


async def test_tool_calls_are_assembled_from_deltas_in_start_order() -> None:
    events: list[StreamEvent] = [
        ToolCallStart(index=1, id="call_b", name="second"),
        ToolCallStart(index=0, id="call_a", name="first"),
        ToolCallDelta(index=0, arguments='{"q":'),
        ToolCallDelta(index=1, arguments='{"n":'),
        ToolCallDelta(index=0, arguments='"x"}'),
        ToolCallDelta(index=1, arguments="2}"),
        ToolCallEnd(index=0),
        ToolCallEnd(index=1, extra_content={"responses_item_id": "fc_1"}),
        Finish(finish_reason="tool_calls"),
    ]
    response = await generate(Replay(events), REQ)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_b", "second", '{"n":2}'),
        ("call_a", "first", '{"q":"x"}'),
    ]
    assert response.tool_calls[0].extra_content == {"responses_item_id": "fc_1"}
    assert response.tool_calls[1].extra_content is None
    assert response.finish_reason == "tool_calls"


async def test_tool_call_end_arguments_replace_the_fragments() -> None:
    events: list[StreamEvent] = [
        ToolCallStart(index=0, id="c", name="t"),
        ToolCallDelta(index=0, arguments='{"partial'),
        ToolCallEnd(index=0, arguments='{"full":true}'),
        Finish(),
    ]
    response = await generate(Replay(events), REQ)
    assert response.tool_calls[0].arguments == '{"full":true}'


async def test_missing_call_id_gets_one() -> None:
    events: list[StreamEvent] = [ToolCallStart(index=0, name="t"), ToolCallEnd(index=0), Finish()]
    response = await generate(Replay(events), REQ)
    assert re.fullmatch(r"call_[0-9a-f]{32}", response.tool_calls[0].id)
    assert response.tool_calls[0].arguments == ""


async def test_text_reasoning_usage_and_details_are_aggregated() -> None:
    usage = Usage(input_tokens=10, output_tokens=4, total_tokens=14, cost=0.5)
    details = [{"type": "reasoning.summary", "summary": "s", "format": "openai-responses-v1"}]
    events: list[StreamEvent] = [
        ReasoningDelta(text="th"),
        ReasoningDelta(text="ink"),
        TextDelta(text="hel"),
        TextDelta(text="lo"),
        Finish(finish_reason="length", usage=usage, reasoning_details=details, response_id="r1"),
    ]
    response = await generate(Replay(events), REQ)
    assert response.id == "r1"
    assert response.model == "model-x"
    assert (response.content, response.reasoning_content) == ("hello", "think")
    assert response.reasoning_details == details
    assert response.finish_reason == "length"
    assert response.usage == usage


async def test_empty_text_is_none_and_id_defaults_to_res_hex() -> None:
    response = await generate(Replay([Finish()]), REQ)
    assert response.content is None and response.reasoning_content is None
    assert response.tool_calls == [] and response.reasoning_details is None
    assert re.fullmatch(r"res_[0-9a-f]{12}", response.id)


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([TextDelta(text="a")], "stream ended without a Finish event"),
        ([ToolCallDelta(index=0, arguments="{}"), Finish()], "ToolCallDelta for tool call 0"),
        ([ToolCallEnd(index=2), Finish()], "ToolCallEnd for tool call 2"),
        ([Finish(), TextDelta(text="late")], "TextDelta after Finish"),
        (
            [ToolCallStart(index=0, name="a"), ToolCallStart(index=0, name="b"), Finish()],
            "tool call 0 started twice",
        ),
    ],
)
async def test_broken_streams_raise_unknown_retryable_errors(
    events: list[StreamEvent], detail: str
) -> None:
    provider = Replay(events)
    with pytest.raises(ProviderError) as info:
        await generate(provider, REQ)
    assert detail in info.value.message
    assert (info.value.code, info.value.retryable, info.value.provider) == (
        "unknown",
        True,
        "replay",
    )
    assert provider.closed


async def test_provider_errors_propagate_and_the_stream_is_closed() -> None:
    provider = Replay([TextDelta(text="a")], ProviderError("down", code="overloaded"))
    with pytest.raises(ProviderError, match="down"):
        await generate(provider, REQ)
    assert provider.closed


def test_response_builder_exposes_progress() -> None:
    builder = ResponseBuilder("m")
    builder.add(TextDelta(text="ab"))
    builder.add(ReasoningDelta(text="r"))
    assert (builder.text, builder.reasoning, builder.finish) == ("ab", "r", None)
    builder.add(Finish(response_id="x"))
    assert builder.finish is not None and builder.build().content == "ab"
