"""What a turn commits and publishes (docs/engine.md "What a turn commits", "Durability").

A tool-using turn on an idle thread that someone watches — user message, assistant tool
call, tool result, final text — makes six commits: the send with the run start and the
delivery, the pending message with its LLM row (not synced), the finalised tool call, the
tool result, the second pending message (not synced), and the final message with the
end-of-run check. (Unwatched, a quick answer is stored with its pending message in one
commit: tests/engine/test_pending_hold.py.)
Events reach subscribers in commit order, and nothing completed is lost when the process
dies.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from test_c04_control import _crash, _raw_state

from threadloom import Runtime, ThreadState
from threadloom.define import tool
from threadloom.providers.scripted import Call, Reply
from threadloom.store.shapes import LOST_TAIL_EVENTS


def _texts(request: Any) -> list[str]:
    return [m.text for m in request.messages if m.role != "system"]


async def test_a_turn_commits_six_times_and_publishes_in_commit_order(make_chat: Any) -> None:
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1}, id="c1")),
            Reply.text("done"),
            Reply.tool_calls(Call("echo", {"v": 2}, id="c2")),
            Reply.text("ok"),
        ]
    )
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    await rt.send_message(tid, "warm-up")  # a first turn: the thread has history after it
    await rt.wait_idle(tid, timeout=5)
    head = (await rt.store.get_thread(tid)).event_seq
    sub = rt.events.subscribe(tid)
    commits = rt.store.commits

    sent = await rt.send_message(tid, "hello")
    await rt.wait_idle(tid, timeout=5)

    assert rt.store.commits - commits == 6
    published = sub.drain()
    sub.close()
    durable = [e for e in published if e.seq is not None]
    stored = await rt.store.read_events(tid, head)
    assert [(e.seq, e.kind) for e in durable] == [(e.seq, e.kind) for e in stored]
    assert [e.seq for e in durable] == list(range(head + 1, head + 1 + len(durable)))
    messages = (await state.get_messages(order="asc", limit=None)).messages[-4:]
    user, call, result, final = (m.id for m in messages)
    assert [(e.kind, _entity(e)) for e in durable] == [
        ("message", sent.id),  # the send, the run start and the delivery: one commit
        ("status", "running"),
        ("message", user),
        ("message", call),  # pending, with its LLM row
        ("log", None),
        ("log", None),  # finalised with its LLM row
        ("message", call),
        ("message", result),  # the tool result with the row's tool_results
        ("log", None),
        ("message", final),  # pending, with its LLM row
        ("log", None),
        ("log", None),  # finalised, with the end-of-run check
        ("message", final),
        ("status", "idle"),
    ]
    assert sent.id == user
    # the run's end is announced as a separate end-of-run check would: the last
    # message, the step's telemetry, then the settled status
    tail = [(e.kind, e.data.get("type")) for e in published[-4:]]
    assert tail == [
        ("message", None),
        ("telemetry", "step_completed"),
        ("telemetry", "stopped"),
        ("status", None),
    ]
    assert durable[-1].data["status"]["reason"] == "stop_on_response"
    assert [(m.role, m.status) for m in messages] == [
        ("user", "completed"),
        ("assistant", "completed"),
        ("tool", "completed"),
        ("assistant", "completed"),
    ]


def _entity(event: Any) -> str | None:
    if event.kind == "status":
        return str(event.data["status"]["state"])
    if event.kind == "message":
        return str(event.data["message"]["id"])
    return None


async def test_a_message_queued_during_the_last_step_starts_the_next_run(
    make_chat: Any,
) -> None:
    """The end-of-run check commits with the final message; an entry queued before that
    commit continues the run (the status stays running), one queued after it starts a
    new run — none is left waiting."""
    chat = await make_chat([Reply.text("one", delay=0.2), Reply.text("two"), Reply.text("three")])
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    await rt.send_message(tid, "first")
    while not chat.provider.requests:
        await asyncio.sleep(0.005)
    await rt.send_message(tid, "during")  # queued while the final answer streams
    await rt.wait_idle(tid, timeout=5)
    await rt.send_message(tid, "after")
    await rt.wait_idle(tid, timeout=5)
    assert _texts(chat.provider.requests[1]) == ["first", "one", "during"]
    assert _texts(chat.provider.requests[2])[-1] == "after"
    assert await rt.store.list_queue(tid) == []
    assert (await state.status()).state == "idle"


async def test_an_entry_queued_by_another_process_mid_run_is_delivered(
    make_chat: Any, db_url: str
) -> None:
    """The engine skips reading a queue it knows to be empty, but an entry another
    Runtime on the same file queued while a run is active (seen as a gap in the thread's
    event numbers) is delivered before the next model request."""
    # no agents, not exclusive: it shares the file and never runs the thread itself
    other = await Runtime.open(db_url, exclusive=False)

    @tool
    async def poke(state: ThreadState) -> str:
        """Queue a message from another runtime."""
        foreign = await other.thread(state.thread_id)
        await foreign.queue_message(role="user", content="from elsewhere")
        return "poked"

    try:
        chat = await make_chat(
            [Reply.tool_calls(Call("poke", {}, id="p1")), Reply.text("done")],
            prompt={"tools": ["poke"]},
            extra=[poke],
        )
        state = await chat.thread()
        await chat.runtime.send_message(state.thread_id, "go")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    finally:
        await other.close()
    assert _texts(chat.provider.requests[1]) == ["go", "", "poked", "from elsewhere"]
    assert await chat.runtime.store.list_queue(state.thread_id) == []


async def test_completed_turns_survive_a_kill_during_the_next_request(
    make_chat: Any, db_url: str
) -> None:
    """SIGKILL while a request is in flight (its pending message and LLM row committed
    without a sync): every message of the completed turns is there, completed, and the
    lost run settles as usual."""
    ready = await _crash(db_url, "turns")
    tid = ready["thread_id"]
    row, before, _, _ = await _raw_state(db_url, tid)
    assert row.status.state == "running"
    assert [m.id for m in before[:8]] == ready["completed"]
    assert [(m.role, m.status) for m in before[8:]] == [
        ("user", "completed"),
        ("assistant", "pending"),
    ]

    chat = await make_chat([Reply.text("unused")])
    state = await chat.runtime.thread(tid)
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = (await state.get_messages(order="asc", limit=None)).messages
    assert [m.id for m in rows[:8]] == ready["completed"]
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "first"),
        ("assistant", "completed", None),
        ("tool", "completed", "echo 1"),
        ("assistant", "completed", "one"),
        ("user", "completed", "second"),
        ("assistant", "completed", None),
        ("tool", "completed", "echo 2"),
        ("assistant", "completed", "two"),
        ("user", "completed", "third"),
        ("assistant", "failed", None),
    ]
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "execution_lost")


@pytest.mark.sqlite_only
async def test_the_unsynced_write_leaves_full_sync_in_place(make_chat: Any) -> None:
    """The pending message's commit runs with synchronous=NORMAL; every connection the
    store writes with is back at FULL afterwards, so the next commit is synced."""
    chat = await make_chat([Reply.text("hi")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    store: Any = chat.runtime.store
    for conn in (store._iconn, store._wconn):
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert [(m.role, m.status) for m in (await state.get_messages(order="asc")).messages] == [
        ("user", "completed"),
        ("assistant", "completed"),
    ]


def _drop_last_commit(wal: Path) -> None:
    """What an operating-system crash can do to an unsynced commit: the WAL file ends at
    the commit before the last one (frames are 24-byte headers and pages; a commit's
    last frame holds the database size; frames of an older generation carry other salts)."""
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    ends: list[int] = []
    offset = 32
    while offset + 24 + page_size <= len(data) and data[offset + 8 : offset + 16] == salts:
        commit = struct.unpack(">I", data[offset + 4 : offset + 8])[0]
        offset += 24 + page_size
        if commit:
            ends.append(offset)  # a commit ends here
    assert len(ends) >= 2
    with wal.open("r+b") as f:
        f.truncate(ends[-2])


@pytest.mark.sqlite_only  # the crash is made by cutting the last commit from the WAL file
async def test_event_numbers_an_os_crash_lost_are_never_given_again(
    make_chat: Any, db_url: str, tmp_path: Path
) -> None:
    """The pending message and its LLM row are committed without a sync and published at
    once. If the OS loses that commit, recovery starts from the state before it; the
    numbers its events had are skipped and count as pruned, so a stream client that saw
    them resumes with ``resync`` (spec 09 §9.7.1), never with other events under them."""
    chat = await make_chat([Reply.text("lost", delay=30)])
    rt = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    sub = rt.events.subscribe(tid)
    await rt.send_message(tid, "hello")
    while not chat.provider.requests:  # the unsynced commit is in, the request in flight
        await asyncio.sleep(0.005)
    seen = [e.seq for e in sub.drain() if e.seq is not None]
    sub.close()
    path = Path(db_url.removeprefix("sqlite:///"))
    crashed = tmp_path / "after-crash.db"
    shutil.copyfile(path, crashed)
    shutil.copyfile(str(path) + "-wal", str(crashed) + "-wal")
    _drop_last_commit(Path(str(crashed) + "-wal"))
    url = f"sqlite:///{crashed}"

    row, messages, _, _ = await _raw_state(url, tid)
    lost = [seq for seq in seen if seq > row.event_seq]
    assert row.status.state == "running" and [m.role for m in messages] == ["user"]
    assert len(lost) == 2  # the pending message and its LLM row: published, then lost

    recovered = await Runtime.open(url)
    try:
        after = await recovered.store.get_thread(tid)
        assert after is not None
        assert (after.status.state, after.status.reason) == ("failed", "execution_lost")
        assert after.events_pruned_through == row.event_seq + LOST_TAIL_EVENTS
        assert after.events_pruned_through >= max(lost)  # resuming there: resync "expired"
        new = await recovered.store.read_events(tid, row.event_seq)
        assert new and min(e.seq for e in new) > max(lost)  # no number given twice
        assert [e.seq for e in new] == list(range(new[0].seq, after.event_seq + 1))
    finally:
        await recovered.close()
