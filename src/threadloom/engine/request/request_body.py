"""The ``request_body`` of an LLM log row, and its storage hint (spec 04 §4.25).

The body is the JSON text of the request as built. Its messages array is joined from the
fragments the context already holds, so building it costs one join — and on the
incremental path not even that: the log row gives the body lazily (``RequestDelta.whole``
and ``length``), and the store joins it only when it keeps the body as text (a root, one
row in 65), not for a delta row. On the incremental
path (``context_cache``) the body also carries a ``RequestDelta``: the messages it shares
with the last request stored from the same context, so the store can keep it as a delta
(``store/core/bodies.py``) instead of writing the whole history again. The system
message, which may change from one request to the next, goes into the delta's prefix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Protocol, overload

from threadloom.records import RequestDelta


class Fragments(Sequence[str]):
    """A request's fragments without a copy of the history's: ``head``, then the first
    ``shared`` of ``prefix`` (a context cache's committed fragments, a list that only grows
    until the cache rebuilds into a new one, so those entries never change), then
    ``tail``. Indexing and slicing read through; ``copy()`` builds the list."""

    __slots__ = ("head", "prefix", "shared", "tail")

    def __init__(
        self, head: Sequence[str], prefix: Sequence[str], shared: int, tail: Sequence[str]
    ) -> None:
        self.head, self.prefix, self.shared, self.tail = head, prefix, shared, tail

    def __len__(self) -> int:
        return len(self.head) + self.shared + len(self.tail)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        head, count = len(self.head), self.shared
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return self.copy()[index]
            out: list[str] = []
            if start < head:
                out += self.head[start:stop]
            if start < head + count and stop > head:
                out += self.prefix[max(start - head, 0) : min(stop - head, count)]
            if stop > head + count:
                out += self.tail[max(start - head - count, 0) : stop - head - count]
            return out
        if index < 0:
            index += len(self)
        if index < 0:
            raise IndexError("fragment index out of range")
        if index < head:
            return self.head[index]
        if index < head + count:
            return self.prefix[index - head]
        return self.tail[index - head - count]

    def __iter__(self) -> Iterator[str]:
        return chain(self.head, islice(self.prefix, self.shared), self.tail)

    def copy(self) -> list[str]:
        """The fragments as one list."""
        return [*self.head, *self.prefix[: self.shared], *self.tail]


@dataclass(frozen=True, slots=True)
class LastRequest:
    """What a context cache remembers of the last request stored from it."""

    log_id: str
    generation: int
    committed: int
    fragments: Sequence[str]
    first: int
    """``fragments[first:]`` are the messages after the system message."""


class RequestCache(Protocol):
    """What a request body needs of the context cache its context came from
    (``context_cache.ContextCache``): its generation and the last request stored from it."""

    generation: int
    last_request: LastRequest | None


class PreparedContext(Protocol):
    """What a request body needs of the context it was built from
    (``context_cache.Prepared``): how much of it came from the cache's committed prefix."""

    @property
    def cache(self) -> RequestCache: ...
    @property
    def generation(self) -> int: ...
    @property
    def committed(self) -> int: ...
    @property
    def committed_chars(self) -> int: ...


@dataclass(eq=False, slots=True)
class RequestBody:
    """A request body: its text (joined when first asked for), and the parts a delta is
    made of."""

    before: str
    """The head's text before the messages array."""
    every: Sequence[str]
    """Every message fragment of the request, in order (a list or ``Fragments``)."""
    after: str
    """The head's text after the messages array."""
    prefix: str = ""
    fragments: Sequence[str] | None = None
    """The request's fragments (``None``: no delta is offered); ``fragments[first:]`` are
    the messages after the system message (no copy of the history's list)."""
    first: int = 0
    suffix: str = ""
    prepared: PreparedContext | None = None
    tools_schema: str | None = None
    """The log row's ``tools_schema`` column (the request's tools as JSON), if any."""
    _text: str | None = None

    @property
    def text(self) -> str:
        """The body's JSON text, joined once."""
        if self._text is None:
            self._text = _joined(self.before, self.every, self.after)
        return self._text

    def joined(self) -> str:
        """The body's JSON text (``RequestDelta.whole``)."""
        return self.text

    def length(self) -> int:
        """The text's length, without joining it: the committed messages' lengths are
        summed by the context cache as it grows (``Prepared.committed_chars``)."""
        prepared, every = self.prepared, self.every
        if self._text is not None or prepared is None:
            return len(self.text)
        start, end = self.first, self.first + prepared.committed
        chars = prepared.committed_chars
        if (
            isinstance(every, Fragments)
            and len(every.head) == start
            and every.shared == prepared.committed
        ):  # the view's own parts: no slices built
            chars += sum(map(len, every.head)) + sum(map(len, every.tail))
        else:
            chars += sum(map(len, every[:start])) + sum(map(len, every[end:]))
        commas = len(every) - 1 if every else 0
        return len(self.before) + 2 + chars + commas + len(self.after)

    def delta(self) -> RequestDelta | None:
        """The storage hint of the next row that stores this body."""
        prepared, own, first = self.prepared, self.fragments, self.first
        if prepared is None or own is None:
            return None
        last: LastRequest | None = prepared.cache.last_request
        keep = 0
        if last is not None and last.generation == prepared.generation:
            # the committed prefix is shared by construction; the tail by identity
            previous, start = last.fragments, last.first
            keep = min(last.committed, prepared.committed)
            limit = min(len(previous) - start, len(own) - first)
            while keep < limit and previous[start + keep] is own[first + keep]:
                keep += 1
        return RequestDelta(
            base_log_id=last.log_id if keep and last is not None else None,
            keep=keep,
            prefix=self.prefix,
            fragments=tuple(own[first + keep :]),
            suffix=self.suffix,
            whole=self.joined,
            length=self.length(),
        )

    def stored(self, log_id: str) -> None:
        """Remember that row ``log_id`` stored this body: the next delta's base."""
        prepared, own = self.prepared, self.fragments
        if prepared is None or own is None:
            return
        if prepared.cache.generation != prepared.generation:
            return  # the cache was rebuilt meanwhile: its next request starts a new chain
        prepared.cache.last_request = LastRequest(
            log_id, prepared.generation, prepared.committed, own, self.first
        )


def _joined(before: str, fragments: Sequence[str], after: str) -> str:
    """``before[f1,f2,…]after`` in one pass that allocates the text once: joining the
    fragments and then framing them allocates the (history-sized) text twice, which
    costs several times more (~300 µs instead of ~40 µs at 2,500 messages)."""
    if not fragments:
        return f"{before}[]{after}"
    parts = fragments.copy() if isinstance(fragments, list | Fragments) else list(fragments)
    parts[0] = f"{before}[{parts[0]}"
    parts[-1] = f"{parts[-1]}]{after}"
    return ",".join(parts)


def request_body(
    head: str, slot: str, fragments: Sequence[str], prepared: PreparedContext | None, system: bool
) -> RequestBody:
    """The body whose text is ``head`` with the JSON string ``slot`` replaced by the
    messages array of ``fragments``; ``system``: the first fragment is the system one."""
    before, marker, after = head.partition(f'"{slot}"')
    if not marker:
        raise ValueError("the request head has no messages slot")
    first = 1 if system else 0
    if prepared is None or len(fragments) <= first:
        return RequestBody(before, fragments, after)
    prefix = before + "[" + (fragments[0] + "," if system else "")
    return RequestBody(before, fragments, after, prefix, fragments, first, "]" + after, prepared)
