"""Structured output end to end on the OpenAI (Chat Completions, Responses) and Anthropic
adapters against their local fake HTTP servers, on both stores (spec 24, C24-020 … C24-025).

Each test opens a Runtime whose model is an adapter instance pointed at its fake server; the
prompt declares a pydantic output type. Three stories per adapter: the first answer matches;
the first does not and the second (after the problem was sent back) does; no answer matches
and the run fails with the schema problem. What is checked: the wire body carries the output
type in the provider's native form, the stored assistant message carries the parsed value
(``Message.output``, ``metadata.output``), the problem reaches the model in the next request,
and the thread's status says why the run failed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from fakes import load_provider_fake
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.anthropic import AnthropicProvider
from threadloom.providers.openai import OpenAIChatProvider, OpenAIResponsesProvider
from threadloom.records import Message

fo = load_provider_fake("fake_openai")
fa = load_provider_fake("fake_anthropic")


class City(BaseModel):
    """The declared output type."""

    name: str
    population: int


VALID = '{"name": "Lyon", "population": 522000}'
WRONG_TYPE = '{"name": "Lyon", "population": "many"}'
MISSING = '{"name": "Lyon"}'


@dataclass(frozen=True)
class Adapter:
    """One adapter: how to make it, how its server answers text, where the format goes."""

    id: str
    make: Callable[[str], Any]
    text: Callable[[str], Any]
    native: Callable[[dict[str, Any]], Any]  # the output format as found in the wire body
    expected: dict[str, Any]  # ... and what it must be
    sent_back: Callable[[dict[str, Any]], str]  # the last user-side text of a request

    @property
    def anthropic(self) -> bool:
        return self.id == "anthropic"


def _chat_last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else " ".join(p["text"] for p in content)


def _responses_last_user(body: dict[str, Any]) -> str:
    users = [i for i in body["input"] if i.get("role") == "user"]
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content)


def _anthropic_last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if b.get("type") == "text")


SCHEMA = {
    "description": "The declared output type.",
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "population": {"title": "Population", "type": "integer"},
    },
    "required": ["name", "population"],
    "type": "object",
    "additionalProperties": False,
}

ADAPTERS = [
    Adapter(
        id="openai-chat",
        make=lambda url: OpenAIChatProvider(api_key="sk-test", base_url=url, dialect="openai"),
        text=fo.chat_text_stream,
        native=lambda body: body.get("response_format"),
        expected={
            "type": "json_schema",
            "json_schema": {"name": "City", "schema": SCHEMA, "strict": True},
        },
        sent_back=_chat_last_user,
    ),
    Adapter(
        id="openai-responses",
        make=lambda url: OpenAIResponsesProvider(api_key="sk-test", base_url=url),
        text=lambda text: fo.ResponsesEvents().created().message(text).completed().stream(),
        native=lambda body: body.get("text"),
        expected={
            "format": {"type": "json_schema", "name": "City", "schema": SCHEMA, "strict": True}
        },
        sent_back=_responses_last_user,
    ),
    Adapter(
        id="anthropic",
        make=lambda url: AnthropicProvider(api_key="sk-test", base_url=url),
        text=lambda text: fa.Stream(fa.simple_text_stream(text)),
        native=lambda body: body.get("output_config"),
        expected={"format": {"type": "json_schema", "schema": SCHEMA}},
        sent_back=_anthropic_last_user,
    ),
]
every_adapter = pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.id)


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    """Closes runtimes, then providers, then the servers (reverse order of opening)."""
    async with AsyncExitStack() as opened:
        yield opened


@dataclass
class Harness:
    runtime: Runtime
    thread_id: str
    fake: Any

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.fake.requests]

    async def history(self) -> list[Message]:
        state = await self.runtime.thread(self.thread_id)
        page = await state.get_messages(order="asc", limit=None, include_silent=True)
        return list(page.messages)


async def open_harness(
    stack: AsyncExitStack, db_url: str, adapter: Adapter, answers: list[str], retries: int = 2
) -> Harness:
    fake = await stack.enter_async_context(
        fa.FakeAnthropic() if adapter.anthropic else fo.FakeOpenAIServer()
    )
    for text in answers:
        if adapter.anthropic:
            fake.queue.append(adapter.text(text))
        else:
            fake.enqueue(adapter.text(text))
    provider = adapter.make(str(fake.base_url))
    stack.push_async_callback(provider.aclose)
    defs = Definitions().add(
        Model(name="M", provider=provider, model="model-1"),
        Prompt(
            name="P",
            model="M",
            system="Answer about cities.",
            output_type=City,
            output_retries=retries,
            output_strict=not adapter.anthropic,
        ),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    stack.push_async_callback(runtime.close, 0)
    state = await runtime.create_thread("chat")
    await runtime.send_message(state.thread_id, "Tell me about Lyon")
    await runtime.wait_idle(state.thread_id, timeout=15)
    return Harness(runtime, state.thread_id, fake)


@every_adapter
async def test_c24_020_valid_first_time_native_format_and_parsed_value(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """C24-020: one request carrying the output type in the provider's native form; the
    answer is stored once, completed, with its parsed value; the run ends as usual."""
    run = await open_harness(stack, db_url, adapter, [VALID])
    assert len(run.bodies) == 1
    assert adapter.native(run.bodies[0]) == adapter.expected
    rows = await run.history()
    assert [(m.role, m.silent) for m in rows] == [("user", False), ("assistant", False)]
    answer = rows[-1]
    assert (answer.status, answer.content) == ("completed", VALID)
    assert answer.output == {"name": "Lyon", "population": 522000}
    assert answer.metadata is not None and "output_error" not in answer.metadata
    assert answer.to_wire()["metadata"]["output"] == answer.output
    parsed = Prompt(name="P", model="M", output_type=City).parse_output(answer)
    assert parsed == City(name="Lyon", population=522000)
    status = await (await run.runtime.thread(run.thread_id)).status()
    assert status.reason == "stop_on_response"


@every_adapter
async def test_c24_021_valid_after_a_retry_problem_sent_back(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """C24-021: an answer that does not match is stored with ``output_error``; a silent
    message naming the problem follows and the model is asked again within the same run
    (the second request carries it as the last user text); the second answer matches and
    carries the parsed value."""
    run = await open_harness(stack, db_url, adapter, [WRONG_TYPE, VALID])
    assert len(run.bodies) == 2
    assert adapter.native(run.bodies[1]) == adapter.expected
    rows = await run.history()
    assert [m.role for m in rows] == ["user", "assistant", "user", "assistant"]
    first, feedback, second = rows[1], rows[2], rows[3]
    assert first.output is None and first.content == WRONG_TYPE
    assert first.metadata is not None and "population" in first.metadata["output_error"]
    assert feedback.silent and feedback.metadata is not None
    assert feedback.metadata["status_kind"] == "output_invalid"
    assert feedback.metadata["output_attempt"] == 1
    assert "population" in (feedback.content or "")
    assert "valid integer" in adapter.sent_back(run.bodies[1])
    assert second.output == {"name": "Lyon", "population": 522000}
    status = await (await run.runtime.thread(run.thread_id)).status()
    assert (status.state, status.reason, status.error) == ("idle", "stop_on_response", None)


@every_adapter
async def test_c24_022_invalid_after_all_retries_fails_naming_the_problem(
    stack: AsyncExitStack, db_url: str, adapter: Adapter
) -> None:
    """C24-022: with ``output_retries=1`` two answers that do not match end the run
    ``failed`` / ``step_error``; its error is ``OutputInvalid`` naming the prompt, the
    attempts and the schema problem; both answers stay stored, no third request is made."""
    run = await open_harness(stack, db_url, adapter, [WRONG_TYPE, MISSING], retries=1)
    assert len(run.bodies) == 2
    status = await (await run.runtime.thread(run.thread_id)).status()
    assert (status.state, status.reason) == ("failed", "step_error")
    assert status.error is not None and status.error.type == "OutputInvalid"
    assert status.error.message.startswith(
        'Output of prompt "P" does not match its output type after 2 attempts:'
    )
    assert "population: Field required" in status.error.message
    rows = await run.history()
    answers = [m for m in rows if m.role == "assistant"]
    assert [m.content for m in answers] == [WRONG_TYPE, MISSING]
    assert all(m.output is None and m.status == "completed" for m in answers)
    assert json.loads(answers[-1].content or "") == {"name": "Lyon"}
