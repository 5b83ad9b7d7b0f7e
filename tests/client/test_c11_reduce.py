"""The pure reducer on literal inputs (spec 11 §11.5.4, cases C11-001 to C11-024)."""

from __future__ import annotations

import copy
import json
from typing import Any

from threadloom.client.chat import AgentError, Citation, Delivery, Outcome, Phase, ToolUseBlock
from threadloom.client.reduce import (
    FrameEvent,
    LocalSend,
    ReducerEvent,
    SendAccepted,
    SendFailed,
    Snapshot,
    ThreadView,
    empty_view,
    reduce,
    reduce_all,
)
from threadloom.records import Message as Record
from threadloom.records import ThreadStatus

T = "thread-1"
S = 1_000_000


def record(id: str, role: str = "assistant", content: str | None = "", **fields: Any) -> Record:
    fields.setdefault("status", "completed")
    fields.setdefault("created_at", 10)
    return Record.model_validate({"id": id, "role": role, "content": content, **fields})


def status(state: str = "running", since: int = S, reason: str | None = None) -> FrameEvent:
    body = {"state": state, "since": since, "reason": reason}
    return FrameEvent({"type": "thread_status", "seq": 0, "status": body, "terminated": None})


def data(rec: Record, seq: int = 0, at: int | None = None) -> FrameEvent:
    frame = {"type": "message_data", "seq": seq, "message_id": rec.id, "data": rec.model_dump()}
    return FrameEvent(frame, at)


def chunk(mid: str, text: str, offset: int, at: int | None = None, depth: int = 0) -> FrameEvent:
    frame = {
        "type": "message_chunk",
        "message_id": mid,
        "chunk": text,
        "offset": offset,
        "depth": depth,
    }
    return FrameEvent(frame, at)


def reasoning(mid: str, text: str, offset: int, at: int | None = None) -> FrameEvent:
    frame = {"type": "reasoning_chunk", "message_id": mid, "chunk": text, "offset": offset}
    return FrameEvent(frame, at)


def event(kind: str, **payload: Any) -> FrameEvent:
    return FrameEvent({"type": "event", "eventType": kind, "data": payload, "timestamp": 1})


def run(*events: ReducerEvent) -> ThreadView:
    return reduce_all(empty_view(T), events)


def streaming_a(*more: ReducerEvent) -> ThreadView:
    return run(status(), data(record("A", status="pending", content=None)), *more)


def test_c11_001_the_same_events_twice_give_equal_views_and_stay_unchanged() -> None:
    events: list[ReducerEvent] = [
        status(),
        data(record("A", status="pending", content=None), seq=1),
        chunk("A", "Hel", 0, at=5),
        LocalSend("u1", "hi", at_ms=7),
        data(record("A", content="Hello", tool_calls=None), seq=2),
        status("idle", S + 5, "stop_on_response"),
    ]
    before = copy.deepcopy(events)
    assert run(*events) == run(*events)
    assert events == before


def test_c11_002_a_snapshot_of_completed_records_gives_static_messages() -> None:
    records = [record(i, "user", i, created_at=n) for n, i in enumerate(["m1", "m2", "m3"])]
    view = run(Snapshot(records, ThreadStatus(state="idle", since=1), None, 9))
    assert [m.id for m in view.messages] == ["m1", "m2", "m3"]
    for m in view.messages:
        assert m.delivery == Delivery.static(m.id)
        assert m.key == m.id
    assert view.seq == 9


def test_c11_003_a_streamed_reply_completes_with_the_canonical_text() -> None:
    view = streaming_a(chunk("A", "Hel", 0), chunk("A", "lo", 3))
    a = view.by_id("A")
    assert a is not None and a.text == "Hello"
    assert a.delivery == Delivery.streaming(f"run:{S}")
    view = reduce(view, data(record("A", content="Hello!")))
    a = view.by_id("A")
    assert a is not None and a.text == "Hello!"
    assert a.delivery == Delivery.complete(f"run:{S}", Outcome.SUCCESS)


def test_c11_004_equal_deltas_are_applied_not_deduplicated() -> None:
    view = streaming_a(chunk("A", "|", 0), chunk("A", "|", 1))
    assert view.messages[0].text == "||"


