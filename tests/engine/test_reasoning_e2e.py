"""Reasoning end to end, per adapter: the real engine and the real SDK adapters against the
local fake HTTP servers of ``tests/providers`` (spec 03 §3.10, spec 05 §5.6, §5.8.3, §5.9.2).

Each test opens a Runtime on a real SQLite file whose model holds an adapter instance pointed
at a fake server — ``OpenAIChatProvider`` with dialect ``openai`` (accepts no reasoning),
``openrouter`` (``reasoning_details``) or ``compatible`` with ``reasoning_input=
"reasoning_content"``, ``OpenAIResponsesProvider`` (replayed ``reasoning`` items) and
``AnthropicProvider`` (signed ``thinking`` blocks) — scripts the server so that turn 1's
answer carries reasoning, sends a second message and reads the wire body of turn 2.

Rules checked for every adapter: (1) the turn-1 assistant message stores the reasoning as the
adapter produced it, byte for byte, also after a restart; (2) turn 2 replays it in the form
the provider accepts (none for dialect ``openai``); (3) ``Reasoning(include=False)`` → no
replay; (4) a ``filter_messages`` hook dropping the message drops its reasoning; (5) details
of another provider's format are never forwarded. Also: a fallback converts per attempt,
and inside one run the tool round's second request replays the tool-calling message's
reasoning (Anthropic, Responses). Conformance cases: C03-038, C03-039, C03-041, C05-016,
C05-038.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from fakes import load_provider_fake
from store_probe import StoreProbe
from threadloom import Agent, Definitions, Runtime, Side, hook
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.providers.anthropic import AnthropicProvider
from threadloom.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from threadloom.records import Message, new_id

# --------------------------------------------------------------------------------------
# The fake servers (tests/providers is no package; its tests import these by file name)


fo = load_provider_fake("fake_openai")
fa = load_provider_fake("fake_anthropic")

# --------------------------------------------------------------------------------------
# What turn 1 returns, what gets stored, what turn 2 must carry

THINK, SIG = "think-1", "sig-1"
SUMMARIES, ENC = ["sum-1", "sum-2"], "enc-1"
REDACTED = "redacted-1"  # an Anthropic redacted_thinking payload (seeded only)
MARKERS = (THINK, SIG, *SUMMARIES, ENC, REDACTED)
ANTHROPIC_FMT = "anthropic-claude-v1"
RESPONSES_FMT = "openai-responses-v1"
SYSTEM = "You are P."

#: OpenRouter's signed detail, merged by the chat adapter from two streamed pieces.
OPENROUTER_DETAIL = {
    "type": "reasoning.text",
    "text": THINK,
    "format": ANTHROPIC_FMT,
    "index": 0,
    "signature": SIG,
}
OPENROUTER_TEXT = (
    '[{"type":"reasoning.text","text":"think-1","format":"anthropic-claude-v1","index":0,'
    '"signature":"sig-1"}]'
)
RESPONSES_TEXT = (
    '[{"type":"reasoning.summary","summary":"sum-1","format":"openai-responses-v1","id":"rs_1",'
    '"index":0},{"type":"reasoning.summary","summary":"sum-2","format":"openai-responses-v1",'
    '"id":"rs_1","index":1},{"type":"reasoning.encrypted","data":"enc-1",'
    '"format":"openai-responses-v1","id":"rs_1","index":2}]'
)
RESPONSES_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": s} for s in SUMMARIES],
    "encrypted_content": ENC,
}
ANTHROPIC_TEXT = (
    '[{"type":"reasoning.text","text":"think-1","signature":"sig-1",'
    '"format":"anthropic-claude-v1","index":0}]'
)
THINKING_BLOCK = {"type": "thinking", "thinking": THINK, "signature": SIG}

CHAT_USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def _chat_stream(*deltas: dict[str, Any]) -> Any:
    return fo.SSEResponse(
        [
            fo.chat_chunk({"role": "assistant", "content": ""}),
            *(fo.chat_chunk(delta) for delta in deltas),
            fo.chat_chunk({"content": "Hello"}),
            fo.chat_chunk({}, finish_reason="stop"),
            fo.chat_chunk(choices=False, usage=CHAT_USAGE),
        ]
    )


def openrouter_reasoned() -> Any:
    """OpenRouter serving a Claude model: ``reasoning`` text and a signed detail, in two
    pieces of one detail (index 0) that the adapter merges."""
    first = {"type": "reasoning.text", "text": "think-", "format": ANTHROPIC_FMT, "index": 0}
    second = {
        "type": "reasoning.text",
        "text": "1",
        "signature": SIG,
        "format": ANTHROPIC_FMT,
        "index": 0,
    }
    return _chat_stream(
        {"reasoning": "think-", "reasoning_details": [first]},
        {"reasoning": "1", "reasoning_details": [second]},
    )


def compatible_reasoned() -> Any:
    """A vLLM/DeepSeek-style server: ``reasoning_content`` text only."""
    return _chat_stream({"reasoning_content": "think-"}, {"reasoning_content": "1"})


def responses_reasoned() -> Any:
    events = fo.ResponsesEvents().created().reasoning("rs_1", SUMMARIES, encrypted=ENC)
    return events.message("Hello").completed().stream()


def responses_text(text: str) -> Any:
    return (
        fo.ResponsesEvents(response_id=f"resp_{text}").created().message(text).completed().stream()
    )


def anthropic_reasoned() -> Any:
    events = [
        fa.message_start(),
        *fa.thinking_block(0, THINK, SIG),
        *fa.text_block(1, "Hel", "lo"),
        fa.message_delta(),
        fa.message_stop(),
    ]
    return fa.Stream(events)


def anthropic_text(text: str) -> Any:
    return fa.Stream(fa.simple_text_stream(text))


def chat_replayed(body: dict[str, Any]) -> list[Any]:
    """Every reasoning field on any Chat Completions message of ``body``."""
    keys = ("reasoning", "reasoning_content", "reasoning_details")
    return [{k: m[k]} for m in body["messages"] for k in keys if k in m]


def responses_replayed(body: dict[str, Any]) -> list[Any]:
    return [item for item in body["input"] if item.get("type") == "reasoning"]


def anthropic_replayed(body: dict[str, Any]) -> list[Any]:
    return [
        block
        for m in body["messages"]
        for block in m["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    ]


def leaked(body: Any) -> list[str]:
    """The reasoning markers found anywhere in a wire body."""
    text = json.dumps(body)
    return [marker for marker in MARKERS if marker in text]


@dataclass(frozen=True)
class Adapter:
    """One adapter under test and what it must do with turn 1's reasoning."""

    id: str
    provider: Callable[[str], Any]
    reasoned: Callable[[], Any]
    text: Callable[[str], Any]
    reasoning_content: str
    reasoning_details: str | None
    asked: dict[str, Any]  # how reasoning is requested (body keys of every request)
    replayed: Callable[[dict[str, Any]], list[Any]]
    replay: list[Any]  # what turn 2 must carry (include=True)

    @property
    def anthropic(self) -> bool:
        return self.id == "anthropic"


