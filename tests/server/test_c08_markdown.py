"""Markdown rendered as safe HTML (spec 08 §8.10.6): ``POST /api/markdown`` on a real
server, on both stores (the route reads none, but is served by each)."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

from conftest import Api

RICH = """# Title

Some **bold** text and `inline code`.

```py
x = 1 < 2
```

- one
- two

| a | b |
|---|--:|
| 1 | 2 |
"""


class Links(HTMLParser):
    """Every start tag with its attributes, as a browser's parser would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parsed(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Links()
    parser.feed(html)
    parser.close()
    return parser.tags


async def test_c08_173_markdown_is_rendered_and_raw_html_is_text(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api()
    answer = await api.client().post(
        "/api/markdown", json={"texts": [RICH, "<script>alert(1)</script> <b>x</b>"]}
    )
    assert answer.status_code == 200, answer.text
    html = answer.json()["html"]
    assert len(html) == 2
    rich = html[0]
    assert "<h1>Title</h1>" in rich
    assert "<strong>bold</strong>" in rich
    assert "<code>inline code</code>" in rich
    assert '<pre><code class="language-py">x = 1 &lt; 2\n</code></pre>' in rich
    assert "<li>one</li>" in rich and "<li>two</li>" in rich
    assert "<table>" in rich and "<td>1</td>" in rich
    assert [t for t, _ in parsed(rich)].count("td") == 2
    raw = html[1]
    assert "<script" not in raw and "<b>" not in raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in raw
    assert [t for t, _ in parsed(raw)] == ["p"]


LINKS = "\n\n".join(
    [
        "[a](javascript:alert(1))",
        "[b](JaVaScRiPt&#58;alert(2))",
        "[c](data:text/html;base64,PHNjcmlwdD5hbGVydCgzKTwvc2NyaXB0Pg==)",
        "[d](vbscript:msgbox(4))",
        '<a href="javascript:alert(5)">e</a>',
        "[f](https://example.com/path?q=1)",
        "[g](mailto:someone@example.com)",
        "![h](https://example.com/track.png)",
        "<https://example.org/auto>",
    ]
)


async def test_c08_174_links_cannot_run_script_and_open_apart(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api()
    answer = await api.client().post("/api/markdown", json={"texts": [LINKS]})
    assert answer.status_code == 200, answer.text
    html = answer.json()["html"][0]
    tags = parsed(html)
    assert "img" not in [t for t, _ in tags] and "<img" not in html
    links = [attrs for tag, attrs in tags if tag == "a"]
    hrefs = [a.get("href") for a in links if a.get("href")]
    assert hrefs == [
        "https://example.com/path?q=1",
        "mailto:someone@example.com",
        "https://example.com/track.png",
        "https://example.org/auto",
    ]
    for href in hrefs:
        assert re.match(r"^(https?|mailto):", href or "")
    assert not re.search(r"(?i)javascript|vbscript|data:text", " ".join(hrefs))
    for attrs in links:
        assert attrs.get("target") == "_blank"
        assert attrs.get("rel") == "noopener noreferrer nofollow"
    # the raw anchor is text, not a link
    assert "&lt;a href=" in html


async def test_c08_175_bad_markdown_requests_are_refused(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api()
    client = api.client()

    async def refused(body: Any, field: str) -> None:
        answer = await client.post("/api/markdown", json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["code"] == "invalid_request"
        assert field in answer.json()["error"], answer.text

    await refused({}, "texts")
    await refused({"texts": "# one"}, "texts")
    await refused({"texts": ["x"] * 201}, "texts")
    await refused({"texts": ["x", 3]}, "texts[1]")
    await refused({"texts": ["y" * (64 * 1024 + 1)]}, "texts[0]")
    await refused({"texts": ["\U0001f600" * (64 * 1024 + 1)]}, "texts[0]")  # not a 413
    fine = await client.post("/api/markdown", json={"texts": ["y" * (64 * 1024)]})
    assert fine.status_code == 200, fine.text
    typed = await client.post(
        "/api/markdown", content=b"texts", headers={"Content-Type": "text/plain"}
    )
    assert typed.status_code == 415, typed.text
    anonymous = await api.client(None).post("/api/markdown", json={"texts": ["x"]})
    assert anonymous.status_code == 401, anonymous.text
