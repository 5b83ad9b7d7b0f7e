"""Spec 09 §9.3, §9.7, §9.10: resuming with ``since``, resync, slow consumers, deletion."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from test_c09_stream import exchange, head_of, open_ws, quiet, recv, settled_idle, until
from websockets.exceptions import ConnectionClosed

from conftest import Api, stream_settings
from threadloom import EventRetention
from threadloom.providers.scripted import Reply
from threadloom.server.stream.frames import Close, Frame, Outbox


class Mirror:
    """What a client holds: messages by id, upserted and removed by frames."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.seq = 0

    def apply(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "message_data":
            self.messages[frame["message_id"]] = frame["data"]
        elif frame["type"] == "message_deleted":
            self.messages.pop(frame["message_id"], None)
        if frame["type"] in ("message_data", "message_deleted", "thread_status", "log_data"):
            self.seq = max(self.seq, frame["seq"])

    def view(self) -> dict[str, tuple[Any, Any]]:
        """Visible messages as a default GET shows them (no silent, depth 0)."""
        return {
            mid: (m["content"], m["status"])
            for mid, m in self.messages.items()
            if not m["silent"] and m["depth"] == 0
        }


async def fresh_view(api: Api, thread: str) -> dict[str, tuple[Any, Any]]:
    page = (await api.client().get(f"/api/threads/{thread}/messages")).json()
    return {m["id"]: (m["content"], m["status"]) for m in page["messages"]}


async def test_c09_026_since_replays_each_missed_message_once_at_its_latest_state(
    api: Api,
) -> None:
    thread = await api.thread()
    await exchange(api, thread, "zero")
    read = (await api.client().get(f"/api/threads/{thread}/messages")).json()
    r = read["seq"]
    for text in ("one", "two", "three"):
        await exchange(api, thread, text)
    head = await head_of(api, thread)
    async with await open_ws(api, thread, since=r) as ws:
        snapshot = await recv(ws)
        replayed = await quiet(ws)
        assert snapshot["type"] == "thread_status" and snapshot["snapshot"] is True
        assert snapshot["seq"] == r and snapshot["head"] == head
        assert all(f["seq"] > r for f in replayed)
        seqs = [f["seq"] for f in replayed]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        ids = [f["message_id"] for f in replayed if f["type"] == "message_data"]
        assert len(ids) == len(set(ids)) == 6  # three sends, three answers
        latest = {
            m["id"]: m
            for m in (await api.client().get(f"/api/threads/{thread}/messages")).json()["messages"]
        }
        for frame in replayed:
            if frame["type"] == "message_data":
                assert frame["data"]["status"] == "completed"
                assert frame["data"] == latest[frame["message_id"]]
        status = [f for f in replayed if f["type"] == "thread_status"]
        assert len(status) == 1 and status[0]["status"]["state"] == "idle"
        # then live
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "four"})
        live = await until(ws, settled_idle)
        assert all(f["seq"] >= head for f in live)
        assert any(
            f["type"] == "message_data" and f["data"]["content"] == "echo: four" for f in live
        )


async def test_c09_027_resume_after_a_drop_converges_on_a_fresh_read(api: Api) -> None:
    thread = await api.thread()
    mirror = Mirror()
    async with await open_ws(api, thread) as ws:
        mirror.apply(await recv(ws))
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "a"})
        for frame in await until(ws, settled_idle):
            mirror.apply(frame)
    s = mirror.seq
    await exchange(api, thread, "b")
    await exchange(api, thread, "c")
    async with await open_ws(api, thread, since=s) as ws:
        for frame in [await recv(ws), *await quiet(ws)]:
            mirror.apply(frame)
    assert mirror.view() == await fresh_view(api, thread)
    assert len(mirror.view()) == 6


async def test_c09_028_since_head_replays_nothing(api: Api) -> None:
    thread = await api.thread()
    await exchange(api, thread, "x")
    head = await head_of(api, thread)
    async with await open_ws(api, thread, since=head) as ws:
        snapshot = await recv(ws)
        assert snapshot["type"] == "thread_status" and snapshot["seq"] == head
        assert await quiet(ws) == []


async def test_c09_029_since_ahead_of_head_is_resync_ahead(api: Api) -> None:
    thread = await api.thread()
    await exchange(api, thread, "x")
    head = await head_of(api, thread)
    async with await open_ws(api, thread, since=head + 100) as ws:
        snapshot = await recv(ws)
        resync = await recv(ws)
    assert snapshot["type"] == "thread_status" and snapshot["seq"] == head
    assert resync == {"type": "resync", "seq": head, "since": head + 100, "reason": "ahead"}


