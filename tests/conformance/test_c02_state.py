"""Conformance cases C02-055 … C02-090 (spec 02 §2.9–§2.17): status, set_status, log, user,
terminate, parent/child, notify_parent, arguments/context, the event bus and emit.

Every test runs a real ``Runtime`` on a real SQLite file. Setup the API cannot do yet (a
``running`` status, registry entries, costed LLM rows, nested messages) is written through
the real store (``rt.store``).
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock
from threadloom import Runtime, ThreadState
from threadloom.errors import EventOverflow, InvalidArgument, ThreadTerminated
from threadloom.records import (
    LogRow,
    Message,
    SubagentRegistryEntry,
    ThreadStatus,
    UserHandle,
    json_compact,
    new_id,
)
from threadloom.thread.events import ThreadEvent
from threadloom.thread.lognorm import (
    BODY_LIMIT,
    DATA_LIMIT,
    LEVELS,
    NAME_LIMIT,
    STATUSES,
    TEXT_LIMIT,
    build_entry,
    normalize_log_entry,
)

MARK = "…[truncated]"
TERMINATED_PREFIX = "Thread is terminated (terminated_at="


# --------------------------------------------------------------------------------------
# Helpers


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


async def make_child(
    rt: Runtime,
    parent: ThreadState,
    *,
    owner: str = "a",
    status: str = "running",
    arguments: dict[str, Any] | None = None,
) -> ThreadState:
    """A child thread of ``parent`` with a seeded registry entry on the parent."""
    child = await rt.create_thread("child", parent=parent.thread_id, arguments=arguments)
    await rt.store.upsert_registry_entry(
        parent.thread_id,
        SubagentRegistryEntry(
            reference=child.thread_id,
            relationship="helper",
            owner=owner,  # type: ignore[arg-type]
            name="child",
            status=status,
        ),
    )
    return child


async def entry_for(rt: Runtime, parent_id: str, child_id: str) -> SubagentRegistryEntry:
    entries = {e.reference: e for e in await rt.store.get_registry(parent_id)}
    return entries[child_id]


async def all_messages(state: ThreadState) -> list[Message]:
    """Every stored message and pending view of the thread, any depth, silent included."""
    page = await state.get_messages(limit=None, order="asc", include_silent=True, max_depth=None)
    return page.messages


async def event_rows(rt: Runtime, thread_id: str) -> list[tuple[int, str, str | None]]:
    return [(e.seq, e.kind, e.entity_id) for e in await rt.store.read_events(thread_id, 0)]


async def stored_log(rt: Runtime, thread_id: str, row: LogRow | None) -> LogRow:
    assert row is not None
    found = await rt.store.get_log(thread_id, row.id)
    assert found is not None
    assert found == row
    return found


# --------------------------------------------------------------------------------------
# status (§2.9)


async def test_c02_055_new_thread_status_is_idle_since_creation(db_url: str) -> None:
    """C02-055: new T → ``status()`` → ``{state: "idle", since: <creation µs>, reason: None}``."""
    clock = FakeClock(1_700_000_000_123_456)
    rt = await Runtime.open(db_url, clock=clock)
    try:
        t = await rt.create_thread("chat")
        clock.now += 5_000_000
        status = await t.status()
        assert status == ThreadStatus(state="idle", since=1_700_000_000_123_456, reason=None)
        record = await rt.get_thread_record(t.thread_id)
        assert record.status == status
        assert record.created_at == 1_700_000_000  # seconds on the record (C13)
    finally:
        await rt.close()


async def test_c02_056_running_status_settles_to_execution_lost_on_reopen(db_url: str) -> None:
    """C02-056: T whose stored status is ``running`` (written directly), Runtime closed
    without running it, reopened → ``status()`` is ``{state: "failed", reason:
    "execution_lost"}`` with a newer ``since``."""
    clock = FakeClock()
    rt = await Runtime.open(db_url, clock=clock)
    t = await rt.create_thread("chat")
    clock.now += 1_000
    running_since = clock.now
    await rt.store.set_status(
        t.thread_id, ThreadStatus(state="running", since=running_since, reason=None)
    )
    assert (await t.status()).state == "running"
    await rt.close()

    clock.now += 2_000_000
    rt2 = await Runtime.open(db_url, clock=clock)
    try:
        status = await (await rt2.thread(t.thread_id)).status()
        assert status.state == "failed"
        assert status.reason == "execution_lost"
        assert status.since > running_since
        # the settlement is a durable status change with its event row
        kinds = [kind for _, kind, _ in await event_rows(rt2, t.thread_id)]
        assert kinds[-1] == "status"
    finally:
        await rt2.close()


# --------------------------------------------------------------------------------------
# set_status (§2.10)


async def test_c02_057_set_status_writes_parent_registry_label(runtime: Runtime) -> None:
    """C02-057: child C of parent P (entry status ``running``) → ``C.set_status("  half done
    ")`` → P's entry status ``"half done"``; a P message with ``subagent_id == C`` reads
    ``subagent_status == "half done"``; C's ``status()`` unchanged."""
    rt = runtime
    p = await rt.create_thread("parent")
    c = await make_child(rt, p, status="running")
    link = await p.inject_message(
        role="assistant", content="spawned", metadata={"subagent_id": c.thread_id}
    )
    assert link.subagent_id == c.thread_id
    assert link.subagent_status == "running"
    before = await c.status()
    sub = rt.events.subscribe(None)

    assert await c.set_status("  half done ") is None

    assert (await entry_for(rt, p.thread_id, c.thread_id)).status == "half done"
    reread = await p.get_message(link.id)
    assert reread is not None
    assert reread.subagent_status == "half done"
    page = await p.get_messages()
    assert [m.subagent_status for m in page.messages] == ["half done"]
    assert await c.status() == before
    # one `subagent` event on the parent, none on the child (its ThreadStatus is untouched)
    events = sub.drain()
    assert [(e.thread_id, e.kind) for e in events] == [(p.thread_id, "subagent")]
    assert events[0].data["entry"]["status"] == "half done"
    assert events[0].data["entry"]["id"] == c.thread_id
    assert isinstance(events[0].seq, int)


async def test_c02_058_c06_032_set_status_validation_and_root_noop(runtime: Runtime) -> None:
    """C02-058: ``set_status("   ")`` → ``InvalidArgument``; ``set_status(3)`` →
    ``InvalidArgument``; root thread ``set_status("x")`` → returns ``None``, nothing
    changes. C06-032: ``set_status("")`` → ``InvalidArgument("set_status requires
    non-empty status")``."""
    rt = runtime
    p = await rt.create_thread("parent")
    c = await make_child(rt, p)
    sub = rt.events.subscribe(None)

    with pytest.raises(InvalidArgument, match="set_status requires non-empty status"):
        await c.set_status("   ")
    with pytest.raises(InvalidArgument) as empty:
        await c.set_status("")
    assert str(empty.value) == "set_status requires non-empty status"
    with pytest.raises(InvalidArgument):
        await c.set_status(3)  # type: ignore[arg-type]
    assert (await entry_for(rt, p.thread_id, c.thread_id)).status == "running"

    root = await rt.create_thread("chat")
    status_before = await root.status()
    events_before = await event_rows(rt, root.thread_id)
    assert await root.set_status("x") is None
    assert await root.status() == status_before
    assert await event_rows(rt, root.thread_id) == events_before
    assert await rt.store.get_registry(root.thread_id) == []
    # creating ``root`` announced it (thread_created feeds /api/events, spec 09 §9.14)
    assert [e for e in sub.drain() if e.kind != "thread_created"] == []


# --------------------------------------------------------------------------------------
# log (§2.11)


async def test_c02_059_log_mapping_fields_and_anchor(runtime: Runtime) -> None:
    """C02-059: ``log({"name": "cache.miss", "level": "debug", "message": "cold start"})``
    on T with messages → row ``kind == "app"``, ``model == "cache.miss"``, ``app_level ==
    "debug"``, ``app_message == "cold start"``, ``message_id`` = newest top-level message id.

    The newest top-level message is silent here (the anchor counts silent messages), and a
    newer depth-1 message exists (the anchor ignores it)."""
    rt = runtime
    t = await rt.create_thread("chat")
    await t.inject_message(role="user", content="hello")
    newest_top = await t.inject_message(role="assistant", content="note", silent=True)
    await rt.store.insert_message(
        t.thread_id,
        Message(id=new_id(), role="user", content="nested", depth=1, parent_id=newest_top.id),
    )

    row = await t.log({"name": "cache.miss", "level": "debug", "message": "cold start"})

    assert row is not None
    assert row.kind == "app"
    assert row.provider == "app"
    assert row.model == "cache.miss"
    assert row.app_level == "debug"
    assert row.app_message == "cold start"
    assert row.message_id == newest_top.id
    assert row.is_complete is True
    assert row.cost_total is None
    assert row.error is None
    assert row.app_status is None
    assert row.app_data is None
    await stored_log(rt, t.thread_id, row)


async def test_c02_060_log_before_first_message_and_log_event(runtime: Runtime) -> None:
    """C02-060: fresh T → ``log(name="boot")`` → ``message_id is None``; a log subscriber
    receives a ``log`` event with that row."""
    rt = runtime
    t = await rt.create_thread("chat")
    sub = rt.events.subscribe(t.thread_id, kinds=["log"])

    row = await t.log(name="boot")

    assert row is not None
    assert row.message_id is None
    assert row.model == "boot"
    assert row.app_level == "info"
    await stored_log(rt, t.thread_id, row)
    events = sub.drain()
    assert len(events) == 1
    event = events[0]
    assert event.kind == "log"
    assert event.thread_id == t.thread_id
    assert event.data == {"log": row.to_list_wire()}
    assert event.data["log"]["id"] == row.id
    assert event.data["log"]["kind"] == "app"
    assert (event.seq, "log", row.id) == (await event_rows(rt, t.thread_id))[-1]


async def test_c02_061_log_name_rule(runtime: Runtime) -> None:
    """C02-061: ``log(name="x"*500)`` → ``model`` is 120 characters ending with ``…``;
    ``log(name="x"*120)`` → unchanged."""
    t = await runtime.create_thread("chat")
    long_row = await stored_log(runtime, t.thread_id, await t.log(name="x" * 500))
    assert len(long_row.model) == NAME_LIMIT == 120
    assert long_row.model == "x" * 119 + "…"
    exact_row = await stored_log(runtime, t.thread_id, await t.log(name="x" * 120))
    assert exact_row.model == "x" * 120


async def test_c02_062_log_message_text_rule(runtime: Runtime) -> None:
    """C02-062: ``log(name="m", message="é"*3000)`` (6,000 bytes) → ``app_message`` is ≤ 4,096
    bytes, ends with ``…[truncated]``, and no longer prefix would fit."""
    t = await runtime.create_thread("chat")
    original = "é" * 3000
    assert nbytes(original) == 6000
    row = await stored_log(runtime, t.thread_id, await t.log(name="m", message=original))
    text = row.app_message
    assert text is not None
    assert nbytes(text) <= TEXT_LIMIT
    assert text.endswith(MARK)
    prefix = text[: -len(MARK)]
    assert original.startswith(prefix)
    assert nbytes(original[: len(prefix) + 1] + MARK) > TEXT_LIMIT
    # 4,096 − 14 marker bytes = 4,082 bytes = 2,041 two-byte characters
    assert text == "é" * 2041 + MARK


async def test_c02_063_log_data_json_rule(runtime: Runtime) -> None:
    """C02-063: ``log(name="d", data={"s": "x"*20000})`` → ``app_data`` parses to
    ``{"$truncated": true, "bytes": <n>, "preview": …}`` and is ≤ 16,384 bytes; data of
    exactly 16,384 bytes is stored unchanged."""
    t = await runtime.create_thread("chat")
    data = {"s": "x" * 20000}
    full = json_compact(data)
    row = await stored_log(runtime, t.thread_id, await t.log(name="d", data=data))
    assert row.app_data is not None
    assert nbytes(row.app_data) <= DATA_LIMIT
    parsed = json.loads(row.app_data)
    assert list(parsed) == ["$truncated", "bytes", "preview"]
    assert parsed["$truncated"] is True
    assert parsed["bytes"] == nbytes(full) == 20008
    preview = parsed["preview"]
    assert full.startswith(preview)
    longer = json_compact(
        {"$truncated": True, "bytes": parsed["bytes"], "preview": full[: len(preview) + 1]}
    )
    assert nbytes(longer) > DATA_LIMIT  # the preview is the longest that fits

    exact = {"s": "x" * (DATA_LIMIT - len('{"s":""}'))}
    exact_text = json_compact(exact)
    assert nbytes(exact_text) == DATA_LIMIT
    exact_row = await stored_log(runtime, t.thread_id, await t.log(name="d", data=exact))
    assert exact_row.app_data == exact_text


async def test_c02_064_log_unserializable_markers(runtime: Runtime) -> None:
    """C02-064: ``log(name="r", request={1, 2}, response=float("nan"))`` →
    ``app_request == '{"$unserializable":"set"}'``, ``app_response ==
    '{"$unserializable":"float"}'``."""
    t = await runtime.create_thread("chat")
    row = await stored_log(
        runtime, t.thread_id, await t.log(name="r", request={1, 2}, response=float("nan"))
    )
    assert row.app_request == '{"$unserializable":"set"}'
    assert row.app_response == '{"$unserializable":"float"}'


async def test_c02_065_log_string_request_stays_text(runtime: Runtime) -> None:
    """C02-065: ``log(name="s", request="{\\"a\\":1}")`` → ``app_request == '"{\\\\"a\\\\":1}"'``
    (a JSON string, never parsed)."""
    t = await runtime.create_thread("chat")
    row = await stored_log(runtime, t.thread_id, await t.log(name="s", request='{"a":1}'))
    assert row.app_request == '"{\\"a\\":1}"'
    assert json.loads(row.app_request) == '{"a":1}'


async def test_c02_066_log_level_defaults(runtime: Runtime) -> None:
    """C02-066: ``log(name="e", status="error")`` → ``app_level == "error"``;
    ``log(name="e", level="loud")`` → ``app_level == "info"``."""
    t = await runtime.create_thread("chat")
    errored = await stored_log(runtime, t.thread_id, await t.log(name="e", status="error"))
    assert errored.app_level == "error"
    assert errored.app_status == "error"
    loud = await stored_log(runtime, t.thread_id, await t.log(name="e", level="loud"))
    assert loud.app_level == "info"
    assert loud.app_status is None


async def test_c02_067_log_wrong_typed_numbers_dropped(runtime: Runtime) -> None:
    """C02-067: ``log(name="t", duration_ms="182", cost=True)`` → ``app_duration_ms is
    None``, ``app_cost is None``."""
    t = await runtime.create_thread("chat")
    row = await stored_log(
        runtime, t.thread_id, await t.log(name="t", duration_ms="182", cost=True)
    )
    assert row.model == "t"
    assert row.app_duration_ms is None
    assert row.app_cost is None
    assert (await t.cost()).to_wire()["appCost"] == 0


async def test_c02_068_log_cost_in_cost_report(runtime: Runtime) -> None:
    """C02-068: ``log(name="c", cost=0.0004)`` → cost report ``appCost == 0.0004``,
    ``totalCost`` includes it, ``requestCount`` unchanged.

    A costed LLM row (0.001 USD) is seeded first so that ``totalCost`` = LLM + app is
    observable; the app cost stays out of ``requestCount`` and ``modelBreakdown``."""
    rt = runtime
    t = await rt.create_thread("chat")
    m = await t.inject_message(role="user", content="hi")
    await rt.store.insert_log(
        t.thread_id,
        LogRow(
            id=new_id(),
            kind=None,
            message_id=m.id,
            provider="openai",
            model="gpt",
            model_name="gpt-x",
            created_at=0,
            is_complete=True,
            cost_input=0.0006,
            cost_output=0.0004,
            cost_total=0.001,
        ),
    )
    before = (await t.cost()).to_wire()
    assert before["requestCount"] == 1
    assert before["appCost"] == 0
    assert before["totalCost"] == pytest.approx(0.001)

    row = await stored_log(rt, t.thread_id, await t.log(name="c", cost=0.0004))
    assert row.app_cost == 0.0004
    assert row.cost_total is None

    after = (await t.cost()).to_wire()
    assert after["appCost"] == 0.0004
    assert after["totalCost"] == pytest.approx(0.0014, abs=1e-12)
    assert after["llmCost"] == pytest.approx(0.001, abs=1e-12)
    assert after["requestCount"] == before["requestCount"] == 1
    assert after["modelBreakdown"] == before["modelBreakdown"]
    assert after["ownCost"] == pytest.approx(0.0014, abs=1e-12)


async def test_c02_069_log_garbage_entries_never_raise(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """C02-069: ``log(42)``, ``log(None)``, ``log({"name": None})``, an entry containing a
    cyclic list → no exception; rows named ``"unnamed"`` (the cyclic value stored with a
    ``cycle`` marker).

    Also (§2.11.1 rule 1): on a thread that no longer exists ``log()`` returns ``None`` and
    reports a WARNING on the ``threadloom.log`` logger instead of raising."""
    t = await runtime.create_thread("chat")
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    rows = [
        await t.log(42),  # type: ignore[arg-type]
        await t.log(None),
        await t.log({"name": None}),
        await t.log({"data": cyclic}),
    ]
    for row in rows:
        stored = await stored_log(runtime, t.thread_id, row)
        assert stored.model == "unnamed"
        assert stored.app_level == "info"
    assert rows[3] is not None
    assert rows[3].app_data == '[1,{"$unserializable":"cycle"}]'
    listed = await runtime.store.list_logs(t.thread_id, kind="app")
    assert [r.id for r in listed] == [r.id for r in rows if r is not None]

    await runtime.delete_thread(t.thread_id)
    with caplog.at_level(logging.WARNING, logger="threadloom.log"):
        assert await t.log(name="gone") is None
    assert [r.levelno for r in caplog.records if r.name == "threadloom.log"] == [logging.WARNING]


async def test_c02_070_log_exception_error(runtime: Runtime) -> None:
    """C02-070: ``log(name="err", error=ValueError("bad"))`` → ``app_error ==
    "ValueError: bad"``."""
    t = await runtime.create_thread("chat")
    row = await stored_log(runtime, t.thread_id, await t.log(name="err", error=ValueError("bad")))
    assert row.app_error == "ValueError: bad"
    assert row.error is None  # app rows never use the runtime error column


async def test_c02_071_log_creates_no_message_and_works_terminated(runtime: Runtime) -> None:
    """C02-071: ``log(...)`` on an idle thread → no message created, ``status()`` unchanged;
    on a terminated thread → row stored."""
    rt = runtime
    t = await rt.create_thread("chat")
    status = await t.status()
    sub = rt.events.subscribe(t.thread_id)
    row = await t.log(name="idle.check", message="x")
    await stored_log(rt, t.thread_id, row)
    assert await all_messages(t) == []
    assert await t.status() == status
    assert [e.kind for e in sub.drain()] == ["log"]  # no message, no status change

    at = await t.terminate()
    sub.drain()
    late = await t.log(name="after.terminate")
    stored = await stored_log(rt, t.thread_id, late)
    assert stored.model == "after.terminate"
    assert t.terminated == at
    assert await all_messages(t) == []
    assert [e.kind for e in sub.drain()] == ["log"]


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(exclude_categories=())),  # surrogates included
    st.binary(max_size=20),
    st.builds(set, st.lists(st.integers(), max_size=3)),
    st.builds(
        lambda c, n: c * n, st.sampled_from(["x", "é", "😀", "\\", '"']), st.integers(0, 70_000)
    ),
    st.sampled_from(["debug", "info", "warn", "error", "success", "skipped", " name "]),
    st.builds(ValueError, st.text(max_size=30)),
    st.builds(lambda n: RuntimeError("é" * n), st.integers(0, 3000)),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.integers(), st.none(), st.floats(), st.booleans()),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "name",
        "message",
        "level",
        "status",
        "trigger",
        "request",
        "response",
        "error",
        "duration_ms",
        "cost",
        "data",
        "unknown",
    ]
)
_TRIGGERS = st.fixed_dictionaries(
    {"kind": st.one_of(st.text(max_size=200), st.integers())},
    optional={"id": _VALUES, "summary": _VALUES, "other": _VALUES},
)
_ENTRY = st.one_of(
    st.dictionaries(_KEYS, st.one_of(_VALUES, _TRIGGERS), max_size=8),
    _VALUES,
)
_FIELDS = st.dictionaries(_KEYS, st.one_of(_VALUES, _TRIGGERS), max_size=4)


