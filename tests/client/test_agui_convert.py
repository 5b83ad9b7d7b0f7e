"""AG-UI bridge on literal inputs (spec 11 §11.7.3): round trips between OpenAI, chat messages,
Anthropic and AG-UI, and the exporter's mapping of each kind of frame."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import BaseEvent, EventType

from threadloom.client.chat import (
    AttachmentRef,
    Delivery,
    FileBlock,
    ImageBlock,
    Message,
    Outcome,
    TextBlock,
    frozen,
)
from threadloom.client.convert.agui import (
    AguiExporter,
    from_agui_messages,
    to_agui_messages,
)
from threadloom.client.convert.anthropic import from_anthropic, to_anthropic
from threadloom.client.convert.openai import from_openai, to_openai
from threadloom.client.reduce import LocalSend, SendAccepted, empty_view, reduce_all

# --- round trips -------------------------------------------------------------------------------

OPENAI = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather in Lisbon and the time?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "Two tools are needed.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
    {"role": "assistant", "content": "21 °C at noon."},
]

ANTHROPIC_ASSISTANT = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "sig-1"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Lisbon"}},
    ],
}
ANTHROPIC_RESULT = {
    "role": "user",
    "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": False},
        {"type": "text", "text": "thanks"},
    ],
}


def through_agui(messages: list[Message]) -> list[Message]:
    return from_agui_messages(to_agui_messages(messages))


def test_agui_round_trip_keeps_openai_text_tool_calls_and_reasoning() -> None:
    chat = [from_openai(m) for m in OPENAI]
    back = through_agui(chat)
    assert to_openai(back, reasoning="reasoning_content") == OPENAI
    assistant = back[2]
    assert (assistant.reasoning, assistant.tool_call_ids) == (
        "Two tools are needed.",
        ("call_1", "call_2"),
    )
    # the wire form: the reasoning travels as its own message just before its assistant
    wire = [m.model_dump(by_alias=True) for m in to_agui_messages(chat)]
    assert [m["role"] for m in wire] == [
        "system",
        "user",
        "reasoning",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert wire[2]["id"] == f"{chat[2].id}:reasoning"
    assert wire[3]["toolCalls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city": "Lisbon"}',
    }


def test_agui_round_trip_keeps_anthropic_thinking_signatures() -> None:
    chat = from_anthropic(ANTHROPIC_ASSISTANT) + from_anthropic(ANTHROPIC_RESULT)
    back = through_agui(chat)
    system, turns = to_anthropic(back)
    assert system is None
    assert turns == [ANTHROPIC_ASSISTANT, ANTHROPIC_RESULT]
    assert back[0].extra["reasoning_details"][0]["signature"] == "sig-1"


def test_anthropic_to_agui_to_openai_and_back_keeps_the_signed_thinking() -> None:
    """Anthropic → chat → AG-UI → chat → OpenAI (OpenRouter reasoning_details) → chat →
    Anthropic: each format that carries the signature hands it on."""
    chat = from_anthropic(ANTHROPIC_ASSISTANT)
    openai = to_openai(through_agui(chat), reasoning="openrouter")
    assert openai[0]["reasoning_details"][0]["signature"] == "sig-1"
    assert openai[0]["tool_calls"][0]["function"]["arguments"] == '{"city":"Lisbon"}'
    _, turns = to_anthropic([from_openai(openai[0])])
    assert turns == [ANTHROPIC_ASSISTANT]


def test_openai_to_anthropic_to_agui_to_openai_keeps_text_and_calls() -> None:
    """Unsigned reasoning is never sent to Anthropic (§11.7.2 rule 3), so it ends there; text
    and tool calls survive the whole trip."""
    chat = [from_openai(m) for m in OPENAI]
    system, turns = to_anthropic(chat)
    again = [from_openai({"role": "system", "content": system})]
    for turn in turns:
        again += from_anthropic(turn)
    out = to_openai(through_agui(again), reasoning="reasoning_content")
    assert [m["role"] for m in out] == [m["role"] for m in OPENAI]
    assert [m.get("content") for m in out] == [m.get("content") for m in OPENAI]
    calls = [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in out[2]["tool_calls"]
    ]
    assert calls == [("call_1", "weather", {"city": "Lisbon"}), ("call_2", "time", {})]
    assert "reasoning_content" not in out[2]


def test_agui_round_trip_of_attachments_and_threadloom_fields() -> None:
    ref = AttachmentRef(
        id="f1", type="file", path="/docs/a.pdf", name="a.pdf", mimeType="application/pdf", size=3
    )
    user = Message(
        id="u1",
        key="u1",
        role="user",
        content=(
            TextBlock(text="see these"),
            ImageBlock(url="https://x.example/cat.png", mime_type="image/png"),
            ImageBlock(url="data:image/png;base64,AAAA", mime_type="image/png"),
            FileBlock(attachment=ref, url="/api/threads/t/fs/docs/a.pdf"),
        ),
        delivery=Delivery.static("u1"),
        silent=True,
        depth=0,
        created_at_us=123,
    )
    failed_tool = Message(
        id="t1",
        key="t1",
        role="tool",
        content="boom",
        delivery=Delivery.static("t1"),
        tool_call_id="c1",
        extra=frozen({"tool_status": "error"}),
    )
    (wire_user, wire_tool) = to_agui_messages([user, failed_tool])
    assert wire_user.metadata == {
        "threadloom": {"silent": True, "depth": 0, "created_at": 123, "subagent_id": None}
    }
    assert wire_tool.model_dump(by_alias=True)["error"] == "boom"
    back_user, back_tool = from_agui_messages([wire_user, wire_tool])
    assert back_user.content == user.content
    assert (back_user.silent, back_user.created_at_us) == (True, 123)
    assert (back_tool.text, back_tool.tool_call_id, back_tool.extra["tool_status"]) == (
        "boom",
        "c1",
        "error",
    )


def test_agui_snapshot_holds_only_what_a_model_sees() -> None:
    queued = reduce_all(empty_view("t"), [LocalSend("u1", "later"), SendAccepted("u1", "M")])
    failed = Message(
        id="a",
        key="a",
        role="assistant",
        content="half",
        delivery=Delivery.complete("run:1", Outcome.ERROR),
        status="failed",
    )
    deep = Message(
        id="d", key="d", role="assistant", content="x", delivery=Delivery.static("d"), depth=1
    )
    assert to_agui_messages([*queued.messages, failed, deep]) == []
    assert [m.id for m in to_agui_messages([deep], include_subprompts=True)] == ["d"]


# --- export of frames --------------------------------------------------------------------------

T = "thread-1"
S = 1_000


def status(state: str, since: int = S, reason: str | None = None, seq: int = 0) -> dict[str, Any]:
    body = {"state": state, "since": since, "reason": reason}
    return {"type": "thread_status", "seq": seq, "status": body}


def record(
    id: str, role: str = "assistant", content: str | None = "", **fields: Any
) -> dict[str, Any]:
    fields.setdefault("status", "completed")
    fields.setdefault("created_at", 10)
    data = {"id": id, "role": role, "content": content, **fields}
    return {"type": "message_data", "seq": 0, "message_id": id, "data": data}


def chunk(mid: str, text: str, offset: int, kind: str = "message_chunk") -> dict[str, Any]:
    return {"type": kind, "message_id": mid, "chunk": text, "offset": offset}


def feed(exporter: AguiExporter, *frames: dict[str, Any]) -> list[BaseEvent]:
    return [event for frame in frames for event in exporter.feed(frame)]


def kinds(events: list[BaseEvent]) -> list[str]:
    return [e.type.value for e in events if e.type is not EventType.CUSTOM]


def test_agui_export_outcomes_of_a_run_ending() -> None:
    for reason, state, expected in (
        ("stop_on_response", "idle", "success"),
        ("aborted_by_user", "idle", "cancelled"),
        ("terminated", "idle", "cancelled"),
        ("awaiting_human", "idle", "interrupt"),
    ):
        events = feed(AguiExporter(T), status("running"), status(state, S + 1, reason))
        finished = events[-2]
        assert finished.type is EventType.RUN_FINISHED and finished.outcome.type == expected
        if expected == "interrupt":
            assert finished.outcome.interrupts[0].id == f"{T}:{S}"
    for reason in ("step_error", "execution_lost"):
        events = feed(AguiExporter(T), status("running"), status("failed", S + 1, reason))
        error = events[-2]
        assert error.type is EventType.RUN_ERROR and (error.code, error.message) == (reason, reason)
    custom = [
        e for e in events if e.type is EventType.CUSTOM and e.name == "threadloom.thread_status"
    ]
    assert [c.value["state"] for c in custom] == ["running", "failed"]


def test_agui_export_emits_catch_up_chunks_and_replayed_records_once() -> None:
    exporter = AguiExporter(T)
    events = feed(
        exporter,
        status("running"),
        record("A", status="pending", content=None),
        chunk("A", "Hel", 0),
        chunk("A", "Hello", 0),  # catch-up after a reconnect: only "lo" is new
        chunk("A", "Hello", 0),
        record("A", content="Hello!"),
        record("A", content="Hello!"),  # replayed
    )
    deltas = [e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT]
    assert deltas == ["Hel", "lo", "!"]
    assert kinds(events).count("TEXT_MESSAGE_END") == 1


def test_agui_export_of_records_without_chunks_and_of_tool_results() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"q":1}'}}]
    events = feed(
        AguiExporter(T),
        record("A", content="", reasoning_content="hm", tool_calls=json.dumps(calls)),
        record("R", "tool", '{"n":1}', tool_call_id="c1", tool_status="success"),
        record(
            "Q", "user", "later", status="pending", metadata={"queued": True, "queue_source": "api"}
        ),
        {"type": "message_deleted", "seq": 0, "message_id": "R"},
    )
    assert kinds(events) == [
        "MESSAGES_SNAPSHOT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    result = next(e for e in events if e.type is EventType.TOOL_CALL_RESULT)
    assert (result.message_id, result.tool_call_id, result.content) == ("R", "c1", '{"n":1}')
    custom = {e.name: e.value for e in events if e.type is EventType.CUSTOM}
    assert custom["threadloom.queue"] == {"id": "Q", "content": "later", "queue_source": "api"}
    assert custom["threadloom.message_deleted"] == {"id": "R"}


def test_agui_export_closes_open_streams_before_the_run_ends() -> None:
    events = feed(
        AguiExporter(T),
        status("running"),
        chunk("A", "thinking", 0, "reasoning_chunk"),
        status("idle", S + 1, "aborted_by_user"),
    )
    assert kinds(events)[-3:] == ["REASONING_MESSAGE_END", "REASONING_END", "RUN_FINISHED"]


def test_agui_export_of_subagents_and_of_a_child_thread() -> None:
    def child(status: str, id: str = "k1") -> dict[str, Any]:
        entry = {"id": id, "relationship": "researcher", "status": status, "description": "digs"}
        return {"type": "subagent_updated", "seq": 0, "subagent_id": id, "data": entry}

    events = feed(
        AguiExporter(T), child("running"), child("running"), child("idle"), child("failed", "k2")
    )
    assert kinds(events) == [
        "MESSAGES_SNAPSHOT",
        "SUBAGENT_STARTED",
        "SUBAGENT_FINISHED",
        "SUBAGENT_STARTED",
        "SUBAGENT_ERROR",
    ]
    assert (events[1].subagent_run_id, events[1].name, events[1].description) == (
        "k1",
        "researcher",
        "digs",
    )
    inner = feed(
        AguiExporter("k1", subagent_run_id="k1"),
        status("running"),
        chunk("A", "hi", 0),
        record("A", content="hi"),
        status("idle", S + 1, "stop_on_response"),
    )
    assert kinds(inner) == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert {e.subagent_run_id for e in inner} == {"k1"}


def test_agui_export_snapshots_again_after_a_resync() -> None:
    exporter = AguiExporter(T)
    first = feed(exporter, record("u", "user", "q"))
    assert kinds(first) == [
        "MESSAGES_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert feed(exporter, {"type": "resync", "seq": 0}) == []
    after = feed(exporter, {"type": "heartbeat"})
    (snapshot,) = after
    assert snapshot.type is EventType.MESSAGES_SNAPSHOT
    assert [m.content for m in snapshot.messages] == ["q"]
    assert feed(exporter, record("u", "user", "q")) == []  # already in the snapshot
