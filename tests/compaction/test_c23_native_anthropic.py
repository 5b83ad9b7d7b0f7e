"""Anthropic's own compaction (spec 23 §23.2 rule 7, §23.4 rule 5) with the Anthropic adapter
against its fake HTTP server (which counts tokens, and answers a paused
``compact_20260112`` edit with one ``compaction`` block, as the Messages API documents), on
both stores: the compact call's request, the record's ``provider_item``, the next turn's
request carrying the block, a later compaction folding it, undo, another adapter or model
getting the text, a range under the API's trigger minimum, a refused call, and Claude on
Bedrock making none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from fakes import load_provider_fake
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, hook
from threadloom.providers.anthropic import (
    COMPACT_BETA,
    NATIVE_COMPACTION,
    REPLAY_TRIGGER,
    AnthropicProvider,
    iterations_usage,
)
from threadloom.providers.anthropic_bedrock import AnthropicBedrockProvider
from threadloom.providers.anthropic_vertex import AnthropicVertexProvider
from threadloom.providers.openai import OpenAIChatProvider
from threadloom.records import Message
from threadloom.records.compaction import SUMMARY_PREFIX

fa = load_provider_fake("fake_anthropic")
fb = load_provider_fake("fake_bedrock")
fo = load_provider_fake("fake_openai")

FILLER = " and more" * 5000
"""45,000 characters: five questions of it pass the 50,000 tokens of the minimum."""
MIN_EDIT = {
    "type": "compact_20260112",
    "trigger": {"type": "input_tokens", "value": 50_000},
    "pause_after_compaction": True,
}
REPLAY_EDIT = {
    "type": "compact_20260112",
    "trigger": {"type": "input_tokens", "value": REPLAY_TRIGGER},
    "pause_after_compaction": False,
}


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


def defs(provider: Any, model_id: str = "claude-test", *hooks: Any) -> Definitions:
    return Definitions().add(
        Model(name="M", provider=provider, model=model_id, input_price=1.0, output_price=2.0),
        Prompt(name="P", model="M", system="You are P."),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="User"),
            hooks=tuple(h.__name__ for h in hooks),
        ),
        *hooks,
    )


async def runtime_on(
    stack: AsyncExitStack,
    db_url: str,
    provider: Any,
    model_id: str = "claude-test",
    *hooks: Any,
) -> Runtime:
    runtime = await Runtime.open(db_url, definitions=defs(provider, model_id, *hooks))
    stack.push_async_callback(runtime.close, drain=0)
    return runtime


async def fake_server(stack: AsyncExitStack, cls: Any = None) -> Any:
    return await stack.enter_async_context((cls or fa.FakeAnthropic)())


def adapter(fake: Any) -> AnthropicProvider:
    return AnthropicProvider(api_key="sk-test", base_url=fake.base_url)


def question(n: int, long: bool) -> str:
    return f"question {n}" + (FILLER if long else "")


async def seed(runtime: Runtime, pairs: int, *, long: bool = True, start: int = 0) -> str:
    state = await runtime.create_thread("chat")
    await add_pairs(runtime, state.thread_id, start, pairs, long=long)
    return state.thread_id


async def add_pairs(runtime: Runtime, thread_id: str, start: int, stop: int, long: bool) -> None:
    state = await runtime.thread(thread_id)
    for n in range(start, stop):
        await state.inject_message(role="user", content=question(n, long))
        await state.inject_message(role="assistant", content=f"answer {n}")


async def turn(runtime: Runtime, thread_id: str, text: str) -> None:
    await runtime.send_message(thread_id, text)
    await runtime.wait_idle(thread_id, 30)


def calls(fake: Any, kind: str) -> list[Any]:
    """The recorded requests of one kind: ``count`` (token counts), ``compact`` (the
    paused compaction calls) or ``stream`` (streamed turns and summaries)."""
    out = []
    for r in fake.requests:
        body = r.body if isinstance(r.body, dict) else {}
        if r.path.split("?")[0].endswith("/count_tokens"):
            found = "count"
        elif body.get("stream"):
            found = "stream"
        else:
            found = "compact"
        if found == kind:
            out.append(r)
    return out


def shape(messages: list[Any]) -> list[tuple[str, str]]:
    """(role, text) of each wire message; a compaction block shows as ``compaction:<its
    encrypted content>``; texts are cut at the filler."""
    out = []
    for m in messages:
        parts = []
        for block in m["content"]:
            if block["type"] == "text":
                parts.append(block["text"].split(" and more")[0])
            elif block["type"] == "compaction":
                parts.append(f"compaction:{block['encrypted_content']}")
        out.append((m["role"], " | ".join(parts)))
    return out


def folded(first: int, stop: int) -> list[tuple[str, str]]:
    return [
        p
        for n in range(first, stop)
        for p in (("user", f"question {n}"), ("assistant", f"answer {n}"))
    ]


async def native_rows(runtime: Runtime, thread_id: str) -> list[Any]:
    """The thread's LLM rows of compaction requests."""
    rows = await runtime.store.list_logs(thread_id, limit=None)
    return [r for r in rows if r.endpoint in ("compaction", "compaction.native")]