def _chat(dialect: str, **options: Any) -> Callable[[str], Any]:
    def make(base_url: str) -> Any:
        return OpenAIChatProvider(api_key="sk-test", base_url=base_url, dialect=dialect, **options)

    return make


ADAPTERS = {
    a.id: a
    for a in (
        Adapter(
            id="openai",
            provider=_chat("openai"),
            reasoned=openrouter_reasoned,  # the adapter keeps whatever the server returns
            text=fo.chat_text_stream,
            reasoning_content=THINK,
            reasoning_details=OPENROUTER_TEXT,
            asked={"reasoning_effort": "low"},
            replayed=chat_replayed,
            replay=[],
        ),
        Adapter(
            id="openrouter",
            provider=_chat("openrouter"),
            reasoned=openrouter_reasoned,
            text=fo.chat_text_stream,
            reasoning_content=THINK,
            reasoning_details=OPENROUTER_TEXT,
            asked={"reasoning": {"effort": "low"}},
            replayed=chat_replayed,
            replay=[{"reasoning_details": [OPENROUTER_DETAIL]}],
        ),
        Adapter(
            id="compatible",
            provider=_chat("compatible", reasoning_input="reasoning_content"),
            reasoned=compatible_reasoned,
            text=fo.chat_text_stream,
            reasoning_content=THINK,
            reasoning_details=None,
            asked={"reasoning_effort": "low"},
            replayed=chat_replayed,
            replay=[{"reasoning_content": THINK}],
        ),
        Adapter(
            id="responses",
            provider=lambda url: OpenAIResponsesProvider(api_key="sk-test", base_url=url),
            reasoned=responses_reasoned,
            text=responses_text,
            reasoning_content="sum-1\n\nsum-2",
            reasoning_details=RESPONSES_TEXT,
            asked={
                "reasoning": {"effort": "low", "summary": "auto"},
                "include": ["reasoning.encrypted_content"],
            },
            replayed=responses_replayed,
            replay=[RESPONSES_ITEM],
        ),
        Adapter(
            id="anthropic",
            provider=lambda url: AnthropicProvider(api_key="sk-test", base_url=url),
            reasoned=anthropic_reasoned,
            text=anthropic_text,
            reasoning_content=THINK,
            reasoning_details=ANTHROPIC_TEXT,
            asked={"thinking": {"type": "enabled", "budget_tokens": 1024}},
            replayed=anthropic_replayed,
            replay=[THINKING_BLOCK],
        ),
    )
}
every_adapter = pytest.mark.parametrize("adapter", list(ADAPTERS.values()), ids=lambda a: a.id)