def test_c11_005_the_completing_record_wins_even_when_empty() -> None:
    view = streaming_a(chunk("A", "abc", 0), data(record("A", content="")))
    assert view.messages[0].text == ""


def test_c11_006_a_chunk_for_a_complete_message_changes_nothing() -> None:
    view = streaming_a(data(record("A", content="done")))
    assert reduce(view, chunk("A", "late", 4)) is view


def test_c11_007_a_chunk_beyond_the_text_marks_a_gap_until_the_record() -> None:
    view = streaming_a(chunk("A", "abc", 0), chunk("A", "xyz", 5))
    a = view.messages[0]
    assert a.text == "abc" and a.extra["gap"] is True
    view = reduce(view, data(record("A", content="abcdexyz")))
    assert view.messages[0].text == "abcdexyz"
    assert "gap" not in view.messages[0].extra


def test_c11_008_a_catch_up_chunk_rewrites_from_offset_zero() -> None:
    view = streaming_a(chunk("A", "Hel", 0), chunk("A", "Hello", 0))
    assert view.messages[0].text == "Hello"


def test_c11_009_a_stopped_reply_ends_aborted_and_stays_complete() -> None:
    view = streaming_a(chunk("A", "par", 0), data(record("A", content="par", status="failed")))
    a = view.messages[0]
    assert a.status == "failed"
    assert a.delivery == Delivery.complete(f"run:{S}", Outcome.ERROR)
    view = reduce(view, status("idle", S + 9, "aborted_by_user"))
    assert view.messages[0].delivery == Delivery.complete(f"run:{S}", Outcome.ABORTED)
    view = reduce(view, data(record("A", content="edited", status="failed")))
    assert view.messages[0].text == "edited"
    assert view.messages[0].delivery == Delivery.complete(f"run:{S}", Outcome.ABORTED)


def test_c11_010_the_ending_status_gives_the_outcome() -> None:
    lost = streaming_a(status("failed", S + 1, "execution_lost"))
    assert lost.messages[0].delivery.outcome is Outcome.INTERRUPTED
    paused = streaming_a(status("idle", S + 1, "awaiting_human"))
    assert paused.messages[0].delivery.outcome is Outcome.PAUSED
    failed = streaming_a(status("failed", S + 1, "step_error"))
    assert failed.messages[0].delivery.outcome is Outcome.ERROR
    assert failed.error is not None and failed.error.kind == "server"
    assert failed.error.message == "step_error"
    assert reduce(failed, status("running", S + 2)).error is None


def test_c11_011_two_messages_stream_at_once_without_implicit_completion() -> None:
    view = run(
        status(),
        data(record("P", status="pending", content=None, depth=1)),
        data(record("Q", status="pending", content=None, depth=1, created_at=11)),
        chunk("P", "one", 0, depth=1),
        chunk("Q", "two", 0, depth=1),
    )
    p, q = view.by_id("P"), view.by_id("Q")
    assert p is not None and q is not None
    assert p.delivery.phase is Phase.STREAMING and q.delivery.phase is Phase.STREAMING
    assert (p.text, q.text) == ("one", "two")


def queue_entry(mid: str, cmid: str, content: str = "hi", at: int = 50) -> Record:
    meta = {"client_message_id": cmid, "queued": True, "queue_status": "queued"}
    return record(mid, "user", content, status="pending", created_at=at, metadata=meta)


def test_c11_012_an_echo_that_overtakes_the_answer_merges_by_client_message_id() -> None:
    view = run(LocalSend("u1", "hi", at_ms=1))
    sent = view.messages[0]
    assert sent.key == sent.id == "local:u1"
    assert sent.delivery.phase is Phase.SENDING
    assert view.queue == (sent,)
    view = reduce(view, data(queue_entry("M", "u1")))
    assert len(view.messages) == 1
    echoed = view.messages[0]
    assert echoed.key == "local:u1" and echoed.id == "M"
    assert echoed.delivery == Delivery.queued("queue:M")
    after = reduce(view, SendAccepted("u1", "M"))
    assert after.messages[0] is echoed


