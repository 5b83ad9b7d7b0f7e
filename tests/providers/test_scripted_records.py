"""The scripted provider's request record is bounded (issue 23 item 8): a scripted model that
serves for a long time keeps a fixed number of requests, not every one it ever received."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadloom import Runtime
from threadloom.providers import ProviderRequest, UserMessage, generate
from threadloom.providers.scripted import DEFAULT_MAX_RECORDS, Reply, ScriptedProvider

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def request(n: int) -> ProviderRequest:
    return ProviderRequest(model="m", messages=[UserMessage(content=f"message {n}")])


async def serve(provider: ScriptedProvider, count: int) -> None:
    for n in range(count):
        await generate(provider, request(n))


def texts(provider: ScriptedProvider) -> list[str]:
    return [r.messages[0].text for r in provider.requests]


async def test_records_keep_the_most_recent_requests_by_default() -> None:
    provider = ScriptedProvider(lambda r: Reply.text("ok"))
    await serve(provider, 3 * DEFAULT_MAX_RECORDS + 7)
    assert DEFAULT_MAX_RECORDS == 100
    assert len(provider.requests) == DEFAULT_MAX_RECORDS
    first_kept = 2 * DEFAULT_MAX_RECORDS + 7
    assert texts(provider) == [f"message {n}" for n in range(first_kept, first_kept + 100)]
    assert provider.last_request is not None
    assert provider.last_request.messages[0].text == f"message {3 * DEFAULT_MAX_RECORDS + 6}"
    assert provider.request_count == 3 * DEFAULT_MAX_RECORDS + 7


async def test_records_stay_bounded_over_many_requests() -> None:
    provider = ScriptedProvider(lambda r: Reply.text("ok"), max_records=5)
    for round_ in range(20):
        await serve(provider, 50)
        assert len(provider.requests) == 5
        assert provider.request_count == 50 * (round_ + 1)
    assert texts(provider) == [f"message {n}" for n in range(45, 50)]


async def test_records_can_be_unbounded_or_off() -> None:
    everything = ScriptedProvider(max_records=None)
    await serve(everything, 250)
    assert len(everything.requests) == 250 == everything.request_count
    nothing = ScriptedProvider(record=False)
    await serve(nothing, 10)
    assert nothing.requests == [] and nothing.last_request is None
    assert nothing.request_count == 10


async def test_reset_clears_the_record_and_the_count() -> None:
    provider = ScriptedProvider(max_records=3)
    await serve(provider, 7)
    provider.reset()
    assert (provider.requests, provider.request_count) == ([], 0)
    await serve(provider, 2)
    assert texts(provider) == ["message 0", "message 1"]


@pytest.mark.parametrize("bad", [0, -1, True])
def test_max_records_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_records"):
        ScriptedProvider(max_records=bad)


async def test_the_served_example_model_records_nothing(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    runtime = await Runtime.open(db_url, project=EXAMPLES)
    try:
        model = runtime.definitions.model("assistant")
        assert model is not None and isinstance(model.provider, ScriptedProvider)
        demo = model.provider
        before = demo.request_count
        state = await runtime.create_thread("support")
        for n in range(3):
            await runtime.send_message(state.thread_id, f"Where is order A-100{n}?")
            await runtime.wait_idle(state.thread_id, timeout=10)
        assert demo.request_count >= before + 6  # a lookup and an answer per message
        assert demo.requests == []
    finally:
        await runtime.close()
