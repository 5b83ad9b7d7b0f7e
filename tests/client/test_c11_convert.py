"""Conversions (spec 11 §11.7): OpenAI (C11-034 to C11-037) and threadplane JSON (C11-045)."""

from __future__ import annotations

import json
from typing import Any

from threadloom.client.chat import (
    AgentError,
    Delivery,
    Message,
    Outcome,
    TextBlock,
    ToolUseBlock,
    frozen,
)
from threadloom.client.convert.anthropic import from_anthropic, to_anthropic
from threadloom.client.convert.openai import OpenAIStreamAccumulator, from_openai, to_openai
from threadloom.client.convert.threadplane import from_threadplane, to_threadplane
from threadloom.client.reduce import (
    FrameEvent,
    LocalSend,
    SendAccepted,
    SendFailed,
    empty_view,
    reduce_all,
)


def msg(id: str, role: Any, content: Any = "", **fields: Any) -> Message:
    fields.setdefault("delivery", Delivery.static(id))
    fields.setdefault("status", "completed")
    return Message(id=id, key=id, role=role, content=content, **fields)


def call(id: str, args_raw: str = '{"city": "Lisbon"}') -> ToolUseBlock:
    return ToolUseBlock(id=id, name="weather", args=json.loads(args_raw), args_raw=args_raw)


def test_c11_034_to_openai_of_a_tool_exchange() -> None:
    c1 = call("c1", '{"city":  "Lisbon"}')
    messages = [
        msg("s", "system", "be brief"),
        msg("u", "user", "q"),
        msg("a", "assistant", (c1,), tool_call_ids=("c1",), reasoning="thinking"),
        msg("t", "tool", "r", tool_call_id="c1"),
        msg("q", "user", "s", silent=True),
    ]
    out = to_openai(messages)
    assert len(out) == 5
    assert out[0] == {"role": "system", "content": "be brief"}
    assert out[2]["content"] is None
    assert out[2]["tool_calls"][0]["function"]["arguments"] == c1.args_raw
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert out[4] == {"role": "user", "content": "s"}
    assert all("reasoning_content" not in m for m in out)


def test_c11_035_failed_and_queued_messages_are_not_sent_to_a_model() -> None:
    failed = msg(
        "a",
        "assistant",
        "half",
        status="failed",
        delivery=Delivery.complete("run:1", Outcome.ERROR),
    )
    view = reduce_all(
        empty_view("t"),
        [
            LocalSend("u1", "later"),
            SendAccepted("u1", "M"),
        ],
    )
    queued = view.messages[0]
    assert to_openai([msg("u", "user", "q"), failed, queued]) == [{"role": "user", "content": "q"}]
    refused = reduce_all(
        empty_view("t"),
        [LocalSend("u2", "no"), SendFailed("u2", AgentError("rejected", "x", False, 423))],
    )
    assert to_openai(refused.messages) == []
    assert to_openai([], include_subprompts=True) == []
    streaming = reduce_all(
        empty_view("t"),
        [FrameEvent({"type": "message_chunk", "message_id": "x", "chunk": "a", "offset": 0})],
    )
    assert to_openai(streaming.messages) == []


def test_c11_036_from_openai_to_openai_round_trip() -> None:
    original = {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "The user wants weather.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "time", "arguments": "{}"},
            },
        ],
    }
    message = from_openai(original)
    assert message.tool_call_ids == ("call_1", "call_2")
    assert message.reasoning == "The user wants weather."
    assert to_openai([message], reasoning="reasoning_content")[0] == original


