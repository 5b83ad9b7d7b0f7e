"""The HTTP contract of threads that move (spec 21 §21.6): the export's answer is the
portable thread file itself (``records/portable.py``), the import's body is one, and its
answer names the threads stored."""

from __future__ import annotations

from threadloom.records.portable import ThreadExport as ThreadExport
from threadloom.wire.model import Answer
from threadloom.wire.query import choice

IMPORT_QUERY = (
    choice(
        "ids",
        ("keep", "new"),
        "`keep` (default): the file's ids; an id already stored is a 409."
        " `new`: new thread, message and log ids, references following",
    ),
)


class ThreadImported(Answer):
    """What an import stored: the root thread's id (new with ``ids=new``) and every
    thread's, parents first."""

    threadId: str
    threadIds: list[str]