async def test_c09_031_replay_works_on_a_new_process(make_api: Callable[..., Any]) -> None:
    first: Api = await make_api()
    thread = await first.thread()
    await exchange(first, thread, "one")
    s = await head_of(first, thread)
    await exchange(first, thread, "two")
    await first.runtime.close()  # the first process ends: one at a time runs the file
    second: Api = await make_api()  # a new Runtime and server on the same store
    async with await open_ws(second, thread, since=s) as ws:
        snapshot = await recv(ws)
        replayed = await quiet(ws)
    assert snapshot["seq"] == s
    contents = [f["data"]["content"] for f in replayed if f["type"] == "message_data"]
    assert contents == ["two", "echo: two"]


async def test_c09_032_new_socket_catches_up_text_being_generated(api: Api) -> None:
    text = "".join(f"{i:02d}-abcdefg " for i in range(12))  # 120 characters
    api.echo.reset(lambda request: Reply(content=text, chunk_size=10, chunk_delay=0.05))
    thread = await api.thread()
    async with await open_ws(api, thread) as watcher:
        await recv(watcher)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        await until(
            watcher, lambda f: f["type"] == "message_chunk" and f["offset"] >= 40, timeout=10
        )
        async with await open_ws(api, thread) as late:
            snapshot = await recv(late)
            assert snapshot["status"]["state"] == "running"
            frames = await until(late, settled_idle)
    chunks = [f for f in frames if f["type"] == "message_chunk"]
    assert chunks[0]["offset"] == 0 and len(chunks[0]["chunk"]) >= 40
    assert text.startswith(chunks[0]["chunk"])
    assembled = ""
    for chunk in chunks:
        assert chunk["offset"] <= len(assembled)
        assembled = assembled[: chunk["offset"]] + chunk["chunk"]
    assert assembled == text


async def test_c09_033_c09_034_slow_consumer_is_closed_4008_and_resumes(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(buffer_frames=50, buffer_bytes=256 * 1024))
    thread = await api.thread()
    await exchange(api, thread, "before")
    state = await api.runtime.thread(thread)
    blob = "x" * 16000  # 80 MB in all: more than the kernel buffers of both ends hold
    # no compression: the repetitive frames would shrink to nothing
    mirror = Mirror()
    page = (await api.client().get(f"/api/threads/{thread}/messages")).json()
    mirror.messages = {m["id"]: m for m in page["messages"]}
    mirror.seq = page["seq"]
    paused = await open_ws(api, thread, max_queue=1, compression=None, since=mirror.seq)
    mirror.apply(await recv(paused))
    others: list[dict[str, Any]] = []

    async def read_other() -> None:
        async with await open_ws(api, thread) as other:
            others.append(await recv(other))
            while True:
                frame = await recv(other, 10)
                others.append(frame)
                if frame["type"] == "event" and frame["data"].get("n") == 4999:
                    return

    reader = asyncio.create_task(read_other())
    await asyncio.sleep(0.2)
    for n in range(5000):
        state.emit("blob", {"n": n, "blob": blob})
        if n == 2500:
            messages = (await api.client().get(f"/api/threads/{thread}/messages")).json()
            first = messages["messages"][-1]["id"]
            await api.client().patch(
                f"/api/threads/{thread}/messages/{first}", json={"content": "edited"}
            )
        if n % 10 == 0:
            await asyncio.sleep(0.002)
    await asyncio.wait_for(reader, 30)
    assert len([f for f in others if f["type"] == "event"]) == 5000  # unaffected

    error: dict[str, Any] | None = None
    received = 0
    try:
        while True:
            frame = json.loads(await asyncio.wait_for(paused.recv(), 10))
            received += 1
            if frame["type"] == "error":
                error = frame
            else:
                mirror.apply(frame)
    except ConnectionClosed:
        pass
    assert error is not None and error["code"] == "slow_consumer"
    assert paused.close_code == 4008
    assert received < 5000  # it was cut off, not served in full
    # C09-034: resume from the last seq processed
    async with await open_ws(api, thread, since=mirror.seq) as ws:
        for frame in [await recv(ws), *await quiet(ws)]:
            mirror.apply(frame)
    assert mirror.view() == await fresh_view(api, thread)
    assert "edited" in [content for content, _ in mirror.view().values()]