def _assert_row_within_limits(row: LogRow) -> None:
    assert row.kind == "app"
    assert row.provider == "app"
    assert row.is_complete is True
    assert row.cost_total is None
    assert row.error is None
    assert isinstance(row.model, str)
    assert 0 < len(row.model) <= NAME_LIMIT
    assert row.model == row.model.strip()
    assert row.app_level in LEVELS
    assert row.app_status is None or row.app_status in STATUSES
    for text in (row.app_message, row.app_error):
        if text is not None:
            assert nbytes(text) <= TEXT_LIMIT
    for body, limit in (
        (row.app_request, BODY_LIMIT),
        (row.app_response, BODY_LIMIT),
        (row.app_data, DATA_LIMIT),
    ):
        if body is not None:
            assert nbytes(body) <= limit
            json.loads(body)  # always valid JSON text
    if row.app_trigger is not None:
        trigger = json.loads(row.app_trigger)
        assert set(trigger) <= {"kind", "id", "summary"}
        assert 0 < len(trigger["kind"]) <= NAME_LIMIT
        if "id" in trigger:
            assert len(trigger["id"]) <= NAME_LIMIT
        if "summary" in trigger:
            assert nbytes(trigger["summary"]) <= TEXT_LIMIT
    for amount in (row.app_duration_ms, row.app_cost):
        if amount is not None:
            assert math.isfinite(amount)
            assert amount >= 0


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entry=_ENTRY, fields=_FIELDS)
async def test_c02_072_log_never_raises_and_respects_limits(
    tmp_path: Path, entry: Any, fields: dict[str, Any]
) -> None:
    """C02-072: hypothesis: arbitrary entries (wrong types, huge strings, nested structures,
    non-JSON values) → ``log()`` never raises and every stored field respects its limit
    exactly.

    "Exactly" is checked two ways: the stored row is within every limit of §2.11.5, and
    its columns equal what the pure normaliser (``threadloom.thread.lognorm``, unit-tested
    in tests/test_lognorm.py) computes for the same call."""
    rt = await Runtime.open(f"sqlite:///{tmp_path / 'hyp.db'}")
    try:
        t = await rt.create_thread("chat")
        row = await t.log(entry, **fields)
        assert row is not None
        stored = await rt.store.get_log(t.thread_id, row.id)
        assert stored == row
        _assert_row_within_limits(stored)
        expected = normalize_log_entry(build_entry(entry, fields))
        assert {k: getattr(stored, k) for k in expected} == expected
    finally:
        await rt.close()


