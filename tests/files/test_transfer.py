"""Attachments copied across a thread boundary (spec 06 §6.12): a new file under the
destination's ``/attachments/``, a new ref, the source untouched."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.errors import FileTooLarge, InvalidArgument
from threadloom.records import AttachmentRef
from threadloom.thread.state import ThreadState
from threadloom.thread.transfer import STEM_LIMIT, copy_attachments, display_name, target_path

HEX8 = "[0-9a-f]{8}"


@pytest.fixture
async def family(runtime: Runtime) -> tuple[ThreadState, ThreadState]:
    parent = await runtime.create_thread("parent")
    child = await runtime.create_thread("child", parent=parent.thread_id)
    return parent, child


async def test_parent_to_child_copy_keeps_bytes_and_image_size(
    family: tuple[ThreadState, ThreadState], png: Callable[[int, int], bytes]
) -> None:
    parent, child = family
    image = png(3, 2)
    await parent.write_file("/attachments/a.png", image)
    (ref,) = await copy_attachments(parent, child, ["/attachments/a.png"])
    assert re.fullmatch(rf"/attachments/a-{HEX8}\.png", ref.path)
    assert (ref.name, ref.mimeType, ref.size, ref.width, ref.height) == (
        "a.png",
        "image/png",
        len(image),
        3,
        2,
    )
    assert await child.read_file(ref.path) == image
    stat = await child.stat_file(ref.path)
    assert stat is not None and (stat.width, stat.height) == (3, 2)
    # the source stays where it was, and the copy exists only in the destination
    assert await parent.read_file("/attachments/a.png") == image
    assert await parent.stat_file(ref.path) is None


async def test_child_to_parent_copy_takes_name_and_description_from_the_ref(
    family: tuple[ThreadState, ThreadState],
) -> None:
    parent, child = family
    await child.write_file("/out/r.txt", "findings")
    source = AttachmentRef(
        id="src-1",
        path="/out/r.txt",
        name="Quarterly report (Q3).TXT",
        mimeType="text/plain",
        size=8,
        description="the summary",
    )
    (ref,) = await copy_attachments(child, parent, [source])
    assert ref.id != "src-1"
    assert ref.name == "Quarterly-report-Q3-.TXT"
    assert re.fullmatch(rf"/attachments/Quarterly-report-Q3--{HEX8}\.txt", ref.path)
    assert (ref.mimeType, ref.size, ref.description) == ("text/plain", 8, "the summary")
    assert await parent.read_file(ref.path) == b"findings"


async def test_mime_falls_back_to_the_ref_then_to_the_name(
    family: tuple[ThreadState, ThreadState],
) -> None:
    parent, child = family
    await parent.write_file("/blob", b"a,b\n1,2\n", "application/octet-stream")
    await parent.write_file("/table.csv", b"a,b\n", "application/octet-stream")
    by_ref, by_name, plain = await copy_attachments(
        parent,
        child,
        [{"path": "/blob", "mimeType": "text/csv"}, "/table.csv", "/blob"],
    )
    assert by_ref.mimeType == "text/csv" and re.fullmatch(
        rf"/attachments/blob-{HEX8}\.csv", by_ref.path
    )
    assert by_name.mimeType == "text/csv" and by_name.path.endswith(".csv")
    assert plain.mimeType == "application/octet-stream" and plain.path.endswith(".bin")


async def test_missing_files_and_directories_are_skipped(
    family: tuple[ThreadState, ThreadState],
) -> None:
    parent, child = family
    await parent.write_file("/docs/keep.md", "# keep")
    refs = await copy_attachments(parent, child, ["/missing.txt", "/docs", "/docs/keep.md"])
    assert [r.name for r in refs] == ["keep.md"]
    assert [e.path for e in await child.find_files("**")] == ["/attachments", refs[0].path]


async def test_bad_items_and_the_destination_limits_are_errors(
    open_runtime: Callable[..., Any],
) -> None:
    rt = await open_runtime(max_thread_file_bytes=100)
    try:
        parent = await rt.create_thread("parent")
        child = await rt.create_thread("child", parent=parent.thread_id)
        await parent.write_file("/big.bin", b"x" * 64)
        with pytest.raises(InvalidArgument):
            await copy_attachments(parent, child, [{"name": "no path"}])
        with pytest.raises(InvalidArgument):
            await copy_attachments(parent, child, [5])  # type: ignore[list-item]
        (first,) = await copy_attachments(parent, child, ["/big.bin"])
        with pytest.raises(FileTooLarge):  # 128 bytes would exceed the child's 100
            await copy_attachments(parent, child, ["/big.bin"])
        assert [e.path for e in await child.find_files("/attachments/*")] == [first.path]
    finally:
        await rt.close()


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        (("My Report.pdf",), "My-Report.pdf"),
        (("dir/sub/x  y.txt",), "x-y.txt"),
        (("C:\\docs\\notes.md",), "notes.md"),
        ((None, "", "a--b__c.txt"), "a-b__c.txt"),
        (("--ü--.txt",), ".txt"),
        (("   ", None), "asset"),
        (("///",), "asset"),
        (("???",), "asset"),
    ],
)
def test_display_name_rules(candidates: tuple[str | None, ...], expected: str) -> None:
    assert display_name(*candidates) == expected


def test_target_path_stem_and_extension() -> None:
    long = "n" * 100 + ".PNG"
    assert re.fullmatch(
        rf"/attachments/n{{{STEM_LIMIT}}}-{HEX8}\.png", target_path(long, "image/png")
    )
    assert re.fullmatch(rf"/attachments/asset-{HEX8}\.bin", target_path("asset", "x/unknown+type"))
    assert re.fullmatch(
        rf"/attachments/notes-{HEX8}\.json", target_path("notes", "application/json")
    )
    assert target_path("a.txt", "text/plain") != target_path("a.txt", "text/plain")
