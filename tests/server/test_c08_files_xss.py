"""Spec 08 §8.8: user files cannot run script on the API's origin (issue 23, item 3).

Before, an uploaded ``text/xml`` file was served inline without a Content-Security-Policy,
and XHTML inside XML ran script with the viewer's session cookie. Every file answer of
``GET /fs/{path}`` (bytes and thumbnails, also of message attachments) now carries
``Content-Security-Policy: sandbox`` and one ``X-Content-Type-Options: nosniff``, and every
type a browser can execute is an ``attachment`` download; passive types stay inline.
"""

from __future__ import annotations

import base64

import httpx

from conftest import Api
from threadloom.server.file_headers import shown_inline

XHTML_IN_XML = (
    b'<?xml version="1.0"?><root><x:script xmlns:x="http://www.w3.org/1999/xhtml">'
    b"alert(document.cookie)</x:script></root>"
)

EXECUTABLE = [
    ("feed.xml", "text/xml"),
    ("data.xml", "application/xml"),
    ("rss.xml", "application/rss+xml"),
    ("atom.xml", "application/atom+xml"),
    ("style.xsl", "text/xsl"),
    ("style.xslt", "application/xslt+xml"),
    ("page.html", "text/html"),
    ("page.xhtml", "application/xhtml+xml"),
    ("pic.svg", "image/svg+xml"),
    ("math.mml", "application/mathml+xml"),
    ("app.js", "text/javascript"),
    ("app2.js", "application/javascript"),
    ("app3.js", "application/ecmascript"),
    ("old.js", "application/x-javascript"),
    ("shouty.xml", "Text/XML; charset=utf-8"),
    ("unknown.bin", "application/x-unknown-thing"),
]