async def test_c09_035_c08_045_deleting_the_thread_closes_1000(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        response = await api.client().delete(f"/api/threads/{thread}")
        assert response.status_code == 200
        try:
            while True:
                await recv(ws)
        except ConnectionClosed:
            pass
        assert ws.close_code == 1000
        assert ws.close_reason == "Thread deleted"


async def test_c09_037_terminate_sends_status_with_terminated(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        before = await recv(ws)
        response = await api.client().post(f"/api/threads/{thread}/terminate", json={})
        at = response.json()["terminated"]
        frame = await until(ws, lambda f: f["type"] == "thread_status")
    assert frame[-1]["terminated"] == at
    assert frame[-1]["status"] == before["status"]
    assert frame[-1]["snapshot"] is False
    async with await open_ws(api, thread) as again:
        snapshot = await recv(again)
    assert snapshot["terminated"] == at


async def test_c09_024_idle_socket_gets_heartbeats_with_the_head(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(heartbeat_s=0.2))
    thread = await api.thread()
    await exchange(api, thread, "x")
    head = await head_of(api, thread)
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        beat = await recv(ws, 2)
    assert beat["type"] == "heartbeat" and beat["seq"] == head
    assert isinstance(beat["ts"], int)


async def test_c09_025_ping_is_answered(api: Api) -> None:
    thread = await api.thread()
    async with await open_ws(api, thread) as ws:
        await recv(ws)
        await ws.send("ping")
        assert await asyncio.wait_for(ws.recv(), 5) == "pong"
        await ws.send("stream_ping")
        assert await asyncio.wait_for(ws.recv(), 5) == "stream_pong"
        await ws.send("something else")
        await ws.send("x" * (64 * 1024 + 1))
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 5)
        except ConnectionClosed:
            pass
        assert ws.close_code == 1009


async def test_c09_030_pruned_window_is_resync_expired_and_the_rest_replays(
    make_api: Callable[..., Any],
) -> None:
    # the replay settings of the case: one hour, 10 events; the runtime's pruner pass
    api = await make_api(event_retention=EventRetention(3600, 10, interval=None))
    thread = await api.thread()
    for text in ("a", "b", "c", "d"):
        await exchange(api, thread, text)
    head = (await api.runtime.store.get_thread(thread)).event_seq
    assert head >= 20
    report = await api.runtime.prune_events()
    assert report.rows == head - 11  # a row goes once more than 10 newer rows follow it
    row = await api.runtime.store.get_thread(thread)
    assert row.events_pruned_through == head - 11
    async with await open_ws(api, thread, since=1) as ws:
        snapshot = await recv(ws)
        resync = await recv(ws)
        assert await quiet(ws) == []
    assert snapshot["seq"] == head
    assert resync == {"type": "resync", "seq": head, "since": 1, "reason": "expired"}
    async with await open_ws(api, thread, since=head - 3, logs="true") as ws:
        snapshot = await recv(ws)
        replayed = await quiet(ws)
    assert snapshot["seq"] == head - 3
    assert [f["seq"] for f in replayed] == [head - 2, head - 1, head]


async def test_c09_032_catch_up_includes_the_reasoning_so_far(api: Api) -> None:
    thinking = "".join(f"step {i:02d}; " for i in range(12))  # 108 characters
    api.echo.reset(
        lambda request: Reply(
            content="done", reasoning_content=thinking, chunk_size=9, chunk_delay=0.05
        )
    )
    thread = await api.thread()
    async with await open_ws(api, thread, reasoning="true") as watcher:
        await recv(watcher)
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "go"})
        await until(watcher, lambda f: f["type"] == "reasoning_chunk" and f["offset"] >= 36)
        async with await open_ws(api, thread, reasoning="true") as late:
            await recv(late)
            frames = await until(late, settled_idle)
    chunks = [f for f in frames if f["type"] == "reasoning_chunk"]
    assert chunks[0]["offset"] == 0 and len(chunks[0]["chunk"]) >= 36
    assembled = ""
    for chunk in chunks:
        assert chunk["offset"] <= len(assembled)
        assembled = assembled[: chunk["offset"]] + chunk["chunk"]
    assert assembled == thinking


async def test_c09_033_a_write_stuck_for_the_timeout_is_a_slow_consumer(
    make_api: Callable[..., Any],
) -> None:
    """§9.10.2 rule 4: the queue is large enough, but the peer stopped reading."""
    api: Api = await make_api(
        stream_settings(write_timeout_s=0.5, buffer_frames=10_000, buffer_bytes=200 * 1024 * 1024)
    )
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    paused = await open_ws(api, thread, max_queue=1, compression=None)
    await recv(paused)
    blob = "y" * 16000
    for n in range(3000):  # 48 MB: more than the kernel buffers hold
        state.emit("blob", {"n": n, "blob": blob})
        if n % 20 == 0:
            await asyncio.sleep(0.002)
    await asyncio.sleep(1.0)
    frames: list[dict[str, Any]] = []
    try:
        while True:
            frames.append(json.loads(await asyncio.wait_for(paused.recv(), 10)))
    except ConnectionClosed:
        pass
    assert paused.close_code == 4008
    assert len(frames) < 3000


