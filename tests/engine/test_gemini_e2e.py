"""The Gemini adapter end to end (spec 05 §5.11, C05-119…C05-121): the real engine on
both stores, the real ``google-genai`` SDK, the local fake Gemini server of
``tests/providers/fake_gemini.py`` (which refuses requests that break the documented
function-calling and thought-signature rules).

A thread whose prompt offers two tools: Gemini 3 answers with two parallel calls (the
signature on the first), the engine runs the tools and sends the results back — the
fake accepts the request only if the signature is on the call that carried it — then a
text answer. Checked: what is stored, what is replayed on a later turn and after a
restart, the log rows' usage and cost (priced from the ``genai-prices`` catalog, since
the model declares no prices), and a thread that moves from Anthropic to Gemini.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fakes import load_provider_fake
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.providers.anthropic import AnthropicProvider
from threadloom.providers.gemini import GeminiProvider
from threadloom.records import Message

fg = load_provider_fake("fake_gemini")
fa = load_provider_fake("fake_anthropic")

MODEL = "gemini-3-flash-preview"
SIG = base64.b64encode(b"\xfb\xff-gemini-signature-\xfe").decode()


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def clock(city: str) -> str:
    """The time in a city."""
    return f"noon in {city}"


def definitions(*models: Model, model: str = "G") -> Definitions:
    return Definitions().add(
        *models,
        weather,
        clock,
        Prompt(
            name="P",
            model=model,
            system="You are P.",
            reasoning=Reasoning(effort="low"),
            tools=("weather", "clock"),
        ),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
    )


@pytest.fixture
async def fake() -> AsyncIterator[Any]:
    async with fg.FakeGemini() as server:
        yield server


def parallel_calls() -> list[dict[str, Any]]:
    return [
        fg.chunk(fg.thought_part("Two lookups.")),
        fg.chunk(
            fg.call_part("weather", {"city": "Paris"}, id="fc-1", signature=SIG),
            fg.call_part("clock", {"city": "Paris"}, id="fc-2"),
        ),
        fg.chunk(
            finish="STOP",
            usage_metadata=fg.usage(prompt=1000, candidates=100, thoughts=50, cached=200),
        ),
    ]


async def history(runtime: Runtime, thread_id: str) -> list[Message]:
    state = await runtime.thread(thread_id)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return list(page.messages)


async def turn(runtime: Runtime, thread_id: str, text: str) -> list[Message]:
    await runtime.send_message(thread_id, text)
    await runtime.wait_idle(thread_id, timeout=20)
    rows = await history(runtime, thread_id)
    assert (rows[-1].role, rows[-1].status) == ("assistant", "completed"), [
        (m.role, m.status, m.content) for m in rows
    ]
    return rows


async def open_runtime(db_url: str, fake: Any, defs: Definitions, **extra: Any) -> Runtime:
    providers = {"gemini": GeminiProvider(api_key="gm-test", base_url=fake.base_url), **extra}
    return await Runtime.open(db_url, definitions=defs, providers=providers)


async def test_c05_119_tool_round_replays_the_signature_and_stores_it(
    db_url: str, fake: Any
) -> None:
    fake.stream(parallel_calls())
    fake.stream(fg.text_stream("Sunny, noon."))
    defs = definitions(Model(name="G", provider="gemini", model=MODEL))
    runtime = await open_runtime(db_url, fake, defs)
    try:
        state = await runtime.create_thread("chat")
        rows = await turn(runtime, state.thread_id, "Paris?")
    finally:
        await runtime.close()
    assert fake.rejected == [] and len(fake.requests) == 2
    calling = next(m for m in rows if m.role == "assistant" and m.tool_calls)
    assert calling.reasoning_content == "Two lookups."
    assert json.loads(calling.reasoning_details or "null") == [
        {
            "type": "reasoning.text",
            "text": "Two lookups.",
            "format": "google-gemini-v1",
            "index": 0,
        },
        {
            "type": "reasoning.encrypted",
            "data": SIG,
            "format": "google-gemini-v1",
            "id": "fc-1",
            "index": 1,
        },
    ]
    assert [(m.role, m.content) for m in rows if m.role == "tool"] == [
        ("tool", "sunny in Paris"),
        ("tool", "noon in Paris"),
    ]
    model_turn = fake.last_body["contents"][1]
    first, second = model_turn["parts"]
    assert first["functionCall"]["name"] == "weather"
    assert fg.sig_bytes(first["thoughtSignature"]) == base64.b64decode(SIG)
    assert "thoughtSignature" not in second
    body = fake.requests[0].wire
    assert body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingLevel": "LOW",
    }


async def test_c05_120_usage_and_catalog_cost_in_the_log(db_url: str, fake: Any) -> None:
    fake.stream(parallel_calls())
    fake.stream(fg.text_stream("Sunny, noon."))
    defs = definitions(Model(name="G", provider="gemini", model=MODEL))
    runtime = await open_runtime(db_url, fake, defs)
    try:
        state = await runtime.create_thread("chat")
        await turn(runtime, state.thread_id, "Paris?")
        logs = await runtime.store.list_logs(state.thread_id, limit=None)
    finally:
        await runtime.close()
    llm = [row for row in logs if row.kind is None]
    assert len(llm) == 2, [(r.kind, r.input_tokens, r.is_complete) for r in logs]
    first = next(row for row in llm if row.reasoning_tokens)  # the tool-calling request
    assert (first.provider, first.model) == ("gemini", "G")
    assert (first.input_tokens, first.cached_tokens) == (1000, 200)
    assert (first.output_tokens, first.reasoning_tokens, first.total_tokens) == (150, 50, 1150)
    # genai-prices: gemini-3-flash-preview at Google, $0.50 / $3.00 per Mtok, cache $0.05
    assert first.cost_input == pytest.approx(800 * 0.5 / 1e6)
    assert first.cost_cached == pytest.approx(200 * 0.05 / 1e6)
    assert first.cost_output == pytest.approx(150 * 3.0 / 1e6)
    assert first.cost_total == pytest.approx((800 * 0.5 + 200 * 0.05 + 150 * 3.0) / 1e6)


async def test_c05_121_replayed_on_a_later_turn_after_a_restart(db_url: str, fake: Any) -> None:
    """Signatures outside the current turn are not validated, but still sent back as
    received (the docs' general rule), also after the runtime restarts."""
    fake.stream(parallel_calls())
    fake.stream(fg.text_stream("Sunny, noon."))
    defs = definitions(Model(name="G", provider="gemini", model=MODEL))
    runtime = await open_runtime(db_url, fake, defs)
    try:
        state = await runtime.create_thread("chat")
        await turn(runtime, state.thread_id, "Paris?")
    finally:
        await runtime.close()
    fake.stream(fg.text_stream("Still sunny."))
    runtime = await open_runtime(db_url, fake, defs)
    try:
        await turn(runtime, state.thread_id, "and now?")
    finally:
        await runtime.close()
    assert fake.rejected == []
    contents = fake.last_body["contents"]
    signed = [p for c in contents for p in c["parts"] if "thoughtSignature" in p]
    assert [p["functionCall"]["id"] for p in signed] == ["fc-1"]
    assert fg.sig_bytes(signed[0]["thoughtSignature"]) == base64.b64decode(SIG)


async def test_c05_105_a_thread_moves_from_anthropic_to_gemini(db_url: str, fake: Any) -> None:
    """The current turn began on Anthropic (a signed thinking block, a tool call) and
    continues on Gemini after the prompt's model changes: Gemini gets no Anthropic data,
    and the dummy signature on the carried-over call, so the fake accepts it."""
    async with fa.FakeAnthropic() as anthropic_fake:
        anthropic_fake.stream(
            [
                fa.message_start(),
                *fa.thinking_block(0, "th", "anthropic-sig"),
                *fa.tool_use_block(1, "toolu_1", "weather", '{"city":"Rome"}'),
                fa.message_delta("tool_use", 10),
                fa.message_stop(),
            ]
        )
        claude = AnthropicProvider(api_key="sk-test", base_url=anthropic_fake.base_url)
        fake.stream(fg.text_stream("Rome is sunny."))
        models = (
            Model(
                name="C",
                provider="anthropic",
                model="claude-test",
                fallbacks=("G",),
                max_attempts=1,
            ),
            Model(name="G", provider="gemini", model=MODEL),
        )
        # The tool result is sent to Gemini: the engine's request after the tool round
        # goes to the prompt's model, switched by a fallback from Claude on that request.
        anthropic_fake.error(
            529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
        )
        defs = Definitions().add(
            *models,
            weather,
            clock,
            Prompt(
                name="P",
                model="C",
                system="You are P.",
                reasoning=Reasoning(effort="low"),
                tools=("weather", "clock"),
            ),
            Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
        )
        runtime = await open_runtime(db_url, fake, defs, anthropic=claude)
        try:
            state = await runtime.create_thread("chat")
            await turn(runtime, state.thread_id, "Rome?")
        finally:
            await runtime.close()
    assert fake.rejected == [] and len(fake.requests) == 1
    contents = fake.last_body["contents"]
    assert contents[1]["parts"] == [
        {
            "functionCall": {"id": "toolu_1", "name": "weather", "args": {"city": "Rome"}},
            "thoughtSignature": "skip_thought_signature_validator",
        }
    ]
    assert contents[2]["parts"] == [
        {
            "functionResponse": {
                "id": "toolu_1",
                "name": "weather",
                "response": {"output": "sunny in Rome"},
            }
        }
    ]
    assert "anthropic-sig" not in str(fake.requests[-1].body)