# --------------------------------------------------------------------------------------
# user (§2.12)


async def test_c02_073_user_identity_and_roles(db_url: str) -> None:
    """C02-073: thread without user → ``user()`` is ``None``; thread of a user with roles
    ``["billing"]`` → ``roles == ("billing",)``; a user without roles → ``roles == ()``."""
    rt = await Runtime.open(
        db_url,
        users=[
            UserHandle(id="u1", username="ann", roles=("billing",)),
            {"id": "u2", "username": "bob"},
        ],
    )
    try:
        nobody = await rt.create_thread("chat")
        assert await nobody.user() is None
        ann_thread = await rt.create_thread("chat", user_id="u1")
        ann = await ann_thread.user()
        assert ann is not None
        assert (ann.id, ann.username) == ("u1", "ann")
        assert ann.roles == ("billing",)
        bob = await (await rt.create_thread("chat", user_id="u2")).user()
        assert bob is not None
        assert (bob.id, bob.username) == ("u2", "bob")
        assert bob.roles == ()
        unknown = await rt.create_thread("chat", user_id="u9")
        assert await unknown.user() is None  # the authority does not know the user
        await ann_thread.terminate()
        assert await ann_thread.user() == ann  # works on terminated threads
    finally:
        await rt.close()


# --------------------------------------------------------------------------------------
# terminate (§2.13)


