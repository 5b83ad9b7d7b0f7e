"""One thread across providers (issue 39 item 4, spec 05 §5.13, C05-185 … C05-192) and the
fallback path with the real adapters (spec 04 §4.12.3, C04-147, C04-148).

A real engine on both stores; the real SDK adapters against the fake HTTP servers of
``tests/providers``, each of which refuses (HTTP 400, in the API's words) a request that
breaks its provider's documented rules — tool-call/result pairing, the fields a block or
item may have, reasoning item order, thought signatures and thinking-block signatures only
where they were issued (``fake_openai.py``, ``fake_anthropic.py``, ``fake_gemini.py``).

The thread: the prompt's model changes between turns (the runtime is reopened on the same
store with the prompt pointing at another model, as a team does when it changes a model):
OpenAI chat → Anthropic → Gemini → OpenAI Responses → OpenAI chat → Anthropic → Gemini →
OpenAI Responses. Every turn: the model reasons and calls tools, the engine runs them, the
same model reasons and answers. Run with ``-s`` to see the transcript.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from fakes import load_provider_fake
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.providers.anthropic import AnthropicProvider
from threadloom.providers.gemini import GeminiProvider
from threadloom.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from threadloom.records import Message

fo = load_provider_fake("fake_openai")
fa = load_provider_fake("fake_anthropic")
fg = load_provider_fake("fake_gemini")

GEMINI_MODEL = "gemini-3-flash-preview"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def weigh(q: str) -> str:
    """Weigh something."""
    return f"{q} weighs 3 kg"


def gemini_sig(label: str) -> str:
    return base64.b64encode(f"gemini-signature-{label}".encode()).decode()


def anthropic_sig(label: str) -> str:
    return f"anthropic-signature-{label}"


def openai_enc(label: str) -> str:
    return f"openai-encrypted-{label}"


# -- what each provider answers in a turn (a reasoned tool round, then a reasoned text) ---


def chat_turn(label: str) -> list[Any]:
    """OpenAI Chat Completions: two parallel calls, then text (the API returns no reasoning
    text, only the reasoning token count)."""
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 20,
        "total_tokens": 70,
        "completion_tokens_details": {"reasoning_tokens": 12},
    }

    def call(index: int, name: str) -> dict[str, Any]:
        start = {"index": index, "id": f"call_{label}_{index}", "type": "function"}
        return {"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]}

    def args(index: int, text: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}

    calls = fo.SSEResponse(
        [
            fo.chat_chunk({"role": "assistant", "content": None}),
            fo.chat_chunk(call(0, "lookup")),
            fo.chat_chunk(args(0, f'{{"q": "{label}-a"}}')),
            fo.chat_chunk(call(1, "weigh")),
            fo.chat_chunk(args(1, f'{{"q": "{label}-b"}}')),
            fo.chat_chunk({}, finish_reason="tool_calls"),
            fo.chat_chunk(choices=False, usage=usage),
        ]
    )
    return [calls, fo.chat_text_stream(f"chat answer {label}", usage=usage)]


def anthropic_turn(label: str) -> list[Any]:
    """Anthropic: signed thinking and two tool uses, then signed thinking and text."""
    calls = fa.Stream(
        [
            fa.message_start(),
            *fa.thinking_block(0, f"thinking {label}", anthropic_sig(f"{label}-1")),
            *fa.tool_use_block(1, f"toolu_{label}_1", "lookup", f'{{"q": "{label}-a"}}'),
            *fa.tool_use_block(2, f"toolu_{label}_2", "weigh", f'{{"q": "{label}-b"}}'),
            fa.message_delta("tool_use"),
            fa.message_stop(),
        ]
    )
    text = fa.Stream(
        [
            fa.message_start(),
            *fa.thinking_block(0, f"concluding {label}", anthropic_sig(f"{label}-2")),
            *fa.text_block(1, f"claude answer {label}"),
            fa.message_delta(),
            fa.message_stop(),
        ]
    )
    return [calls, text]


def gemini_turn(label: str) -> list[Any]:
    """Gemini 3: a thought summary and two parallel calls (the signature on the first), then
    text whose signature is on its last part."""
    calls = [
        fg.chunk(fg.thought_part(f"gemini thinks {label}")),
        fg.chunk(
            fg.call_part(
                "lookup",
                {"q": f"{label}-a"},
                id=f"fc-{label}-1",
                signature=gemini_sig(f"{label}-1"),
            ),
            fg.call_part("weigh", {"q": f"{label}-b"}, id=f"fc-{label}-2"),
        ),
        fg.chunk(finish="STOP", usage_metadata=fg.usage(prompt=60, candidates=20, thoughts=9)),
    ]
    text = [
        fg.chunk(fg.text_part(f"gemini answer {label}")),
        fg.chunk(
            fg.text_part("", signature=gemini_sig(f"{label}-2")),
            finish="STOP",
            usage_metadata=fg.usage(prompt=80, candidates=10, thoughts=4),
        ),
    ]
    return [calls, text]


def responses_turn(label: str) -> list[Any]:
    """OpenAI Responses: a reasoning item (summary, encrypted) and two calls, then a
    reasoning item and the message."""
    calls = fo.ResponsesEvents(response_id=f"resp_{label}_1").created()
    calls.reasoning(
        f"rs_{label}_1", [f"responses reasons {label}"], encrypted=openai_enc(f"{label}-1")
    )
    calls.function_call(f"fc_{label}_1", f"call_r{label}_1", "lookup", [f'{{"q": "{label}-a"}}'])
    calls.function_call(f"fc_{label}_2", f"call_r{label}_2", "weigh", [f'{{"q": "{label}-b"}}'])
    text = fo.ResponsesEvents(response_id=f"resp_{label}_2").created()
    text.reasoning(
        f"rs_{label}_2", [f"responses concludes {label}"], encrypted=openai_enc(f"{label}-2")
    )
    text.message(f"responses answer {label}", item_id=f"msg_{label}")
    return [calls.completed().stream(), text.completed().stream()]


# -- the harness ---------------------------------------------------------------------------


@dataclass
class Fakes:
    chat: Any
    anthropic: Any
    gemini: Any
    responses: Any
    providers: dict[str, Any] = field(default_factory=dict)

    def queue(self, kind: str, answers: list[Any]) -> None:
        for answer in answers:
            if kind == "anthropic":
                self.anthropic.queue.append(answer)
            elif kind == "gemini":
                self.gemini.stream(answer)
            else:
                getattr(self, kind).enqueue(answer)

    def rejected(self) -> dict[str, list[str]]:
        fakes = {"chat": self.chat, "anthropic": self.anthropic, "gemini": self.gemini}
        fakes["responses"] = self.responses
        return {name: fake.rejected for name, fake in fakes.items() if fake.rejected}

    def bodies(self, kind: str) -> list[Any]:
        if kind == "gemini":
            return [r.wire for r in self.gemini.requests]
        return [r.body for r in getattr(self, kind).requests]


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    async with AsyncExitStack() as stack:
        chat = await stack.enter_async_context(fo.FakeOpenAIServer(openai_only=True))
        responses = await stack.enter_async_context(fo.FakeOpenAIServer(verify_issued=True))
        anthropic = await stack.enter_async_context(fa.FakeAnthropic(verify_signatures=True))
        gemini = await stack.enter_async_context(fg.FakeGemini())
        found = Fakes(chat, anthropic, gemini, responses)
        found.providers = {
            "chat": OpenAIChatProvider(api_key="sk-test", base_url=chat.base_url, dialect="openai"),
            "responses": OpenAIResponsesProvider(api_key="sk-test", base_url=responses.base_url),
            "anthropic": AnthropicProvider(api_key="sk-test", base_url=anthropic.base_url),
            "gemini": GeminiProvider(api_key="gm-test", base_url=gemini.base_url),
        }
        for provider in found.providers.values():
            stack.push_async_callback(provider.aclose)
        yield found


MODEL_IDS = {
    "chat": "gpt-5-mini",
    "responses": "gpt-5-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": GEMINI_MODEL,
}


def models(fakes: Fakes) -> list[Model]:
    return [
        Model(name=kind, provider=provider, model=MODEL_IDS[kind], max_attempts=1)
        for kind, provider in fakes.providers.items()
    ]


def definitions(fakes: Fakes, model: str, extra: tuple[Model, ...] = ()) -> Definitions:
    named = {m.name: m for m in (*models(fakes), *extra)}
    return Definitions().add(
        *named.values(),
        lookup,
        weigh,
        Prompt(
            name="P",
            model=model,
            system="You are P.",
            reasoning=Reasoning(effort="low"),
            tools=("lookup", "weigh"),
        ),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
    )


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


ANSWERS: dict[str, Callable[[str], list[Any]]] = {
    "chat": chat_turn,
    "anthropic": anthropic_turn,
    "gemini": gemini_turn,
    "responses": responses_turn,
}
ROUTE = ["chat", "anthropic", "gemini", "responses", "chat", "anthropic", "gemini", "responses"]

#: What each provider issues, and who may receive it back.
FOREIGN = {
    "chat": (
        "anthropic-signature-",
        "openai-encrypted-",
        "gemini thinks",
        "thinking ",
        "concluding ",
        "responses reasons",
    ),
    "anthropic": ("openai-encrypted-", "responses reasons", "gemini thinks", "rs_"),
    "gemini": (
        "anthropic-signature-",
        "openai-encrypted-",
        "responses reasons",
        "rs_",
        "thinking ",
        "concluding ",
    ),
    "responses": ("anthropic-signature-", "gemini thinks", "thinking ", "concluding "),
}


def leaks(kind: str, body: Any) -> list[str]:
    """Another provider's reasoning found anywhere in a request ``kind`` received."""
    text = json.dumps(body)
    found = [marker for marker in FOREIGN[kind] if marker in text]
    if kind != "gemini":
        found += [
            f"gemini signature {label}"
            for label in range(len(ROUTE))
            for n in (1, 2)
            if gemini_sig(f"{label}-{n}") in text
        ]
    return found