# --------------------------------------------------------------------------------------
# Harness


class Wire:
    """One fake server: queue its answers, read the bodies it received."""

    def __init__(self, fake: Any) -> None:
        self.fake = fake

    @property
    def base_url(self) -> str:
        return str(self.fake.base_url)

    def answer(self, *responses: Any) -> None:
        for response in responses:
            if isinstance(self.fake, fa.FakeAnthropic):
                self.fake.queue.append(response)
            else:
                self.fake.enqueue(response)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.fake.requests]


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    """Closes runtimes, then providers, then the servers (in reverse order of opening)."""
    async with AsyncExitStack() as opened:
        yield opened


async def serve(stack: AsyncExitStack, anthropic: bool) -> Wire:
    fake = fa.FakeAnthropic() if anthropic else fo.FakeOpenAIServer()
    return Wire(await stack.enter_async_context(fake))


def provider(stack: AsyncExitStack, adapter: Adapter, wire: Wire) -> Any:
    instance = adapter.provider(wire.base_url)
    stack.push_async_callback(instance.aclose)
    return instance


def definitions(
    model: Any,
    *,
    include: bool = True,
    hooks: Sequence[str] = (),
    extra: Sequence[Any] = (),
    models: Sequence[Model] = (),
    tools: Sequence[str] = (),
) -> Definitions:
    """Model M (``model``: a provider instance or a Model), prompt P asking for low effort
    reasoning, and the ai_human agent ``chat`` (side a on P)."""
    return Definitions().add(
        model if isinstance(model, Model) else Model(name="M", provider=model, model="model-1"),
        *models,
        Prompt(
            name="P",
            model="M",
            system=SYSTEM,
            reasoning=Reasoning(effort="low", include=include),
            tools=tuple(tools),
        ),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="Customer"),
            hooks=tuple(hooks),
        ),
        *extra,
    )


async def start(stack: AsyncExitStack, db_url: str, defs: Definitions) -> Runtime:
    runtime = await Runtime.open(db_url, definitions=defs)
    stack.push_async_callback(runtime.close, 0)
    return runtime


async def history(runtime: Runtime, thread_id: str) -> list[Message]:
    state = await runtime.thread(thread_id)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return list(page.messages)


async def turn(runtime: Runtime, thread_id: str, text: str) -> Message:
    """Send ``text``, wait for the run, return the answer (which must have completed)."""
    await runtime.send_message(thread_id, text)
    await runtime.wait_idle(thread_id, timeout=10)
    rows = await history(runtime, thread_id)
    answer = rows[-1]
    assert (answer.role, answer.status) == ("assistant", "completed"), [
        (m.role, m.status, m.content) for m in rows
    ]
    return answer


@dataclass
class TwoTurns:
    runtime: Runtime
    thread_id: str
    wire: Wire
    first: Message  # turn 1's stored answer

    @property
    def body(self) -> dict[str, Any]:
        """Turn 2's wire body."""
        return self.wire.bodies[-1]


async def two_turns(stack: AsyncExitStack, db_url: str, adapter: Adapter, **defs: Any) -> TwoTurns:
    """Turn 1 answered with reasoning, turn 2 with text "Fine"."""
    wire = await serve(stack, adapter.anthropic)
    wire.answer(adapter.reasoned(), adapter.text("Fine"))
    runtime = await start(stack, db_url, definitions(provider(stack, adapter, wire), **defs))
    state = await runtime.create_thread("chat")
    first = await turn(runtime, state.thread_id, "hi")
    second = await turn(runtime, state.thread_id, "again")
    assert second.content == "Fine" and len(wire.bodies) == 2
    return TwoTurns(runtime, state.thread_id, wire, first)