PASSIVE = [
    ("a.txt", "text/plain"),
    ("b.txt", "text/plain; charset=utf-8"),
    ("c.md", "text/markdown"),
    ("d.csv", "text/csv"),
    ("e.css", "text/css"),
    ("f.json", "application/json"),
    ("g.pdf", "application/pdf"),
    ("h.png", "image/png"),
    ("i.jpg", "image/jpeg"),
    ("j.webp", "image/webp"),
    ("k.mp3", "audio/mpeg"),
    ("l.mp4", "video/mp4"),
    ("m.bin", "application/octet-stream"),
]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def assert_user_content(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.headers.get_list("content-security-policy") == ["sandbox"]
    assert response.headers.get_list("x-content-type-options") == ["nosniff"]


async def setup(api: Api) -> tuple[httpx.AsyncClient, str, str]:
    thread = await api.thread()
    return api.client(), thread, f"/api/threads/{thread}/fs"


async def test_executable_types_are_sandboxed_downloads(api: Api) -> None:
    """Each type a browser can run, uploaded with its type (JSON form and raw body): served
    with its type, sandboxed, not sniffed, and as an attachment."""
    client, _, fs = await setup(api)
    for name, mime in EXECUTABLE:
        for form in ("json", "raw"):
            path = f"{fs}/{form}/{name}"
            if form == "json":
                made = await client.post(path, json={"data": b64(XHTML_IN_XML), "mimeType": mime})
            else:
                made = await client.post(path, content=XHTML_IN_XML, headers={"Content-Type": mime})
            assert made.status_code == 201, (mime, made.text)
            got = await client.get(path)
            assert_user_content(got)
            assert got.content == XHTML_IN_XML
            expected_type = mime if form == "json" else mime.split(";")[0]
            assert got.headers["content-type"] == expected_type, (form, mime)
            assert got.headers["content-disposition"] == f'attachment; filename="{name}"', mime


async def test_types_inferred_from_the_name_are_sandboxed_downloads(api: Api) -> None:
    """A raw upload as octet-stream, or without a type, takes its type from the extension:
    ``.xml`` is application/xml, ``.svg`` image/svg+xml, ``.html`` text/html, ``.js``
    text/javascript — each a sandboxed attachment."""
    client, _, fs = await setup(api)
    inferred = {
        "x.xml": "application/xml",
        "X.XML": "application/xml",
        "x.svg": "image/svg+xml",
        "x.html": "text/html",
        "x.htm": "text/html",
        "x.js": "text/javascript",
    }
    for name, mime in inferred.items():
        for content_type in ("application/octet-stream", None):
            headers = {"Content-Type": content_type} if content_type else {}
            path = f"{fs}/{content_type or 'none'}/{name}"
            made = await client.post(path, content=XHTML_IN_XML, headers=headers)
            assert made.status_code == 201, made.text
            assert made.json()["mimeType"] == mime
            got = await client.get(path)
            assert_user_content(got)
            assert got.headers["content-type"] == mime
            assert got.headers["content-disposition"] == f'attachment; filename="{name}"'


async def test_passive_types_stay_inline_but_sandboxed(api: Api) -> None:
    client, _, fs = await setup(api)
    for name, mime in PASSIVE:
        made = await client.post(f"{fs}/{name}", json={"data": b64(b"plain"), "mimeType": mime})
        assert made.status_code == 201, made.text
        got = await client.get(f"{fs}/{name}")
        assert_user_content(got)
        assert got.headers["content-type"] == mime
        assert got.headers["content-disposition"] == f'inline; filename="{name}"', mime


async def test_thumbnails_and_message_attachments_are_sandboxed(api: Api) -> None:
    """The other ways user bytes reach a browser: a file's thumbnail, and a message's
    attachment (written by the send route, read through /fs)."""
    client, thread, fs = await setup(api)
    await client.post(
        f"{fs}/img.png", json={"data": b64(b"\x89PNG fake"), "thumbnail": b64(XHTML_IN_XML)}
    )
    thumb = await client.get(f"{fs}/img.png", params={"thumbnail": ""})
    assert_user_content(thumb)
    assert thumb.headers["content-type"] == "image/jpeg"
    sent = await client.post(
        f"/api/threads/{thread}/messages",
        json={
            "content": "see",
            "attachments": [
                {"name": "feed.xml", "mimeType": "application/rss+xml", "data": b64(XHTML_IN_XML)},
                {"name": "page.xml", "mimeType": "text/xml", "data": b64(XHTML_IN_XML)},
            ],
        },
    )
    assert sent.status_code == 202, sent.text
    await api.settle(thread)
    messages = (await client.get(f"/api/threads/{thread}/messages")).json()["messages"]
    user = next(m for m in messages if m["id"] == sent.json()["messageId"])
    refs = user["attachments"]
    assert [r["mimeType"] for r in refs] == ["application/rss+xml", "text/xml"]
    for ref in refs:
        got = await client.get(f"{fs}{ref['path']}")
        assert_user_content(got)
        assert got.content == XHTML_IN_XML
        assert got.headers["content-disposition"].startswith("attachment;")


def test_inline_policy() -> None:
    """Only passive types are inline; anything XML, SVG, script or unknown is downloaded."""
    for mime in (
        "image/png",
        "image/gif",
        "image/x-icon",
        "audio/ogg",
        "video/webm",
        "application/pdf",
        "application/ld+json",
        "TEXT/PLAIN; charset=utf-8",
    ):
        assert shown_inline(mime), mime
    for mime in (
        "text/html",
        "text/xml",
        "text/xsl",
        "text/rdf",
        "text/x-component",
        "text/vbscript",
        "application/xml",
        "application/vnd.mozilla.xul+xml",
        "image/svg+xml",
        "image/svg",
        "video/vnd.example+xml",
        "multipart/x-mixed-replace",
        "message/rfc822",
        "text/javascript",
        "application/wasm",
        "application/x-shockwave-flash",
        "",
        "nonsense",
    ):
        assert not shown_inline(mime), mime
