"""The provider's own compaction item (spec 23 §23.2 rule 7, §23.4 rule 5) with the OpenAI
Responses adapter against its fake HTTP server (``/responses/compact`` answered as the API
does: the user messages kept and one ``compaction`` item of encrypted content), on both
stores: the record keeps the item beside the text summary, the next request to the same
adapter and model sends the item in the summary's place, a later compaction folds it, and
any other adapter (Chat Completions, on the same store) gets the text summary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from fakes import load_provider_fake
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from threadloom.records.compaction import SUMMARY_PREFIX

fo = load_provider_fake("fake_openai")


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


async def server(stack: AsyncExitStack, cls: Any = None) -> Any:
    return await stack.enter_async_context((cls or fo.FakeOpenAIServer)())


def defs(provider: Any) -> Definitions:
    return Definitions().add(
        Model(
            name="M",
            provider=provider,
            model="gpt-fake",
            input_price=1.0,
            output_price=2.0,
        ),
        Prompt(name="P", model="M", system="You are P."),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
    )


async def runtime_on(stack: AsyncExitStack, db_url: str, provider: Any) -> Runtime:
    runtime = await Runtime.open(db_url, definitions=defs(provider))
    stack.push_async_callback(runtime.close, drain=0)
    return runtime


def responses(fake: Any) -> OpenAIResponsesProvider:
    return fake.adopt(OpenAIResponsesProvider(api_key="sk-test", base_url=fake.base_url))


def text_stream(text: str) -> Any:
    return fo.ResponsesEvents().created().message(text).completed().stream()


async def seed(runtime: Runtime, pairs: int) -> str:
    state = await runtime.create_thread("chat")
    for n in range(pairs):
        await state.inject_message(role="user", content=f"question {n}")
        await state.inject_message(role="assistant", content=f"answer {n}")
    return state.thread_id


async def turn(runtime: Runtime, thread_id: str, text: str) -> None:
    await runtime.send_message(thread_id, text)
    await runtime.wait_idle(thread_id, 30)


def sent(fake: Any, path: str) -> list[Any]:
    return [r.body for r in fake.requests if r.path.split("?")[0].endswith(path)]


def texts_of(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            out.append(" ".join(p.get("text", "") for p in content))
        elif isinstance(content, str):
            out.append(content)
    return out


async def test_c23_033_the_responses_adapter_keeps_and_sends_the_native_item(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-033: a compaction on the Responses adapter asks ``/responses/compact`` with the
    range as input items after the text summary's request; the record keeps the text
    summary and the answered window as ``provider_item`` (kind, adapter, model); both
    requests are LLM rows whose cost the record sums; the next turn's input carries the
    window (the kept user messages, the compaction item as issued) in place of the text
    summary, then the kept messages and the new one."""
    fake = await server(stack)
    runtime = await runtime_on(stack, db_url, responses(fake))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    fake.enqueue(text_stream("They asked six questions."))
    record = await state.compact(keep_messages=2)
    assert record.summary == "They asked six questions."
    [compact_body] = sent(fake, "/responses/compact")
    assert compact_body["model"] == "gpt-fake"
    assert texts_of(compact_body["input"]) == [
        t for n in range(5) for t in (f"question {n}", f"answer {n}")
    ]
    item = record.provider_item
    assert item["type"] == "openai.responses.compact"
    assert item["provider"] == "openai-responses" and item["model"] == "gpt-fake"
    window = item["output"]
    assert window[-1]["type"] == "compaction"
    assert fake.compactions[window[-1]["encrypted_content"]] == compact_body["input"]
    assert texts_of(window[:-1]) == [f"question {n}" for n in range(5)]
    rows = [r for r in await runtime.store.list_logs(thread_id, limit=None) if r.endpoint]
    assert [r.endpoint for r in rows] == ["compaction", "compaction.native"]
    assert rows[1].input_tokens == 100 and rows[1].output_tokens == 7
    assert record.input_tokens == sum(r.input_tokens for r in rows)
    assert record.cost == pytest.approx(sum(r.cost_total for r in rows))

    fake.enqueue(text_stream("ok"))
    await turn(runtime, thread_id, "question 6")
    body = sent(fake, "/responses")[-1]
    wire = body["input"]
    assert not any(SUMMARY_PREFIX in t for t in texts_of(wire))
    compaction = [i for i in wire if i.get("type") == "compaction"]
    assert compaction == [
        {
            "type": "compaction",
            "id": window[-1]["id"],
            "encrypted_content": window[-1]["encrypted_content"],
        }
    ]
    assert texts_of(wire) == [
        "You are P.",
        *(f"question {n}" for n in range(5)),
        "question 5",
        "answer 5",
        "question 6",
    ]
    assert fake.rejected == []


