"""Conformance cases of spec 07 §7.10 on paths, content, limits, listing, find, images,
attachments and links: C07-001 … C07-012, C07-019, C07-020, C07-027.

Spec 07 tags none of its cases [api]; its HTTP counterparts (C08-111 … C08-115, C08-129,
C08-130) and the stream frame (C09-022) belong to the server and stream issues.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable

import pytest

from store_probe import StoreProbe
from threadloom import Runtime
from threadloom.errors import (
    FileTooLarge,
    InvalidArgument,
    InvalidPath,
    IsADirectory,
    NotADirectory,
)
from threadloom.records import FileRecord
from threadloom.thread.files import FileLimits, configure_file_limits
from threadloom.thread.state import ThreadState


def paths(records: list[FileRecord]) -> list[str]:
    return [r.path for r in records]


def count_rows(db_url: str, table: str) -> int:
    return int(StoreProbe(db_url).rows(f"SELECT COUNT(*) FROM {table}")[0][0])


async def three_files(state: ThreadState) -> None:
    await state.write_file("/d/b.txt", b"bbb")
    await state.write_file("/d/e/c.txt", b"cccc")
    await state.write_file("/a.txt", b"a")


async def test_c07_001_path_normalised_and_implicit_directory(state: ThreadState) -> None:
    """C07-001: write_file("a//b/") → /a/b named b; stat("/a/b/") finds it; /a is an
    implicit directory record."""
    record = await state.write_file("a//b/", b"x")
    assert (record.path, record.name) == ("/a/b", "b")
    found = await state.stat_file("/a/b/")
    assert found is not None and found.path == "/a/b" and not found.is_directory
    parent = await state.stat_file("/a")
    assert parent is not None
    assert parent.is_directory is True
    assert parent.mime_type == "inode/directory"
    assert (parent.path, parent.name, parent.size) == ("/a", "a", 0)
    assert parent.created_at == record.created_at
    assert parent.to_wire()["isDirectory"] is True
    assert parent.to_wire()["mimeType"] == "inode/directory"


async def test_c07_002_dotdot_rejected(state: ThreadState, db_url: str) -> None:
    """C07-002: write_file("/a/../b") → InvalidPath with the spec's text; nothing stored."""
    with pytest.raises(InvalidPath) as info:
        await state.write_file("/a/../b", b"x")
    assert str(info.value) == "Path must not contain '.' or '..' segments: /a/../b"
    assert (await state.readdir_file("/")).entries == []
    assert count_rows(db_url, "files") == 0


async def test_c07_003_dot_backslash_control_rejected(state: ThreadState) -> None:
    """C07-003: "/a/./b", "/a\\b" and a path containing a newline → InvalidPath each."""
    for bad in ("/a/./b", "/a\\b", "/a\nb", "/nul\x00x", "/del\x7f", "./x", ".."):
        with pytest.raises(InvalidPath):
            await state.write_file(bad, b"x")
    with pytest.raises(InvalidPath) as info:
        await state.write_file("/a\\b", b"x")
    assert str(info.value) == "Invalid character in path: '/a\\\\b'"
    assert (await state.readdir_file("/")).entries == []


async def test_c07_004_path_too_long(state: ThreadState) -> None:
    """C07-004: a path of 1025 characters → "Path too long: 1025 characters"; segments over
    255 characters are refused too; exactly 1024 is accepted."""
    long_path = "/" + "/".join(["a" * 200] * 5) + "/" + "b" * 19
    assert len(long_path) == 1025
    with pytest.raises(InvalidPath) as info:
        await state.write_file(long_path, b"x")
    assert str(info.value) == "Path too long: 1025 characters"
    with pytest.raises(InvalidPath) as info:
        await state.write_file("/" + "s" * 256, b"x")
    assert str(info.value) == "Path segment too long: " + "s" * 256
    fits = await state.write_file(long_path[:-1], b"x")
    assert len(fits.path) == 1024


async def test_c07_005_large_file_round_trip(state: ThreadState) -> None:
    """C07-005: 5,000,000 random bytes → identical on read; size and stats exact."""
    data = os.urandom(5_000_000)
    record = await state.write_file("/big.bin", data, "application/octet-stream")
    assert record.size == 5_000_000
    assert record.is_chunked is True and record.chunk_count == 3  # 1.75 MiB chunks
    assert await state.read_file("/big.bin") == data
    stats = await state.get_file_stats()
    assert stats.to_wire() == {"totalSize": 5_000_000, "fileCount": 1}


async def test_c07_006_stream_chunks(state: ThreadState) -> None:
    """C07-006: read_file_stream(chunk_size=1 MiB) of 5,000,000 bytes → 5 chunks, 4 of
    1 MiB and one of 805,696, only the last is_last; they concatenate to the content."""
    data = os.urandom(5_000_000)
    await state.write_file("/big.bin", data, "application/octet-stream")
    stream = await state.read_file_stream("/big.bin", chunk_size=1_048_576)
    assert stream is not None
    chunks = [chunk async for chunk in stream]
    assert [c.index for c in chunks] == [0, 1, 2, 3, 4]
    assert {c.total_chunks for c in chunks} == {5}
    assert [len(c.data) for c in chunks] == [1_048_576] * 4 + [805_696]
    assert [c.is_last for c in chunks] == [False, False, False, False, True]
    assert b"".join(c.data for c in chunks) == data
    assert await state.read_file_stream("/missing") is None
    await state.mkdir_file("/dir")
    assert await state.read_file_stream("/dir") is None