def raw_details(db_url: str, message_id: str) -> bytes | None:
    """The ``reasoning_details`` column as the UTF-8 bytes stored, read by a probe of the
    database (not through the store)."""
    rows = StoreProbe(db_url).rows(
        "SELECT reasoning_details FROM messages WHERE id = ?", (message_id,)
    )
    assert rows
    text: str | None = rows[0][0]
    return None if text is None else text.encode()


# --------------------------------------------------------------------------------------
# Rule 1: persisted as the adapter produced it


@every_adapter
async def test_turn1_reasoning_stored_as_adapter_produced_it_and_after_restart(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """Rule 1 (spec 05 §5.6.1, spec 01 §1.4; the C01-025 check with a real adapter): the
    turn-1 assistant message has ``reasoning_content`` and ``reasoning_details`` exactly as
    the adapter produced them — details as the compact JSON text of the adapter's list, byte
    for byte in the SQLite file — and a new Runtime on the same file reads the same record.
    The request asked for reasoning in the adapter's form (§5.6.3)."""
    wire = await serve(stack, adapter.anthropic)
    wire.answer(adapter.reasoned())
    runtime = await start(stack, db_url, definitions(provider(stack, adapter, wire)))
    state = await runtime.create_thread("chat")
    first = await turn(runtime, state.thread_id, "hi")

    body = wire.bodies[0]
    assert {key: body.get(key) for key in adapter.asked} == adapter.asked
    assert (first.content, first.prompt) == ("Hello", "P")
    assert first.reasoning_content == adapter.reasoning_content
    assert first.reasoning_details == adapter.reasoning_details
    expected = adapter.reasoning_details.encode() if adapter.reasoning_details else None
    assert raw_details(db_url, first.id) == expected

    await runtime.close(drain=0)
    reopened = await start(stack, db_url, definitions(provider(stack, adapter, wire)))
    stored = (await history(reopened, state.thread_id))[-1]
    assert stored.model_dump() == first.model_dump()
    assert raw_details(db_url, first.id) == expected


# --------------------------------------------------------------------------------------
# Rule 2: turn 2 carries the persisted reasoning in the provider's form


async def test_anthropic_turn2_replays_signed_thinking_block_before_text(
    stack: AsyncExitStack, db_url: str
) -> None:
    """Rule 2, Anthropic (§5.6.2, §5.9.2): turn 2's assistant message starts with the
    ``thinking`` block of turn 1 — same text, same signature, verbatim — then its text;
    thinking is enabled for turn 2 too."""
    run = await two_turns(stack, db_url, ADAPTERS["anthropic"])
    body = run.body
    assert body["system"] == SYSTEM
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [THINKING_BLOCK, {"type": "text", "text": "Hello"}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


async def test_responses_turn2_replays_reasoning_item_before_assistant_item(
    stack: AsyncExitStack, db_url: str
) -> None:
    """Rule 2, Responses (§5.8.2, §5.8.3): turn 2's input holds the ``reasoning`` item of
    turn 1 (both summaries and the encrypted content, ``store`` false) immediately before
    the assistant message item it belongs to."""
    run = await two_turns(stack, db_url, ADAPTERS["responses"])
    body = run.body
    assert body["store"] is False
    assert body["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": SYSTEM}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        RESPONSES_ITEM,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]


async def test_openrouter_turn2_sends_reasoning_details_on_assistant(
    stack: AsyncExitStack, db_url: str
) -> None:
    """Rule 2, OpenRouter (§5.6.2): the persisted details travel unchanged as the assistant
    message's ``reasoning_details``; ``reasoning`` is not sent since details were."""
    run = await two_turns(stack, db_url, ADAPTERS["openrouter"])
    assert run.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello", "reasoning_details": [OPENROUTER_DETAIL]},
        {"role": "user", "content": "again"},
    ]


