"""Markdown rendered as safe HTML over HTTP (spec 08 §8.10.6): ``POST /api/markdown``."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import refuse

MAX_TEXT = 64 * 1024
"""The longest text one request may render (characters): even escaped as JSON at its
worst (12 bytes a character), one such text fits in the 1 MiB body (§8.1.1), so a text
too long is a 400 naming it, never a 413."""
MAX_TEXTS = 200
"""The most texts one request may render: two pages of messages."""


def _short(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise refuse(f"must be at most {MAX_TEXT} characters")
    return text


Text = Annotated[str, AfterValidator(_short)]
"""A text to render. Its length is checked here rather than declared as ``maxLength``: a
fuzzer's too-long text, made of characters JSON escapes, would pass the body's 1 MiB limit
first and be a 413 instead of the 400 the schema's bound promises."""


class RenderMarkdown(Body):
    """``POST /api/markdown``: the texts to render, in order (at most 200, each at most
    65,536 characters)."""

    model_config = examples({"texts": ["# Hello\n\n**bold** and `code`"]})

    texts: Annotated[list[Text], Field(max_length=MAX_TEXTS)]


class RenderedMarkdown(Answer):
    """Each text as sanitized HTML, in the order given."""

    html: list[str]
