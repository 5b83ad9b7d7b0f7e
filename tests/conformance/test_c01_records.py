"""Conformance cases of spec 01 (records and storage), §1.12: every untagged case.

[engine] cases (C01-021, C01-023, C01-024, C01-025) and the [engine] halves of C01-040 and
C01-041 need the execution engine and are out of scope here. Everything runs on a real
SQLite file through ``Runtime`` / ``ThreadState``; the store is used directly only to seed
what only the engine would write (registry entries, nested messages, LLM log rows, a run
status), and raw SQL on the file is used only to assert the storage model (§1.11).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock
from store_probe import probe
from thread_content import fill_thread
from threadloom import Agent, Definitions, Runtime
from threadloom.errors import InvalidMessage, StoreError, ThreadNotFound
from threadloom.records import (
    LogRow,
    Message,
    SubagentRegistryEntry,
    ThreadStatus,
    ToolCall,
    ToolCallFunction,
    decode_tool_calls,
    encode_tool_calls,
    json_compact,
    new_id,
)
from threadloom.store.core import messages as sqlite_messages

WIRE_KEYS = [
    "id",
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "tool_status",
    "status",
    "attachments",
    "reasoning_content",
    "reasoning_details",
    "prompt",
    "created_at",
    "parent_id",
    "depth",
    "silent",
    "subagent_id",
    "log_id",
]
PROJECTED_KEYS = [
    "subagent_relationship",
    "subagent_name",
    "subagent_title",
    "subagent_description",
    "subagent_status",
    "subagent_blocking",
    "subagent_thread_name",
    "subagent_spawn_group_id",
]
# Every LLM-only column of a log row (spec 01 §1.9.3).
LLM_ONLY_COLUMNS = [
    "endpoint",
    "model_name",
    "actual_provider",
    "standard_agents_router_used",
    "prompt_name",
    "parent_log_id",
    "retry_of_log_id",
    "request_body",
    "response_body",
    "request_headers",
    "response_headers",
    "status_code",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "total_tokens",
    "latency_ms",
    "time_to_first_token_ms",
    "generation_ms",
    "finish_reason",
    "errors",
    "cost_input",
    "cost_cached",
    "cost_output",
    "cost_router_fee",
    "router_fee_percent",
    "cost_total",
    "message_history_length",
    "tools_available",
    "tools_called",
    "tools_schema",
    "system_prompt",
    "reasoning_content",
    "tool_results",
    "provider_tools",
    "queued_tools",
]
COUNTER_COLUMNS = "msg_seq, clock_us, queue_seq, event_seq, log_seq"


# -- helpers -------------------------------------------------------------------------------


def db_path(rt: Runtime) -> str:
    return str(rt.store.path)  # type: ignore[attr-defined]


def q(rt: Runtime, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of the store's tables, read by a probe of its backend (storage assertions)."""
    return probe(rt).rows(sql, params)


def counters(rt: Runtime, tid: str) -> tuple[Any, ...]:
    return q(rt, f"SELECT {COUNTER_COLUMNS} FROM threads WHERE id = ?", tid)[0]


def thread_snapshot(rt: Runtime, tid: str) -> dict[str, Any]:
    """Everything a failed write must leave untouched (C01-011, C01-012, C01-037)."""
    return {
        "messages": q(rt, "SELECT id, seq FROM messages WHERE thread_id = ? ORDER BY seq", tid),
        "counts": q(
            rt,
            "SELECT depth, silent, count FROM message_counts WHERE thread_id = ?"
            " ORDER BY depth, silent",
            tid,
        ),
        "tool_calls": q(
            rt, "SELECT id, message_id FROM tool_calls WHERE thread_id = ? ORDER BY id", tid
        ),
        "queue": q(rt, "SELECT id FROM message_queue WHERE thread_id = ?", tid),
        "counters": counters(rt, tid),
        "events": q(
            rt,
            "SELECT seq, kind, entity_id FROM thread_events WHERE thread_id = ? ORDER BY seq",
            tid,
        ),
    }


def is_uuid4(value: str) -> bool:
    try:
        parsed = uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return parsed.version == 4 and str(parsed) == value


def attachment(**extra: Any) -> dict[str, Any]:
    return {
        "id": new_id(),
        "type": "file",
        "path": "/docs/a.txt",
        "name": "a.txt",
        "mimeType": "text/plain",
        "size": 3,
        **extra,
    }


def llm_row(**fields: Any) -> LogRow:
    values: dict[str, Any] = {
        "id": new_id(),
        "kind": None,
        "provider": "scripted",
        "model": "m",
        "model_name": None,
        "created_at": 0,
        "cost_total": 0.01,
        "endpoint": "chat.completions",
        "standard_agents_router_used": False,
    }
    values.update(fields)
    return LogRow(**values)


async def all_messages(state: Any) -> list[Message]:
    page = await state.get_messages(limit=None, order="asc", include_silent=True, max_depth=None)
    return list(page.messages)


# -- §1.3 timestamps and order -------------------------------------------------------------


async def test_c01_001_frozen_clock_stamps_increase_by_one(db_url: str) -> None:
    """C01-001: 1,000 messages inserted as fast as possible with a clock frozen at one µs
    value → ``created_at`` strictly increasing by exactly 1 from the first (§1.3.3:
    ``max(now_us, last_stamp + 1)``, so the first stamp is the frozen value itself)."""
    clock = FakeClock(1_700_000_000_000_000)
    rt = await Runtime.open(db_url, clock=clock)
    try:
        state = await rt.create_thread("a")
        await asyncio.gather(
            *(state.inject_message(role="user", content=f"m{i}") for i in range(1000))
        )
        stamps = [m.created_at for m in await all_messages(state)]
        assert len(stamps) == 1000
        assert stamps[0] == clock.now
        assert stamps == list(range(stamps[0], stamps[0] + 1000))
        by_seq = [
            r[0]
            for r in q(
                rt,
                "SELECT created_at FROM messages WHERE thread_id = ? ORDER BY seq",
                state.thread_id,
            )
        ]
        assert by_seq == stamps
    finally:
        await rt.close()


async def test_c01_002_clock_stepping_back_never_moves_created_at_back(db_url: str) -> None:
    """C01-002: clock stepped back 5 s between two injects → second ``created_at`` is the
    first + 1."""
    clock = FakeClock(1_700_000_000_000_000)
    rt = await Runtime.open(db_url, clock=clock)
    try:
        state = await rt.create_thread("a")
        first = await state.inject_message(role="user", content="one")
        clock.now -= 5_000_000
        second = await state.inject_message(role="user", content="two")
        assert first.created_at == 1_700_000_000_000_000
        assert second.created_at == first.created_at + 1
        stored = await state.get_message(second.id)
        assert stored is not None and stored.created_at == first.created_at + 1
    finally:
        await rt.close()