async def test_c02_074_terminate_idle_child(db_url: str) -> None:
    """C02-074: ``terminate()`` on idle child C of P → returns an int µs; ``C.terminated``
    equals it; ``C.status()`` unchanged; P's entry for C has status ``"terminated"``; a
    second ``terminate()`` returns the same value and publishes nothing."""
    clock = FakeClock()
    rt = await Runtime.open(db_url, clock=clock)
    try:
        p = await rt.create_thread("parent")
        c = await make_child(rt, p)
        other_view = await rt.thread(c.thread_id)
        status = await c.status()
        clock.now += 7_000
        sub = rt.events.subscribe(None)

        at = await c.terminate()

        assert type(at) is int
        assert at == clock.now
        assert c.terminated == at
        assert other_view.terminated == at  # same process: shared live value (§2.3.1)
        assert (await rt.get_thread_record(c.thread_id)).terminated == at
        assert await c.status() == status
        assert (await entry_for(rt, p.thread_id, c.thread_id)).status == "terminated"
        events = sub.drain()
        assert [(e.thread_id, e.kind) for e in events] == [
            (c.thread_id, "status"),
            (c.thread_id, "thread_updated"),
            (p.thread_id, "subagent"),
        ]
        assert events[0].data == {"status": status.model_dump(), "terminated": at}
        assert events[1].seq is None
        assert events[2].data["entry"]["status"] == "terminated"

        clock.now += 7_000
        assert await c.terminate() == at
        assert await other_view.terminate() == at
        assert sub.drain() == []
    finally:
        await rt.close()