async def test_compatible_turn2_sends_reasoning_content_on_assistant(
    stack: AsyncExitStack, db_url: str
) -> None:
    """Rule 2, dialect ``compatible`` with ``reasoning_input="reasoning_content"`` (§5.6.2):
    the persisted text goes back as the assistant message's ``reasoning_content``."""
    run = await two_turns(stack, db_url, ADAPTERS["compatible"])
    assert run.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello", "reasoning_content": THINK},
        {"role": "user", "content": "again"},
    ]


async def test_c05_016_openai_dialect_turn2_sends_no_reasoning(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C05-016: fake OpenAI chat server; assistant message with reasoning content and
    details; dialect ``openai`` → the wire body's assistant message has neither
    ``reasoning_content``, ``reasoning`` nor ``reasoning_details``. End to end: the message
    with both is turn 1's stored answer; the stored record is not altered."""
    run = await two_turns(stack, db_url, ADAPTERS["openai"])
    assert run.first.reasoning_content == THINK and run.first.reasoning_details
    assert run.body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "again"},
    ]
    assert leaked(run.body) == []
    stored = (await history(run.runtime, run.thread_id))[1]
    assert stored.model_dump() == run.first.model_dump()


# --------------------------------------------------------------------------------------
# Rule 3: reasoning.include = False