async def transcript(runtime: Runtime, thread_id: str) -> str:
    """The thread as the lead pastes it: each message, who served it, its reasoning."""
    rows = {r.id: r for r in await runtime.store.list_logs(thread_id)}
    lines = []
    for m in await history(runtime, thread_id):
        if m.role == "user":
            lines.append(f"user: {m.content}")
        elif m.role == "tool":
            lines.append(f"  tool {m.tool_call_id}: {m.content}")
        else:
            row = rows.get(m.log_id or "")
            served = f"{row.model} ({row.provider})" if row is not None else "?"
            if row is not None and row.reasoning_tokens:
                served += f" {row.reasoning_tokens} reasoning tokens"
            reasoning = (m.reasoning_content or "").replace("\n", " ")
            kinds = sorted({d.get("format", "?") for d in json.loads(m.reasoning_details or "[]")})
            calls = ", ".join(
                f"{c['function']['name']}#{c['id']}" for c in json.loads(m.tool_calls or "[]")
            )
            lines.append(
                f"assistant [{served}]"
                + (f" reasoning={reasoning!r}" if reasoning else "")
                + (f" details={kinds}" if kinds else "")
                + (f" calls: {calls}" if calls else "")
                + (f" text: {m.content!r}" if m.content else "")
            )
    return "\n".join(lines)