async def test_c02_075_terminated_thread_rejects_new_work(runtime: Runtime) -> None:
    """C02-075: terminated T → ``queue_message``, ``inject_message``, ``notify_parent``,
    ``set_status`` raise ``ThreadTerminated`` whose text starts ``Thread is terminated
    (terminated_at=``; nothing stored."""
    rt = runtime
    p = await rt.create_thread("parent")
    t = await make_child(rt, p)
    at = await t.terminate()
    fresh = await rt.thread(t.thread_id)
    p_events = await event_rows(rt, p.thread_id)
    t_events = await event_rows(rt, t.thread_id)
    sub = rt.events.subscribe(None)

    calls: list[Callable[[], Any]] = [
        lambda: t.queue_message(role="user", content="q"),
        lambda: t.inject_message(role="user", content="i"),
        lambda: t.notify_parent("50%"),
        lambda: t.set_status("working"),
        lambda: fresh.queue_message(role="user", content="q"),
        lambda: fresh.inject_message(role="user", content="i"),
    ]
    for call in calls:
        with pytest.raises(ThreadTerminated) as info:
            await call()
        assert str(info.value).startswith(TERMINATED_PREFIX)
        assert str(info.value) == f"Thread is terminated (terminated_at={at})"
        assert info.value.thread_id == t.thread_id
        assert info.value.terminated_at == at

    assert await all_messages(t) == []
    assert await all_messages(p) == []
    assert (await entry_for(rt, p.thread_id, t.thread_id)).status == "terminated"
    assert await event_rows(rt, p.thread_id) == p_events
    assert await event_rows(rt, t.thread_id) == t_events
    assert sub.drain() == []