async def test_c01_003_concurrent_threads_each_strictly_increasing(db_url: str) -> None:
    """C01-003: two threads written concurrently → each thread's ``created_at`` strictly
    increases in its own ``seq`` order; sorting by ``created_at`` equals sorting by ``seq``.
    The shared clock jitters (repeats and steps back) to make the per-thread clock work."""
    ticks = iter(range(10**6))
    base = 1_700_000_000_000_000

    def jittery() -> int:
        n = next(ticks)
        return base + (n // 3) * 2 - (n % 3) * 5  # repeats and steps backwards

    rt = await Runtime.open(db_url, clock=jittery)
    try:
        t1 = await rt.create_thread("a")
        t2 = await rt.create_thread("a")

        async def writer(state: Any, tag: str) -> None:
            for i in range(40):
                if i % 7 == 3:
                    await state.queue_message(role="user", content=f"{tag}-q{i}")
                else:
                    await state.inject_message(role="user", content=f"{tag}{i}")

        await asyncio.gather(writer(t1, "a"), writer(t2, "b"), writer(t1, "c"), writer(t2, "d"))
        for state in (t1, t2):
            rows = q(
                rt,
                "SELECT seq, created_at, id FROM messages WHERE thread_id = ? ORDER BY seq",
                state.thread_id,
            )
            assert len(rows) == 2 * 40 - 2 * 6
            stamps = [r[1] for r in rows]
            assert all(a < b for a, b in itertools.pairwise(stamps))
            assert sorted(rows, key=lambda r: r[1]) == rows
            stored = [m for m in await all_messages(state) if m.status == "completed"]
            assert [m.id for m in sorted(stored, key=lambda m: m.created_at)] == [
                r[2] for r in rows
            ]
    finally:
        await rt.close()


async def test_c01_004_ids_are_canonical_uuid4(runtime: Runtime) -> None:
    """C01-004: created thread, message, log row, queue entry → each id is a UUID version 4
    in canonical lowercase form."""
    state = await runtime.create_thread("a")
    message = await state.inject_message(role="user", content="hi")
    log = await state.log({"name": "x"})
    entry = await state.queue_message(role="user", content="later")
    assert log is not None
    for value in (state.thread_id, message.id, log.id, entry.id):
        assert is_uuid4(value), value
        assert value == value.lower()
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", entry.id
    )
    logs = await runtime.store.list_logs(state.thread_id)
    assert [r.id for r in logs] == [log.id]


# -- §1.4 message records ------------------------------------------------------------------


async def test_c01_005_wire_record_keys(runtime: Runtime) -> None:
    """C01-005: inject ``{role: "user", content: "hi"}`` → the wire record has exactly the
    18 keys of §1.4.1 minus metadata and the projected ``subagent_*`` keys."""
    state = await runtime.create_thread("a")
    injected = await state.inject_message({"role": "user", "content": "hi"})
    for message in (injected, await state.get_message(injected.id)):
        assert message is not None
        wire = message.to_wire()
        assert set(wire) == set(WIRE_KEYS)
        assert len(wire) == len(WIRE_KEYS)
        assert "metadata" not in wire
        assert not any(k in wire for k in PROJECTED_KEYS)
        assert wire["role"] == "user" and wire["content"] == "hi"
        assert wire["subagent_id"] is None
    page = await state.get_messages()
    assert set(page.to_wire()["messages"][0]) == set(WIRE_KEYS)


async def test_c01_006_empty_metadata_stored_as_none(runtime: Runtime) -> None:
    """C01-006: inject with ``metadata: {}`` → stored ``metadata`` is None; the wire record
    has no ``metadata`` key."""
    state = await runtime.create_thread("a")
    injected = await state.inject_message(role="user", content="x", metadata={})
    stored = await state.get_message(injected.id)
    assert stored is not None
    assert injected.metadata is None and stored.metadata is None
    assert "metadata" not in stored.to_wire()
    assert q(runtime, "SELECT metadata FROM messages WHERE id = ?", injected.id) == [(None,)]


async def test_c01_007_subagent_projection_from_registry(runtime: Runtime) -> None:
    """C01-007: inject with ``metadata: {"subagent_id": C}`` where C is a child in T's
    registry → ``subagent_id == C``; the wire record has all eight projected keys;
    ``subagent_name`` = the registry entry's name (and the others map per §1.4.11.2)."""
    parent = await runtime.create_thread("a")
    child = await runtime.create_thread("child_agent", parent=parent.thread_id)
    entry = SubagentRegistryEntry(
        reference=child.thread_id,
        relationship="researcher",
        owner="a",
        name="child_agent",
        title="Research",
        description="Finds things",
        blocking=True,
        status="running",
        thread_name="Deep dive",
        spawn_group_id="grp-1",
    )
    await runtime.store.upsert_registry_entry(parent.thread_id, entry)
    injected = await parent.inject_message(
        role="user", content="about child", metadata={"subagent_id": child.thread_id}
    )
    stored = await parent.get_message(injected.id)
    assert stored is not None
    for message in (injected, stored):
        assert message.subagent_id == child.thread_id
        wire = message.to_wire()
        assert set(PROJECTED_KEYS) <= set(wire)
        assert {k: wire[k] for k in PROJECTED_KEYS} == {
            "subagent_relationship": "researcher",
            "subagent_name": "child_agent",
            "subagent_title": "Research",
            "subagent_description": "Finds things",
            "subagent_status": "running",
            "subagent_blocking": True,
            "subagent_thread_name": "Deep dive",
            "subagent_spawn_group_id": "grp-1",
        }
        assert wire["metadata"] == {"subagent_id": child.thread_id}
    # the projected fields are not stored (§1.11.1): only subagent_id is a column
    assert q(runtime, "SELECT subagent_id FROM messages WHERE id = ?", injected.id) == [
        (child.thread_id,)
    ]


async def test_c01_008_projection_fallback_terminated_thread(db_url: str) -> None:
    """C01-008: ``subagent_id`` = X, a terminated thread absent from the registry →
    ``subagent_status == "terminated"``, ``subagent_name`` = X's agent name,
    ``subagent_relationship is None`` (plus the other §1.4.11.3 fallbacks)."""
    defs = (
        Definitions()
        .add(Agent(name="a"))
        .add(Agent(name="worker", title="Worker", description="Does the work"))
    )
    rt = await Runtime.open(db_url, definitions=defs)
    try:
        owner = await rt.create_thread("a")
        other = await rt.create_thread("worker", tags=["misc", "name:  Big   Job "])
        await other.terminate()
        injected = await owner.inject_message(
            role="system", content="note", metadata={"subagent_id": other.thread_id}
        )
        stored = await owner.get_message(injected.id)
        assert stored is not None
        for message in (injected, stored):
            assert message.subagent_id == other.thread_id
            assert message.subagent_status == "terminated"
            assert message.subagent_name == "worker"
            assert message.subagent_relationship is None
            assert message.subagent_title == "Worker"
            assert message.subagent_description == "Does the work"
            assert message.subagent_thread_name == "Big Job"
            assert message.subagent_blocking is None
            assert message.subagent_spawn_group_id is None
            assert set(PROJECTED_KEYS) <= set(message.to_wire())
    finally:
        await rt.close()


async def test_c01_009_tool_calls_canonical_text(runtime: Runtime) -> None:
    """C01-009: assistant ``tool_calls=[{"id":"c1","function":{"name":"echo","arguments":
    "{ \\"a\\" : 1 }"}}]`` → stored text is exactly the canonical compact form."""
    state = await runtime.create_thread("a")
    expected = (
        '[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\\"a\\":1}"}}]'
    )
    injected = await state.inject_message(
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "function": {"name": "echo", "arguments": '{ "a" : 1 }'}}],
    )
    assert injected.tool_calls == expected
    stored = await state.get_message(injected.id)
    assert stored is not None and stored.tool_calls == expected
    assert q(runtime, "SELECT tool_calls FROM messages WHERE id = ?", injected.id) == [(expected,)]
    assert stored.to_wire()["tool_calls"] == expected


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
_tool_call = st.builds(
    ToolCall,
    id=st.text(min_size=1, max_size=30),
    function=st.builds(
        ToolCallFunction,
        name=st.text(min_size=1, max_size=30),
        arguments=st.dictionaries(st.text(max_size=8), _json_value, max_size=4).map(json_compact),
    ),
    extra_content=st.one_of(
        st.none(), st.dictionaries(st.text(max_size=8), _json_value, min_size=0, max_size=4)
    ),
)


