"""Compaction as a durable event on every store (spec 23): the record, the range and its
summary in place of the originals in the next request, the threshold trigger on a
1,000-message thread under a small context window, undo, hooks that still see the live
history, and the OpenTelemetry event. Real runtimes with the scripted model."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from otel_support import in_memory
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, hook
from threadloom.errors import CompactionNotFound, NothingToCompact
from threadloom.providers.script import Reply
from threadloom.providers.scripted import ScriptedProvider, synthetic_usage
from threadloom.providers.types import ProviderRequest
from threadloom.records import Compaction, Message
from threadloom.records.compaction import SUMMARY_PREFIX

LABEL = re.compile(r"\b([ua]\d{4})\b")
PAD = " lorem ipsum dolor sit amet consectetur" * 2


def is_compaction(request: ProviderRequest) -> bool:
    return request.metadata.get("purpose") == "compaction"


def answer(request: ProviderRequest) -> Reply:
    """Summaries name the first and last message they cover (the previous summary's first
    when there is one); ordinary turns answer with the label of the user's last message."""
    text = request.messages[-1].text  # type: ignore[union-attr]
    if is_compaction(request):
        labels = LABEL.findall(text)
        return Reply(content=f"covers {labels[0]}..{labels[-1]}")
    found = LABEL.findall(text)
    label = found[-1] if found else "u0000"
    return Reply(content=f"a{label[1:]}{PAD}")


def definitions(
    provider: ScriptedProvider, *extra: Any, hooks: tuple[str, ...] = (), **model: Any
) -> Definitions:
    return Definitions().add(
        Model(
            name="M",
            provider=provider,
            model="scripted-1",
            input_price=1.0,
            output_price=2.0,
            **model,
        ),
        Prompt(name="P", model="M", system="You are P."),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="User"),
            hooks=hooks,
        ),
        *extra,
    )


