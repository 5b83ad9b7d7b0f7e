"""Markdown as safe HTML (spec 08 §8.10.7): what a model writes, rendered for the web UI.

markdown-it-py parses CommonMark (with GFM tables and strikethrough) with raw HTML
disabled, so markup in the text is shown as text; images are not rendered (a remote image
would be a request to another host: the link text stays). nh3 (the Rust ``ammonia``
sanitizer) then keeps only the tags and attributes below, links only with ``http``,
``https`` or ``mailto`` (a ``javascript:`` or ``data:`` link loses its ``href``), and sets
``rel="noopener noreferrer nofollow"`` and ``target="_blank"`` on every link. Two layers:
the parser never emits raw HTML, and the sanitizer would remove it if it did.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

TAGS = frozenset(
    {
        "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del",
        "code", "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody",
        "tr", "th", "td",
    }
)  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "code": {"class"},
    "th": {"style"},
    "td": {"style"},
}
SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.disable("image")
    return md


def render(text: str) -> str:
    """``text`` as sanitized HTML: safe to insert into a page as markup."""
    html = _parser().render(text)
    return nh3.clean(
        html,
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(SCHEMES),
        link_rel=LINK_REL,
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
        filter_style_properties={"text-align"},
    )