async def test_c07_007_str_is_utf8_text(state: ThreadState) -> None:
    """C07-007: write_file("/t.txt", "héllo") → text/plain, size 6, UTF-8 bytes back; a str
    without a known extension is text/plain; charset=utf-8."""
    record = await state.write_file("/t.txt", "héllo")
    assert record.mime_type == "text/plain"
    assert record.size == 6
    assert await state.read_file("/t.txt") == "héllo".encode()
    plain = await state.write_file("/notes", "hi")
    assert plain.mime_type == "text/plain; charset=utf-8"
    blob = await state.write_file("/blob", b"\x00\x01")
    assert blob.mime_type == "application/octet-stream"


async def test_c07_008_file_too_large(runtime: Runtime, state: ThreadState, db_url: str) -> None:
    """C07-008: max_file_size=999 → writing 1,000 bytes raises FileTooLarge; nothing stored.
    The thread total (max_thread_file_bytes) is enforced as well."""
    configure_file_limits(runtime.hub, FileLimits(max_file_size=999))
    with pytest.raises(FileTooLarge) as info:
        await state.write_file("/x.bin", b"x" * 1000)
    assert str(info.value) == "File exceeds the maximum size of 999 bytes: /x.bin"
    assert await state.stat_file("/x.bin") is None
    assert count_rows(db_url, "files") == 0
    assert (await state.write_file("/ok.bin", b"x" * 999)).size == 999

    configure_file_limits(runtime.hub, FileLimits(max_file_size=999, max_thread_file_bytes=1500))
    with pytest.raises(FileTooLarge):
        await state.write_file("/more.bin", b"y" * 600)
    assert await state.stat_file("/more.bin") is None
    # Overwriting counts the new size instead of the old one.
    assert (await state.write_file("/ok.bin", b"z" * 900)).size == 900
    assert (await state.get_file_stats()).total_size == 900


async def test_c07_009_directory_and_file_conflicts(state: ThreadState) -> None:
    """C07-009: /d/x.txt exists → write "/d" → IsADirectory; write "/d/x.txt/z" →
    NotADirectory naming /d/x.txt."""
    await state.write_file("/d/x.txt", b"x")
    with pytest.raises(IsADirectory) as info:
        await state.write_file("/d", b"y")
    assert str(info.value) == "Path is a directory: /d"
    with pytest.raises(NotADirectory) as info2:
        await state.write_file("/d/x.txt/z", b"y")
    assert str(info2.value) == "Parent path is a file: /d/x.txt"
    with pytest.raises(InvalidPath) as info3:
        await state.write_file("/", b"y")
    assert str(info3.value) == "Cannot write to the root directory"
    await state.mkdir_file("/empty")
    with pytest.raises(IsADirectory):
        await state.write_file("/empty", b"y")
    assert await state.read_file("/d/x.txt") == b"x"


async def test_c07_010_readdir_order(state: ThreadState) -> None:
    """C07-010: /d/b.txt, /d/e/c.txt, /a.txt → readdir("/") = [d (dir), a.txt];
    readdir("/d") = [e (dir), b.txt]; a missing path has no entries."""
    await three_files(state)
    root = (await state.readdir_file("/")).entries
    assert [(e.name, e.is_directory) for e in root] == [("d", True), ("a.txt", False)]
    d = (await state.readdir_file("/d")).entries
    assert [(e.path, e.is_directory) for e in d] == [("/d/e", True), ("/d/b.txt", False)]
    assert (await state.readdir_file("/missing")).entries == []
    assert (await state.readdir_file("/a.txt")).entries == []
    # Explicit directories are listed with the implicit ones, in code-point order.
    await state.mkdir_file("/D")
    await state.mkdir_file("/d/e/deeper")
    names = [e.name for e in (await state.readdir_file("/")).entries]
    assert names == ["D", "d", "a.txt"]
    assert [e.name for e in (await state.readdir_file("/d/e")).entries] == ["deeper", "c.txt"]