@pytest.fixture
async def opened(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    runtimes: list[Runtime] = []

    async def open_(defs: Definitions, **options: Any) -> Runtime:
        runtime = await Runtime.open(db_url, definitions=defs, **options)
        runtimes.append(runtime)
        return runtime

    yield open_
    for runtime in runtimes:
        await runtime.close(drain=0)


async def seed(runtime: Runtime, pairs: int) -> str:
    """A thread with ``pairs`` user/assistant exchanges stored as history (no run)."""
    state = await runtime.create_thread("chat")
    for n in range(pairs):
        await state.inject_message(role="user", content=f"u{2 * n:04d}{PAD}")
        await state.inject_message(role="assistant", content=f"a{2 * n:04d}{PAD}")
    return state.thread_id


async def turn(runtime: Runtime, thread_id: str, text: str) -> None:
    await runtime.send_message(thread_id, text)
    await runtime.wait_idle(thread_id, 30)


def turns(provider: ScriptedProvider) -> list[ProviderRequest]:
    return [r for r in provider.requests if not is_compaction(r)]


def texts(request: ProviderRequest) -> list[str]:
    return [m.text for m in request.messages]  # type: ignore[union-attr]


async def stored(runtime: Runtime, thread_id: str) -> list[Message]:
    return list(await runtime.hub.store.top_level_history(thread_id))


async def test_c23_001_a_compaction_is_a_durable_record_listed_and_undone_once(
    opened: Callable[..., Any],
) -> None:
    """C23-001: an explicit compaction stores a record with its range, summary, model,
    tokens and cost; it is listed (oldest first), and undo sets undone_at once."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 10)
    state = await runtime.thread(thread_id)
    history = await stored(runtime, thread_id)
    record = await state.compact(keep_messages=4)
    assert record.first_message_id == history[0].id
    assert record.last_message_id == history[15].id and record.message_count == 16
    assert record.summary == "covers u0000..a0014"
    assert record.model == "M" and record.trigger == "explicit"
    assert record.input_tokens > 0 and record.output_tokens > 0
    assert record.cost == pytest.approx(
        (record.input_tokens * 1.0 + record.output_tokens * 2.0) / 1e6
    )
    assert record.created_at > 0 and record.undone_at is None and record.provider_item is None
    assert await state.compactions() == [record]
    undone = await state.undo_compaction(record.id)
    assert undone.undone_at is not None and undone.id == record.id
    again = await state.undo_compaction(record.id)
    assert again.undone_at == undone.undone_at
    assert await state.compactions() == [undone]
    with pytest.raises(CompactionNotFound):
        await state.undo_compaction("0" * 32)


async def test_c23_002_the_next_request_carries_the_summary_as_history_in_place_of_the_range(
    opened: Callable[..., Any],
) -> None:
    """C23-002: after a compaction the next request has the system text, the summary as a
    labelled user message and an assistant acknowledgement, then the kept messages — the
    covered ones are absent; nothing stored changed."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 10)
    before = await stored(runtime, thread_id)
    state = await runtime.thread(thread_id)
    record = await state.compact(keep_messages=4)
    await turn(runtime, thread_id, "u0020 next")
    request = turns(provider)[-1]
    sent = texts(request)
    assert request.messages[0].role == "system" and sent[0] == "You are P."
    assert request.messages[1].role == "user" and sent[1].startswith(SUMMARY_PREFIX)
    assert sent[1].endswith(record.summary)
    assert request.messages[2].role == "assistant"
    assert sent[3:] == [m.content for m in before[16:]] + ["u0020 next"]
    after = await stored(runtime, thread_id)
    assert after[: len(before)] == before  # never deleted or edited
    assert after[len(before)].content == "u0020 next"


async def test_c23_003_undo_restores_the_request(opened: Callable[..., Any]) -> None:
    """C23-003: after undo the next request carries the original messages again, as if
    the compaction had never been."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 6)
    await turn(runtime, thread_id, "u0012 first")
    original = texts(turns(provider)[-1])
    state = await runtime.thread(thread_id)
    record = await state.compact(keep_messages=2)
    await turn(runtime, thread_id, "u0014 second")
    assert len(texts(turns(provider)[-1])) < len(original)
    await state.undo_compaction(record.id)
    await turn(runtime, thread_id, "u0016 third")
    history = await stored(runtime, thread_id)
    restored = texts(turns(provider)[-1])
    assert restored == ["You are P."] + [m.content for m in history[:-1]]
    assert restored[: len(original)] == original


async def test_c23_004_filter_messages_hooks_see_the_live_history(
    opened: Callable[..., Any],
) -> None:
    """C23-004: a filter_messages hook receives the live messages, covered ones included;
    the summary replaces the covered range after it ran."""
    seen: list[list[str]] = []

    @hook("filter_messages")
    def look(state: Any, messages: list[Message]) -> list[Message]:
        seen.append([m.content or "" for m in messages])
        return messages

    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider, look, hooks=("look",)))
    thread_id = await seed(runtime, 5)
    state = await runtime.thread(thread_id)
    await state.compact(keep_messages=2)
    await turn(runtime, thread_id, "u0010 go")
    history = await stored(runtime, thread_id)
    assert seen[-1] == [m.content for m in history[:-1]]  # all 11, the covered 8 too
    sent = texts(turns(provider)[-1])
    assert sent[1].startswith(SUMMARY_PREFIX) and history[0].content not in sent


async def test_c23_005_nothing_to_compact_writes_nothing(opened: Callable[..., Any]) -> None:
    """C23-005: a compaction with no message before those kept is refused
    (NothingToCompact) and writes no record."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 1)
    state = await runtime.thread(thread_id)
    with pytest.raises(NothingToCompact):
        await state.compact(keep_messages=2)
    assert await state.compactions() == []
    assert provider.request_count == 0


async def test_c23_006_a_thousand_messages_under_a_small_window(
    opened: Callable[..., Any],
) -> None:
    """C23-006: a 1,000-message thread on a model with a 2,000-token window that compacts at
    half of it: every request (turns and summaries) stays under the window, each summary
    covers the range its record says, and every stored message is still there."""
    provider = ScriptedProvider(answer, max_records=None)
    options, exporter = in_memory()
    runtime = await opened(
        definitions(provider, context_window=2000, compact_at=0.5), tracing=options
    )
    thread_id = await seed(runtime, 500)
    before = await stored(runtime, thread_id)
    assert len(before) == 1000
    for n in range(30):
        await turn(runtime, thread_id, f"u{1000 + 2 * n:04d} turn")
    for request in provider.requests:
        assert synthetic_usage(request, Reply(content="x")).input_tokens <= 2000
    state = await runtime.thread(thread_id)
    records: list[Compaction] = await state.compactions()
    assert len(records) >= 2 and all(r.trigger == "threshold" for r in records)
    history = await stored(runtime, thread_id)
    by_id = {m.id: m for m in history}
    for record in records:
        assert record.first_message_id == history[0].id
        last = by_id[record.last_message_id]
        first_label = LABEL.findall(history[0].content or "")[0]
        last_label = LABEL.findall(last.content or "")[0]
        assert record.summary == f"covers {first_label}..{last_label}"
        assert history.index(last) + 1 == record.message_count
    assert history[:1000] == before  # nothing stored is lost or edited
    assert len(history) == 1000 + 60
    newest = records[-1]
    sent = texts(turns(provider)[-1])
    assert any(t.endswith(newest.summary) for t in sent)
    events = [
        e
        for span in exporter.get_finished_spans()
        for e in span.events
        if e.name == "gen_ai.conversation.compacted"
    ]
    assert len(events) == len(records)
    assert {e.attributes["threadloom.compaction.id"] for e in events} == {r.id for r in records}


async def test_c23_007_off_by_default(opened: Callable[..., Any]) -> None:
    """C23-007: without compact_at no compaction happens, however long the thread; a
    compact_at without a context_window, or outside (0, 1), is a V17 problem."""
    bad = Model(name="B", provider="scripted", model="s", compact_at=0.5).self_problems()
    assert bad == [("V17", 'Model "B": compact_at needs a context_window')]
    worse = Model(name="B", provider="scripted", model="s", context_window=10, compact_at=1.5)
    assert worse.self_problems() == [("V17", 'Model "B": compact_at must be between 0 and 1')]
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider, context_window=100))
    thread_id = await seed(runtime, 30)
    await turn(runtime, thread_id, "u0060 go")
    state = await runtime.thread(thread_id)
    assert await state.compactions() == []
    assert len(texts(turns(provider)[-1])) == 1 + 61