# -- the thread ------------------------------------------------------------------------------


async def test_c05_185_c05_186_c05_187_c05_188_one_thread_across_four_providers(
    db_url: str, fakes: Fakes
) -> None:
    thread_id = ""
    for step, kind in enumerate(ROUTE):
        fakes.queue(kind, ANSWERS[kind](str(step)))
        runtime = await Runtime.open(db_url, definitions=definitions(fakes, kind))
        try:
            if not thread_id:
                thread_id = (await runtime.create_thread("chat")).thread_id
            rows = await turn(runtime, thread_id, f"step {step} on {kind}")
            assert fakes.rejected() == {}, (kind, fakes.rejected())
            answer = rows[-1]
            assert answer.content is not None and f"answer {step}" in answer.content
            calls = rows[-4]
            assert calls.role == "assistant" and len(json.loads(calls.tool_calls or "[]")) == 2
            assert [m.role for m in rows[-3:-1]] == ["tool", "tool"]
            if step == len(ROUTE) - 1:
                text = await transcript(runtime, thread_id)
        finally:
            await runtime.close()
    print("\n--- cross-provider transcript ---\n" + text + "\n---")

    # C05-185: every request was accepted, two per turn, on the provider of that turn
    assert fakes.rejected() == {}
    counts = {kind: ROUTE.count(kind) * 2 for kind in ANSWERS}
    assert {k: len(fakes.bodies(k)) for k in ANSWERS} == counts

    # C05-186: no provider received another's reasoning (signatures, encrypted items, text)
    for kind in ANSWERS:
        for body in fakes.bodies(kind):
            assert leaks(kind, body) == [], (kind, leaks(kind, body))

    # C05-187: back on a provider, its own reasoning of the earlier turn is replayed as issued
    anthropic_back = json.dumps(fakes.bodies("anthropic")[-1])
    assert anthropic_sig("1-1") in anthropic_back and anthropic_sig("1-2") in anthropic_back
    gemini_back = fakes.bodies("gemini")[-1]
    signed = [
        part
        for content in gemini_back["contents"]
        for part in content["parts"]
        if "thoughtSignature" in part and part["thoughtSignature"] not in fg.DUMMY_SIGNATURES
    ]
    assert {fg.sig_bytes(p["thoughtSignature"]) for p in signed} >= {
        fg.sig_bytes(gemini_sig("2-1")),
        fg.sig_bytes(gemini_sig("2-2")),
    }
    responses_back = fakes.bodies("responses")[-1]
    replayed = [i["id"] for i in responses_back["input"] if i.get("type") == "reasoning"]
    assert {"rs_3_1", "rs_3_2", "rs_7_1"} <= set(replayed)

    # C05-188: inside each tool round the calling message's own reasoning came first
    for body in fakes.bodies("anthropic")[1::2]:  # each turn's second request
        assistant = body["messages"][-2]
        assert assistant["content"][0]["type"] == "thinking", assistant
        assert "_metadata" not in json.dumps(body)
    for body in fakes.bodies("responses")[1::2]:
        kinds = [i.get("type") for i in body["input"][-5:]]
        assert (
            kinds == ["reasoning", "function_call", "function_call"] + ["function_call_output"] * 2
        )


