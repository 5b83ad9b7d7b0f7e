"""Spec 08 §8.8: thread files over HTTP, on a real server (conformance C08-111…115, 129, 130,
and the attachment cases C08-074/075 of §8.2.5). Traversal: test_c08_files_traversal.py."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from rawhttp import raw_request

from conftest import Api
from threadloom.server.settings import ServerSettings
from threadloom.testing import png


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def setup(api: Api) -> tuple[httpx.AsyncClient, str]:
    thread = await api.thread()
    return api.client(), f"/api/threads/{thread}/fs"


async def put_raw(
    client: httpx.AsyncClient, url: str, data: bytes, mime: str | None = "text/plain"
) -> httpx.Response:
    headers = {"Content-Type": mime} if mime is not None else {}
    return await client.post(url, content=data, headers=headers)


# -- conformance cases ---------------------------------------------------------------------


async def test_c08_111_raw_upload_and_read_back(api: Api) -> None:
    client, fs = await setup(api)
    created = await put_raw(client, f"{fs}/notes/a.txt", b"hello")
    assert created.status_code == 201, created.text
    ref = created.json()
    assert ref == {
        "id": "/notes/a.txt",
        "type": "file",
        "path": "/notes/a.txt",
        "name": "a.txt",
        "mimeType": "text/plain",
        "size": 5,
    }
    read = await client.get(f"{fs}/notes/a.txt")
    assert read.status_code == 200
    assert read.content == b"hello"
    assert read.headers["content-type"] == "text/plain"
    assert read.headers["content-length"] == "5"
    assert read.headers["x-content-type-options"] == "nosniff"
    assert read.headers["content-disposition"] == 'inline; filename="a.txt"'


async def test_c08_112_traversal_in_get_is_400(api: Api) -> None:
    client, fs = await setup(api)
    response = await client.get(f"{fs}/..%2Fetc%2Fpasswd")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["error"] == "Path must not contain '.' or '..' segments: ../etc/passwd"
    assert "root:" not in response.text
    # /fs/a/../../b: literal dot segments (httpx would resolve them, so sent raw)
    status, _, text = await raw_request(api, "GET", f"{fs}/a/../../b")
    assert status == 400
    assert b"invalid_request" in text


async def test_c08_113_html_is_served_as_attachment(api: Api) -> None:
    client, fs = await setup(api)
    page = b"<html><script>alert(1)</script></html>"
    created = await client.post(
        f"{fs}/page.html", json={"data": b64(page), "mimeType": "text/html"}
    )
    assert created.status_code == 201
    assert created.json()["id"] == "/page.html"
    read = await client.get(f"{fs}/page.html")
    assert read.content == page
    assert read.headers["content-type"] == "text/html"
    assert read.headers["content-disposition"].startswith("attachment")
    for name, mime in (("x.svg", "image/svg+xml"), ("x.xhtml", "application/xhtml+xml")):
        await client.post(f"{fs}/{name}", json={"data": b64(b"<x/>"), "mimeType": mime})
        got = await client.get(f"{fs}/{name}")
        assert got.headers["content-disposition"] == f'attachment; filename="{name}"'


async def test_c08_114_move_onto_existing_destination_is_409(api: Api) -> None:
    client, fs = await setup(api)
    await put_raw(client, f"{fs}/a.txt", b"a")
    await put_raw(client, f"{fs}/b.txt", b"b")
    response = await client.post(f"{fs}/a.txt", json={"action": "move", "destination": "/b.txt"})
    assert response.status_code == 409
    assert response.json() == {"error": "Destination already exists: /b.txt", "code": "conflict"}
    assert (await client.get(f"{fs}/a.txt")).content == b"a"
    assert (await client.get(f"{fs}/b.txt")).content == b"b"


async def test_c08_115_delete_then_get_is_404(api: Api) -> None:
    client, fs = await setup(api)
    await put_raw(client, f"{fs}/notes/a.txt", b"hello")
    deleted = await client.delete(f"{fs}/notes/a.txt")
    assert deleted.status_code == 204
    assert deleted.content == b""
    gone = await client.get(f"{fs}/notes/a.txt")
    assert gone.status_code == 404
    assert gone.json() == {"error": "Not found", "code": "not_found"}
    again = await client.delete(f"{fs}/notes/a.txt")
    assert again.status_code == 404
    assert again.json()["error"] == "Not found"


async def test_c08_129_directory_not_empty_then_recursive_delete(api: Api) -> None:
    client, fs = await setup(api)
    await put_raw(client, f"{fs}/d/a.txt", b"a")
    await put_raw(client, f"{fs}/d/e/b.txt", b"b")
    refused = await client.delete(f"{fs}/d")
    assert refused.status_code == 400
    assert refused.json()["error"] == "Directory not empty"
    assert refused.json()["code"] == "invalid_request"
    assert (await client.get(f"{fs}/d/a.txt")).status_code == 200
    removed = await client.delete(f"{fs}/d", params={"recursive": "true"})
    assert removed.status_code == 204
    assert (await client.get(f"{fs}/d/a.txt")).status_code == 404
    assert (await client.get(f"{fs}/d/e/b.txt")).status_code == 404
    assert (await client.get(fs, params={"stats": ""})).json() == {"totalSize": 0, "fileCount": 0}


async def test_c08_130_location_form_is_invalid_request_body(api: Api) -> None:
    client, fs = await setup(api)
    response = await client.post(f"{fs}/x.txt", json={"location": "https://example.com/x"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "Invalid request body"
    assert body["code"] == "invalid_request"
    assert (await client.get(f"{fs}/x.txt")).status_code == 404
    for other in ({}, {"action": "copy", "destination": "/y"}, {"type": "file"}):
        assert (await client.post(f"{fs}/x.txt", json=other)).json()["error"] == (
            "Invalid request body"
        )


async def test_c08_074_invalid_attachment_creates_no_file(api: Api) -> None:
    thread = await api.thread()
    client = api.client()
    response = await client.post(
        f"/api/threads/{thread}/messages",
        json={
            "content": "look",
            "attachments": [{"name": "a.png", "mimeType": "image/png", "data": "not base64!"}],
        },
    )
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "attachments[0].data"
    fs = f"/api/threads/{thread}/fs"
    assert (await client.get(fs, params={"stats": ""})).json() == {"totalSize": 0, "fileCount": 0}
    assert (await client.get(fs)).json() == {"files": [], "path": "/"}
    assert (await client.get(f"/api/threads/{thread}/messages")).json()["total"] == 0


async def test_c08_075_image_attachment_is_readable_through_fs(api: Api) -> None:
    thread = await api.thread()
    client = api.client()
    image = png(3, 2)
    sent = await client.post(
        f"/api/threads/{thread}/messages",
        json={
            "content": "see",
            "attachments": [{"name": "Dot.png", "mimeType": "image/png", "data": b64(image)}],
        },
    )
    assert sent.status_code == 202, sent.text
    await api.settle(thread)
    messages = (await client.get(f"/api/threads/{thread}/messages")).json()["messages"]
    user = next(m for m in messages if m["id"] == sent.json()["messageId"])
    ref = user["attachments"][0]
    assert ref["type"] == "file"
    assert ref["mimeType"] == "image/png"
    assert ref["size"] == len(image)
    assert (ref["width"], ref["height"]) == (3, 2)
    read = await client.get(f"/api/threads/{thread}/fs{ref['path']}")
    assert read.status_code == 200
    assert read.content == image
    assert read.headers["content-type"] == "image/png"
    assert read.headers["content-disposition"].startswith("inline")


# -- the rest of the §8.8 table --------------------------------------------------------------


async def test_listing_directories_first_then_files_by_name(api: Api) -> None:
    client, fs = await setup(api)
    for path in ("/z.txt", "/a.txt", "/d/x.txt", "/b/y.txt"):
        await put_raw(client, fs + path, b"x")
    await client.post(f"{fs}/empty", json={"type": "directory"})
    root = (await client.get(fs)).json()
    assert root["path"] == "/"
    assert [(f["name"], f["isDirectory"]) for f in root["files"]] == [
        ("b", True),
        ("d", True),
        ("empty", True),
        ("a.txt", False),
        ("z.txt", False),
    ]
    assert set(root["files"][3]) >= {"path", "mimeType", "size", "createdAt", "storage"}
    sub = await client.get(f"{fs}/d")
    assert sub.headers["content-type"].startswith("application/json")
    assert sub.json() == {"files": [root_file(sub.json(), "x.txt")], "path": "/d"}


def root_file(listing: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in listing["files"] if f["name"] == name)
    return found


async def test_stats_grep_and_find(api: Api) -> None:
    client, fs = await setup(api)
    await put_raw(client, f"{fs}/t.txt", b"say hello world")
    await put_raw(client, f"{fs}/d/n.txt", b"nothing")
    await put_raw(client, f"{fs}/d/hello.bin", b"hello", "application/octet-stream")
    assert (await client.get(fs, params={"stats": ""})).json() == {
        "totalSize": 27,
        "fileCount": 3,
    }
    assert (await client.get(fs, params={"stats": "true", "path": "/d"})).json() == {
        "totalSize": 12,
        "fileCount": 2,
    }
    grep = (await client.get(fs, params={"grep": "HELLO"})).json()
    assert grep["pattern"] == "HELLO"
    assert grep["results"] == [
        {"path": "/d/hello.bin", "name": "hello.bin", "snippet": "<mark>hello</mark>.bin"},
        {"path": "/t.txt", "name": "t.txt", "snippet": "say <mark>hello</mark> world"},
    ]
    below = (await client.get(fs, params={"grep": "hello", "path": "/d", "limit": "1"})).json()
    assert [r["path"] for r in below["results"]] == ["/d/hello.bin"]
    found = (await client.get(fs, params={"find": "*.txt"})).json()
    assert found["pattern"] == "*.txt"
    assert [f["path"] for f in found["files"]] == ["/d/n.txt", "/t.txt"]
    dirs = (await client.get(fs, params={"find": "*", "type": "DIRECTORY"})).json()
    assert [f["path"] for f in dirs["files"]] == ["/d"]


async def test_query_errors_are_400(api: Api) -> None:
    client, fs = await setup(api)
    cases = [
        ({"grep": ""}, "Search query must not be empty"),
        ({"grep": "x" * 257}, "Search query too long"),
        ({"find": ""}, "Pattern must not be empty"),
        ({"find": "*", "limit": "0"}, "limit must be an integer from 1 to 1000"),
        ({"grep": "x", "limit": "1001"}, "limit must be an integer from 1 to 1000"),
        ({"grep": "x", "limit": "-1"}, "limit must be a non-negative integer"),
        ({"find": "*", "type": "link"}, "type must be 'file', 'directory' or 'all'"),
        ({"stats": "maybe"}, "stats must be true or false"),
        ({"grep": "x", "path": "../d"}, "Path must not contain '.' or '..' segments: ../d"),
    ]
    for params, error in cases:
        response = await client.get(fs, params=params)
        assert response.status_code == 400, params
        assert response.json()["error"] == error
        assert response.json()["code"] == "invalid_request"
    bad_format = await client.get(f"{fs}/a.txt", params={"format": "xml"})
    assert bad_format.json()["error"] == "format must be 'json'"
    bad_recursive = await client.delete(f"{fs}/a.txt", params={"recursive": "yes"})
    assert bad_recursive.status_code == 400  # validation before the 404 lookup


async def test_json_write_mkdir_rename_and_move(api: Api) -> None:
    client, fs = await setup(api)
    written = await client.post(f"{fs}/docs/a.md", json={"data": b64(b"# A"), "metadata": {"k": 1}})
    assert written.status_code == 201
    assert written.json() == {
        "id": "/docs/a.md",
        "type": "file",
        "path": "/docs/a.md",
        "name": "a.md",
        "mimeType": "text/markdown",
        "size": 3,
    }
    with_charset = await client.post(
        f"{fs}/docs/c.txt", json={"data": b64(b"c"), "mimeType": "text/plain; charset=latin-1"}
    )
    assert with_charset.json()["mimeType"] == "text/plain; charset=latin-1"
    read = await client.get(f"{fs}/docs/c.txt")
    assert read.headers["content-type"] == "text/plain; charset=latin-1"
    info = (await client.get(f"{fs}/docs/a.md", params={"format": "json"})).json()["file"]
    assert info["metadata"] == {"k": 1}
    assert info["isDirectory"] is False
    made = await client.post(f"{fs}/out", json={"type": "directory"})
    assert made.status_code == 201
    assert made.json()["directory"]["isDirectory"] is True
    assert made.json()["directory"]["mimeType"] == "inode/directory"
    renamed = await client.post(f"{fs}/docs/a.md", json={"action": "rename", "newName": "b.md"})
    assert renamed.status_code == 200
    assert renamed.json()["id"] == renamed.json()["path"] == "/docs/b.md"
    moved = await client.post(f"{fs}/docs", json={"action": "move", "destination": "/out/docs"})
    assert moved.status_code == 200
    assert moved.json()["path"] == "/out/docs"
    assert moved.json()["mimeType"] == "inode/directory"
    assert (await client.get(f"{fs}/out/docs/b.md")).content == b"# A"
    assert (await client.get(f"{fs}/docs/b.md")).status_code == 404


async def test_file_errors_map_to_the_table(api: Api) -> None:
    client, fs = await setup(api)
    await put_raw(client, f"{fs}/d/x.txt", b"x")
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("/nope", {"action": "move", "destination": "/y"}, 404,
         "Source path does not exist: /nope"),
        ("/", {"action": "move", "destination": "/y"}, 400, "Cannot move the root directory"),
        ("/d", {"action": "move", "destination": "/d/sub"}, 400,
         "Cannot move a directory into itself or one of its descendants"),
        ("/d/x.txt", {"action": "rename", "newName": "a/b"}, 400,
         "New name must not contain path separators"),
        ("/d/x.txt", {"action": "rename", "newName": ""}, 400, "New name must not be empty"),
        ("/d", {"data": b64(b"y")}, 409, "Path is a directory: /d"),
        ("/d/x.txt/z", {"data": b64(b"y")}, 409, "Parent path is a file: /d/x.txt"),
        ("/d/x.txt/z", {"type": "directory"}, 409, "Parent path is a file: /d/x.txt"),
        ("/", {"data": b64(b"y")}, 400, "Cannot write to the root directory"),
        ("/w", {"data": "%%%"}, 400, "data must be base64-encoded data"),
        ("/w", {"action": "move"}, 400, "destination must be a path string"),
        ("/w", {"data": b64(b"y"), "width": 10**30}, 400,
         "width must be an integer from 1 to 100000"),
        ("/w", {"data": b64(b"y"), "height": True}, 400,
         "height must be an integer from 1 to 100000"),
        ("/w", {"data": b64(b"y"), "mimeType": "bad"}, 400,
         "mimeType must be a MIME type such as text/plain"),
    ]  # fmt: skip
    for path, body, status, error in cases:
        response = await client.post(fs + path, json=body)
        assert (response.status_code, response.json()["error"]) == (status, error), path
    expected = {400: "invalid_request", 404: "not_found", 409: "conflict"}
    response = await client.post(f"{fs}/d", json={"data": b64(b"y")})
    assert response.json()["code"] == expected[409]
    assert (await client.delete(f"{fs}/")).json()["error"] == "Cannot remove the root directory"
    assert (await client.get(f"{fs}/d/x.txt")).content == b"x"


async def test_raw_upload_mime_rules_and_percent_decoding(api: Api) -> None:
    client, fs = await setup(api)
    inferred = await put_raw(client, f"{fs}/p.json", b"{}", "application/octet-stream")
    assert inferred.json()["mimeType"] == "application/json"
    absent = await put_raw(client, f"{fs}/q.png", png(1, 1), None)
    assert absent.status_code == 201
    assert absent.json()["mimeType"] == "image/png"
    assert (absent.json()["width"], absent.json()["height"]) == (1, 1)
    unknown = await put_raw(client, f"{fs}/blob", b"\x00\x01", None)
    assert unknown.json()["mimeType"] == "application/octet-stream"
    params = await put_raw(client, f"{fs}/c.csv", b"a,b", "text/csv; charset=utf-8")
    assert params.json()["mimeType"] == "text/csv"
    refused = await put_raw(client, f"{fs}/r", b"x", "garbage")
    assert refused.status_code == 400
    # decoded exactly once: %20 is a space, %2541 stays the three characters %41
    spaced = await put_raw(client, f"{fs}/a%20b.txt", b"s")
    assert spaced.json()["path"] == "/a b.txt"
    once = await put_raw(client, f"{fs}/%2541.txt", b"p")
    assert once.json()["path"] == "/%41.txt"
    assert (await client.get(f"{fs}/%2541.txt")).content == b"p"
    assert (await client.get(f"{fs}/A.txt")).status_code == 404


async def test_content_disposition_names_are_sanitised(api: Api) -> None:
    client, fs = await setup(api)
    assert (await put_raw(client, f"{fs}/a%22b%5C", b"x")).status_code == 400  # backslash
    await put_raw(client, f"{fs}/a%22b.txt", b"x")
    quoted = await client.get(f"{fs}/a%22b.txt")
    assert quoted.headers["content-disposition"] == 'inline; filename="a_b.txt"'
    await put_raw(client, f"{fs}/r%C3%A9sum%C3%A9.txt", b"x")
    accented = await client.get(f"{fs}/r%C3%A9sum%C3%A9.txt")
    assert accented.status_code == 200
    assert accented.headers["content-disposition"] == (
        "inline; filename=\"r_sum_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt"
    )


async def test_a_mime_type_that_cannot_be_a_header_is_sent_as_octet_stream(api: Api) -> None:
    client, fs = await setup(api)
    state = await api.runtime.thread(fs.split("/")[3])
    await state.write_file("/odd", b"<b>x</b>", "text/html\nX-Evil: 1")
    await state.write_file("/odd2", b"y", "text/plain; name=\u00e9\u4e2d")
    for path in ("/odd", "/odd2"):
        response = await client.get(fs + path)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/octet-stream"
        assert "x-evil" not in response.headers
        assert response.headers["content-disposition"].startswith("inline")


async def test_external_link_and_thumbnail(api: Api) -> None:
    client, fs = await setup(api)
    thread = fs.split("/")[3]
    state = await api.runtime.thread(thread)
    await state.link_file("/docs/spec.pdf", "https://example.com/spec.pdf", size=10)
    link = await client.get(f"{fs}/docs/spec.pdf")
    assert link.status_code == 200
    body = link.json()
    assert body["external"] is True
    assert body["location"] == "https://example.com/spec.pdf"
    assert body["file"]["storage"] == "url"
    assert body["file"]["mimeType"] == "application/pdf"
    thumb = b"\xff\xd8\xff thumb"
    await client.post(f"{fs}/img.png", json={"data": b64(png(4, 4)), "thumbnail": b64(thumb)})
    got = await client.get(f"{fs}/img.png", params={"thumbnail": ""})
    assert got.status_code == 200
    assert got.content == thumb
    assert got.headers["content-type"] == "image/jpeg"
    assert got.headers["cache-control"] == "private, max-age=31536000"
    await put_raw(client, f"{fs}/plain.txt", b"x")
    none = await client.get(f"{fs}/plain.txt", params={"thumbnail": "true"})
    assert none.status_code == 404
    assert none.json() == {"error": "Thumbnail not found", "code": "not_found"}
    deleted = await client.delete(f"{fs}/docs/spec.pdf")
    assert deleted.status_code == 204
    assert await state.stat_file("/docs/spec.pdf") is None


async def test_large_file_streams_back_whole(api: Api) -> None:
    client, fs = await setup(api)
    data = bytes(range(256)) * (3 * 4096 + 7)  # about 3 MiB: several read chunks
    created = await put_raw(client, f"{fs}/big.bin", data, "application/octet-stream")
    assert created.json()["size"] == len(data)
    async with client.stream("GET", f"{fs}/big.bin") as response:
        assert response.headers["content-length"] == str(len(data))
        received = b"".join([part async for part in response.aiter_bytes()])
    assert received == data


async def test_body_limits(make_api: Any) -> None:
    api: Api = await make_api(
        ServerSettings(auth="required", max_upload_bytes=4096), max_file_size=10_000
    )
    client, fs = await setup(api)
    assert (await put_raw(client, f"{fs}/ok", b"x" * 10_000, "text/plain")).status_code == 201
    raw = await put_raw(client, f"{fs}/big", b"x" * 10_001, "text/plain")
    assert raw.status_code == 413
    assert raw.json() == {
        "error": "Request body too large (limit 10000 bytes)",
        "code": "payload_too_large",
    }
    json_body = await client.post(f"{fs}/big", json={"data": b64(b"x" * 4000)})
    assert json_body.status_code == 413
    assert json_body.json()["error"] == "Request body too large (limit 4096 bytes)"

    async def chunks() -> Any:  # no Content-Length: the limit holds while reading
        for _ in range(100):
            yield b"x" * 1000

    streamed = await client.post(f"{fs}/big", content=chunks(), headers={"Content-Type": "a/b"})
    assert streamed.status_code == 413
    assert (await client.get(f"{fs}/big")).status_code == 404
    decoded = await client.post(f"{fs}/big", json={"data": b64(b"x" * 3000)})
    assert decoded.status_code == 201
    assert (await client.get(f"{fs}/big")).content == b"x" * 3000


async def test_access_checks_come_first_and_terminated_threads_keep_files(api: Api) -> None:
    client, fs = await setup(api)
    bob = api.client("bob")
    forbidden = await bob.get(f"{fs}/..%2Fx")
    assert forbidden.status_code == 403  # 403 before the 400 of the path
    assert (await bob.post(f"{fs}/x", content=b"x")).status_code == 403
    missing = await client.get("/api/threads/00000000-0000-4000-8000-000000000000/fs")
    assert missing.json()["code"] == "thread_not_found"
    assert (await api.client(None).get(fs)).status_code == 401
    wrong = await client.put(f"{fs}/x")
    assert wrong.status_code == 405
    assert {m.strip() for m in wrong.headers["allow"].split(",")} >= {"GET", "POST", "DELETE"}
    thread = fs.split("/")[3]
    assert (await client.post(f"/api/threads/{thread}/terminate")).status_code == 200
    assert (await put_raw(client, f"{fs}/after.txt", b"t")).status_code == 201
    assert (await client.get(f"{fs}/after.txt")).content == b"t"
    assert (await client.delete(f"{fs}/after.txt")).status_code == 204


async def test_a_rewrite_while_streaming_never_mixes_versions(api: Api) -> None:
    """Spec 07 §7.5 / C07-025 over HTTP: the answer is the old version whole, or it ends
    short of Content-Length — never old bytes followed by new ones."""
    client, fs = await setup(api)
    state = await api.runtime.thread(fs.split("/")[3])
    old = b"o" * (24 * 1024 * 1024)
    await state.write_file("/big.bin", old)
    received = b""
    broken = False
    try:
        async with client.stream("GET", f"{fs}/big.bin") as response:
            assert response.headers["content-length"] == str(len(old))
            parts = response.aiter_raw()
            received += await anext(parts)
            await state.write_file("/big.bin", b"n" * len(old))
            async for part in parts:
                received += part
    except httpx.RemoteProtocolError:
        broken = True
    assert b"n" not in received
    assert received == old or (broken and len(received) < len(old))


async def test_deeply_nested_json_is_400_never_500(api: Api) -> None:
    """A bug found on the way (deps.json_object): nesting past the parser's stack, or deep
    enough to break storing or rendering, answered 500 on every JSON route."""
    client, fs = await setup(api)
    thread = fs.split("/")[3]
    json_type = {"Content-Type": "application/json"}
    for depth in (101, 950, 100_000):
        nested = b'{"a":' * depth + b"1" + b"}" * depth
        for method, url in (("POST", f"{fs}/x"), ("PATCH", f"/api/threads/{thread}")):
            response = await client.request(method, url, content=nested, headers=json_type)
            assert response.status_code == 400, (depth, url)
            assert response.json()["error"] == (
                "Request body is nested too deeply (limit 100 levels)"
            )
    ok = b'{"data":"eA==","metadata":' + b'{"a":' * 99 + b"1" + b"}" * 99 + b"}"
    assert (await client.post(f"{fs}/ok", content=ok, headers=json_type)).status_code == 201
    assert (await client.get(f"{fs}/ok", params={"format": "json"})).status_code == 200