def test_c11_037_stream_accumulator_joins_argument_fragments() -> None:
    acc = OpenAIStreamAccumulator()
    first = {"index": 0, "id": "call_1", "function": {"name": "weather", "arguments": '{"loca'}}
    acc.feed({"id": "r1", "choices": [{"delta": {"tool_calls": [first]}}]})
    second = {"index": 0, "function": {"arguments": 'tion":"Lisbon"}'}}
    acc.feed({"id": "r1", "choices": [{"delta": {"tool_calls": [second]}}]})
    assert acc.message().delivery.phase.value == "streaming"
    acc.feed({"id": "r1", "choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    message = acc.message()
    (use,) = message.tool_uses
    assert (use.id, use.name, use.args) == ("call_1", "weather", {"location": "Lisbon"})
    assert message.delivery == Delivery.complete("r1", Outcome.SUCCESS)


def test_c11_045_to_threadplane_of_queued_and_rejected_messages() -> None:
    queued = reduce_all(empty_view("t"), [LocalSend("u1", "hi"), SendAccepted("u1", "M")])
    wire = to_threadplane(queued.messages[0])
    assert wire["delivery"] == {"generation": "queue:M", "phase": "streaming"}
    assert wire["extra"]["deliveryDetail"] == "queued"
    refused = reduce_all(
        empty_view("t"),
        [LocalSend("u2", "no"), SendFailed("u2", AgentError("rejected", "x", False, 423))],
    )
    wire = to_threadplane(refused.messages[0])
    assert wire["delivery"] == {"generation": "send:u2", "phase": "complete", "outcome": "error"}
    static = msg("a", "assistant", "hi", reasoning="r", metadata=frozen({"k": 1}))
    back = from_threadplane(to_threadplane(static))
    assert (back.id, back.role, back.text, back.reasoning, back.delivery) == (
        "a",
        "assistant",
        "hi",
        "r",
        Delivery.complete("a", Outcome.SUCCESS),
    )
    assert dict(back.metadata) == {"k": 1}


def test_c11_038_to_anthropic_merges_turns_to_alternate() -> None:
    c1, c2 = call("c1"), call("c2")
    messages = [
        msg("s", "system", "A"),
        msg("u", "user", "q"),
        msg("a", "assistant", (TextBlock(text="t"), c1, c2), tool_call_ids=("c1", "c2")),
        msg("t1", "tool", "r1", tool_call_id="c1"),
        msg("t2", "tool", "r2", tool_call_id="c2", extra=frozen({"tool_status": "error"})),
        msg("n", "user", "next"),
    ]
    system, turns = to_anthropic(messages)
    assert system == "A"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    last = turns[-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[1] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": "r2",
        "is_error": True,
    }
    assert [b["type"] for b in turns[1]["content"]] == ["text", "tool_use", "tool_use"]


def test_c11_039_only_signed_reasoning_becomes_a_thinking_block() -> None:
    plain = msg("a", "assistant", "answer", reasoning="unsigned thoughts")
    _, turns = to_anthropic([msg("u", "user", "q"), plain])
    assert [b["type"] for b in turns[1]["content"]] == ["text"]
    signed = msg(
        "b",
        "assistant",
        "answer",
        reasoning="…",
        extra=frozen(
            {"reasoning_details": [{"type": "thinking", "thinking": "…", "signature": "sig"}]}
        ),
    )
    _, turns = to_anthropic([msg("u", "user", "q"), signed])
    first = turns[1]["content"][0]
    assert first == {"type": "thinking", "thinking": "…", "signature": "sig"}
    _, dropped = to_anthropic([msg("u", "user", "q"), signed], thinking="drop")
    assert [b["type"] for b in dropped[1]["content"]] == ["text"]


def test_c11_040_from_anthropic_splits_tool_results_from_the_user_text() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "r2", "is_error": True},
            {"type": "text", "text": "and now?"},
        ],
    }
    out = from_anthropic(message)
    assert [(m.role, m.tool_call_id, m.text) for m in out] == [
        ("tool", "c1", "r1"),
        ("tool", "c2", "r2"),
        ("user", None, "and now?"),
    ]
    assert out[1].extra["tool_status"] == "error"
    (assistant,) = from_anthropic(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s1"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "c9", "name": "look", "input": {"q": 1}},
            ],
        }
    )
    assert (assistant.text, assistant.reasoning, assistant.tool_call_ids) == ("ok", "hm", ("c9",))
    assert assistant.extra["reasoning_details"][0]["signature"] == "s1"
