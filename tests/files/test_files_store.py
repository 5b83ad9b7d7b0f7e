"""Files across restarts and migrations, their durable event rows (spec 07 §7.9, spec 09
§9.6), the attachment cascade of deleted messages and queue entries (C02-054, spec 01
§1.11.3 rule 4) and the header readers of spec 07 §7.7.3."""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Callable
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url
from threadloom.thread.filetypes import extension_for_mime, image_size, is_text_mime
from threadloom.thread.state import ThreadState


def ref(path: str) -> dict[str, Any]:
    return {"id": "r-" + path, "type": "file", "path": path, "name": path.rsplit("/", 1)[1],
            "mimeType": "image/png", "size": 3}  # fmt: skip


async def test_c02_054_shared_attachment_file_kept(state: ThreadState) -> None:
    """C02-054: two messages reference the same attachment path → deleting one keeps the
    file; deleting the other removes it."""
    ref_a = await state.write_attachment(b"img", name="a.png")
    first = await state.inject_message(role="user", content="1", attachments=[ref_a.to_wire()])
    second = await state.inject_message(
        role="assistant", content="2", attachments=[ref_a.to_wire()]
    )
    assert await state.delete_message(first.id) is True
    assert await state.read_file(ref_a.path) == b"img"
    assert await state.delete_message(second.id) is True
    assert await state.stat_file(ref_a.path) is None


async def test_queue_entries_hold_and_release_attachment_files(state: ThreadState) -> None:
    """A waiting queue entry keeps a shared file alive; cancelling the last holder (an
    entry) deletes it. Paths not stored as files, and directories, are left alone."""
    await state.write_file("/att/q.png", b"q")
    await state.mkdir_file("/att/dir")
    message = await state.inject_message(
        role="user", content="m", attachments=[ref("/att/q.png"), ref("/att/dir")]
    )
    entry = await state.queue_message(
        role="user", content="q", attachments=[ref("/att/q.png"), ref("/att/none.png")]
    )
    assert await state.delete_message(message.id) is True
    assert await state.read_file("/att/q.png") == b"q"  # the entry still refers to it
    assert (await state.stat_file("/att/dir")) is not None
    assert await state.delete_message(entry.id) is True
    assert await state.stat_file("/att/q.png") is None
    assert (await state.stat_file("/att/dir")) is not None


async def test_cascade_delete_removes_files_of_every_deleted_message(
    runtime: Runtime, state: ThreadState
) -> None:
    """Tool results deleted with their assistant message take their attachment files too;
    a file still referenced by a message of the thread survives. The file events follow
    the message_deleted events in the same transaction."""
    await state.write_file("/r1.png", b"1")
    await state.write_file("/keep.png", b"k")
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    call = await state.inject_message(role="assistant", content=None, tool_calls=calls)
    await state.inject_message(
        role="tool",
        content="r",
        tool_call_id="c1",
        name="f",
        attachments=[ref("/r1.png"), ref("/keep.png")],
    )
    await state.inject_message(role="user", content="u", attachments=[ref("/keep.png")])
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(call.id) is True
    published = sub.drain()
    assert [e.kind for e in published] == ["message_deleted", "message_deleted", "file"]
    assert [e.seq for e in published] == [published[0].seq + i for i in range(3)]
    assert published[2].data["data"] == {"path": "/r1.png"}
    assert await state.stat_file("/r1.png") is None
    assert await state.read_file("/keep.png") == b"k"


async def test_file_event_payloads_are_durable(runtime: Runtime, state: ThreadState) -> None:
    """Every file change writes one thread_events row (kind file, entity_id the path,
    payload = the published data) and publishes exactly that with the row's seq."""
    head = (await runtime.store.get_thread(state.thread_id)).event_seq  # type: ignore[union-attr]
    sub = runtime.events.subscribe(state.thread_id)
    created = await state.write_file("/n/a.txt", "a", metadata={"k": [1, 2]})
    await state.write_file("/n/a.txt", b"bb", "text/plain")
    await state.link_file("/n/l", "https://example.com/doc.md", size=5)
    await state.mkdir_file("/m")
    moved = await state.move_file("/n", "/m/n")
    await state.rename_file("/m/n/l", "link")
    await state.unlink_file("/m/n/a.txt")
    await state.rmdir_file("/m", recursive=True)
    published = [e for e in sub.drain() if e.kind == "file"]
    assert [e.data["event_type"] for e in published] == [
        "file_created",
        "file_updated",
        "file_created",
        "file_created",
        "file_moved",
        "file_moved",
        "file_deleted",
        "file_deleted",
        "file_deleted",
    ]
    assert [e.seq for e in published] == list(range(head + 1, head + 10))
    assert published[0].data["data"] == {"path": "/n/a.txt", "file": created.to_wire()}
    assert created.to_wire()["metadata"] == {"k": [1, 2]}
    assert set(created.to_wire()) == {
        "path", "name", "mimeType", "storage", "location", "size", "metadata",
        "isDirectory", "createdAt", "width", "height", "isChunked", "chunkCount",
    }  # fmt: skip
    assert published[2].data["data"]["file"]["mimeType"] == "text/markdown"
    assert published[4].data["data"] == {"from": "/n", "path": "/m/n", "file": moved.to_wire()}
    assert published[5].data["data"]["from"] == "/m/n/l"
    assert published[5].data["data"]["path"] == "/m/n/link"
    assert [e.data["data"]["path"] for e in published[6:]] == ["/m/n/a.txt", "/m", "/m/n/link"]
    rows = await runtime.store.read_events(state.thread_id, head)
    assert [(r.seq, r.kind, r.payload) for r in rows] == [
        (e.seq, "file", e.data) for e in published
    ]
    assert [r.entity_id for r in rows] == [e.data["data"]["path"] for e in published]
    # Replaying the durable rows through the hub yields the same data.
    assert [await runtime.hub.event_data(r) for r in rows] == [e.data for e in published]