async def test_c23_037_the_anthropic_compact_call_and_the_record(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-037: a compaction keeping 2 of 12 messages on the Anthropic adapter → the text
    summary's request, a token count of the 10 folded messages, then one non-streamed
    Messages request with the ``compact-2026-01-12`` beta, the ``compact_20260112`` edit at
    the 50,000-token minimum with ``pause_after_compaction``, and the folded messages ending
    with a user message; the record keeps the summary and ``provider_item`` (kind, adapter,
    model, the message id, the ``compaction`` block as issued); two LLM rows
    (``compaction``, ``compaction.native`` whose tokens are the answer's iterations') whose
    cost the record sums; no count row."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("They asked six questions."))
    record = await state.compact(keep_messages=2)
    assert record.summary == "They asked six questions."
    assert [len(calls(fake, k)) for k in ("stream", "count", "compact")] == [1, 1, 1]
    [count] = calls(fake, "count")
    assert count.headers["anthropic-beta"] == COMPACT_BETA
    assert shape(count.body["messages"]) == [
        *folded(0, 5),
        ("user", "(End of the conversation to compact.)"),
    ]
    [compact] = calls(fake, "compact")
    assert compact.headers["anthropic-beta"] == COMPACT_BETA
    assert compact.body["model"] == "claude-test" and "stream" not in compact.body
    assert compact.body["context_management"] == {"edits": [MIN_EDIT]}
    assert compact.body["messages"] == count.body["messages"]
    assert "system" not in compact.body

    item = record.provider_item
    [block] = item["output"]
    assert item == {
        "type": NATIVE_COMPACTION,
        "provider": "anthropic",
        "model": "claude-test",
        "id": "msg_compact_1",
        "output": [block],
    }
    assert block == {
        "type": "compaction",
        "content": "Summary 1 of 11 messages",
        "encrypted_content": "fake-compaction-1",
    }
    assert fake.compactions["fake-compaction-1"] == compact.body["messages"]
    rows = await native_rows(runtime, thread_id)
    assert [(r.endpoint, r.error) for r in rows] == [
        ("compaction", None),
        ("compaction.native", None),
    ]
    tokens = fa.count_tokens(compact.body)
    assert tokens >= 50_000
    assert (rows[1].input_tokens, rows[1].output_tokens) == (tokens, 7)
    assert rows[1].cost_total == pytest.approx(tokens * 1.0 / 1e6 + 7 * 2.0 / 1e6)
    assert record.input_tokens == sum(r.input_tokens for r in rows)
    assert record.cost == pytest.approx(sum(r.cost_total for r in rows))
    assert fake.rejected == []


async def test_c23_038_the_next_turn_sends_the_block_in_place_of_the_summary(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-038: the next turn's request is the system text, then an assistant message of
    the ``compaction`` block as issued (after the ``(conversation start)`` user text the
    adapter puts first), the kept messages and the new one — no text summary —, with the
    compaction beta and the edit declared at a trigger the request never reaches; the fake
    API (which takes a block only so) accepts it."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("the summary"))
    record = await state.compact(keep_messages=2)
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 6")
    last = calls(fake, "stream")[-1]
    assert last.body["system"] == "You are P."
    assert shape(last.body["messages"]) == [
        ("user", "(conversation start)"),
        ("assistant", "compaction:fake-compaction-1"),
        ("user", "question 5"),
        ("assistant", "answer 5"),
        ("user", "question 6"),
    ]
    assert last.body["messages"][1]["content"] == record.provider_item["output"]
    assert SUMMARY_PREFIX not in str(last.body["messages"])
    assert last.headers["anthropic-beta"] == COMPACT_BETA
    assert last.body["context_management"] == {"edits": [REPLAY_EDIT]}
    assert fake.rejected == []
    rows = await runtime.store.list_logs(thread_id, limit=None)
    logged = [r for r in rows if r.endpoint not in ("compaction", "compaction.native")]
    assert SUMMARY_PREFIX in (logged[-1].request_body or "")  # the neutral request


async def test_c23_039_a_later_compaction_folds_the_block_and_undo_restores(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-039: a second compaction sends the first one's block (in an assistant message)
    and the messages after it to the compact call; after undoing it the next turn carries
    the first block again; after undoing both, the plain request: the original messages,
    no beta, no edit."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("first summary"))
    first = await state.compact(keep_messages=2)
    await add_pairs(runtime, thread_id, 6, 12, long=True)
    fake.stream(fa.simple_text_stream("second summary"))
    second = await state.compact(keep_messages=2)
    compact = calls(fake, "compact")[-1]
    assert shape(compact.body["messages"]) == [
        ("user", "(conversation start)"),
        ("assistant", "compaction:fake-compaction-1"),
        *folded(5, 11),
        ("user", "(End of the conversation to compact.)"),
    ]
    assert compact.body["context_management"] == {"edits": [MIN_EDIT]}
    assert second.provider_item["output"][0]["encrypted_content"] == "fake-compaction-2"

    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 12")
    assert shape(calls(fake, "stream")[-1].body["messages"])[1] == (
        "assistant",
        "compaction:fake-compaction-2",
    )
    await state.undo_compaction(second.id)
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 13")
    wire = shape(calls(fake, "stream")[-1].body["messages"])
    assert wire[1] == ("assistant", "compaction:fake-compaction-1")
    assert wire[2] == ("user", "question 5")

    await state.undo_compaction(first.id)
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 14")
    plain = calls(fake, "stream")[-1]
    assert "anthropic-beta" not in plain.headers
    assert "context_management" not in plain.body
    assert shape(plain.body["messages"])[:4] == [*folded(0, 2)]
    assert "compaction" not in str(plain.body["messages"])
    assert fake.rejected == []


async def test_c23_040_another_adapter_or_model_gets_the_text_summary(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-040: the same thread on the Anthropic adapter for another model id, and on Chat
    Completions (the store reopened with other definitions each time), is sent the text
    summary and no block, beta or edit."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("the summary"))
    await state.compact(keep_messages=2)
    await runtime.close(drain=0)

    other_model = await runtime_on(stack, db_url, adapter(fake), model_id="claude-other")
    fake.stream(fa.simple_text_stream("ok"))
    await turn(other_model, thread_id, "question 6")
    last = calls(fake, "stream")[-1]
    assert last.body["model"] == "claude-other"
    assert shape(last.body["messages"])[0][1].startswith(SUMMARY_PREFIX)
    assert last.body["messages"][0]["content"][0]["text"].endswith("the summary")
    assert "compaction:" not in str(shape(last.body["messages"]))
    assert "anthropic-beta" not in last.headers and "context_management" not in last.body
    await other_model.close(drain=0)

    openai = await stack.enter_async_context(fo.FakeOpenAIServer())
    chat = openai.adopt(OpenAIChatProvider(api_key="sk-test", base_url=openai.base_url))
    other = await runtime_on(stack, db_url, chat)
    openai.enqueue(fo.chat_text_stream("ok"))
    await turn(other, thread_id, "question 7")
    messages = [r.body for r in openai.requests if r.path.endswith("/chat/completions")][-1][
        "messages"
    ]
    assert messages[1]["content"].startswith(SUMMARY_PREFIX)
    assert "fake-compaction" not in str(messages)


async def test_c23_041_a_range_under_the_trigger_minimum_keeps_the_text_only(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-041: a range whose counted tokens are under the API's 50,000-token minimum →
    the token count only, no compact call and no ``compaction.native`` row; the record
    has ``provider_item`` null and the next turn carries the text summary."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6, long=False)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("short summary"))
    record = await state.compact(keep_messages=2)
    assert record.provider_item is None and record.summary == "short summary"
    assert [len(calls(fake, k)) for k in ("stream", "count", "compact")] == [1, 1, 0]
    assert [r.endpoint for r in await native_rows(runtime, thread_id)] == ["compaction"]
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 6")
    last = calls(fake, "stream")[-1]
    assert shape(last.body["messages"])[0][1].startswith(SUMMARY_PREFIX)
    assert "anthropic-beta" not in last.headers


class RefusingCompact(fa.FakeAnthropic):  # type: ignore[name-defined,misc]
    """A server whose model does not compact: the compact call is a 400."""

    def refuse(self, request: Any, raw: bytes) -> Any:
        body = request.body if isinstance(request.body, dict) else {}
        if "context_management" in body and "count_tokens" not in request.path:
            error = {"type": "invalid_request_error", "message": "compaction is not supported"}
            return fa.ErrorReply(400, {"type": "error", "error": error})
        return None


async def test_c23_042_a_refused_compact_call_leaves_the_text_summary(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-042: the provider refuses the compact call (400) → the record is stored with
    the text summary and ``provider_item`` null, the refused call is a failed
    ``compaction.native`` row of no tokens, and the next turn carries the text summary."""
    fake = await fake_server(stack, RefusingCompact)
    runtime = await runtime_on(stack, db_url, adapter(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("the summary"))
    record = await state.compact(keep_messages=2)
    assert record.provider_item is None and record.summary == "the summary"
    rows = await native_rows(runtime, thread_id)
    assert [(r.endpoint, r.error is None) for r in rows] == [
        ("compaction", True),
        ("compaction.native", False),
    ]
    assert "compaction is not supported" in (rows[1].error or "")
    assert not rows[1].input_tokens and rows[1].cost_total is None
    assert record.input_tokens == rows[0].input_tokens
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 6")
    last = calls(fake, "stream")[-1]
    assert shape(last.body["messages"])[0][1].startswith(SUMMARY_PREFIX)
    assert "context_management" not in last.body


async def test_c23_043_claude_on_bedrock_makes_no_native_item(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-043: on Claude on Bedrock (its fake: SigV4, event-stream) a compaction sends
    the summary request only — no token count (the SDK's Bedrock client has none), no
    compact call — and the record has ``provider_item`` null; the Vertex adapter inherits
    the Anthropic adapter's native compaction."""
    fake = await stack.enter_async_context(fb.FakeBedrock())
    bedrock = AnthropicBedrockProvider(
        aws_region="eu-west-1",
        aws_access_key=fb.ACCESS_KEY,
        aws_secret_key=fb.SECRET_KEY,
        base_url=fake.base_url,
    )
    runtime = await runtime_on(stack, db_url, bedrock)
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("bedrock summary"))
    record = await state.compact(keep_messages=2)
    assert record.summary == "bedrock summary" and record.provider_item is None
    assert len(fake.requests) == 1 and fake.auth_failures == []
    assert bedrock.native_compaction is None
    assert AnthropicVertexProvider.native_compaction == NATIVE_COMPACTION


@hook("filter_messages")
def note_first(state: Any, messages: list[Message]) -> list[Message]:
    """Puts a note before the whole history."""
    note = Message(id="note", role="user", content="a note first", created_at=0)
    return [note, *messages]


async def test_c23_045_a_message_before_the_summary_sends_the_text(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-045: a ``filter_messages`` hook puts a message before the history → the
    summary pair stands behind it, where the API would drop what precedes a compaction
    block: the Anthropic adapter sends the note, the text summary and no block, beta or
    edit."""
    fake = await fake_server(stack)
    runtime = await runtime_on(stack, db_url, adapter(fake), "claude-test", note_first)
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.stream(fa.simple_text_stream("the summary"))
    record = await state.compact(keep_messages=2)
    assert record.provider_item is not None
    fake.stream(fa.simple_text_stream("ok"))
    await turn(runtime, thread_id, "question 6")
    last = calls(fake, "stream")[-1]
    [first, *_] = shape(last.body["messages"])
    assert first[0] == "user" and first[1].startswith("a note first | " + SUMMARY_PREFIX)
    assert "compaction:" not in str(shape(last.body["messages"]))
    assert "anthropic-beta" not in last.headers and "context_management" not in last.body
    assert fake.rejected == []


def test_c23_044_the_compaction_usage_sums_the_iterations() -> None:
    """C23-044: a paused compaction's answer reports 0 at the top level and its tokens in
    ``usage.iterations`` → the row's usage is the iterations' sum (cache reads and writes
    in the input, reads cached); an answer without iterations → its top-level counts."""
    usage = {
        "input_tokens": 0,
        "output_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 60_000,
                "output_tokens": 400,
                "cache_read_input_tokens": 1_000,
                "cache_creation_input_tokens": 500,
            },
            {"type": "message", "input_tokens": 1_200, "output_tokens": 7},
        ],
    }
    summed = iterations_usage(usage)
    assert (summed.input_tokens, summed.output_tokens, summed.cached_tokens) == (
        62_700,
        407,
        1_000,
    )
    plain = iterations_usage({"input_tokens": 12, "output_tokens": 3})
    assert (plain.input_tokens, plain.output_tokens, plain.cached_tokens) == (12, 3, 0)
