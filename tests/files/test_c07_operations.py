"""Conformance cases of spec 07 §7.10 on directories, moves, search, attachment cleanup,
terminated threads, isolation, concurrency and events: C07-013 … C07-018, C07-021 …
C07-026, C07-028."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from store_probe import StoreProbe
from threadloom import Runtime
from threadloom.errors import (
    DirectoryNotEmpty,
    FileError,
    FileExists,
    FileNotFound,
    IsADirectory,
    NotADirectory,
)
from threadloom.thread.events import Subscription
from threadloom.thread.state import ThreadState

Events = Callable[[Subscription], list[dict[str, Any]]]


async def three_files(state: ThreadState) -> None:
    await state.write_file("/d/b.txt", b"bbb")
    await state.write_file("/d/e/c.txt", b"cccc")
    await state.write_file("/a.txt", b"a")


def ref(path: str, name: str = "x.png") -> dict[str, Any]:
    return {"id": f"ref-{name}", "type": "file", "path": path, "name": name,
            "mimeType": "image/png", "size": 1}  # fmt: skip


async def test_c07_013_rmdir_not_empty_and_recursive(
    state: ThreadState, runtime: Runtime, events_of: Events
) -> None:
    """C07-013: rmdir("/d") with entries → DirectoryNotEmpty; recursive → everything below
    gone, one file_deleted per removed file (and explicit directory)."""
    await three_files(state)
    await state.mkdir_file("/d/e/empty")
    with pytest.raises(DirectoryNotEmpty) as info:
        await state.rmdir_file("/d")
    assert str(info.value) == "Directory not empty"
    assert await state.read_file("/d/b.txt") == b"bbb"
    sub = runtime.events.subscribe(state.thread_id)
    await state.rmdir_file("/d", recursive=True)
    assert await state.stat_file("/d/e/c.txt") is None
    assert await state.stat_file("/d") is None
    events = events_of(sub)
    assert [(e["event_type"], e["data"]) for e in events] == [
        ("file_deleted", {"path": p}) for p in ("/d/b.txt", "/d/e/c.txt", "/d/e/empty")
    ]
    assert [e["seq"] for e in events] == [events[0]["seq"] + i for i in range(3)]
    assert [e.path for e in (await state.readdir_file("/")).entries] == ["/a.txt"]
    with pytest.raises(NotADirectory) as info2:
        await state.rmdir_file("/a.txt")
    assert str(info2.value) == "Not a directory: /a.txt"
    await state.rmdir_file("/nothing")  # nothing there: no effect, no event
    assert events_of(sub) == []


async def test_c07_014_mkdir_and_rmdir_empty(
    state: ThreadState, runtime: Runtime, events_of: Events
) -> None:
    """C07-014: mkdir("/empty") → listed as a directory; rmdir → gone; rmdir("/") →
    FileError("Cannot remove the root directory")."""
    sub = runtime.events.subscribe(state.thread_id)
    made = await state.mkdir_file("/empty")
    assert made.is_directory and made.mime_type == "inode/directory" and made.size == 0
    again = await state.mkdir_file("/empty/")  # idempotent: no second event
    assert again.path == "/empty"
    listed = (await state.readdir_file("/")).entries
    assert [(e.path, e.is_directory) for e in listed] == [("/empty", True)]
    await state.rmdir_file("/empty")
    assert await state.stat_file("/empty") is None
    assert [e["event_type"] for e in events_of(sub)] == ["file_created", "file_deleted"]
    with pytest.raises(FileError) as info:
        await state.rmdir_file("/")
    assert str(info.value) == "Cannot remove the root directory"
    root = await state.mkdir_file("/")
    assert (root.path, root.name, root.is_directory) == ("/", "", True)
    await state.write_file("/f", b"x")
    with pytest.raises(NotADirectory):
        await state.mkdir_file("/f")
    with pytest.raises(NotADirectory) as info2:
        await state.mkdir_file("/f/sub")
    assert str(info2.value) == "Parent path is a file: /f"


async def test_c07_015_move_errors(state: ThreadState) -> None:
    """C07-015: move into itself, from a missing source, onto an existing path → the
    spec's errors; nothing changes."""
    await three_files(state)
    with pytest.raises(FileError) as info:
        await state.move_file("/d", "/d/sub")
    assert str(info.value) == "Cannot move a directory into itself or one of its descendants"
    with pytest.raises(FileNotFound) as info2:
        await state.move_file("/nope", "/x")
    assert str(info2.value) == "Source path does not exist: /nope"
    with pytest.raises(FileExists) as info3:
        await state.move_file("/a.txt", "/d/b.txt")
    assert str(info3.value) == "Destination already exists: /d/b.txt"
    with pytest.raises(FileExists):
        await state.move_file("/a.txt", "/d/e")  # an implicit directory is something
    with pytest.raises(FileError) as info4:
        await state.move_file("/", "/x")
    assert str(info4.value) == "Cannot move the root directory"
    with pytest.raises(FileError) as info5:
        await state.move_file("/a.txt", "/")
    assert str(info5.value) == "Cannot move over the root directory"
    with pytest.raises(NotADirectory):
        await state.move_file("/d", "/a.txt/d")
    assert await state.read_file("/d/e/c.txt") == b"cccc"