# -- the fakes refuse what the providers refuse ---------------------------------------------


async def test_c05_189_the_fakes_refuse_unpaired_tool_calls_and_results() -> None:
    """Each fake answers 400 for a call left unanswered and a result that answers no call
    (OpenAI chat, Responses, Anthropic; Gemini's own checks are C05-119)."""
    from fake_anthropic import Invalid as AnthropicInvalid
    from fake_anthropic import check_messages
    from fake_openai import Invalid as OpenAIInvalid
    from fake_openai import check_chat, check_responses

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    unanswered = [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]
    with pytest.raises(OpenAIInvalid, match="did not have response messages: c1"):
        check_chat({"messages": [*unanswered, {"role": "user", "content": "?"}]})
    with pytest.raises(OpenAIInvalid, match="must be a response to a preceeding message"):
        check_chat({"messages": [{"role": "tool", "tool_call_id": "c9", "content": "r"}]})
    check_chat({"messages": [*unanswered, {"role": "tool", "tool_call_id": "c1", "content": "r"}]})

    fc = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    with pytest.raises(OpenAIInvalid, match="No tool output found for function call c1"):
        check_responses({"input": [fc]}, {}, {})
    output = {"type": "function_call_output", "call_id": "c2", "output": "r"}
    with pytest.raises(OpenAIInvalid, match="No tool call found for function call output"):
        check_responses({"input": [fc, output]}, {}, {})

    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}
    asked = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [use]}]
    with pytest.raises(AnthropicInvalid, match="`tool_use` ids were found without"):
        check_messages({"messages": [*asked, {"role": "user", "content": "more"}]})
    with pytest.raises(AnthropicInvalid, match="unexpected `tool_use_id`"):
        check_messages({"messages": [{"role": "user", "content": [result]}]})
    late = [{"type": "text", "text": "and"}, result]
    with pytest.raises(AnthropicInvalid, match="must come first"):
        check_messages({"messages": [*asked, {"role": "user", "content": late}]})
    check_messages({"messages": [*asked, {"role": "user", "content": [result]}]})


