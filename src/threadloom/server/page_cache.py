"""Encoded pages of ``GET …/messages`` kept while their thread is unchanged (spec 08 §8.4.1).

Every change of a thread's messages and queue entries commits with an event row and raises
the thread row's ``event_seq`` (spec 01 §1.11), on whichever node writes it. So the body of
a page read when the row said ``event_seq = S`` is the body of every later read of the
same page that finds ``S`` again: the route reads the row anyway (its access check), and
when this cache holds the page at that ``S`` it answers with the bytes, without reading,
building or encoding a message. A row with another ``S`` (or another ``created_at_us``: the
thread was deleted and made again under its id) misses, and the fresh page replaces the
old one.

Not kept: a page with a message that names a subagent (its ``subagent_*`` fields are
projected from the registry and from the child's row, whose changes do not move the
parent's ``event_seq``), and a page larger than an eighth of the budget. The budget is in
bytes of bodies (``THREADLOOM_PAGE_CACHE_BYTES``, default 16 MiB, 0 turns the cache off);
the least recently used pages go first.
"""

from __future__ import annotations

from collections import OrderedDict

DEFAULT_BUDGET = 16 * 1024 * 1024

PageKey = tuple[str, int, int | None, int, str, int | None, bool, bool]
"""Thread id, its ``created_at_us``, limit, offset, order, depth, silent, workblocks."""


class PageCache:
    """A least-recently-used map of page bodies, bounded in bytes; one per server."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self.used = 0
        self.hits = 0
        self.misses = 0
        self._pages: OrderedDict[PageKey, tuple[int, bytes]] = OrderedDict()
        self._threads: dict[str, int] = {}
        """Kept pages by thread id."""

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, key: PageKey, seq: int) -> bytes | None:
        """The body kept for ``key`` when it was read at ``seq``; else ``None``."""
        found = self._pages.get(key)
        if found is None or found[0] != seq:
            self.misses += 1
            return None
        self._pages.move_to_end(key)
        self.hits += 1
        return found[1]

    def holds_thread(self, thread_id: str) -> bool:
        """Whether a page of the thread is kept (at any ``event_seq``): a read of it then
        reads the row first, to answer from here, rather than the row and the page in
        one go (issue 40)."""
        return thread_id in self._threads

    def put(self, key: PageKey, seq: int, body: bytes, *, keep: bool = True) -> None:
        """Keep ``body``, the page of ``key`` read at ``seq``, unless it may not be kept:
        ``keep`` false (a message of the page names a subagent) or too large."""
        size = len(body)
        if size > self.budget // 8 or not keep:
            self._drop(key)
            return
        self._drop(key)
        self._pages[key] = (seq, body)
        self.used += size
        self._threads[key[0]] = self._threads.get(key[0], 0) + 1
        while self.used > self.budget:
            gone, (_, oldest) = self._pages.popitem(last=False)
            self._forget(gone, oldest)

    def clear(self) -> None:
        """Forget every page (the database failed over: a page kept at ``seq`` S may not be
        the new primary's page at S, spec 17 §17.5.3 rule 4)."""
        self._pages.clear()
        self._threads.clear()
        self.used = 0

    def _drop(self, key: PageKey) -> None:
        old = self._pages.pop(key, None)
        if old is not None:
            self._forget(key, old[1])

    def _forget(self, key: PageKey, body: bytes) -> None:
        """Account for ``key``'s page ``body``, gone from the map."""
        self.used -= len(body)
        left = self._threads[key[0]] - 1
        if left:
            self._threads[key[0]] = left
        else:
            del self._threads[key[0]]
