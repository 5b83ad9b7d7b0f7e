"""Full-text search of threads (spec 08 §8.14): ``GET /api/search``'s query parameters and
its answer."""

from __future__ import annotations

from threadloom.wire.model import Answer
from threadloom.wire.patterns import WHITESPACE
from threadloom.wire.query import OFFSET, Param, boolean, choices, integer, text
from threadloom.wire.threads import ThreadItem

MAX_Q = 500
"""The longest search text (characters)."""
MAX_LIMIT = 100
"""The largest page: each hit's snippet is made when it is answered."""

Q: Param = {
    "name": "q",
    "in": "query",
    "required": True,
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_Q,
        # not blank, no NUL (every query value, §8.1.5)
        "pattern": f"^[^\\x00]*[^{WHITESPACE}\\x00][^\\x00]*$",
    },
    "description": 'Words a message holds (all of them), "quoted phrases", -excluded',
}

SEARCH_QUERY: tuple[Param, ...] = (
    Q,
    integer("limit", f"Page size (default 20); values above {MAX_LIMIT} read as {MAX_LIMIT}"),
    OFFSET,
    text("user_id", "Owner (admins; ignored for others)"),
    text("agent_id", "Agent (current or origin)"),
    boolean("include_children", "With agent_id: also the matching threads' descendants"),
    text("tag", "Only threads carrying exactly this tag"),
    choices("status", ("idle", "running", "failed"), "Comma-separated run states"),
    text("parent", "Children of this thread; `none`: top-level threads only"),
)


class SnippetPart(Answer):
    """A piece of a snippet: plain text, or (``match``) a word the search matched."""

    text: str
    match: bool


class SearchHit(Answer):
    """A thread found, with its best-ranked matching message."""

    thread: ThreadItem
    message_id: str
    snippet: list[SnippetPart]
    rank: float
    matches: int


class SearchResults(Answer):
    """A page of threads found, best first, and how many there are."""

    hits: list[SearchHit]
    total: int
    hasMore: bool
