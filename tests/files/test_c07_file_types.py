"""A file's type when the writer gives none (spec 07 §7.4, case C07-029): what the bytes
announce (PNG, JPEG, GIF, WebP, PDF), else the name's extension — the spec's table, then
Python's ``mimetypes`` table. Real Runtime on SQLite and PostgreSQL."""

from __future__ import annotations

from conftest import make_png
from threadloom import ThreadState
from threadloom.thread.filetypes import mime_from_name, sniff_mime

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


async def test_c07_029_types_from_bytes_then_name(state: ThreadState) -> None:
    by_name = {
        "/a.mp3": "audio/mpeg",
        "/a.docx": DOCX,
        "/a.tsv": "text/tab-separated-values",
        "/a.ts": "application/typescript",  # the spec's table overrides Python's
        "/a.jsonl": "application/jsonl",
    }
    for path, expected in by_name.items():
        record = await state.write_file(path, b'{"line": "needle"}\n')
        assert record.mime_type == expected, path
    found = [hit.path for hit in await state.grep_files("needle")]
    assert "/a.jsonl" in found and "/a.tsv" in found  # text types are searched
    assert "/a.mp3" not in found

    image = make_png(3, 2)
    for path in ("/pic", "/pic.txt"):
        record = await state.write_file(path, image)
        assert (record.mime_type, record.width, record.height) == ("image/png", 3, 2), path
    blob = await state.write_file("/blob", b"\x00\x01 nothing to say")
    assert blob.mime_type == "application/octet-stream"
    text = await state.write_file("/notes", "plain words")  # a str: text, as before
    assert text.mime_type == "text/plain; charset=utf-8"


def test_sniffing_and_names() -> None:
    assert sniff_mime(b"%PDF-1.7 ...") == "application/pdf"
    assert sniff_mime(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_mime(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert sniff_mime(b"GIF89a") == "image/gif"
    assert sniff_mime(b"PK\x03\x04") is None  # a zip says nothing of what it holds
    assert mime_from_name("REPORT.XLSX").endswith("spreadsheetml.sheet")
    assert mime_from_name("x.unknownext") == "application/octet-stream"
    assert mime_from_name("noext", "") == ""