@settings(max_examples=100, deadline=None)
@given(calls=st.lists(_tool_call, min_size=1, max_size=5))
def test_c01_010_tool_calls_encode_decode_round_trip(calls: list[ToolCall]) -> None:
    """C01-010: ``decode_tool_calls(encode_tool_calls(calls)) == calls`` for calls with and
    without ``extra_content`` (property test)."""
    text = encode_tool_calls(calls)
    assert decode_tool_calls(text) == calls
    # canonical key order and compactness (§1.4.3 rule 2)
    for item, call in zip(json.loads(text), calls, strict=True):
        keys = ["id", "type", "function"] + (
            ["extra_content"] if call.extra_content is not None else []
        )
        assert list(item) == keys
        assert list(item["function"]) == ["name", "arguments"]
    assert text == json_compact(json.loads(text))


async def test_c01_011_arguments_object_rejected(runtime: Runtime) -> None:
    """C01-011: ``tool_calls`` with ``arguments`` given as an object → ``InvalidMessage``;
    nothing stored."""
    state = await runtime.create_thread("a")
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message(
            role="assistant",
            content=None,
            tool_calls=[{"id": "c1", "function": {"name": "echo", "arguments": {"a": 1}}}],
        )
    assert thread_snapshot(runtime, state.thread_id) == before
    assert (await state.get_messages(include_silent=True, max_depth=None)).total == 0


async def test_c01_012_duplicate_call_id_in_thread_rejected(runtime: Runtime) -> None:
    """C01-012: ``tool_calls`` whose call id already occurs in another message of the thread
    → ``InvalidMessage``; nothing stored; the same id in a different thread is accepted."""
    state = await runtime.create_thread("a")
    other = await runtime.create_thread("a")
    calls = [{"id": "dup", "function": {"name": "echo", "arguments": "{}"}}]
    first = await state.inject_message(role="assistant", content=None, tool_calls=calls)
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message(role="user", content="again", tool_calls=calls)
    assert thread_snapshot(runtime, state.thread_id) == before
    assert [m.id for m in await all_messages(state)] == [first.id]
    accepted = await other.inject_message(role="assistant", content=None, tool_calls=calls)
    assert accepted.decoded_tool_calls()[0].id == "dup"
    assert q(runtime, "SELECT thread_id FROM tool_calls WHERE id = 'dup' ORDER BY thread_id") == [
        (t,) for t in sorted((state.thread_id, other.thread_id))
    ]


async def test_c01_013_tool_status_on_system_rejected(runtime: Runtime) -> None:
    """C01-013: ``{role: "system", content: "x", tool_status: "success"}`` → InvalidMessage."""
    state = await runtime.create_thread("a")
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message({"role": "system", "content": "x", "tool_status": "success"})
    assert thread_snapshot(runtime, state.thread_id) == before


async def test_c01_014_tool_without_call_id_rejected(runtime: Runtime) -> None:
    """C01-014: ``{role: "tool", content: "r"}`` without ``tool_call_id`` → InvalidMessage."""
    state = await runtime.create_thread("a")
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message({"role": "tool", "content": "r"})
    assert thread_snapshot(runtime, state.thread_id) == before


async def test_c01_015_tool_call_id_on_user_rejected(runtime: Runtime) -> None:
    """C01-015: ``{role: "user", content: "x", tool_call_id: "c1"}`` → InvalidMessage."""
    state = await runtime.create_thread("a")
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message({"role": "user", "content": "x", "tool_call_id": "c1"})
    assert thread_snapshot(runtime, state.thread_id) == before


async def test_c01_016_attachments_validation(runtime: Runtime) -> None:
    """C01-016: ``attachments: []`` → stored None; an element with ``type: "url"`` →
    InvalidMessage; an extra key ``foo`` → accepted and absent from the stored ref."""
    state = await runtime.create_thread("a")
    empty = await state.inject_message(role="user", content="x", attachments=[])
    stored_empty = await state.get_message(empty.id)
    assert stored_empty is not None and stored_empty.attachments is None
    assert stored_empty.to_wire()["attachments"] is None
    assert q(runtime, "SELECT attachments FROM messages WHERE id = ?", empty.id) == [(None,)]

    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage):
        await state.inject_message(role="user", content="x", attachments=[attachment(type="url")])
    assert thread_snapshot(runtime, state.thread_id) == before

    ref = attachment(foo="bar")
    extra = await state.inject_message(role="user", content="x", attachments=[ref])
    stored = await state.get_message(extra.id)
    assert stored is not None and stored.attachments is not None
    wire_ref = stored.to_wire()["attachments"][0]
    assert "foo" not in wire_ref
    assert wire_ref == {k: v for k, v in ref.items() if k != "foo"}
    (text,) = q(runtime, "SELECT attachments FROM messages WHERE id = ?", extra.id)[0]
    assert "foo" not in json.loads(text)[0]


async def test_c01_017_silent_stored_true(runtime: Runtime) -> None:
    """C01-017: inject with ``silent: true`` → stored ``silent is True``; wire ``true``."""
    state = await runtime.create_thread("a")
    injected = await state.inject_message(role="user", content="psst", silent=True)
    stored = await state.get_message(injected.id)
    assert stored is not None and stored.silent is True
    assert stored.to_wire()["silent"] is True
    assert '"silent":true' in json_compact(stored.to_wire())
    assert q(runtime, "SELECT silent FROM messages WHERE id = ?", injected.id) == [(1,)]


# -- §1.5 queue entries ----------------------------------------------------------------------


async def test_c01_018_queue_pending_view(runtime: Runtime) -> None:
    """C01-018: queue with metadata ``{"k": 1}`` → pending view metadata ``{"k": 1,
    "queued": true, "queue_status": "queued", "queue_source": "queue_message"}``; status
    pending, depth 0, parent_id None, tool_calls None, prompt None."""
    state = await runtime.create_thread("a")
    view = await state.queue_message(role="user", content="later", metadata={"k": 1})
    read = await state.get_message(view.id)
    page = await state.get_messages()
    assert read is not None and [m.id for m in page.messages] == [view.id]
    for message in (view, read, page.messages[0]):
        assert message.metadata == {
            "k": 1,
            "queued": True,
            "queue_status": "queued",
            "queue_source": "queue_message",
        }
        assert message.status == "pending"
        assert message.depth == 0
        assert message.parent_id is None
        assert message.tool_calls is None
        assert message.prompt is None
        wire = message.to_wire()
        assert wire["metadata"]["queued"] is True and wire["status"] == "pending"
    # stored entry metadata carries no queue markers (§1.4.10 rule 2)
    assert q(runtime, "SELECT metadata FROM message_queue WHERE id = ?", view.id) == [('{"k":1}',)]


async def test_c01_019_reserved_metadata_and_size_limit(runtime: Runtime) -> None:
    """C01-019: metadata ``{"queued": false}`` on inject or queue → InvalidMessage with text
    ``metadata.queued is reserved``; metadata whose JSON is 16,385 bytes → InvalidMessage;
    16,384 bytes → accepted (on inject and on queue)."""
    state = await runtime.create_thread("a")
    before = thread_snapshot(runtime, state.thread_id)
    with pytest.raises(InvalidMessage) as inj:
        await state.inject_message(role="user", content="x", metadata={"queued": False})
    assert str(inj.value) == "metadata.queued is reserved"
    with pytest.raises(InvalidMessage) as que:
        await state.queue_message(role="user", content="x", metadata={"queued": False})
    assert str(que.value) == "metadata.queued is reserved"

    def meta(size: int) -> dict[str, str]:
        value = {"k": "x" * (size - len('{"k":""}'))}
        assert len(json_compact(value).encode("utf-8")) == size
        return value

    with pytest.raises(InvalidMessage):
        await state.inject_message(role="user", content="x", metadata=meta(16_385))
    with pytest.raises(InvalidMessage):
        await state.queue_message(role="user", content="x", metadata=meta(16_385))
    assert thread_snapshot(runtime, state.thread_id) == before

    ok = await state.inject_message(role="user", content="x", metadata=meta(16_384))
    stored = await state.get_message(ok.id)
    assert stored is not None and stored.metadata == meta(16_384)
    queued = await state.queue_message(role="user", content="x", metadata=meta(16_384))
    assert queued.metadata is not None and queued.metadata["k"] == meta(16_384)["k"]