async def test_c07_016_move_directory(
    state: ThreadState, runtime: Runtime, events_of: Events
) -> None:
    """C07-016: move("/d", "/z") → /z/b.txt, /z/e/c.txt with the same bytes, /d gone;
    exactly one file_moved {from: /d, path: /z}; stats unchanged."""
    await three_files(state)
    before = await state.get_file_stats()
    sub = runtime.events.subscribe(state.thread_id)
    moved = await state.move_file("/d", "/z")
    assert moved.path == "/z" and moved.is_directory
    assert await state.read_file("/z/b.txt") == b"bbb"
    assert await state.read_file("/z/e/c.txt") == b"cccc"
    assert await state.stat_file("/d") is None and await state.stat_file("/d/b.txt") is None
    events = events_of(sub)
    assert len(events) == 1
    assert events[0]["event_type"] == "file_moved"
    assert events[0]["data"]["from"] == "/d" and events[0]["data"]["path"] == "/z"
    assert events[0]["data"]["file"]["path"] == "/z"
    assert await state.get_file_stats() == before
    assert [e.name for e in (await state.readdir_file("/z")).entries] == ["e", "b.txt"]
    same = await state.move_file("/z", "/z/")
    assert same.path == "/z" and events_of(sub) == []
    # A file keeps its content, type and date; an explicit directory moves with its subtree.
    await state.mkdir_file("/x/empty")
    await state.move_file("/x", "/y/x")
    assert (await state.stat_file("/y/x/empty")) is not None


async def test_c07_017_rename(state: ThreadState) -> None:
    """C07-017: rename("/a.txt", "x/y") → path separator error; rename to "b.txt" →
    record /b.txt."""
    await state.write_file("/a.txt", b"a")
    with pytest.raises(FileError) as info:
        await state.rename_file("/a.txt", "x/y")
    assert str(info.value) == "New name must not contain path separators"
    with pytest.raises(FileError) as info2:
        await state.rename_file("/a.txt", "")
    assert str(info2.value) == "New name must not be empty"
    for dots in (".", ".."):
        with pytest.raises(FileError) as info3:
            await state.rename_file("/a.txt", dots)
        assert str(info3.value) == f"Invalid name: {dots}"
    record = await state.rename_file("/a.txt", "b.txt")
    assert record.path == "/b.txt" and record.name == "b.txt"
    assert await state.read_file("/b.txt") == b"a" and await state.stat_file("/a.txt") is None
    await state.write_file("/d/in.txt", b"1")
    assert (await state.rename_file("/d/in.txt", "out.txt")).path == "/d/out.txt"
    assert (await state.rename_file("/d", "e")).path == "/e"


