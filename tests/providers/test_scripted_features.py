"""The rest of the scripted provider (spec 05 §5.7): builders, Script, expectations,
delays and cancellation, reset, function elements, request logging."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from threadloom.errors import ProviderError
from threadloom.providers import (
    AssistantMessage,
    Finish,
    ImagePart,
    ProviderRequest,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCallEnd,
    ToolCallSpec,
    ToolSpec,
    Usage,
    UserMessage,
    generate,
)
from threadloom.providers.scripted import (
    Call,
    Expect,
    Fail,
    Reply,
    Script,
    ScriptedProvider,
    synthetic_usage,
)


def request(*messages: Any, **kw: Any) -> ProviderRequest:
    return ProviderRequest(model="m", messages=list(messages), **kw)


HELLO = request(SystemMessage(content="be brief"), UserMessage(content="hello"))


async def failure(provider: ScriptedProvider, req: ProviderRequest = HELLO) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        await generate(provider, req)
    return info.value


# -- builders and Script ------------------------------------------------------------------


def test_reply_builders_and_fields_share_names() -> None:
    reply = Reply.tool_calls(Call("a", '{"bad', id="c1"), ("b", {"k": "é"}), content="calling")
    assert reply.content == "calling"
    assert [c.name for c in reply.tool_calls] == ["a", "b"]
    assert reply.tool_calls[1].arguments_text == '{"k":"é"}'
    err = Reply.error("boom", code="overloaded", status=529, delay=0.5)
    assert err.error == Fail("boom", "overloaded", status=529)
    assert err.delay == 0.5
    assert Reply.text("x").error is None and Reply.text("x").tool_calls == []


def test_reply_validation() -> None:
    with pytest.raises(ValueError, match="concatenate"):
        Reply(content="abc", chunks=["a", "b"])
    with pytest.raises(ValueError, match="fail_after_chunks needs an error"):
        Reply(content="abc", fail_after_chunks=1)
    with pytest.raises(ValueError, match="chunk_size"):
        Reply.text("abc", chunk_size=0)
    with pytest.raises(ValueError, match="unknown usage fields"):
        Reply.text("abc", usage={"prompt_tokens": 1})
    with pytest.raises(ValueError, match="finish_reason"):
        Reply(content="abc", finish_reason="done")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Reply.tool_calls("not a call")  # type: ignore[arg-type]


async def test_script_chains_and_copies() -> None:
    script = Script().text("Hi").tool_calls(("t", {})).reasoning("r", "why").error("busy")
    script.then(lambda req: Reply.text(f"{len(req.messages)} messages"))
    assert len(script) == 5
    clone = script.copy()
    clone.text("extra")
    assert len(script) == 5 and len(clone) == 6

    provider = ScriptedProvider(script)
    assert (await generate(provider, HELLO)).content == "Hi"
    assert (await generate(provider, HELLO)).tool_calls[0].name == "t"
    assert (await generate(provider, HELLO)).reasoning_content == "why"
    assert (await failure(provider)).message == "busy"
    assert (await generate(provider, HELLO)).content == "2 messages"
    provider.assert_complete()


async def test_async_function_elements_and_function_errors() -> None:
    async def later(req: ProviderRequest) -> Reply:
        await asyncio.sleep(0)
        return Reply.text("async")

    def refuse(req: ProviderRequest) -> Reply:
        raise ProviderError("nope", code="permission")

    provider = ScriptedProvider([later, refuse])
    assert (await generate(provider, HELLO)).content == "async"
    error = await failure(provider)
    assert (error.code, error.retryable) == ("permission", False)

    bad = ScriptedProvider(lambda req: "text")  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="must return a Reply"):
        await generate(bad, HELLO)


def test_construction_rejects_bad_scripts() -> None:
    with pytest.raises(TypeError):
        ScriptedProvider([Reply.text("a"), 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        ScriptedProvider(42)  # type: ignore[arg-type]
    assert ScriptedProvider(Reply.text("one")).remaining == 1


# -- streaming details ----------------------------------------------------------------------


async def test_explicit_chunks_and_reasoning_chunking() -> None:
    reply = Reply.reasoning("hello", "abcd", chunks=["he", "l", "lo"], details=[{"a": 1}])
    events = [e async for e in ScriptedProvider([reply]).stream(HELLO)]
    assert events[:4] == [
        ReasoningDelta(text="abcd"),
        TextDelta(text="he"),
        TextDelta(text="l"),
        TextDelta(text="lo"),
    ]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reasoning_details == [{"a": 1}]
    assert finish.response_id == "scripted-1"

    chunked = Reply.reasoning("ok", "abcde", chunk_size=2)
    events = [e async for e in ScriptedProvider([chunked]).stream(HELLO)]
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["ab", "cd", "e"]


async def test_fail_after_zero_chunks_and_after_all_chunks() -> None:
    zero = Reply(content="ab", reasoning_content="r", error=Fail("x"), fail_after_chunks=0)
    seen: list[Any] = []
    with pytest.raises(ProviderError):
        async for event in ScriptedProvider([zero]).stream(HELLO):
            seen.append(event)
    assert seen == [ReasoningDelta(text="r")]

    many = Reply(content="ab", error=Fail("x"), fail_after_chunks=5, tool_calls=[("t", {})])
    seen = []
    with pytest.raises(ProviderError):
        async for event in ScriptedProvider([many]).stream(HELLO):
            seen.append(event)
    assert seen == [TextDelta(text="ab")]  # all content, no tool call, no Finish


async def test_explicit_call_id_extra_content_and_finish_override() -> None:
    call = Call("lookup", {"id": 1}, id="call_fixed", extra_content={"sig": "x"})
    reply = Reply.tool_calls(call, finish_reason="length")
    events = [e async for e in ScriptedProvider([reply]).stream(HELLO)]
    end = next(e for e in events if isinstance(e, ToolCallEnd))
    assert end.extra_content == {"sig": "x"}
    response = await generate(ScriptedProvider([reply]), HELLO)
    assert response.tool_calls[0].id == "call_fixed"
    assert response.tool_calls[0].extra_content == {"sig": "x"}
    assert response.finish_reason == "length"


async def test_generated_call_ids_are_fresh_per_stream() -> None:
    reply = Reply.tool_calls(("t", {}))
    provider = ScriptedProvider([reply, reply])
    first = await generate(provider, HELLO)
    second = await generate(provider, HELLO)
    assert first.tool_calls[0].id != second.tool_calls[0].id


async def test_delay_is_cancellable() -> None:
    provider = ScriptedProvider([Reply.text("late", delay=30)])
    task = asyncio.create_task(generate(provider, HELLO))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.remaining == 0 and len(provider.requests) == 1


async def test_chunk_delay_sleeps_between_chunks() -> None:
    provider = ScriptedProvider([Reply.text("abc", chunk_size=1, chunk_delay=0.02)])
    loop = asyncio.get_running_loop()
    started = loop.time()
    await generate(provider, HELLO)
    assert loop.time() - started >= 0.05


# -- expectations ---------------------------------------------------------------------------


def _custom_check(request: ProviderRequest) -> None:
    raise AssertionError("custom")


@pytest.mark.parametrize(
    ("expect", "detail"),
    [
        (
            Expect(contains_message="absent"),
            'Expected a user or assistant message containing "absent"',
        ),
        (Expect(system_prompt_contains="verbose"), 'Expected system prompt containing "verbose"'),
        (Expect(tools=["b", "a"]), "Expected tools ['b', 'a'], got ['a', 'b']"),
        (Expect(check=_custom_check), "custom"),
    ],
)
async def test_expectation_failures(expect: Expect, detail: str) -> None:
    req = request(
        SystemMessage(content="be brief"),
        UserMessage(content=[TextPart(text="hello"), ImagePart(media_type="image/png", data="AA")]),
        tools=[ToolSpec(name="a"), ToolSpec(name="b")],
    )
    error = await failure(ScriptedProvider([Reply.text("x", expect=expect)]), req)
    assert error.message == f"Scripted expectation failed: {detail}"


async def test_expectations_that_pass() -> None:
    expect = Expect(
        message_count=3,
        contains_message="said",
        system_prompt_contains="brief",
        tools=["a"],
        check=lambda req: None,
    )
    req = request(
        SystemMessage(content="be brief"),
        UserMessage(content="hi"),
        AssistantMessage(content="I said so"),
        tools=[ToolSpec(name="a")],
    )
    assert (await generate(ScriptedProvider([Reply.text("ok", expect=expect)]), req)).content


async def test_no_system_message() -> None:
    expect = Expect(system_prompt_contains="x")
    error = await failure(ScriptedProvider([Reply.text("x", expect=expect)]), request())
    assert error.message == "Scripted expectation failed: No system message"


# -- inspection -----------------------------------------------------------------------------


async def test_request_log_is_a_snapshot() -> None:
    provider = ScriptedProvider()
    req = request(AssistantMessage(content="a", reasoning_details=[{"k": "v"}]))
    await generate(provider, req)
    message = req.messages[0]
    assert isinstance(message, AssistantMessage) and message.reasoning_details is not None
    message.reasoning_details[0]["k"] = "changed"
    logged = provider.requests[0].messages[0]
    assert isinstance(logged, AssistantMessage)
    assert logged.reasoning_details == [{"k": "v"}]


async def test_assert_complete_lists_unconsumed_replies_and_reset() -> None:
    provider = ScriptedProvider([Reply.text("a"), Reply.text("b")])
    await generate(provider, HELLO)
    with pytest.raises(AssertionError, match=r"1 unconsumed reply: \[Reply\(content='b'\)\]"):
        provider.assert_complete()
    provider.reset()
    assert (provider.index, provider.remaining, provider.requests) == (0, 2, [])
    assert provider.last_request is None
    provider.reset([Reply.text("z")])
    assert (await generate(provider, HELLO)).content == "z"
    assert provider.last_request is not None


async def test_empty_exhaustion_message_and_response_ids() -> None:
    provider = ScriptedProvider([])
    error = await failure(provider, request())
    assert error.message == (
        "ScriptedProvider: script exhausted after 0 responses. Received request with 0 "
        'messages. Last message role: "none", content: ""'
    )
    long = request(UserMessage(content="x" * 150))
    assert f'content: "{"x" * 100}"' in (await failure(provider, long)).message

    numbered = ScriptedProvider()
    assert [(await generate(numbered, HELLO)).id for _ in range(2)] == [
        "scripted-1",
        "scripted-2",
    ]


def test_synthetic_usage_counts_parts_calls_and_reasoning() -> None:
    req = request(
        UserMessage(content=[TextPart(text="ab"), ImagePart(media_type="image/png", data="Z")]),
        AssistantMessage(
            content="abcd", tool_calls=[ToolCallSpec(id="c", name="t", arguments="{}")]
        ),
    )
    usage = synthetic_usage(req, Reply.reasoning("abcde", "abcdefghi"))
    # "ab" → 1; "abcd" + "{}" (6 chars) → 2; reasoning 9 chars → 3; content 5 chars → 2
    assert usage == Usage(
        input_tokens=3, output_tokens=5, reasoning_tokens=3, total_tokens=8, cached_tokens=0
    )
    explicit = synthetic_usage(req, Reply.text("x", usage=Usage(total_tokens=99)))
    assert (explicit.input_tokens, explicit.total_tokens) == (3, 99)