async def test_c01_020_pending_entries_after_stored(runtime: Runtime) -> None:
    """C01-020: three stored messages, one queue entry, one more injected message → a full
    read lists the four stored messages in ``seq`` order then the pending entry; the entry's
    ``created_at`` is smaller than the last stored message's."""
    state = await runtime.create_thread("a")
    stored = [await state.inject_message(role="user", content=f"m{i}") for i in range(3)]
    entry = await state.queue_message(role="user", content="queued")
    stored.append(await state.inject_message(role="assistant", content="m3"))
    page = await state.get_messages(limit=None, order="asc")
    assert [m.id for m in page.messages] == [m.id for m in stored] + [entry.id]
    assert page.total == 5 and page.has_more is False
    assert [m.status for m in page.messages] == ["completed"] * 4 + ["pending"]
    assert page.messages[-1].created_at < page.messages[-2].created_at
    seqs = q(runtime, "SELECT id FROM messages WHERE thread_id = ? ORDER BY seq", state.thread_id)
    assert [r[0] for r in seqs] == [m.id for m in stored]
    desc = await state.get_messages(limit=None)
    assert [m.id for m in desc.messages] == [m.id for m in reversed(page.messages)]


# -- §1.6, §1.7 thread record and status -------------------------------------------------------


async def test_c01_022_new_thread_status_and_created_at(db_url: str) -> None:
    """C01-022: new thread → ``status == {state: "idle", since: <creation µs>, reason:
    None}``; the record's ``created_at`` equals the creation µs // 1,000,000."""
    clock = FakeClock(1_700_000_123_456_789)
    rt = await Runtime.open(db_url, clock=clock)
    try:
        state = await rt.create_thread("a")
        clock.now += 7_000_000
        status = await state.status()
        assert status == ThreadStatus(state="idle", since=1_700_000_123_456_789, reason=None)
        assert status.model_dump() == {
            "state": "idle",
            "since": 1_700_000_123_456_789,
            "reason": None,
            "error": None,  # a Threadloom addition: why a failed run failed (§1.7.4)
        }
        record = await rt.get_thread_record(state.thread_id)
        assert record.created_at == 1_700_000_123
        assert record.status == status
        assert q(rt, "SELECT created_at_us FROM threads WHERE id = ?", state.thread_id) == [
            (1_700_000_123_456_789,)
        ]
    finally:
        await rt.close()


# -- §1.9, §1.10 logs and cost --------------------------------------------------------------


async def test_c01_026_app_log_row_shape(runtime: Runtime) -> None:
    """C01-026: ``log({"name": "x", "cost": 0.005})`` → ``kind == "app"``, ``provider ==
    "app"``, ``model == "x"``, ``app_cost == 0.005``, ``cost_total is None``, ``is_complete``
    true, every LLM-only column None."""
    state = await runtime.create_thread("a")
    returned = await state.log({"name": "x", "cost": 0.005})
    assert returned is not None
    stored = await runtime.store.get_log(state.thread_id, returned.id)
    assert stored is not None
    for row in (returned, stored):
        assert row.kind == "app"
        assert row.provider == "app"
        assert row.model == "x"
        assert row.app_cost == 0.005
        assert row.cost_total is None
        assert row.is_complete is True
        assert row.error is None
        assert {c: getattr(row, c) for c in LLM_ONLY_COLUMNS} == dict.fromkeys(LLM_ONLY_COLUMNS)
    # the bodies are kept in log_bodies, beside the row; a short response in the row
    bodies = ("request_body", "response_body")
    columns = ", ".join(
        f"COALESCE({'l.response_body' if c == 'response_body' else 'NULL'},"
        f" (SELECT body FROM log_bodies b WHERE b.log_id = l.id AND b.part = '{c[:-5]}'))"
        if c in bodies
        else f"l.{c}"
        for c in LLM_ONLY_COLUMNS
    )
    joined = "logs l"
    assert q(runtime, f"SELECT {columns} FROM {joined} WHERE l.id = ?", returned.id) == [
        (None,) * len(LLM_ONLY_COLUMNS)
    ]


async def test_c01_027_cost_report_llm_and_app(runtime: Runtime) -> None:
    """C01-027: one LLM row costing 0.01 (model ``m``) and one app row costing 0.005 →
    totalCost 0.015, llmCost 0.01, appCost 0.005, requestCount 1, modelBreakdown one ``m``
    row, ownCost 0.015, avgCostPerMessage 0.01."""
    state = await runtime.create_thread("a")
    anchor = await state.inject_message(role="user", content="q")
    await runtime.store.insert_log(state.thread_id, llm_row(message_id=anchor.id))
    assert await state.log({"name": "x", "cost": 0.005}) is not None
    report = (await state.cost()).to_wire()
    assert report["totalCost"] == 0.015
    assert report["llmCost"] == 0.01
    assert report["appCost"] == 0.005
    assert report["requestCount"] == 1
    assert report["messageCount"] == 1
    assert report["ownCost"] == 0.015
    assert report["avgCostPerMessage"] == 0.01
    assert report["modelBreakdown"] == [
        {
            "modelName": "m",
            "totalCost": 0.01,
            "inputCost": 0.0,
            "cachedCost": 0.0,
            "outputCost": 0.0,
            "routerFeeCost": 0.0,
            "requestCount": 1,
            "unpricedRequestCount": 0,
            "avgCostPerRequest": 0.01,
        }
    ]
    assert report["avgCostPerMessageByModel"] == {"m": {"avgCost": 0.01, "messageCount": 1}}
    assert [r["threadId"] for r in report["threads"]] == [state.thread_id]
    assert report["threads"][0]["isRoot"] is True
    assert report["truncated"] is False


async def test_c01_049_requests_without_a_price_count(runtime: Runtime) -> None:
    """C01-049: one LLM row costing 0.01 (model ``m``) and two of model ``u`` without a
    price → requestCount 3 of which 2 unpriced, llmCost 0.01; ``u``'s breakdown row counts
    its 2 requests, unpriced, at no cost; ``m``'s average is over its priced request."""
    state = await runtime.create_thread("a")
    store = runtime.store
    await store.insert_log(state.thread_id, llm_row())
    for _ in range(2):
        await store.insert_log(state.thread_id, llm_row(model="u", cost_total=None))
    report = (await state.cost()).to_wire()
    assert (report["requestCount"], report["unpricedRequestCount"]) == (3, 2)
    assert report["llmCost"] == 0.01 and report["totalCost"] == 0.01
    by_model = {m["modelName"]: m for m in report["modelBreakdown"]}
    assert [m["modelName"] for m in report["modelBreakdown"]] == ["m", "u"]
    unpriced = by_model["u"]
    assert (unpriced["requestCount"], unpriced["unpricedRequestCount"]) == (2, 2)
    assert unpriced["totalCost"] == 0 and unpriced["avgCostPerRequest"] == 0
    priced = by_model["m"]
    assert (priced["requestCount"], priced["unpricedRequestCount"]) == (1, 0)
    assert priced["avgCostPerRequest"] == 0.01
    (root,) = report["threads"]
    assert (root["requestCount"], root["unpricedRequestCount"]) == (3, 2)