def test_c11_013_equal_text_is_never_a_match() -> None:
    view = run(
        LocalSend("u1", "ok", at_ms=1),
        LocalSend("u2", "ok", at_ms=2),
        data(queue_entry("M2", "u2", "ok", at=60)),
        data(queue_entry("M1", "u1", "ok", at=61)),
    )
    # two messages, each matched by its own client_message_id, in the server's queue order
    assert [(m.key, m.id) for m in view.messages] == [("local:u2", "M2"), ("local:u1", "M1")]


def test_c11_014_an_injected_queue_entry_completes_and_moves_after_stored_messages() -> None:
    view = run(
        Snapshot([record("old", "user", "x", created_at=5)], None, None, 1),
        data(queue_entry("M", "c", at=6), seq=2),
        data(record("B", content="reply", created_at=7), seq=3),
    )
    assert [m.id for m in view.messages] == ["old", "B", "M"]
    assert view.by_id("M") is not None and view.queue[0].id == "M"
    view = reduce(view, data(record("M", "user", "hi", created_at=8), seq=4))
    m = view.by_id("M")
    assert m is not None and m.delivery == Delivery.complete("M", Outcome.SUCCESS)
    assert m.key == "M"
    assert [x.id for x in view.messages] == ["old", "B", "M"]
    assert view.queue == ()


def test_c11_015_a_refused_send_is_rejected_and_not_retryable() -> None:
    error = AgentError(kind="rejected", message="terminated", retryable=False, status=423)
    view = run(LocalSend("u1", "hi"), SendFailed("u1", error, terminated=77))
    assert view.messages[0].delivery == Delivery.complete("send:u1", Outcome.REJECTED)
    assert view.error is not None and view.error.kind == "rejected"
    assert view.error.retryable is False
    assert view.terminated == 77


def calls(*ids: str) -> str:
    items = [
        {"id": i, "type": "function", "function": {"name": "look", "arguments": '{"q": 1}'}}
        for i in ids
    ]
    return json.dumps(items)


def test_c11_016_tool_calls_go_pending_running_complete() -> None:
    view = run(data(record("A", content="let me look", tool_calls=calls("c1", "c2"))))
    a = view.messages[0]
    assert a.tool_call_ids == ("c1", "c2")
    assert isinstance(a.content, tuple)
    assert [type(b) for b in a.content[-2:]] == [ToolUseBlock, ToolUseBlock]
    assert a.text == "let me look"
    assert view.tool_calls["c1"].status == "pending"
    assert view.tool_calls["c1"].args == {"q": 1}
    view = reduce(view, event("tool_call_started", id="c1", name="look", message_id="A"))
    assert view.tool_calls["c1"].status == "running"
    result = record("T1", "tool", '{"n":1}', tool_call_id="c1", tool_status="success")
    view = reduce(view, data(result))
    assert view.tool_calls["c1"].status == "complete"
    assert view.tool_calls["c1"].result == {"n": 1}


def test_c11_017_a_result_before_its_assistant_stays_complete() -> None:
    view = run(data(record("T3", "tool", "r", name="look", tool_call_id="c3")))
    assert view.tool_calls["c3"].status == "complete"
    assert view.tool_calls["c3"].args is None
    view = reduce(view, data(record("A", content=None, tool_calls=calls("c3"), created_at=5)))
    assert view.tool_calls["c3"].status == "complete"
    assert view.tool_calls["c3"].args == {"q": 1}
    assert view.tool_calls["c3"].message_id == "A"


def test_c11_018_a_deleted_assistant_takes_its_calls_along() -> None:
    view = run(data(record("A", content=None, tool_calls=calls("c1", "c2"))))
    view = reduce(view, FrameEvent({"type": "message_deleted", "message_id": "A", "seq": 0}))
    assert view.messages == ()
    assert dict(view.tool_calls) == {}


def test_c11_019_reasoning_content_and_details_are_kept_apart() -> None:
    empty = run(data(record("A", reasoning_content="")))
    assert empty.messages[0].reasoning == ""
    none = run(data(record("A", reasoning_content=None)))
    assert none.messages[0].reasoning is None
    details = run(data(record("A", reasoning_content="why", reasoning_details='[{"type":"x"}]')))
    assert details.messages[0].extra["reasoning_details"] == [{"type": "x"}]
    assert details.messages[0].reasoning == "why"


