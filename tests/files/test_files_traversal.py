"""No file method reads or writes outside the thread's own space (spec 07 §7.1, §7.2,
§7.8 rule 3): every path argument is normalised with ``.``/``..`` refused, nothing touches
the host file system, and another thread's files are invisible to every method."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.errors import FileError, InvalidPath
from threadloom.thread.state import ThreadState
from threadloom.thread.transfer import copy_attachments

ESCAPES = (
    "../secret.txt",
    "/a/../../secret.txt",
    "..",
    "/./secret.txt",
    "..\\secret.txt",
    "/a/\x00/secret.txt",
    "/a/\r\n/secret.txt",
)

Call = Callable[[ThreadState, str], Awaitable[Any]]

# Every file method, with the escaping path in each of its path arguments.
PATH_CALLS: dict[str, Call] = {
    "write_file": lambda s, p: s.write_file(p, b"x"),
    "link_file": lambda s, p: s.link_file(p, "https://example.com/x"),
    "read_file": lambda s, p: s.read_file(p),
    "read_file_stream": lambda s, p: s.read_file_stream(p),
    "stat_file": lambda s, p: s.stat_file(p),
    "readdir_file": lambda s, p: s.readdir_file(p),
    "unlink_file": lambda s, p: s.unlink_file(p),
    "mkdir_file": lambda s, p: s.mkdir_file(p),
    "rmdir_file": lambda s, p: s.rmdir_file(p, recursive=True),
    "move_file(source)": lambda s, p: s.move_file(p, "/moved"),
    "move_file(destination)": lambda s, p: s.move_file("/mine.txt", p),
    "rename_file": lambda s, p: s.rename_file(p, "renamed"),
    "get_file_stats": lambda s, p: s.get_file_stats(p),
    "grep_files(path)": lambda s, p: s.grep_files("secret", path=p),
    "get_file_thumbnail": lambda s, p: s.get_file_thumbnail(p),
    "copy_attachments(path)": lambda s, p: copy_attachments(s, s, [p]),
    "copy_attachments(ref)": lambda s, p: copy_attachments(s, s, [{"path": p, "name": "x"}]),
}


@pytest.fixture
async def pair(runtime: Runtime) -> tuple[ThreadState, ThreadState]:
    """Thread A owning /mine.txt and thread B owning /secret.txt and /b/secret.txt."""
    a = await runtime.create_thread("a")
    b = await runtime.create_thread("a")
    await a.write_file("/mine.txt", b"mine")
    await b.write_file("/secret.txt", b"secret of B", thumbnail=b"thumb")
    await b.write_file("/b/secret.txt", b"secret of B")
    return a, b


def host_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("method", sorted(PATH_CALLS))
async def test_traversal_refused_for_every_method(
    method: str, pair: tuple[ThreadState, ThreadState], tmp_path: Path
) -> None:
    a, b = pair
    before = host_files(tmp_path)
    for escape in ESCAPES:
        with pytest.raises(InvalidPath):
            await PATH_CALLS[method](a, escape)
    assert host_files(tmp_path) == before  # nothing written next to the database
    assert await a.read_file("/mine.txt") == b"mine"
    assert [e.path for e in await a.find_files("**")] == ["/mine.txt"]
    assert await b.read_file("/secret.txt") == b"secret of B"
    assert [e.path for e in await b.find_files("**")] == ["/b", "/b/secret.txt", "/secret.txt"]


async def test_rename_names_cannot_escape(pair: tuple[ThreadState, ThreadState]) -> None:
    a, _ = pair
    for name in ("..", ".", "../x", "a/../../x"):
        with pytest.raises(FileError):
            await a.rename_file("/mine.txt", name)
    with pytest.raises(InvalidPath):
        await a.rename_file("/mine.txt", "..\\x")
    assert await a.read_file("/mine.txt") == b"mine"


async def test_patterns_only_match_own_paths(pair: tuple[ThreadState, ThreadState]) -> None:
    """find and grep patterns are not paths: ``..`` is literal text, and they only ever
    see the calling thread's entries."""
    a, _ = pair
    assert await a.find_files("../**") == []
    assert await a.find_files("/../secret.txt") == []
    assert [e.path for e in await a.find_files("**")] == ["/mine.txt"]
    assert await a.grep_files("secret") == []
    assert await a.grep_files("../") == []


async def test_attachment_names_cannot_escape(
    pair: tuple[ThreadState, ThreadState], tmp_path: Path
) -> None:
    """A write_attachment name is only a display name: the file always lands under
    /attachments of the calling thread."""
    a, b = pair
    before = host_files(tmp_path)
    ref = await a.write_attachment(b"x", name="../../../etc/passwd")
    assert ref.path.startswith("/attachments/") and ref.path.count("/") == 2
    assert ref.name == "../../../etc/passwd"
    assert host_files(tmp_path) == before
    assert await b.stat_file(ref.path) is None


async def test_other_threads_files_invisible_to_every_method(
    pair: tuple[ThreadState, ThreadState],
) -> None:
    """Thread A sees and touches none of B's entries through any method."""
    a, b = pair
    assert await a.read_file("/secret.txt") is None
    assert await a.read_file_stream("/secret.txt") is None
    assert await a.stat_file("/secret.txt") is None
    assert await a.stat_file("/b") is None
    assert (await a.readdir_file("/b")).entries == []
    assert [e.path for e in (await a.readdir_file("/")).entries] == ["/mine.txt"]
    assert (await a.get_file_stats()).to_wire() == {"totalSize": 4, "fileCount": 1}
    assert (await a.get_file_stats("/b")).file_count == 0
    assert await a.get_file_thumbnail("/secret.txt") is None
    assert await a.find_files("*secret*") == []
    assert await a.grep_files("secret of") == []
    await a.unlink_file("/secret.txt")  # nothing there for A: no effect
    await a.rmdir_file("/b", recursive=True)
    with pytest.raises(FileError):
        await a.move_file("/secret.txt", "/stolen.txt")
    with pytest.raises(FileError):
        await a.rename_file("/b", "c")
    # Writes at the same paths create A's own entries and leave B's alone.
    await a.write_file("/secret.txt", b"A's own")
    await a.mkdir_file("/b")
    await a.move_file("/mine.txt", "/b/secret.txt")
    assert await b.read_file("/secret.txt") == b"secret of B"
    assert await b.read_file("/b/secret.txt") == b"secret of B"
    assert await b.get_file_thumbnail("/secret.txt") == b"thumb"
    assert (await b.get_file_stats()).file_count == 2
    assert await a.read_file("/b/secret.txt") == b"mine"