async def test_c01_028_child_app_cost_in_parent_report(runtime: Runtime) -> None:
    """C01-028: child thread with only an app cost of 0.002 → the parent's report has a
    ``threads`` row for the child with appCost 0.002, requestCount 0, isRoot false; the
    parent's totalCost includes 0.002."""
    parent = await runtime.create_thread("a")
    child = await runtime.create_thread("child_agent", parent=parent.thread_id)
    assert await child.log({"name": "tool.fee", "cost": 0.002}) is not None
    report = (await parent.cost()).to_wire()
    assert [r["threadId"] for r in report["threads"]] == [parent.thread_id, child.thread_id]
    row = report["threads"][1]
    assert row["appCost"] == 0.002
    assert row["requestCount"] == 0
    assert row["isRoot"] is False
    assert row["parent"] == parent.thread_id
    assert row["agentName"] == "child_agent"
    assert report["totalCost"] == 0.002
    assert report["appCost"] == 0.002
    assert report["ownCost"] == 0.0
    assert report["requestCount"] == 0


async def test_c01_029_fresh_thread_cost_report(runtime: Runtime) -> None:
    """C01-029: fresh thread → all zeros, modelBreakdown [], avgCostPerMessageByModel {},
    one root row, truncated false."""
    state = await runtime.create_thread("a", tags=["name:Fresh  one"])
    report = (await state.cost()).to_wire()
    zeros = {
        "totalCost": 0,
        "llmCost": 0,
        "appCost": 0,
        "inputCost": 0,
        "cachedCost": 0,
        "outputCost": 0,
        "routerFeeCost": 0,
        "ownCost": 0,
        "requestCount": 0,
        "unpricedRequestCount": 0,
        "messageCount": 0,
        "avgCostPerMessage": 0,
    }
    assert {k: report[k] for k in zeros} == zeros
    assert report["modelBreakdown"] == []
    assert report["avgCostPerMessageByModel"] == {}
    assert report["truncated"] is False
    assert report["threads"] == [
        {
            "threadId": state.thread_id,
            "agentName": "a",
            "threadName": "Fresh one",
            "parent": None,
            "isRoot": True,
            "totalCost": 0,
            "llmCost": 0,
            "appCost": 0,
            "inputCost": 0,
            "cachedCost": 0,
            "outputCost": 0,
            "routerFeeCost": 0,
            "requestCount": 0,
            "unpricedRequestCount": 0,
        }
    ]


async def test_c01_030_log_rows_survive_message_delete(runtime: Runtime) -> None:
    """C01-030: message M anchoring two log rows, one costing 0.01 → delete M → both rows
    remain with ``message_id is None``; the report still shows totalCost 0.01."""
    state = await runtime.create_thread("a")
    anchor = await state.inject_message(role="user", content="q")
    costed, _ = await runtime.store.insert_log(state.thread_id, llm_row(message_id=anchor.id))
    free, _ = await runtime.store.insert_log(
        state.thread_id, llm_row(message_id=anchor.id, cost_total=None)
    )
    assert await state.delete_message(anchor.id) is True
    assert await state.get_message(anchor.id) is None
    for row_id in (costed.id, free.id):
        row = await runtime.store.get_log(state.thread_id, row_id)
        assert row is not None and row.message_id is None
    assert sorted(
        q(runtime, "SELECT id, message_id FROM logs WHERE thread_id = ?", state.thread_id)
    ) == sorted([(costed.id, None), (free.id, None)])
    report = (await state.cost()).to_wire()
    assert report["totalCost"] == 0.01
    assert report["llmCost"] == 0.01
    assert (report["requestCount"], report["unpricedRequestCount"]) == (2, 1)


# -- §1.11 storage model ----------------------------------------------------------------------

THREAD_TABLES = {
    "threads": "id",
    "messages": "thread_id",
    "message_counts": "thread_id",
    "tool_calls": "thread_id",
    "message_queue": "thread_id",
    "logs": "thread_id",
    "subagent_registry": "parent_thread_id",
    "thread_events": "thread_id",
}


async def _populate(rt: Runtime, state: Any, tag: str) -> None:
    """Messages (with tool calls, a nested one), a queue entry and log rows on a thread."""
    user_id = await fill_thread(rt, state, tag)
    await rt.store.insert_log(state.thread_id, llm_row(message_id=user_id))


async def test_c01_031_delete_thread_cascades(runtime: Runtime) -> None:
    """C01-031: delete a thread with a child thread → the child, every message, queue
    entry, log row, registry entry and event row of both threads are gone (also counts and
    tool call rows); an unrelated thread is untouched."""
    parent = await runtime.create_thread("a")
    child = await runtime.create_thread("child_agent", parent=parent.thread_id)
    bystander = await runtime.create_thread("a")
    await runtime.store.upsert_registry_entry(
        parent.thread_id,
        SubagentRegistryEntry(
            reference=child.thread_id, relationship="r", owner="a", name="child_agent"
        ),
    )
    await runtime.store.upsert_registry_entry(
        child.thread_id,
        SubagentRegistryEntry(reference=new_id(), relationship="g", owner="a", name="grand"),
    )
    for tag, state in (("p", parent), ("c", child), ("b", bystander)):
        await _populate(runtime, state, tag)
    ids = (parent.thread_id, child.thread_id)
    for table, column in THREAD_TABLES.items():
        for tid in ids:
            assert q(runtime, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", tid)[0][0] > 0, (
                table,
                tid,
            )
    bystander_before = {
        t: q(runtime, f"SELECT COUNT(*) FROM {t} WHERE {c} = ?", bystander.thread_id)[0][0]
        for t, c in THREAD_TABLES.items()
    }

    deleted = await runtime.delete_thread(parent.thread_id)
    assert deleted == [child.thread_id, parent.thread_id]
    for table, column in THREAD_TABLES.items():
        for tid in ids:
            assert q(runtime, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", tid) == [(0,)], (
                table,
                tid,
            )
    assert q(
        runtime, "SELECT COUNT(*) FROM subagent_registry WHERE reference = ?", child.thread_id
    ) == [(0,)]
    assert {
        t: q(runtime, f"SELECT COUNT(*) FROM {t} WHERE {c} = ?", bystander.thread_id)[0][0]
        for t, c in THREAD_TABLES.items()
    } == bystander_before
    for tid in ids:
        with pytest.raises(ThreadNotFound):
            await runtime.thread(tid)