async def test_c05_190_the_fakes_refuse_reasoning_they_did_not_issue() -> None:
    """Anthropic: a thinking block signed elsewhere, an unsigned one, a Gemini
    ``thoughtSignature`` field; with thinking on, a tool round whose assistant message does
    not start with thinking. Responses: a reasoning item not issued, its encrypted content
    changed, an issued call sent without its reasoning item, a reasoning item with nothing
    after it. OpenAI chat (api.openai.com): reasoning fields on a message."""
    from fake_anthropic import Invalid as AnthropicInvalid
    from fake_anthropic import check_messages
    from fake_openai import Invalid as OpenAIInvalid
    from fake_openai import check_chat, check_responses

    def claude(*blocks: dict[str, Any], thinking: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": list(blocks)},
                {"role": "user", "content": "more"},
            ]
        }
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
        return body

    issued = {"sig-ok": "t"}
    good = {"type": "thinking", "thinking": "t", "signature": "sig-ok"}
    check_messages(claude(good, {"type": "text", "text": "a"}), issued, set())
    with pytest.raises(AnthropicInvalid, match="Invalid `signature` in `thinking` block"):
        check_messages(claude({**good, "signature": gemini_sig("x")}), issued, set())
    with pytest.raises(AnthropicInvalid, match="signature: Field required"):
        check_messages(claude({"type": "thinking", "thinking": "t"}))
    signed_text = {"type": "text", "text": "a", "thoughtSignature": gemini_sig("x")}
    with pytest.raises(AnthropicInvalid, match="Extra inputs are not permitted"):
        check_messages(claude(signed_text))
    use = {"type": "tool_use", "id": "call_1", "name": "f", "input": {}}
    round_trip = {
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1"}]},
        ],
    }
    with pytest.raises(AnthropicInvalid, match="must start with a thinking block"):
        check_messages(round_trip)
    round_trip.pop("thinking")
    check_messages(round_trip)  # thinking off: the tool round needs no thinking block

    answered = {"type": "message", "role": "assistant", "content": []}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"}
    call = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "r"}
    issued_items, after = {"rs_1": "E"}, {"fc_1": "rs_1"}
    check_responses({"input": [reasoning, call, output]}, issued_items, after)
    with pytest.raises(OpenAIInvalid, match="Item with id 'rs_2' not found"):
        check_responses({"input": [{**reasoning, "id": "rs_2"}, answered]}, issued_items, after)
    with pytest.raises(OpenAIInvalid, match="could not be verified"):
        changed = {**reasoning, "encrypted_content": openai_enc("x")}
        check_responses({"input": [changed, answered]}, issued_items, after)
    with pytest.raises(OpenAIInvalid, match="without its required 'reasoning' item: 'rs_1'"):
        check_responses({"input": [call, output]}, issued_items, after)
    with pytest.raises(OpenAIInvalid, match="without its required following item"):
        check_responses({"input": [reasoning]}, issued_items, after)
    with pytest.raises(
        OpenAIInvalid, match=re.escape("Unknown parameter: 'input[0].thoughtSignature'")
    ):
        check_responses({"input": [{**answered, "thoughtSignature": "x"}]}, {}, {})

    details = {"role": "assistant", "content": "a", "reasoning_details": [{"type": "x"}]}
    check_chat({"messages": [details]})  # a compatible server may take it
    with pytest.raises(OpenAIInvalid, match="'reasoning_details' was unexpected"):
        check_chat({"messages": [details]}, openai_only=True)