async def test_c07_018_grep(state: ThreadState) -> None:
    """C07-018: grep("HELLO") over /t.txt "say hello world" → one result with snippet
    "say <mark>hello</mark> world"; an octet-stream file with those bytes is not searched
    by content."""
    await state.write_file("/t.txt", "say hello world")
    await state.write_file("/raw", b"say hello world", "application/octet-stream")
    results = await state.grep_files("HELLO")
    assert [(r.path, r.name, r.snippet) for r in results] == [
        ("/t.txt", "t.txt", "say <mark>hello</mark> world")
    ]
    # Names match for every file; content snippets cut at 40 characters with "...".
    await state.write_file("/hello-notes.bin", b"\x00")
    long_text = "x" * 50 + "\nNeedle\n" + "y" * 50
    await state.write_file("/long.md", long_text)
    by_path = {r.path: r.snippet for r in await state.grep_files("needle")}
    assert by_path == {"/long.md": "..." + "x" * 39 + " <mark>Needle</mark> " + "y" * 39 + "..."}
    names = {r.path: r.snippet for r in await state.grep_files("hello")}
    assert names["/hello-notes.bin"] == "<mark>hello</mark>-notes.bin"
    await state.write_file("/sub/strasse.txt", "die STRASSE")
    assert [r.path for r in await state.grep_files("straße", path="/sub")] == ["/sub/strasse.txt"]
    assert await state.grep_files("hello", path="/sub") == []
    assert len(await state.grep_files("e", limit=1)) == 1
    with pytest.raises(FileError) as info:
        await state.grep_files("   ")
    assert str(info.value) == "Search query must not be empty"
    with pytest.raises(FileError) as info2:
        await state.grep_files("q" * 257)
    assert str(info2.value) == "Search query too long"


async def test_c07_021_shared_attachment_cleanup(
    state: ThreadState, runtime: Runtime, events_of: Events
) -> None:
    """C07-021: two messages reference /attachments/x.png → deleting one keeps the file;
    deleting the other deletes it and publishes file_deleted (after message_deleted)."""
    await state.write_file("/attachments/x.png", b"png")
    m1 = await state.inject_message(
        role="user", content="1", attachments=[ref("/attachments/x.png")]
    )
    m2 = await state.inject_message(
        role="user", content="2", attachments=[ref("/attachments/x.png")]
    )
    assert await state.delete_message(m1.id) is True
    assert await state.read_file("/attachments/x.png") == b"png"
    sub = runtime.events.subscribe(state.thread_id)
    assert await state.delete_message(m2.id) is True
    assert await state.stat_file("/attachments/x.png") is None
    published = sub.drain()
    assert [e.kind for e in published] == ["message_deleted", "file"]
    assert published[1].seq == published[0].seq + 1
    assert published[1].data == {"event_type": "file_deleted",
                                 "data": {"path": "/attachments/x.png"}}  # fmt: skip
    assert events_of(sub) == []


async def test_c07_022_terminated_thread_files(state: ThreadState) -> None:
    """C07-022: a terminated thread still writes and reads files [seed]."""
    await state.terminate()
    assert state.terminated is not None
    await state.write_file("/after.txt", b"still here")
    assert await state.read_file("/after.txt") == b"still here"
    await state.mkdir_file("/dir")
    await state.move_file("/after.txt", "/dir/after.txt")
    assert (await state.get_file_stats()).file_count == 1
    await state.unlink_file("/dir/after.txt")
    assert await state.stat_file("/dir/after.txt") is None


async def test_c07_023_threads_isolated(runtime: Runtime, db_url: str) -> None:
    """C07-023: a file of thread A is invisible in thread B; deleting A deletes its files
    (rows and content)."""
    a = await runtime.create_thread("a")
    b = await runtime.create_thread("a")
    await a.write_file("/secret.txt", b"A" * 2_000_000)
    await a.write_file("/shared/name.txt", b"a")
    await b.write_file("/shared/name.txt", b"b")
    assert await b.stat_file("/secret.txt") is None
    assert await b.read_file("/secret.txt") is None
    assert await b.read_file("/shared/name.txt") == b"b"
    assert [e.path for e in await b.find_files("**")] == ["/shared", "/shared/name.txt"]
    await runtime.delete_thread(a.thread_id)
    store = StoreProbe(db_url)
    rows = store.rows("SELECT thread_id, path FROM files")
    chunks = store.rows("SELECT COUNT(*) FROM file_chunks")[0][0]
    assert rows == [(b.thread_id, "/shared/name.txt")]
    assert chunks == 1
    assert await b.read_file("/shared/name.txt") == b"b"