async def test_c02_076_terminated_thread_keeps_reads_and_edits(runtime: Runtime) -> None:
    """C02-076: terminated T → ``get_messages``, ``update_message``, ``delete_message``,
    ``status``, ``log`` work.

    The "file writes" part of the case is not covered here: the per-thread file system is
    a later issue."""
    rt = runtime
    t = await rt.create_thread("chat")
    m1 = await t.inject_message(role="user", content="one")
    m2 = await t.inject_message(role="assistant", content="two")
    status = await t.status()
    await t.terminate()

    page = await t.get_messages()
    assert [m.id for m in page.messages] == [m2.id, m1.id]
    assert page.total == 2
    updated = await t.update_message(m1.id, content="ONE")
    assert updated.content == "ONE"
    assert (await t.get_message(m1.id)).content == "ONE"  # type: ignore[union-attr]
    assert await t.delete_message(m2.id) is True
    assert await t.get_message(m2.id) is None
    assert await t.status() == status
    row = await t.log(name="after")
    assert row is not None
    assert row.message_id == m1.id
    page = await t.get_messages()
    assert [m.id for m in page.messages] == [m1.id]


async def test_c02_077_terminate_cancels_waiting_entries(runtime: Runtime) -> None:
    """C02-077: T with a waiting entry → ``terminate()`` → the entry is still listed as a
    pending view with ``metadata.queued is True`` and ``metadata.queue_status ==
    "cancelled"``; a subscriber received a ``message`` event with that view;
    ``delete_message(<entry id>)`` → ``True``."""
    rt = runtime
    t = await rt.create_thread("chat")
    entry = await t.queue_message(role="user", content="later")
    assert entry.metadata is not None
    assert entry.metadata["queue_status"] == "queued"
    sub = rt.events.subscribe(t.thread_id)

    at = await t.terminate()

    page = await t.get_messages()
    assert [m.id for m in page.messages] == [entry.id]
    view = page.messages[0]
    assert view.status == "pending"
    assert view.content == "later"
    assert view.metadata is not None
    assert view.metadata["queued"] is True
    assert view.metadata["queue_status"] == "cancelled"
    assert view.metadata["queue_source"] == "queue_message"
    single = await t.get_message(entry.id)
    assert single is not None
    assert single.metadata is not None
    assert single.metadata["queue_status"] == "cancelled"

    events = sub.drain()
    assert [e.kind for e in events] == ["message", "status", "thread_updated"]
    assert events[0].data["message"]["id"] == entry.id
    assert events[0].data["message"]["metadata"]["queued"] is True
    assert events[0].data["message"]["metadata"]["queue_status"] == "cancelled"
    assert events[0].data["message"] == view.to_wire()
    assert events[1].data["terminated"] == at
    assert events[1].seq == events[0].seq + 1  # type: ignore[operator]

    assert await t.delete_message(entry.id) is True
    assert (await t.get_messages()).total == 0
    deleted = sub.drain()
    assert [(e.kind, e.data["message_id"]) for e in deleted] == [("message_deleted", entry.id)]


# --------------------------------------------------------------------------------------
# parent and child (§2.14)


async def test_c02_080_get_parent_thread(runtime: Runtime) -> None:
    """C02-080: ``get_parent_thread()`` on a root thread → ``None``; on child C → a
    ThreadState with ``thread_id == P`` and ``execution is None``."""
    rt = runtime
    p = await rt.create_thread("parent")
    c = await make_child(rt, p)
    assert await p.get_parent_thread() is None
    parent = await c.get_parent_thread()
    assert isinstance(parent, ThreadState)
    assert parent.thread_id == p.thread_id
    assert parent.execution is None
    assert parent.agent_id == "parent"
    assert [e.reference for e in parent.children] == [c.thread_id]


