"""A multipart/form-data upload stores the file, not the form (spec 08 §8.8, C08-133). Real
server and Runtime (SQLite and PostgreSQL), real multipart bodies as httpx sends them (the
same as ``curl -F file=@notes.txt``)."""

from __future__ import annotations

from test_c08_files import png, setup

from conftest import Api

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


async def test_c08_133_a_form_upload_stores_the_file(api: Api) -> None:
    client, fs = await setup(api)
    sent = await client.post(
        f"{fs}/docs/notes.txt", files={"file": ("notes.txt", b"hello", "text/plain")}
    )
    assert sent.status_code == 201, sent.text
    ref = sent.json()
    assert (ref["path"], ref["mimeType"], ref["size"]) == ("/docs/notes.txt", "text/plain", 5)
    read = await client.get(f"{fs}/docs/notes.txt")
    assert read.content == b"hello"  # not the boundary, not the part headers

    report = await client.post(
        f"{fs}/docs/report",
        files={"upload": ("report.docx", b"PK\x03\x04 a zip", "application/octet-stream")},
    )
    assert report.status_code == 201, report.text
    assert report.json()["mimeType"] == DOCX  # the file name's extension

    picture = await client.post(
        f"{fs}/pic", files={"file": ("image.bin", png(4, 3), "application/octet-stream")}
    )
    assert picture.status_code == 201, picture.text
    assert picture.json()["mimeType"] == "image/png"  # what the bytes announce
    record = await (await api.runtime.thread(fs.split("/")[3])).stat_file("/pic")
    assert record is not None and (record.width, record.height) == (4, 3)


async def test_c08_133_a_form_without_one_file_is_refused(api: Api) -> None:
    client, fs = await setup(api)
    fields_only = await client.post(
        f"{fs}/a.txt",
        content=b"--b\r\nContent-Disposition: form-data; name=x\r\n\r\n1\r\n--b--\r\n",
        headers={"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert fields_only.status_code == 400, fields_only.text
    assert fields_only.json()["details"][0]["field"] == "body"
    two = await client.post(
        f"{fs}/a.txt",
        files=[("file", ("a.txt", b"a", "text/plain")), ("file", ("b.txt", b"b", "text/plain"))],
    )
    assert two.status_code == 400, two.text
    broken = await client.post(
        f"{fs}/a.txt",
        content=b"not a form at all",
        headers={"Content-Type": "multipart/form-data; boundary=zzz"},
    )
    assert broken.status_code == 400, broken.text
    listing = await client.get(f"{fs}/")
    assert "a.txt" not in listing.text