def test_c11_020_reasoning_duration_from_arrivals_then_from_the_server() -> None:
    view = streaming_a(
        reasoning("A", "thin", 0, at=100),
        reasoning("A", "king", 4, at=150),
        chunk("A", "x", 0, 400),
    )
    a = view.messages[0]
    assert a.reasoning == "thinking"
    assert a.reasoning_duration_ms == 300
    done = record("A", content="x", reasoning_content="thinking")
    assert reduce(view, data(done, at=500)).messages[0].reasoning_duration_ms == 300
    measured = record("A", content="x", metadata={"reasoning_duration_ms": 280})
    assert reduce(view, data(measured, at=500)).messages[0].reasoning_duration_ms == 280


def test_c11_021_a_snapshot_keeps_what_is_still_streaming_and_local_sends() -> None:
    view = streaming_a(chunk("A", "par", 0), LocalSend("u1", "hi", at_ms=3))
    running = ThreadStatus(state="running", since=S)
    view = reduce(view, Snapshot([record("old", "user", "x", created_at=1)], running, None, 5))
    assert [m.id for m in view.messages] == ["old", "A", "local:u1"]
    a = view.by_id("A")
    assert a is not None and a.delivery.phase is Phase.STREAMING and a.text == "par"
    view = reduce(view, chunk("A", "tial", 3))
    a = view.by_id("A")
    assert a is not None and a.text == "partial"
    assert view.messages[-1].delivery.phase is Phase.SENDING


def test_c11_022_durable_frames_already_in_the_snapshot_are_ignored() -> None:
    view = run(Snapshot([record("m1", "user", "x")], None, None, 10))
    stale = record("m1", "user", "older text")
    assert reduce(view, data(stale, seq=10)) is view
    assert reduce(view, data(stale, seq=9)) is view
    newer = reduce(view, data(record("m1", "user", "edited"), seq=11))
    assert newer.messages[0].text == "edited" and newer.seq == 11


def test_c11_023_visible_hides_silent_and_sub_prompt_messages() -> None:
    view = run(
        data(record("a", "user", "shown", created_at=1)),
        data(record("b", "user", "quiet", silent=True, created_at=2)),
        data(record("c", content="deep", depth=1, created_at=3)),
    )
    assert [m.id for m in view.visible()] == ["a"]
    assert [m.id for m in view.visible(include_silent=True, max_depth=1)] == ["a", "b", "c"]


def test_c11_024_citations_from_metadata() -> None:
    cites = ["https://a.example", {"refId": "x", "name": "B", "href": "https://b.example"}]
    view = run(data(record("A", content="see", metadata={"citations": cites})))
    first, second = view.messages[0].citations
    assert first == Citation(id="c1", index=1, url="https://a.example", source_type="web")
    assert (second.id, second.index, second.title, second.url) == ("x", 2, "B", "https://b.example")


def test_c11_reduce_malformed_and_unknown_frames_change_nothing_visible() -> None:
    view = streaming_a()
    assert reduce(view, FrameEvent({"type": "llm_request", "model": "m", "seq": 1})) is view
    assert reduce(view, FrameEvent({"type": "brand_new", "seq": 1})) is view
    bad = reduce(view, FrameEvent({"type": "message_chunk", "message_id": "A"}))
    assert bad.messages == view.messages and bad.extra["malformed"] == 1


def test_reduce_a_retried_send_is_the_same_message_sending_again() -> None:
    lost = AgentError(kind="connection", message="reset", retryable=True, recovery="retry")
    view = run(LocalSend("u1", "hi", at_ms=1), SendFailed("u1", lost))
    assert view.messages[0].delivery == Delivery.complete("send:u1", Outcome.ERROR)
    view = reduce(view, LocalSend("u1", "hi", at_ms=9))
    assert len(view.messages) == 1 and view.error is None
    assert view.messages[0].delivery == Delivery.sending("send:u1")
    # the server's record of an earlier attempt replaces a local failure
    failed = run(LocalSend("u1", "hi", at_ms=1), SendFailed("u1", lost))
    echoed = reduce(failed, data(record("M", "user", "hi", metadata={"client_message_id": "u1"})))
    assert echoed.messages[0].key == "local:u1" and echoed.messages[0].id == "M"
    assert echoed.messages[0].delivery == Delivery.complete("M", Outcome.SUCCESS)