async def test_c02_081_c06_037_get_child_thread(runtime: Runtime) -> None:
    """C02-081: P with child C, Q with child D → ``P.get_child_thread(C)`` → C's state;
    ``P.get_child_thread(D)`` → ``None``. C06-037: ``get_child_thread(<random uuid>)`` →
    ``None``; on the child, ``get_parent_thread()`` → the parent; on a root → ``None``."""
    rt = runtime
    p = await rt.create_thread("parent")
    q = await rt.create_thread("parent")
    c = await make_child(rt, p)
    d = await make_child(rt, q)
    child = await p.get_child_thread(c.thread_id)
    assert isinstance(child, ThreadState)
    assert child.thread_id == c.thread_id
    assert child.execution is None
    assert child.parent_thread_id == p.thread_id
    assert await p.get_child_thread(d.thread_id) is None
    assert await q.get_child_thread(c.thread_id) is None
    assert (await q.get_child_thread(d.thread_id)).thread_id == d.thread_id  # type: ignore[union-attr]
    assert await p.get_child_thread("nope") is None
    assert await p.get_child_thread(str(uuid.uuid4())) is None
    back = await child.get_parent_thread()
    assert back is not None and back.thread_id == p.thread_id
    assert await p.get_parent_thread() is None


async def test_c02_082_notify_parent_queues_on_parent(runtime: Runtime) -> None:
    """C02-082: child C whose entry owner is ``"b"`` → ``C.notify_parent("50%")`` → P has a
    queue entry ``role == "assistant"``, ``silent is True``, ``metadata.subagent_id == C``,
    ``metadata.queue_source == "subagent"``.

    Also checked (§2.14.5 rule 4): an owner ``"a"`` child's notification has role
    ``"user"``; the content is stripped; ``forwarded_from`` names the child."""
    rt = runtime
    p = await rt.create_thread("parent")
    c = await make_child(rt, p, owner="b")
    sub = rt.events.subscribe(p.thread_id)

    assert await c.notify_parent("  50%  ") is None

    assert (await p.get_messages()).total == 0  # silent: hidden from default reads
    page = await p.get_messages(include_silent=True)
    assert page.total == 1
    view = page.messages[0]
    assert view.role == "assistant"
    assert view.content == "50%"
    assert view.silent is True
    assert view.status == "pending"
    assert view.metadata is not None
    assert view.metadata["subagent_id"] == c.thread_id
    assert view.metadata["queue_source"] == "subagent"
    assert view.metadata["queued"] is True
    assert view.metadata["queue_status"] == "queued"
    assert view.metadata["forwarded_from"] == {"thread_id": c.thread_id, "message_id": None}
    assert [e.kind for e in sub.drain()] == ["message"]
    assert await all_messages(c) == []  # nothing on the child itself

    c2 = await make_child(rt, p, owner="a")
    await c2.notify_parent("done")
    page = await p.get_messages(include_silent=True, order="asc")
    assert [(m.role, m.content) for m in page.messages] == [
        ("assistant", "50%"),
        ("user", "done"),
    ]


async def test_c02_083_c06_011_notify_parent_validation_and_root(runtime: Runtime) -> None:
    """C02-083: ``notify_parent("   ")`` → ``InvalidArgument``; root thread
    ``notify_parent("x")`` → returns ``None``, nothing queued. C06-011: the error reads
    ``notify_parent requires non-empty content``."""
    rt = runtime
    p = await rt.create_thread("parent")
    c = await make_child(rt, p)
    with pytest.raises(InvalidArgument) as blank:
        await c.notify_parent("   ")
    assert str(blank.value) == "notify_parent requires non-empty content"
    with pytest.raises(InvalidArgument):
        await c.notify_parent(5)  # type: ignore[arg-type]
    assert await all_messages(p) == []

    root = await rt.create_thread("chat")
    sub = rt.events.subscribe(None)
    events_before = await event_rows(rt, root.thread_id)
    assert await root.notify_parent("x") is None
    assert await all_messages(root) == []
    assert await rt.store.list_queue(root.thread_id) == []
    assert await event_rows(rt, root.thread_id) == events_before
    assert sub.drain() == []


# --------------------------------------------------------------------------------------
# arguments and context (§2.3.3, §2.3.4)


async def test_c02_085_arguments_read_only(runtime: Runtime) -> None:
    """C02-085: ``state.arguments["x"] = 1`` → ``TypeError``; a child created with arguments
    ``{"topic": "t"}`` → ``arguments == {"topic": "t"}``."""
    rt = runtime
    plain = await rt.create_thread("chat")
    assert dict(plain.arguments) == {}
    with pytest.raises(TypeError):
        plain.arguments["x"] = 1  # type: ignore[index]

    p = await rt.create_thread("parent")
    c = await make_child(rt, p, arguments={"topic": "t", "nested": {"k": [1]}})
    assert c.arguments == {"topic": "t", "nested": {"k": [1]}}
    with pytest.raises(TypeError):
        c.arguments["topic"] = "other"  # type: ignore[index]
    c.arguments["nested"]["k"].append(2)  # a nested change changes nothing stored
    reopened = await rt.thread(c.thread_id)
    assert reopened.arguments == {"topic": "t", "nested": {"k": [1]}}
    assert (await rt.get_thread_record(c.thread_id)).arguments == {
        "topic": "t",
        "nested": {"k": [1]},
    }
    via_parent = await p.get_child_thread(c.thread_id)
    assert via_parent is not None
    assert via_parent.arguments == {"topic": "t", "nested": {"k": [1]}}