async def test_c07_024_concurrent_writes_are_atomic(state: ThreadState, runtime: Runtime) -> None:
    """C07-024: concurrent writes of X and Y to one path while a task reads repeatedly →
    every read is X, Y or the previous content in full; the last commit wins."""
    previous, x, y = b"p" * 2_500_000, b"x" * 3_000_000, b"y" * 3_000_001
    await state.write_file("/f", previous)
    seen: list[bytes | None] = []
    done = asyncio.Event()

    async def reader() -> None:
        while not done.is_set():
            seen.append(await state.read_file("/f"))
            await asyncio.sleep(0)

    sub = runtime.events.subscribe(state.thread_id)
    task = asyncio.create_task(reader())
    await asyncio.gather(state.write_file("/f", x), state.write_file("/f", y))
    seen.append(await state.read_file("/f"))
    done.set()
    await task
    assert seen and all(s in (previous, x, y) for s in seen)
    last = [e for e in sub.drain() if e.kind == "file"][-1]
    winner = x if last.data["data"]["file"]["size"] == len(x) else y
    assert await state.read_file("/f") == winner


async def test_c07_025_stream_during_overwrite(state: ThreadState) -> None:
    """C07-025: read_file_stream while the file is overwritten → FileError("File changed
    while reading: <path>") or one whole version, never a mixture."""
    old, new = b"o" * 3_000_000, b"n" * 3_000_000
    await state.write_file("/s.bin", old)
    stream = await state.read_file_stream("/s.bin", chunk_size=1_000_000)
    assert stream is not None
    received = [await anext(stream)]
    await state.write_file("/s.bin", new)
    try:
        received.extend([chunk async for chunk in stream])
    except FileError as exc:
        assert str(exc) == "File changed while reading: /s.bin"
    else:
        assert b"".join(c.data for c in received) in (old, new)
    # A deleted file is reported the same way.
    stream = await state.read_file_stream("/s.bin", chunk_size=1_000_000)
    assert stream is not None
    await anext(stream)
    await state.unlink_file("/s.bin")
    with pytest.raises(FileError) as info:
        await anext(stream)
    assert str(info.value) == "File changed while reading: /s.bin"


async def test_c07_026_write_and_unlink_events(
    state: ThreadState, runtime: Runtime, events_of: Events
) -> None:
    """C07-026: write to a new path → file_created; over it → file_updated; unlink →
    file_deleted; unlink of a missing path → no error, no event."""
    sub = runtime.events.subscribe(state.thread_id)
    created = await state.write_file("/e.txt", "one")
    updated = await state.write_file("/e.txt", "two!")
    await state.unlink_file("/e.txt")
    await state.unlink_file("/e.txt")
    events = events_of(sub)
    assert [e["event_type"] for e in events] == ["file_created", "file_updated", "file_deleted"]
    assert events[0]["data"] == {"path": "/e.txt", "file": created.to_wire()}
    assert events[1]["data"] == {"path": "/e.txt", "file": updated.to_wire()}
    assert events[2]["data"] == {"path": "/e.txt"}
    assert [e["seq"] for e in events] == [events[0]["seq"] + i for i in range(3)]
    await state.mkdir_file("/dir")
    with pytest.raises(IsADirectory):
        await state.unlink_file("/dir")
    with pytest.raises(IsADirectory):
        await state.unlink_file("/")


async def test_c07_028_stats_below_path(state: ThreadState) -> None:
    """C07-028: get_file_stats("/d") over /d/b.txt (3 bytes), /d/e/c.txt (4 bytes) and
    /a.txt → {totalSize: 7, fileCount: 2}."""
    await three_files(state)
    assert (await state.get_file_stats("/d")).to_wire() == {"totalSize": 7, "fileCount": 2}
    assert (await state.get_file_stats("/")).to_wire() == {"totalSize": 8, "fileCount": 3}
    assert (await state.get_file_stats("/a.txt")).to_wire() == {"totalSize": 1, "fileCount": 1}
    assert (await state.get_file_stats("/none")).to_wire() == {"totalSize": 0, "fileCount": 0}
    await state.mkdir_file("/d/empty")  # directories are not counted
    assert (await state.get_file_stats("/d")).file_count == 2
