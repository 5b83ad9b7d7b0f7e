"""Markdown rendered as safe HTML over HTTP (spec 08 §8.10.6): ``POST /api/markdown``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from threadloom.wire.model import Answer, Body, examples

MAX_TEXT = 256 * 1024
"""The longest text one request may render (characters)."""
MAX_TEXTS = 200
"""The most texts one request may render: two pages of messages."""

Text = Annotated[str, StringConstraints(max_length=MAX_TEXT)]


class RenderMarkdown(Body):
    """``POST /api/markdown``: the texts to render, in order (at most 200, each at most
    262,144 characters)."""

    model_config = examples({"texts": ["# Hello\n\n**bold** and `code`"]})

    texts: Annotated[list[Text], Field(max_length=MAX_TEXTS)]


class RenderedMarkdown(Answer):
    """Each text as sanitized HTML, in the order given."""

    html: list[str]