async def test_c02_086_context_is_per_object(runtime: Runtime) -> None:
    """C02-086: at rest ``state.context["k"] = 1``, then a new ``runtime.thread(id)`` → its
    ``context == {}``."""
    rt = runtime
    t = await rt.create_thread("chat")
    assert t.context == {}
    t.context["k"] = 1
    other = await rt.thread(t.thread_id)
    assert other.context == {}
    other.context["j"] = 2
    assert t.context == {"k": 1}
    assert (await rt.thread(t.thread_id)).context == {}


# --------------------------------------------------------------------------------------
# the event bus (§2.17) and emit (§2.16)


async def test_c02_088_durable_events_in_commit_order(runtime: Runtime) -> None:
    """C02-088: subscriber on T; inject, update, delete (one message), queue, log → five
    durable events ``message``, ``message``, ``message_deleted``, ``message``, ``log`` with
    consecutive ``seq``, in that order, each after its commit.

    "After its commit" is observed as: each event is already buffered when its call
    returns, and its ``seq`` names a committed ``thread_events`` row of the same kind and
    entity."""
    rt = runtime
    t = await rt.create_thread("chat")
    sub = rt.events.subscribe(t.thread_id)
    got: list[ThreadEvent] = []

    m = await t.inject_message(role="user", content="a")
    got += sub.drain()
    assert len(got) == 1
    await t.update_message(m.id, content="b")
    got += sub.drain()
    assert len(got) == 2
    assert await t.delete_message(m.id) is True
    got += sub.drain()
    assert len(got) == 3
    q = await t.queue_message(role="user", content="q")
    got += sub.drain()
    assert len(got) == 4
    row = await t.log(name="l")
    assert row is not None
    got += sub.drain()
    assert len(got) == 5

    assert [e.kind for e in got] == ["message", "message", "message_deleted", "message", "log"]
    seqs = [e.seq for e in got]
    assert all(isinstance(s, int) for s in seqs)
    assert seqs == list(range(seqs[0], seqs[0] + 5))  # type: ignore[arg-type]
    assert got[0].data["message"]["content"] == "a"
    assert got[1].data["message"]["content"] == "b"
    assert got[1].data["message"]["id"] == m.id
    assert got[2].data == {"message_id": m.id, "depth": 0, "silent": False}
    assert got[3].data["message"]["id"] == q.id
    assert got[3].data["message"]["metadata"]["queued"] is True
    assert got[4].data["log"]["id"] == row.id
    assert all(e.thread_id == t.thread_id for e in got)

    durable = {seq: (kind, entity) for seq, kind, entity in await event_rows(rt, t.thread_id)}
    expected_entities = [m.id, m.id, m.id, q.id, row.id]
    for event, entity in zip(got, expected_entities, strict=True):
        assert durable[event.seq] == (event.kind, entity)  # type: ignore[index]


async def test_c02_089_slow_subscriber_overflows(runtime: Runtime) -> None:
    """C02-089: subscriber with ``max_queue=2`` that never reads; 5 injects → the injects all
    succeed; the subscription raises ``EventOverflow`` after yielding its buffered
    events."""
    rt = runtime
    t = await rt.create_thread("chat")
    sub = rt.events.subscribe(t.thread_id, max_queue=2)
    healthy = rt.events.subscribe(t.thread_id)
    injected = [await t.inject_message(role="user", content=str(i)) for i in range(5)]

    assert (await t.get_messages()).total == 5
    assert [e.data["message"]["id"] for e in healthy.drain()] == [m.id for m in injected]

    yielded: list[ThreadEvent] = []
    with pytest.raises(EventOverflow):
        async for event in sub:
            yielded.append(event)
    assert [e.data["message"]["id"] for e in yielded] == [injected[0].id, injected[1].id]
    assert yielded[1].seq == yielded[0].seq + 1  # type: ignore[operator]


async def test_c02_090_emit_is_ephemeral(runtime: Runtime) -> None:
    """C02-090: ``emit("progress", {"p": 1})`` → subscribers receive an ``event`` event
    (``event_type == "progress"``) with ``seq is None``; nothing stored.

    Also (§2.16): ``data`` is normalised and never causes an error; an empty event name is
    ``InvalidArgument``."""
    rt = runtime
    t = await rt.create_thread("chat")
    await t.inject_message(role="user", content="x")
    events_before = await event_rows(rt, t.thread_id)
    sub = rt.events.subscribe(t.thread_id)

    assert t.emit("progress", {"p": 1}) is None
    t.emit("weird", {"s": {1}})
    with pytest.raises(InvalidArgument):
        t.emit("", {"p": 1})

    events = sub.drain()
    assert [(e.kind, e.seq) for e in events] == [("event", None), ("event", None)]
    assert events[0].thread_id == t.thread_id
    assert events[0].data == {"event_type": "progress", "data": {"p": 1}}
    assert events[1].data == {"event_type": "weird", "data": {"s": {"$unserializable": "set"}}}
    assert await event_rows(rt, t.thread_id) == events_before
    assert (await t.get_messages(include_silent=True)).total == 1
    assert await rt.store.list_logs(t.thread_id) == []