async def test_c23_008_deleting_the_thread_deletes_its_compactions(
    opened: Callable[..., Any],
) -> None:
    """C23-008: the records go with their thread."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 3)
    state = await runtime.thread(thread_id)
    await state.compact(keep_messages=2)
    await runtime.delete_thread(thread_id)
    assert await runtime.hub.store.list_compactions(thread_id) == []


async def test_c23_009_a_thread_file_carries_its_compactions(
    opened: Callable[..., Any],
) -> None:
    """C23-009: an exported thread carries its compaction records (undone ones too) and an
    import stores them as they were — kept ids, or new ids with the range's message ids
    mapped — and the imported thread's next request uses the active summary; a file of a
    thread without compactions has no ``compactions`` key."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 6)
    state = await runtime.thread(thread_id)
    first = await state.compact(keep_messages=6)
    first = await state.undo_compaction(first.id)
    second = await state.compact(keep_messages=2)
    doc = await runtime.export_thread(thread_id)
    assert doc.threads[0].compactions == [first, second]
    plain = await runtime.export_thread(await seed(runtime, 1))
    assert b'"compactions"' not in plain.dump() and b'"compactions"' in doc.dump()
    await runtime.delete_thread(thread_id)
    kept = await runtime.import_thread(doc)
    assert await runtime.hub.store.list_compactions(thread_id) == [first, second]
    assert (await runtime.export_thread(thread_id)).dump() == doc.dump()
    renamed = await runtime.import_thread(doc, ids="new")
    new_id = renamed.root
    copied = await runtime.hub.store.list_compactions(new_id)
    messages = await stored(runtime, new_id)
    assert [c.summary for c in copied] == [first.summary, second.summary]
    assert copied[1].id != second.id and copied[1].thread_id == new_id
    assert copied[1].last_message_id == messages[9].id
    assert copied[1].created_at == second.created_at and copied[0].undone_at == first.undone_at
    assert kept.root == thread_id
    await turn(runtime, new_id, "u0012 after import")
    sent = texts(turns(provider)[-1])
    assert sent[1].endswith(second.summary) and len(sent) == 1 + 2 + 2 + 1