async def test_c23_034_a_later_compaction_folds_the_native_item_and_others_get_text(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-034: a second compaction sends the first one's window (its compaction item as
    issued) and the messages after it to ``/responses/compact``; after undoing it the next
    turn carries the first window again; the same thread on another adapter (Chat
    Completions, the store reopened with other definitions) is sent the text summary."""
    fake = await server(stack)
    runtime = await runtime_on(stack, db_url, responses(fake))
    thread_id = await seed(runtime, 4)
    state = await runtime.thread(thread_id)
    fake.enqueue(text_stream("first summary"))
    first = await state.compact(keep_messages=2)
    for n in range(4, 7):
        await state.inject_message(role="user", content=f"question {n}")
        await state.inject_message(role="assistant", content=f"answer {n}")
    fake.enqueue(text_stream("second summary"))
    second = await state.compact(keep_messages=2)
    body = sent(fake, "/responses/compact")[-1]
    issued = first.provider_item["output"][-1]
    assert {
        "type": "compaction",
        "id": issued["id"],
        "encrypted_content": issued["encrypted_content"],
    } in body["input"]
    assert texts_of(body["input"]) == [
        *(f"question {n}" for n in range(3)),
        *(t for n in range(3, 6) for t in (f"question {n}", f"answer {n}")),
    ]
    assert second.provider_item["output"][-1]["encrypted_content"] != issued["encrypted_content"]
    await state.undo_compaction(second.id)
    fake.enqueue(text_stream("ok"))
    await turn(runtime, thread_id, "question 7")
    wire = sent(fake, "/responses")[-1]["input"]
    assert next(i for i in wire if i.get("type") == "compaction")["id"] == issued["id"]
    assert fake.rejected == []
    await runtime.close(drain=0)

    chat = fake.adopt(OpenAIChatProvider(api_key="sk-test", base_url=fake.base_url))
    other = await runtime_on(stack, db_url, chat)
    fake.enqueue(fo.chat_text_stream("ok"))
    await turn(other, thread_id, "question 8")
    messages = sent(fake, "/chat/completions")[-1]["messages"]
    contents = [m["content"] if isinstance(m["content"], str) else "" for m in messages]
    assert contents[1].startswith(SUMMARY_PREFIX) and contents[1].endswith("first summary")
    assert "compaction" not in str(messages)


class RefusingCompact(fo.FakeOpenAIServer):  # type: ignore[name-defined,misc]
    """A server whose model does not support ``/responses/compact``."""

    def refuse(self, request: Any) -> Any:
        if request.path.split("?")[0].endswith("/responses/compact"):
            return fo.JSONResponse(400, fo.error_body("compact is not supported"))
        return None


async def test_c23_035_a_refused_native_compaction_leaves_the_text_summary(
    stack: AsyncExitStack, db_url: str
) -> None:
    """C23-035: when the provider refuses its compaction call, the compaction is stored
    with the text summary and ``provider_item`` null; the refused call is a failed LLM row;
    the next turn carries the text summary."""
    fake = await server(stack, RefusingCompact)
    runtime = await runtime_on(stack, db_url, responses(fake))
    thread_id = await seed(runtime, 3)
    state = await runtime.thread(thread_id)
    fake.enqueue(text_stream("the summary"))
    record = await state.compact(keep_messages=2)
    assert record.provider_item is None and record.summary == "the summary"
    rows = [r for r in await runtime.store.list_logs(thread_id, limit=None) if r.endpoint]
    assert [(r.endpoint, r.error is None) for r in rows] == [
        ("compaction", True),
        ("compaction.native", False),
    ]
    fake.enqueue(text_stream("ok"))
    await turn(runtime, thread_id, "question 3")
    wire = sent(fake, "/responses")[-1]["input"]
    assert texts_of(wire)[1].startswith(SUMMARY_PREFIX)
    assert not [i for i in wire if i.get("type") == "compaction"]