async def test_c01_062_deletes_carry_the_cascades_themselves(runtime: Runtime) -> None:
    """C01-062: the rows of ``logs``, ``log_requests``, ``log_bodies``, ``tool_calls`` and
    ``message_counts`` go with their thread or message by the delete itself (PostgreSQL
    keeps no foreign key on them, migration 20): a deleted message's ``tool_calls`` rows
    are gone and its log rows stay, unlinked, as does a row inserted later naming it; a
    deleted thread leaves none of them, its log rows' request rows and bodies included;
    another thread's rows stay."""
    from threadloom.records import RequestDelta

    doomed = await runtime.create_thread("a")
    kept = await runtime.create_thread("a")
    logs: dict[str, list[str]] = {}
    for tag, state in (("d", doomed), ("k", kept)):
        user_id = await fill_thread(runtime, state, tag)
        ((caller,),) = q(
            runtime,
            "SELECT id FROM messages WHERE thread_id = ? AND tool_calls IS NOT NULL",
            state.thread_id,
        )
        logs[tag] = []
        base = None
        for message_id in (user_id, caller):
            fragments = ('{"role":"user","content":"hi"}',) * (2 if base else 1)
            row = llm_row(
                message_id=message_id,
                request_body='{"messages":[' + ",".join(fragments) + "]}",
                request_delta=RequestDelta(base, 0, '{"messages":[', fragments, "]}"),
                response_body='{"content":"x"}',
            )
            await runtime.store.insert_log(state.thread_id, row)
            logs[tag].append(row.id)
            base = row.id
    by_log = {"log_requests": "log_id", "log_bodies": "log_id"}
    by_thread = {"logs": "thread_id", "tool_calls": "thread_id", "message_counts": "thread_id"}

    def rows(tag: str, tid: str) -> dict[str, int]:
        marks = ",".join("?" * len(logs[tag]))
        found = {
            t: q(runtime, f"SELECT COUNT(*) FROM {t} WHERE {c} IN ({marks})", *logs[tag])[0][0]
            for t, c in by_log.items()
        }
        for t, c in by_thread.items():
            found[t] = q(runtime, f"SELECT COUNT(*) FROM {t} WHERE {c} = ?", tid)[0][0]
        return found

    assert all(rows("d", doomed.thread_id).values()), rows("d", doomed.thread_id)
    kept_before = rows("k", kept.thread_id)

    ((caller,),) = q(
        runtime,
        "SELECT id FROM messages WHERE thread_id = ? AND tool_calls IS NOT NULL",
        doomed.thread_id,
    )
    logged = q(runtime, "SELECT COUNT(*) FROM logs WHERE thread_id = ?", doomed.thread_id)
    assert await doomed.delete_message(caller) is True
    assert q(runtime, "SELECT COUNT(*) FROM tool_calls WHERE message_id = ?", caller) == [(0,)]
    assert q(runtime, "SELECT message_id FROM logs WHERE id = ?", logs["d"][1]) == [(None,)]
    assert q(runtime, "SELECT COUNT(*) FROM logs WHERE thread_id = ?", doomed.thread_id) == logged
    late = llm_row(message_id=caller)  # a row of the deleted message's run, written after it
    await runtime.store.insert_log(doomed.thread_id, late)
    assert q(runtime, "SELECT message_id FROM logs WHERE id = ?", late.id) == [(None,)]
    logs["d"].append(late.id)

    assert await runtime.delete_thread(doomed.thread_id) == [doomed.thread_id]
    assert rows("d", doomed.thread_id) == dict.fromkeys([*by_log, *by_thread], 0)
    assert rows("k", kept.thread_id) == kept_before