async def test_files_survive_restart(open_runtime: Callable[..., Any]) -> None:
    """Files, links, explicit directories, metadata, thumbnails and chunked content read
    back equal from a new Runtime on the same database."""
    rt = await open_runtime()
    state = await rt.create_thread("a")
    big = os.urandom(4_000_000)
    records = [
        await state.write_file("/big.bin", big, metadata={"a": 1}, thumbnail=b"t"),
        await state.link_file("/l.pdf", "https://example.com/l.pdf", size=3),
        await state.mkdir_file("/empty"),
        await state.write_file("/x/y.txt", "text"),
    ]
    listing = await state.readdir_file("/")
    await rt.close()
    rt2 = await open_runtime()
    try:
        again = await rt2.thread(state.thread_id)
        assert [await again.stat_file(r.path) for r in records] == records
        assert await again.read_file("/big.bin") == big
        assert await again.get_file_thumbnail("/big.bin") == b"t"
        assert await again.readdir_file("/") == listing
        assert (await again.get_file_stats()).to_wire() == {
            "totalSize": 4_000_000 + 3 + 4,
            "fileCount": 3,
        }
        assert (await again.write_file("/x/y.txt", "new")).size == 3
    finally:
        await rt2.close()


@pytest.mark.sqlite_only
async def test_migration_from_version_1(db_url: str) -> None:
    """A database with only migration 1 applied (and a thread in it) opens: migration 2
    adds the file tables, and the thread is intact and can store files."""
    path = path_from_url(db_url)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        schema.applied_versions(conn)
        version, name, sql = schema.MIGRATIONS[0]
        assert version == 1
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO threadloom_migrations(version, name, applied_at) VALUES (1, ?, 0)",
            (name,),
        )
        conn.execute(
            "INSERT INTO threads(id, agent_id, origin_agent_id, tags, created_at_us,"
            " status_state, status_since, event_seq) VALUES ('t1', 'a', 'a', '[\"x\"]',"
            " 1700000000000000, 'idle', 1700000000000000, 7)"
        )
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "files" not in tables
    finally:
        conn.close()

    rt = await Runtime.open(db_url)
    try:
        state = await rt.thread("t1")
        record = await rt.get_thread_record("t1")
        assert (record.agent_id, record.tags, record.created_at) == ("a", ["x"], 1_700_000_000)
        assert (await state.status()).state == "idle"
        await state.write_file("/after-migration.txt", b"ok")
        assert await state.read_file("/after-migration.txt") == b"ok"
        events = await rt.store.read_events("t1", 0)
        assert [e.seq for e in events] == [8]  # numbering continues from the thread's head
    finally:
        await rt.close()
    conn = sqlite3.connect(path)
    try:
        versions = [r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")]
    finally:
        conn.close()
    assert (
        sorted(versions) == [m[0] for m in schema.MIGRATIONS] == list(range(1, len(versions) + 1))
    )


def test_image_headers() -> None:
    """Spec 07 §7.7.3: dimensions from PNG, JPEG (SOFn), GIF and WebP (VP8, VP8L, VP8X)
    headers; anything unreadable gives (None, None)."""
    jpeg = (
        b"\xff\xd8"
        + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
        + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\x03" + b"\x00" * 9
    )  # fmt: skip
    assert image_size("image/jpeg", jpeg) == (640, 480)
    assert image_size("image/jpeg", jpeg[:10]) == (None, None)
    gif = b"GIF89a" + struct.pack("<HH", 20, 10) + b"\x00" * 8
    assert image_size("image/gif", gif) == (20, 10)
    vp8 = b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00" + b"\x00\x00\x00\x9d\x01\x2a"
    assert image_size("image/webp", vp8 + struct.pack("<HH", 300, 200)) == (300, 200)
    bits = (300 - 1) | ((200 - 1) << 14)
    vp8l = b"RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f" + struct.pack("<I", bits)
    assert image_size("image/webp", vp8l + b"\x00" * 8) == (300, 200)
    vp8x = (
        b"RIFF\x00\x00\x00\x00WEBPVP8X\x00\x00\x00\x00" + b"\x00" * 4
        + (299).to_bytes(3, "little") + (199).to_bytes(3, "little")
    )  # fmt: skip
    assert image_size("image/webp", vp8x) == (300, 200)
    assert image_size("image/bmp", gif) == (None, None)
    assert image_size("image/png", b"\x89PNG") == (None, None)


def test_mime_rules() -> None:
    """Spec 07 §7.4: what counts as text, and the extension an attachment gets."""
    for text in ("text/csv", "application/ld+json", "image/svg+xml", "application/x-sh",
                 "Application/JSON; charset=utf-8"):  # fmt: skip
        assert is_text_mime(text), text
    for binary in ("application/octet-stream", "image/png", "application/pdf"):
        assert not is_text_mime(binary), binary
    assert extension_for_mime("image/jpeg") == "jpg"
    assert extension_for_mime("audio/mpeg") == "mpeg"
    assert extension_for_mime("application/vnd.ms-excel") == "bin"