# -- the fallback path: reasoning never crosses providers ------------------------------------


async def test_c04_147_anthropic_overloaded_falls_back_to_responses_without_its_thinking(
    db_url: str, fakes: Fakes
) -> None:
    """Turn 1 on Anthropic (signed thinking, a tool round); in turn 2 Anthropic answers 529
    and its fallback, an OpenAI Responses model, serves the turn: the Responses fake (which
    refuses reasoning it did not issue and unknown item fields) accepts both requests, and
    neither carries Anthropic's thinking or signatures."""
    primary = Model(
        name="claude",
        provider=fakes.providers["anthropic"],
        model=MODEL_IDS["anthropic"],
        fallbacks=("responses",),
        max_attempts=1,
    )
    fakes.queue("anthropic", anthropic_turn("1"))
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fakes.anthropic.error(529, overloaded)
    fakes.queue("responses", responses_turn("2"))
    fakes.anthropic.error(529, overloaded)  # the tool round's request falls back too
    runtime = await Runtime.open(db_url, definitions=definitions(fakes, "claude", (primary,)))
    try:
        thread_id = (await runtime.create_thread("chat")).thread_id
        await turn(runtime, thread_id, "first")
        rows = await turn(runtime, thread_id, "second")
        logs = await runtime.store.list_logs(thread_id)
    finally:
        await runtime.close()
    assert fakes.rejected() == {}
    assert rows[-1].content == "responses answer 2"
    assert len(fakes.bodies("anthropic")) == 4 and len(fakes.bodies("responses")) == 2
    assert "thinking" in json.dumps(fakes.bodies("anthropic")[2]["messages"])  # the primary's
    for body in fakes.bodies("responses"):
        assert leaks("responses", body) == []
    left = [json.loads(r.errors)[0] for r in logs if r.errors and r.model == "claude"]
    assert [e["fallback"] for e in left] == [
        {"from": "claude", "to": "responses", "reason": "overloaded"}
    ] * 2


async def test_c04_148_gemini_unavailable_mid_tool_round_falls_back_to_anthropic(
    db_url: str, fakes: Fakes
) -> None:
    """Gemini calls two tools (thought signature on the first); the request carrying the
    results gets 503 and its fallback, Anthropic with thinking on, serves it. The Anthropic
    fake (signatures verified, tool use/result pairing, thinking first in the answered
    message) accepts it: no Gemini signature or thought is sent, and since the calling
    message has no thinking block Anthropic can take, thinking is off for that request."""
    primary = Model(
        name="gem",
        provider=fakes.providers["gemini"],
        model=GEMINI_MODEL,
        fallbacks=("anthropic",),
        max_attempts=1,
    )
    calls, _ = gemini_turn("1")
    fakes.gemini.stream(calls)
    fakes.gemini.error(503, fg.google_error(503, "UNAVAILABLE", "The model is overloaded."))
    fakes.anthropic.queue.append(anthropic_turn("2")[1])
    runtime = await Runtime.open(db_url, definitions=definitions(fakes, "gem", (primary,)))
    try:
        thread_id = (await runtime.create_thread("chat")).thread_id
        rows = await turn(runtime, thread_id, "go")
    finally:
        await runtime.close()
    assert fakes.rejected() == {}
    assert rows[-1].content == "claude answer 2"
    [body] = fakes.bodies("anthropic")
    assert leaks("anthropic", body) == []
    assert "thinking" not in body  # the calling message holds no Anthropic thinking
    assert [b["type"] for b in body["messages"][-2]["content"]] == ["tool_use", "tool_use"]
    assert [b["type"] for b in body["messages"][-1]["content"]] == ["tool_result"] * 2
