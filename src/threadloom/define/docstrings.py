"""A tool's docstring read for what it documents (spec 04 §4.5.1): the text before its
sections, and the description of each parameter in a Google (``Args:``), NumPy
(``Parameters``) or reST (``:param x:``) section — parsed by ``docstring_parser``."""

from __future__ import annotations

from dataclasses import dataclass, field

import docstring_parser


@dataclass(frozen=True)
class Documented:
    summary: str
    """The docstring without its sections (its whole text when nothing was parsed)."""
    descriptions: dict[str, str] = field(default_factory=dict)
    """Parameter name → its documented text (one line per line of the docstring)."""


def parameters(text: str) -> Documented:
    """What ``text`` (a cleaned docstring) documents; no descriptions when it has no
    parameter section, or one the parser cannot read."""
    if not text:
        return Documented(text)
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:
        return Documented(text)
    descriptions = {
        p.arg_name: " ".join(p.description.split())
        for p in parsed.params
        if p.arg_name and p.description and p.description.strip()
    }
    if not descriptions:
        return Documented(text)
    parts = (parsed.short_description, parsed.long_description)
    summary = "\n\n".join(part.strip() for part in parts if part and part.strip())
    return Documented(summary or text, descriptions)
