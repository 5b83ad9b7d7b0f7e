"""Which writes commit without waiting for the WAL flush, and so for a synchronous standby
(spec 17 §17.5.3 rule 2): the list the spec gives is the list the code has."""

from __future__ import annotations

import re
from pathlib import Path

import threadloom

SOURCE = Path(threadloom.__file__).resolve().parent
CALL = re.compile(r"durable=False")
NOT_ACKNOWLEDGED = {
    ("engine/step/pending.py", "insert_locked"),
    ("engine/step/pending.py", "create_with_log"),
    ("store/core/runner.py", "events.prune_chunk"),
    ("store/core/runner.py", "auth.take_attempt"),
    ("store/core/runner.py", "auth.give_back_attempt"),
    ("store/core/runner.py", "retention.strip_log_bodies"),
    ("store/core/runner.py", "search.catch_up"),
}
"""The pending model message with its model-call row (written twice: after a hold, or at
once), the pruning of old chunk events, a login attempt's count taken and given back, and
retention's stripping of old log bodies (lost, the next pass strips them again), and the
search backlog's indexing (lost, the messages are still in the backlog): none is a write
whose answer tells a client it is stored."""


def _non_durable_writes() -> set[tuple[str, str]]:
    """(module, what it writes) of every ``durable=False`` argument in the package's code
    (docstrings and comments, which mention it in backticks, left out)."""
    found: set[tuple[str, str]] = set()
    for path in sorted(SOURCE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0]
            if not CALL.search(code) or "``" in code:
                continue
            context = " ".join(lines[max(0, i - 2) : i + 1])  # the call may start above
            context = context[: context.rindex("durable=False")]
            through_store = re.findall(r"_write\(\s*([\w.]+)", context)
            written = through_store[-1] if through_store else re.findall(r"([\w.]+)\(", context)[-1]
            found.add((str(path.relative_to(SOURCE)), written.removeprefix("thread_messages.")))
    return found


def test_c17_065_only_unacknowledged_writes_skip_the_wal_flush() -> None:
    """C17-065: every ``durable=False`` write in the package (``synchronous_commit = off``
    for its transaction on PostgreSQL: it waits neither for the disk nor for a synchronous
    standby) is one of the five the spec lists, none of which a client is told is stored —
    so with synchronous replication an acknowledged write is never lost by a failover; a
    new one must be added to the spec (and here) on purpose."""
    assert _non_durable_writes() == NOT_ACKNOWLEDGED