@every_adapter
async def test_c03_038_replayed_unless_prompt_include_false(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """C03-038: a stored assistant message with reasoning → the next request's assistant
    message carries it; with ``reasoning.include=False`` → it carries no reasoning.

    Two agents on one model: ``chat`` (prompt P, include defaults to True) and ``quiet``
    (prompt Q, include=False), two turns each. P's turn 2 carries the adapter's replay form
    (dialect ``openai`` accepts none, so there it is empty — §5.6.2); Q's turn 2 carries no
    reasoning at all, although Q still requested reasoning and stored what came back
    (§3.10 rule 6: request settings are independent of replay)."""
    wire = await serve(stack, adapter.anthropic)
    wire.answer(adapter.reasoned(), adapter.text("Fine"), adapter.reasoned(), adapter.text("Ok"))
    quiet = (
        Prompt(
            name="Q", model="M", system=SYSTEM, reasoning=Reasoning(effort="low", include=False)
        ),
        Agent(name="quiet", side_a=Side(prompt="Q", label="Agent"), side_b=Side(label="C")),
    )
    runtime = await start(stack, db_url, definitions(provider(stack, adapter, wire), extra=quiet))
    answers: dict[str, Message] = {}
    for agent in ("chat", "quiet"):
        state = await runtime.create_thread(agent)
        answers[agent] = await turn(runtime, state.thread_id, "hi")
        await turn(runtime, state.thread_id, "again")
    chat_body, quiet_body = wire.bodies[1], wire.bodies[3]

    assert adapter.replayed(chat_body) == adapter.replay
    assert adapter.replayed(quiet_body) == []
    assert leaked(quiet_body) == []
    assert "Hello" in json.dumps(quiet_body)  # the message itself is still there
    assert {key: quiet_body.get(key) for key in adapter.asked} == adapter.asked
    assert answers["quiet"].reasoning_content == adapter.reasoning_content
    assert answers["quiet"].reasoning_details == adapter.reasoning_details


# --------------------------------------------------------------------------------------
# Rule 4: filter_messages drops the message, and its reasoning with it


@hook("filter_messages")
def drop_reasoned(state: Any, messages: list[Message]) -> list[Message]:
    """Drop every message that has reasoning."""
    return [m for m in messages if not (m.reasoning_content or m.reasoning_details)]


@every_adapter
async def test_c03_039_filter_messages_drop_removes_its_reasoning(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """C03-039: ``filter_messages`` drops the message with reasoning → no reasoning of it is
    in the request. Turn 2 carries neither the message nor any of its reasoning; the
    stored message keeps its reasoning (the hook changes the request only)."""
    run = await two_turns(stack, db_url, adapter, hooks=("drop_reasoned",), extra=(drop_reasoned,))
    assert adapter.replayed(run.body) == []
    assert leaked(run.body) == []
    assert "Hello" not in json.dumps(run.body)
    assert "again" in json.dumps(run.body)
    stored = (await history(run.runtime, run.thread_id))[1]
    assert stored.reasoning_content == adapter.reasoning_content
    assert stored.reasoning_details == adapter.reasoning_details


# --------------------------------------------------------------------------------------
# Rule 5: details of another provider's format are never forwarded

#: A signed thinking block and a redacted one; the latter carries an ``id`` (as details
#: relayed by OpenRouter may), so only the ``format`` filter keeps it from becoming a
#: Responses ``reasoning`` item.
ANTHROPIC_DETAILS = json.dumps(
    [
        {"type": "reasoning.text", "text": THINK, "signature": SIG, "format": ANTHROPIC_FMT},
        {"type": "reasoning.encrypted", "data": REDACTED, "format": ANTHROPIC_FMT, "id": "rd_1"},
    ],
    separators=(",", ":"),
)
RESPONSES_DETAILS = json.dumps(
    [
        {"type": "reasoning.summary", "summary": "sum-1", "format": RESPONSES_FMT, "id": "rs_9"},
        {"type": "reasoning.encrypted", "data": ENC, "format": RESPONSES_FMT, "id": "rs_9"},
    ],
    separators=(",", ":"),
)


async def seeded_turn(
    stack: AsyncExitStack, db_url: str, adapter: Adapter, details: str
) -> dict[str, Any]:
    """A thread holding user "q" and a completed assistant "A" (reasoning "think-1",
    ``details``) written through the store; send "again" and return the wire body. The
    seeded record must be unchanged afterwards."""
    wire = await serve(stack, adapter.anthropic)
    wire.answer(adapter.text("Fine"))
    runtime = await start(stack, db_url, definitions(provider(stack, adapter, wire)))
    state = await runtime.create_thread("chat")
    tid = state.thread_id
    await runtime.store.insert_message(tid, Message(id=new_id(), role="user", content="q"))
    seeded, _ = await runtime.store.insert_message(
        tid,
        Message(
            id=new_id(),
            role="assistant",
            content="A",
            name="Agent",
            prompt="P",
            status="completed",
            reasoning_content=THINK,
            reasoning_details=details,
        ),
    )
    assert (await turn(runtime, tid, "again")).content == "Fine"
    after = await runtime.store.get_message(tid, seeded.id)
    assert after is not None and after.model_dump() == seeded.model_dump()
    assert raw_details(db_url, seeded.id) == details.encode()
    [body] = wire.bodies
    return body


async def test_c03_041_openai_dialect_never_sends_anthropic_details(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C03-041: stored ``reasoning_details`` with ``format: "anthropic-claude-v1"``, request
    served by the ``openai`` adapter (dialect ``openai``) → the wire request carries no
    reasoning details (nor any other reasoning); the stored text is unchanged."""
    body = await seeded_turn(stack, db_url, ADAPTERS["openai"], ANTHROPIC_DETAILS)
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "again"},
    ]
    assert leaked(body) == []


async def test_responses_never_sends_anthropic_details(stack: AsyncExitStack, db_url: str) -> None:
    """Rule 5, Responses (§5.6.2: only ``openai-responses-v1`` entries become items): a
    stored message with Anthropic details gets no ``reasoning`` item, and its text is not
    sent either; the stored text is unchanged."""
    body = await seeded_turn(stack, db_url, ADAPTERS["responses"], ANTHROPIC_DETAILS)
    assert body["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": SYSTEM}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]
    assert leaked(body) == []


async def test_anthropic_never_sends_responses_details(stack: AsyncExitStack, db_url: str) -> None:
    """Rule 5, Anthropic (§5.6.2: only ``anthropic-claude-v1`` entries become blocks): a
    stored message with ``openai-responses-v1`` details (a summary and encrypted content)
    gets no ``thinking`` / ``redacted_thinking`` block and no reasoning text; the stored
    text is unchanged."""
    body = await seeded_turn(stack, db_url, ADAPTERS["anthropic"], RESPONSES_DETAILS)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
    ]
    assert leaked(body) == []


# --------------------------------------------------------------------------------------
# Per-attempt conversion across a fallback


async def test_c05_038_fallback_converts_reasoning_per_attempt(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C05-038: primary Anthropic model fails, fallback OpenAI chat model (dialect
    ``openai``) serves the request → the fallback's wire body contains no reasoning while
    the primary's request contained thinking blocks (per-attempt conversion).

    Turn 1 is served by Anthropic (thinking "think-1" signed "sig-1"); in turn 2 Anthropic
    answers 529 overloaded (``max_attempts=1``, so no retry) and the fallback answers."""
    claude_wire = await serve(stack, anthropic=True)
    openai_wire = await serve(stack, anthropic=False)
    claude_wire.answer(anthropic_reasoned())
    claude_wire.fake.error(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    openai_wire.answer(fo.chat_text_stream("From fallback"))
    claude = provider(stack, ADAPTERS["anthropic"], claude_wire)
    gpt = provider(stack, ADAPTERS["openai"], openai_wire)
    defs = definitions(
        Model(name="M", provider=claude, model="claude-test", fallbacks=("O",), max_attempts=1),
        models=[Model(name="O", provider=gpt, model="gpt-fake")],
    )
    runtime = await start(stack, db_url, defs)
    state = await runtime.create_thread("chat")
    first = await turn(runtime, state.thread_id, "hi")
    assert first.reasoning_details == ANTHROPIC_TEXT

    second = await turn(runtime, state.thread_id, "again")
    assert second.content == "From fallback"
    primary = claude_wire.bodies[1]
    assert primary["messages"][1] == {
        "role": "assistant",
        "content": [THINKING_BLOCK, {"type": "text", "text": "Hello"}],
    }
    [fallback] = openai_wire.bodies
    assert fallback["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "again"},
    ]
    assert leaked(fallback) == []
    stored = (await history(runtime, state.thread_id))[1]
    assert stored.model_dump() == first.model_dump()


# --------------------------------------------------------------------------------------
# Inside one run: the tool round's second request replays the tool-calling message's
# reasoning (the APIs that take reasoning back require it there)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def tool_round(
    stack: AsyncExitStack, db_url: str, adapter: Adapter, first: Any
) -> tuple[Runtime, str, Wire]:
    """One run: ``first`` (reasoning + a ``lookup`` call), the tool, then text "done"."""
    wire = await serve(stack, adapter.anthropic)
    wire.answer(first, adapter.text("done"))
    defs = definitions(provider(stack, adapter, wire), tools=["lookup"], extra=[lookup])
    runtime = await start(stack, db_url, defs)
    state = await runtime.create_thread("chat")
    assert (await turn(runtime, state.thread_id, "hi")).content == "done"
    return runtime, state.thread_id, wire


async def test_anthropic_tool_round_replays_thinking_and_keeps_it_enabled(
    stack: AsyncExitStack, db_url: str
) -> None:
    """§5.9.2: the request answering a tool call replays the signed thinking block first in
    the tool-calling assistant message, so thinking stays enabled (no
    ``_metadata.thinkingDisabled`` in the logged request); the tool-calling message stores
    the thinking as produced."""
    events = [
        fa.message_start(),
        *fa.thinking_block(0, THINK, SIG),
        *fa.tool_use_block(1, "toolu_1", "lookup", '{"q":', '"x"}'),
        fa.message_delta("tool_use"),
        fa.message_stop(),
    ]
    runtime, tid, wire = await tool_round(stack, db_url, ADAPTERS["anthropic"], fa.Stream(events))
    rows = await history(runtime, tid)
    calling = rows[1]
    assert calling.tool_calls and calling.reasoning_details == (
        '[{"type":"reasoning.text","text":"think-1","signature":"sig-1",'
        '"format":"anthropic-claude-v1","index":0}]'
    )
    body = wire.bodies[1]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                THINKING_BLOCK,
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "found x"}],
                    "is_error": False,
                }
            ],
        },
    ]
    logs = await runtime.store.list_logs(tid, limit=None)
    bodies = [json.loads(log.request_body) for log in logs if log.request_body]
    assert len(bodies) == 2
    assert all("thinkingDisabled" not in b["_metadata"] for b in bodies)


async def test_responses_tool_round_replays_reasoning_item_before_function_call(
    stack: AsyncExitStack, db_url: str
) -> None:
    """§5.8.2, §5.8.3: the request answering a function call replays the reasoning item
    immediately before the ``function_call`` item it produced (with its item id), followed
    by the ``function_call_output``."""
    first = (
        fo.ResponsesEvents()
        .created()
        .reasoning("rs_1", ["sum-1"], encrypted=ENC)
        .function_call("fc_1", "call_1", "lookup", ['{"q":', '"x"}'])
        .completed()
        .stream()
    )
    _, _, wire = await tool_round(stack, db_url, ADAPTERS["responses"], first)
    assert wire.bodies[1]["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": SYSTEM}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "sum-1"}],
            "encrypted_content": ENC,
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"q":"x"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "found x"},
    ]