@pytest.mark.sqlite_only
async def test_c01_032_sqlite_pragmas_on_every_connection(runtime: Runtime) -> None:
    """C01-032: SQLite store opened with defaults → on every connection ``foreign_keys`` = 1,
    ``journal_mode`` = wal, ``synchronous`` = 2 (FULL). Checked on a connection the store
    opens (``store.pragma``), on every live connection of the store (writer and the readers
    created by a few concurrent reads), and ``journal_mode`` (persistent) on our own
    connection to the file."""
    store: Any = runtime.store
    assert store.pragma("foreign_keys") == 1
    assert store.pragma("synchronous") == 2
    assert str(store.pragma("journal_mode")).lower() == "wal"
    state = await runtime.create_thread("a")
    await state.inject_message(role="user", content="x")
    await asyncio.gather(*(state.get_messages() for _ in range(8)))
    live = list(store._connections)
    assert len(live) >= 2  # the writer and at least one reader
    for conn in live:
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
    with closing(sqlite3.connect(db_path(runtime))) as own:
        assert own.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _seed_top_level(path: str, thread_id: str, n: int, base_us: int) -> None:
    """Seed ``n`` visible top-level messages with raw SQL in one transaction on the file,
    with the matching ``message_counts`` row and thread counters (inject_message would take
    minutes for 100,000 rows; the rows are exactly what the store itself would write)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN IMMEDIATE")
        # rid: the thread's key range (SQLite migration 8), as the store writes it
        (tnum,) = conn.execute("SELECT tnum FROM threads WHERE id = ?", (thread_id,)).fetchone()
        conn.executemany(
            "INSERT INTO messages(rid, thread_id, seq, id, role, content, status, created_at,"
            " depth, silent) VALUES (?, ?, ?, ?, 'user', ?, 'completed', ?, 0, 0)",
            (
                (tnum * 2**32 + i, thread_id, i, str(uuid.uuid4()), f"m{i}", base_us + i)
                for i in range(1, n + 1)
            ),
        )
        conn.execute(
            "INSERT INTO message_counts(thread_id, depth, silent, count) VALUES (?, 0, 0, ?)",
            (thread_id, n),
        )
        conn.execute(
            "UPDATE threads SET msg_seq = ?, clock_us = ? WHERE id = ?",
            (n, base_us + n, thread_id),
        )
        conn.execute("COMMIT")


def _trace_default_page(path: str, thread_id: str) -> tuple[list[str], int]:
    """Run the store's own ``read_page`` (the function ``SqliteStore.read_page`` runs) for
    the default page on a traced connection: the SQL it executes and its VM step count."""
    statements: list[str] = []
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    with closing(sqlite3.connect(path)) as conn:
        conn.set_trace_callback(statements.append)
        conn.set_progress_handler(step, 1)
        sqlite_messages.read_page(conn, thread_id, 100, 0, "desc", False, 0)
        conn.set_progress_handler(None, 1)
        conn.set_trace_callback(None)
    return statements, steps[0]


def _plan(path: str, sql: str) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]


@pytest.mark.sqlite_only
async def test_c01_033_default_page_uses_partial_index(runtime: Runtime) -> None:
    """C01-033: SQLite, thread with 100,000 top-level messages → the query plan of the
    default page read uses the partial index (no full scan of ``messages``), and ``total``
    is read from ``message_counts``. The 100,000 rows are seeded with raw SQL in one
    transaction (see ``_seed_top_level``); the plan is taken of the exact statements the
    store's ``read_page`` executes (captured with a trace callback). The read also costs
    about the same number of SQLite VM steps as on a 100-message thread."""
    path = db_path(runtime)
    big = await runtime.create_thread("a")
    small = await runtime.create_thread("a")
    _seed_top_level(path, big.thread_id, 100_000, 1_700_000_000_000_000)
    _seed_top_level(path, small.thread_id, 100, 1_700_000_000_000_000)

    page = await big.get_messages()
    assert page.total == 100_000
    assert page.has_more is True
    assert len(page.messages) == 100
    assert page.messages[0].content == "m100000" and page.messages[-1].content == "m99901"

    statements, big_steps = _trace_default_page(path, big.thread_id)
    _, small_steps = _trace_default_page(path, small.thread_id)
    queries = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    from_messages = [s for s in queries if re.search(r"\bFROM messages\b", s)]
    from_counts = [s for s in queries if re.search(r"\bFROM message_counts\b", s)]
    assert len(from_messages) == 1, queries
    assert len(from_counts) == 1, queries
    # the page statement: a SEARCH through the partial index, no scan, no sort
    plan = _plan(path, from_messages[0])
    assert any(
        d.startswith("SEARCH messages USING") and "INDEX messages_top_visible" in d for d in plan
    ), plan
    assert not any(d.startswith("SCAN messages") for d in plan), plan
    assert not any("TEMP B-TREE" in d for d in plan), plan
    assert "COUNT(" not in from_messages[0].upper()
    # the total: a keyed read of message_counts, never a count over messages
    count_plan = _plan(path, from_counts[0])
    assert any(d.startswith("SEARCH message_counts") for d in count_plan), count_plan
    assert not any(re.search(r"COUNT\(\*\)\s+FROM messages\b", s, re.I) for s in statements)
    assert q(
        runtime, "SELECT SUM(count) FROM message_counts WHERE thread_id = ?", big.thread_id
    ) == [(page.total,)]
    # same cost on 100 and on 100,000 messages
    assert big_steps < small_steps * 1.5, (big_steps, small_steps)


def _count_mismatch(rt: Runtime, tid: str) -> tuple[dict[Any, int], dict[Any, int]]:
    """The kept counts per (depth, silent) and the counts recomputed from ``messages``. The
    visible top-level count is kept in the thread row (SQLite migration 7), the others in
    ``message_counts``."""
    kept = {
        (d, s): c
        for d, s, c in q(
            rt, "SELECT depth, silent, count FROM message_counts WHERE thread_id = ?", tid
        )
    }
    top = q(rt, "SELECT top_visible_count FROM threads WHERE id = ?", tid)
    kept[(0, 0)] = kept.get((0, 0), 0) + top[0][0]
    real = {
        (d, s): c
        for d, s, c in q(
            rt,
            "SELECT depth, silent, COUNT(*) FROM messages WHERE thread_id = ?"
            " GROUP BY depth, silent",
            tid,
        )
    }
    return kept, real


_op = st.one_of(
    st.tuples(st.just("inject"), st.booleans(), st.integers(0, 10**6)),
    st.tuples(st.just("nested"), st.booleans(), st.integers(0, 10**6)),
    st.tuples(st.just("tool_pair"), st.booleans(), st.integers(0, 10**6)),
    st.tuples(st.just("delete"), st.booleans(), st.integers(0, 10**6)),
    st.tuples(st.just("toggle"), st.booleans(), st.integers(0, 10**6)),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_c01_034_message_counts_match_messages(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, bool, int]]
) -> None:
    """C01-034: random inserts, deletes (with their cascades: tool results and nested
    messages) and ``silent`` updates through ThreadState (nested messages through the store,
    as the engine writes them) → ``message_counts`` equals the counts recomputed from
    ``messages`` after every step (property test)."""
    path = tmp_path_factory.mktemp("c01_034") / "threadloom.db"

    async def scenario() -> None:
        rt = await Runtime.open(f"sqlite:///{path}")
        try:
            state = await rt.create_thread("a")
            tid = state.thread_id
            for n, (kind, flag, pick) in enumerate(ops):
                existing = q(
                    rt,
                    "SELECT id, depth, silent FROM messages WHERE thread_id = ? ORDER BY seq",
                    tid,
                )
                if kind in ("nested", "delete", "toggle") and not existing:
                    kind = "inject"
                if kind == "inject":
                    await state.inject_message(role="user", content=f"m{n}", silent=flag)
                elif kind == "nested":
                    parent_id, depth, _ = existing[pick % len(existing)]
                    await rt.store.insert_message(
                        tid,
                        Message(
                            id=new_id(),
                            role="assistant",
                            content=f"n{n}",
                            depth=depth + 1,
                            parent_id=parent_id,
                            silent=flag,
                        ),
                    )
                elif kind == "tool_pair":
                    call = f"call_{n}"
                    await state.inject_message(
                        role="assistant",
                        content=None,
                        silent=flag,
                        tool_calls=[{"id": call, "function": {"name": "t", "arguments": "{}"}}],
                    )
                    await state.inject_message(
                        role="tool", content="r", tool_call_id=call, silent=not flag
                    )
                elif kind == "delete":
                    assert await state.delete_message(existing[pick % len(existing)][0]) is True
                else:
                    mid, _, silent = existing[pick % len(existing)]
                    updated = await state.update_message(mid, silent=not bool(silent))
                    assert updated.silent is (not bool(silent))
                kept, real = _count_mismatch(rt, tid)
                assert all(c >= 0 for c in kept.values()), kept
                assert {k: c for k, c in kept.items() if c} == real, (n, kind, kept, real)
                page = await state.get_messages(limit=0, include_silent=True, max_depth=None)
                assert page.total == sum(real.values())
        finally:
            await rt.close()

    asyncio.run(scenario())


async def test_c01_035_records_survive_restart(open_runtime: Any) -> None:
    """C01-035: write messages (tool calls, attachments, metadata, silent, nested), queue
    entries, a status change (an idle status with a reason, through the store: a running
    status would be settled at reopen) and logs (app and LLM rows); close; reopen the file
    in a new Runtime → every record reads back equal (wire forms compared)."""
    rt = await open_runtime()
    state = await rt.create_thread("a", user_id="u1", tags=["name:Keep"], arguments={"x": [1]})
    tid = state.thread_id
    child = await rt.create_thread("child_agent", parent=tid)
    await rt.store.upsert_registry_entry(
        tid,
        SubagentRegistryEntry(
            reference=child.thread_id,
            relationship="r",
            owner="a",
            name="child_agent",
            status="idle",
            blocking=True,
        ),
    )
    user = await state.inject_message(
        role="user",
        content="héllo ✓",
        attachments=[attachment(width=10, height=20, description="pic")],
        metadata={"k": "v", "nested": {"a": [1, 2.5, None, True]}},
    )
    await state.inject_message(
        role="assistant",
        content=None,
        tool_calls=[
            {"id": "c1", "function": {"name": "echo", "arguments": '{"a": 1}'}},
            {
                "id": "c2",
                "function": {"name": "look", "arguments": ""},
                "extra_content": {"sig": "abc"},
            },
        ],
    )
    result = await state.inject_message(
        role="tool", content="r1", name="echo", tool_call_id="c1", tool_status="success"
    )
    await state.inject_message(role="tool", content="r2", name="look", tool_call_id="c2")
    await rt.store.insert_message(
        tid, Message(id=new_id(), role="assistant", content="inner", depth=1, parent_id=result.id)
    )
    await state.inject_message(role="system", content="quiet", silent=True)
    await state.inject_message(
        role="user", content="about child", metadata={"subagent_id": child.thread_id}
    )
    await state.queue_message(role="user", content="q1", metadata={"m": 1})
    await state.queue_message(role="system", content="q2", silent=True, attachments=[attachment()])
    await rt.store.set_status(
        tid, ThreadStatus(state="idle", since=1_700_000_000_000_001, reason="stop_on_response")
    )
    await state.log({"name": "app.x", "message": "did", "cost": 0.001, "data": {"d": 1}})
    await rt.store.insert_log(
        tid,
        llm_row(
            message_id=user.id,
            input_tokens=10,
            output_tokens=5,
            cost_input=0.004,
            cost_output=0.006,
            request_body='{"messages": []}',
            is_complete=True,
        ),
    )

    async def snapshot(r: Runtime) -> dict[str, Any]:
        s = await r.thread(tid)
        everything = await all_messages(s)
        return {
            "messages": [m.to_wire() for m in everything],
            "each": [(await s.get_message(m.id)).to_wire() for m in everything],  # type: ignore[union-attr]
            "default_page": (await s.get_messages()).to_wire(),
            "status": (await s.status()).model_dump(),
            "record": (await r.get_thread_record(tid)).model_dump(),
            "logs": [row.model_dump() for row in await r.store.list_logs(tid)],
            "log_list": [row.to_list_wire() for row in await r.store.list_logs(tid)],
            "queue": [e.model_dump() for e in await r.store.list_queue(tid)],
            "registry": [e.model_dump() for e in await s.get_children()],
            "cost": (await s.cost()).to_wire(),
            "events": await r.store.read_events(tid, 0),
        }

    before = await snapshot(rt)
    assert len(before["messages"]) == 9 and len(before["queue"]) == 2 and len(before["logs"]) == 2
    await rt.close()
    reopened = await open_runtime()
    try:
        after = await snapshot(reopened)
        for key in before:
            assert after[key] == before[key], key
        assert after["status"] == {
            "state": "idle",
            "since": 1_700_000_000_000_001,
            "reason": "stop_on_response",
            "error": None,
        }
    finally:
        await reopened.close()


async def test_c01_036_event_numbering(runtime: Runtime) -> None:
    """C01-036: ten writes of different kinds to one thread (none a multi-message delete)
    → ``thread_events`` has seq 1…10, contiguous, in commit order, one row per durable
    event; a delete that cascades to three messages then adds seq 11, 12, 13."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    sub = runtime.events.subscribe(tid)
    m = await state.inject_message(  # 1
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "function": {"name": "echo", "arguments": "{}"}}],
    )
    t = await state.inject_message(  # 2
        role="tool", content="ok", name="echo", tool_call_id="c1", tool_status="success"
    )
    nested, _ = await runtime.store.insert_message(  # 3 (engine write: nested message)
        tid, Message(id=new_id(), role="assistant", content="in", depth=1, parent_id=t.id)
    )
    entry = await state.queue_message(role="user", content="later")  # 4
    await state.update_message(m.id, content="edited")  # 5
    await state.update_message(entry.id, content="later2")  # 6
    log = await state.log({"name": "x"})  # 7
    assert log is not None
    ref = new_id()
    await runtime.store.upsert_registry_entry(  # 8
        tid, SubagentRegistryEntry(reference=ref, relationship="r", owner="a", name="c")
    )
    await runtime.store.set_status(  # 9
        tid, ThreadStatus(state="idle", since=1, reason="stop_on_response")
    )
    assert await state.delete_message(entry.id) is True  # 10

    expected = [
        (1, "message", m.id),
        (2, "message", t.id),
        (3, "message", nested.id),
        (4, "message", entry.id),
        (5, "message", m.id),
        (6, "message", entry.id),
        (7, "log", log.id),
        (8, "subagent", ref),
        (9, "status", tid),
        (10, "message_deleted", entry.id),
    ]
    rows = q(
        runtime,
        "SELECT seq, kind, entity_id FROM thread_events WHERE thread_id = ? ORDER BY seq",
        tid,
    )
    assert rows == expected
    assert counters(runtime, tid)[3] == 10

    assert await state.delete_message(m.id) is True  # cascades to t and nested
    rows = q(
        runtime,
        "SELECT seq, kind, entity_id, payload, created_at FROM thread_events"
        " WHERE thread_id = ? ORDER BY seq",
        tid,
    )
    assert [r[:3] for r in rows] == [
        *expected,
        (11, "message_deleted", m.id),
        (12, "message_deleted", t.id),
        (13, "message_deleted", nested.id),
    ]
    assert [json.loads(r[3]) for r in rows[10:]] == [
        {"depth": 0, "silent": False},
        {"depth": 0, "silent": False},
        {"depth": 1, "silent": False},
    ]
    stamps = [r[4] for r in rows]
    assert stamps == sorted(stamps)
    assert counters(runtime, tid)[3] == 13
    assert [(e.seq, e.kind, e.entity_id) for e in await runtime.store.read_events(tid, 0)] == [
        r[:3] for r in rows
    ]
    # what the bus published for ThreadState writes carries the same numbers; where
    # several nodes may write the store, a subscriber gets every durable event in order,
    # the ones no ThreadState published (3, 8, 9) read from the rows (spec 12 §12.7.1)
    delivery = runtime.relay.delivery if runtime.relay is not None else None
    if delivery is not None:
        await delivery.idle(tid)
    published = [(e.seq, e.kind) for e in sub.drain() if e.seq is not None]
    sub.close()
    unpublished = () if delivery is not None else (3, 8, 9)
    assert published == [(r[0], r[1]) for r in rows if r[0] not in unpublished]