async def test_c09_033_outbox_never_holds_more_than_its_bounds() -> None:
    frame = Frame("event", 1, "x" * 30)
    by_count = Outbox(max_frames=3, max_bytes=1000)
    assert [by_count.put(frame) for _ in range(4)] == [True, True, True, False]
    assert by_count.size == (3, 90)
    assert await by_count.get(0.1) is frame
    assert by_count.size == (2, 60)
    by_bytes = Outbox(max_frames=1000, max_bytes=50)
    assert [by_bytes.put(frame) for _ in range(2)] == [True, False]
    by_bytes.fail(Frame("error", 1, "{}"), Close(4008, "Slow consumer"))
    assert by_bytes.size == (2, 0)
    assert by_bytes.put(frame) is True and by_bytes.size == (2, 0)  # closing: dropped
    assert isinstance(await by_bytes.get(0.1), Frame)
    assert await by_bytes.get(0.1) == Close(4008, "Slow consumer")


def chunk(offset: int, text: str, message_id: str = "m", seq: int = 5) -> Frame:
    body = {
        "type": "message_chunk",
        "seq": seq,
        "message_id": message_id,
        "depth": 0,
        "chunk": text,
        "offset": offset,
    }
    return Frame("message_chunk", seq, json.dumps(body), body)


def apply(frames: list[Any]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for frame in frames:
        if isinstance(frame, Frame) and frame.body is not None:
            body = json.loads(frame.text)
            text = texts.get(body["message_id"], "")
            texts[body["message_id"]] = text[: body["offset"]] + body["chunk"]
    return texts


async def drain(outbox: Outbox) -> list[Any]:
    out = []
    while (item := await outbox.get(0.01)) is not None:
        out.append(item)
    return out


async def test_c09_033_a_full_outbox_merges_queued_chunks_first() -> None:
    """§9.10.2 rule 3: chunks of one message merge (the text a client builds is the same)
    before the socket is given up."""
    outbox = Outbox(max_frames=4, max_bytes=10_000)
    sent = [chunk(0, "ab"), chunk(2, "cd"), Frame("event", 5, "{}"), chunk(4, "ef")]
    sent += [chunk(0, "x", "other"), chunk(6, "gh")]
    assert all(outbox.put(frame) for frame in sent)
    assert outbox.size[0] <= 4
    queued = await drain(outbox)
    assert apply(queued) == apply(sent) == {"m": "abcdefgh", "other": "x"}
    assert [f.seq for f in queued] == sorted(f.seq for f in queued)


async def test_c09_033_chunks_do_not_merge_across_a_gap_or_a_message_data() -> None:
    outbox = Outbox(max_frames=2, max_bytes=10_000)
    assert outbox.put(chunk(0, "ab"))
    assert outbox.put(chunk(5, "zz"))  # a gap: the client marks the text incomplete
    assert outbox.put(chunk(7, "yy"))  # merges into the second, never across the gap
    queued = await drain(outbox)
    assert [json.loads(f.text)["offset"] for f in queued] == [0, 5]
    assert json.loads(queued[1].text)["chunk"] == "zzyy"
    completed = Frame(
        "message_data", 6, "{}", {"type": "message_data", "message_id": "m", "seq": 6}
    )
    outbox = Outbox(max_frames=2, max_bytes=10_000)
    assert outbox.put(chunk(0, "ab")) and outbox.put(completed)
    assert outbox.put(chunk(2, "cd")) is False  # nothing to merge: the socket is given up


async def test_c09_033_a_rewriting_chunk_replaces_the_queued_one() -> None:
    """A retry's first chunk (offset 0) makes the queued text of the failed attempt moot."""
    outbox = Outbox(max_frames=1, max_bytes=10_000)
    assert outbox.put(chunk(0, "first attempt", seq=5))
    assert outbox.put(chunk(0, "retry", seq=7))
    (only,) = await drain(outbox)
    assert json.loads(only.text) == {
        "type": "message_chunk",
        "seq": 5,
        "message_id": "m",
        "depth": 0,
        "chunk": "retry",
        "offset": 0,
    }