async def test_c07_011_find_globs(state: ThreadState) -> None:
    """C07-011: find("*.txt") → all three; find("/d/*") → /d/b.txt and /d/e (type all),
    only /d/b.txt (type file); find("/d/**") → /d/b.txt, /d/e, /d/e/c.txt."""
    await three_files(state)
    assert paths(await state.find_files("*.txt")) == ["/a.txt", "/d/b.txt", "/d/e/c.txt"]
    assert paths(await state.find_files("/d/*")) == ["/d/b.txt", "/d/e"]
    assert paths(await state.find_files("/d/*", type="file")) == ["/d/b.txt"]
    assert paths(await state.find_files("/d/*", type="directory")) == ["/d/e"]
    assert paths(await state.find_files("/d/**")) == ["/d/b.txt", "/d/e", "/d/e/c.txt"]
    assert paths(await state.find_files("?.txt")) == ["/a.txt", "/d/b.txt", "/d/e/c.txt"]
    assert paths(await state.find_files("/?.txt")) == ["/a.txt"]
    assert paths(await state.find_files("**", limit=2)) == ["/a.txt", "/d"]
    implicit = (await state.find_files("/d/e", type="directory"))[0]
    assert implicit.is_directory and implicit.mime_type == "inode/directory"
    with pytest.raises(InvalidArgument):
        await state.find_files("*", limit=0)
    with pytest.raises(InvalidArgument):
        await state.find_files("*", limit=1001)


async def test_c07_012_no_wildcard_leakage(state: ThreadState) -> None:
    """C07-012: /50%_off.txt and /500.txt → find("/50%_off.txt") is the exact match only;
    readdir lists both; paths are case-sensitive."""
    await state.write_file("/50%_off.txt", b"a")
    await state.write_file("/500.txt", b"b")
    await state.write_file("/50%_OFF.txt", b"c")
    assert paths(await state.find_files("/50%_off.txt")) == ["/50%_off.txt"]
    assert paths(await state.find_files("50%_o*")) == ["/50%_off.txt"]
    names = [e.name for e in (await state.readdir_file("/")).entries]
    assert names == ["50%_OFF.txt", "50%_off.txt", "500.txt"]
    await state.write_file("/d_x/in.txt", b"1")
    await state.write_file("/dax/in.txt", b"2")
    assert paths(await state.find_files("/d_x/**")) == ["/d_x/in.txt"]
    assert (await state.get_file_stats("/d_x")).file_count == 1
    assert await state.stat_file("/50%_Off.txt") is None


async def test_c07_019_png_dimensions(state: ThreadState, png: Callable[[int, int], bytes]) -> None:
    """C07-019: a 640×480 PNG without dimensions → width 640, height 480; a truncated PNG
    → both null; caller-given values are stored as given."""
    image = png(640, 480)
    record = await state.write_file("/p.png", image)
    assert record.mime_type == "image/png"
    assert (record.width, record.height) == (640, 480)
    truncated = await state.write_file("/t.png", image[:20])
    assert (truncated.width, truncated.height) == (None, None)
    given = await state.write_file("/g.png", image, width=64, height=48)
    assert (given.width, given.height) == (64, 48)
    stat = await state.stat_file("/p.png")
    assert stat is not None and (stat.width, stat.height) == (640, 480)


async def test_c07_020_write_attachment(
    state: ThreadState, png: Callable[[int, int], bytes]
) -> None:
    """C07-020: write_attachment(png, name="Photo 1.PNG") → /attachments/<13 digits>-<8
    hex>.png, MIME image/png, a UUID4 id, size = byte length, width/height set."""
    image = png(32, 16)
    ref = await state.write_attachment(image, name="Photo 1.PNG", description="a photo")
    assert re.fullmatch(r"/attachments/\d{13}-[0-9a-f]{8}\.png", ref.path)
    assert ref.mimeType == "image/png"
    assert uuid.UUID(ref.id).version == 4 and ref.id == str(uuid.UUID(ref.id))
    assert ref.size == len(image)
    assert (ref.width, ref.height) == (32, 16)
    assert (ref.name, ref.type, ref.description) == ("Photo 1.PNG", "file", "a photo")
    assert await state.read_file(ref.path) == image
    # Without a usable name extension the MIME type names the file.
    other = await state.write_attachment(b"%PDF-1.4", name="report", mime_type="application/pdf")
    assert other.path.endswith(".pdf") and other.mimeType == "application/pdf"
    odd = await state.write_attachment(b"x", name="x.tar.verylongextension")
    assert odd.path.endswith(".bin") and odd.mimeType == "application/octet-stream"
    assert "width" not in odd.to_wire()


async def test_c07_027_external_link(state: ThreadState) -> None:
    """C07-027: link_file("/docs/spec.pdf", "https://…/spec.pdf", size=10) → storage url,
    location the URL, MIME application/pdf; read_file → None; ftp:// → InvalidArgument."""
    url = "https://example.com/spec.pdf"
    record = await state.link_file("/docs/spec.pdf", url, size=10)
    assert (record.storage, record.location, record.mime_type) == ("url", url, "application/pdf")
    assert record.size == 10
    assert await state.read_file("/docs/spec.pdf") is None
    assert await state.read_file_stream("/docs/spec.pdf") is None
    assert (await state.get_file_stats()).to_wire() == {"totalSize": 10, "fileCount": 1}
    with pytest.raises(InvalidArgument) as info:
        await state.link_file("/docs/x", "ftp://x/y")
    assert str(info.value) == "Only http and https locations can be linked"
    for bad in ("example.com/x", "https://", "/relative/path"):
        with pytest.raises(InvalidArgument):
            await state.link_file("/docs/x", bad)
    assert await state.stat_file("/docs/x") is None