async def test_c01_037_failed_transaction_writes_nothing(runtime: Runtime) -> None:
    """C01-037: a write whose transaction fails (duplicate tool call id, detected by the
    store inside the transaction) → no message, no counter change, no event row."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    await state.inject_message(
        role="assistant",
        content=None,
        tool_calls=[{"id": "c1", "function": {"name": "echo", "arguments": "{}"}}],
    )
    await state.queue_message(role="user", content="q")
    await state.log({"name": "x"})
    before = thread_snapshot(runtime, tid)
    sub = runtime.events.subscribe(tid)
    with pytest.raises(InvalidMessage):
        await state.inject_message(
            role="assistant",
            content="again",
            tool_calls=[
                {"id": "c2", "function": {"name": "echo", "arguments": "{}"}},
                {"id": "c1", "function": {"name": "echo", "arguments": "{}"}},
            ],
        )
    after = thread_snapshot(runtime, tid)
    assert after == before
    assert after["counters"] == before["counters"]
    assert len(after["messages"]) == 1 and len(after["events"]) == 3
    assert q(runtime, "SELECT COUNT(*) FROM tool_calls WHERE thread_id = ? AND id = 'c2'", tid) == [
        (0,)
    ]
    assert [e for e in sub.drain() if e.seq is not None] == []
    sub.close()
    # the next write takes the numbers the failed one would have taken
    ok = await state.inject_message(role="user", content="fine")
    assert q(runtime, "SELECT seq FROM messages WHERE id = ?", ok.id) == [(2,)]
    assert counters(runtime, tid)[3] == 4


async def test_c01_038_missing_directory_names_path(tmp_path: Path) -> None:
    """C01-038: store URL pointing into a non-existent directory → opening the Runtime
    raises a clear error (StoreError) naming the path; nothing is created."""
    target = tmp_path / "does" / "not" / "exist" / "threadloom.db"
    with pytest.raises(StoreError) as info:
        await Runtime.open(f"sqlite:///{target}")
    assert str(target) in str(info.value)
    assert not (tmp_path / "does").exists()


async def test_c01_039_same_stamp_logs_in_insertion_order(db_url: str) -> None:
    """C01-039: log rows written in the same µs → the list returns them in insertion
    order (five rows, so an order by id or rowid-free tie-break would show)."""
    clock = FakeClock(1_700_000_000_000_000)
    rt = await Runtime.open(db_url, clock=clock)
    try:
        state = await rt.create_thread("a")
        written = []
        for i in range(5):
            row = await state.log({"name": f"entry{i}"})
            assert row is not None
            written.append(row)
        listed = await rt.store.list_logs(state.thread_id)
        assert [r.id for r in listed] == [r.id for r in written]
        assert [r.model for r in listed] == [f"entry{i}" for i in range(5)]
        assert {r.created_at for r in listed} == {clock.now}
    finally:
        await rt.close()


async def test_c01_040_terminated_thread_entry_cancelled(runtime: Runtime) -> None:
    """C01-040 (untagged part): one waiting queue entry → terminate the thread → the
    entry's pending view has ``status == "pending"``, ``metadata.queued is True``,
    ``metadata.queue_status == "cancelled"``. ([engine] "never delivered" is out of scope.)"""
    state = await runtime.create_thread("a")
    entry = await state.queue_message(role="user", content="waiting")
    assert entry.metadata is not None and entry.metadata["queue_status"] == "queued"
    await state.terminate()
    read = await state.get_message(entry.id)
    page = await state.get_messages()
    fresh = await (await runtime.thread(state.thread_id)).get_message(entry.id)
    assert [m.id for m in page.messages] == [entry.id]
    for view in (read, page.messages[0], fresh):
        assert view is not None
        assert view.status == "pending"
        assert view.metadata is not None
        assert view.metadata["queued"] is True
        assert view.metadata["queue_status"] == "cancelled"
        assert view.metadata["queue_source"] == "queue_message"
    assert q(runtime, "SELECT COUNT(*) FROM message_queue WHERE id = ?", entry.id) == [(1,)]


async def test_c01_041_system_queue_entry_pending_view(runtime: Runtime) -> None:
    """C01-041 (untagged part): queue an entry with ``role: "system"`` → pending view
    ``role == "system"``. ([engine] delivery as a stored system message is out of scope.)"""
    state = await runtime.create_thread("a")
    entry = await state.queue_message(role="system", content="heads up")
    read = await state.get_message(entry.id)
    assert read is not None
    for view in (entry, read):
        assert view.role == "system"
        assert view.status == "pending"
        assert view.to_wire()["role"] == "system"
    assert q(runtime, "SELECT role FROM message_queue WHERE id = ?", entry.id) == [("system",)]
