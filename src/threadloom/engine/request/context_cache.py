"""Incremental context assembly: the common request's context without a pass over the whole
history (spec 04 §4.11; a turn's cost stays flat with the history's length, docs/benchmarks.md).

``context.assemble`` runs the pipeline of spec 04 §4.11 over the whole history on every
model request: eligibility, orphan removal, perspective, reasoning replay, provider-bound
normalisation, and the provider message and log-body fragment of each message. For a step
with no request-context hook that changes messages (``filter_messages``,
``prefilter_llm_history``), no sub-prompt snapshot, ``include_chat`` and
``include_past_tools`` left on, and no image attachment, every stage but the last
assistant's tool block is a function of a message and what precedes it. This module keeps
that output per (history, acting side, reasoning replay) and extends it with what was
appended since, so a request costs the new messages, not the history.

What is kept is exact by construction: records are consumed only up to a *clean cut* — no
``pending`` record before it, every tool block before it answered by tool results before
it. An edit or removal at a consumed position (``MessageHistory.first_edit_since``)
rebuilds from the start. Histories the incremental rules cannot follow (a tool result
stored before the call it answers, a call id issued twice, an image attachment) fall back
to ``context.assemble``'s full pass for good; ``tests/engine/test_context_cache.py``
checks the two agree over random histories and edits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from threadloom.engine.request.fragments import fragment
from threadloom.engine.request.presentation import (
    CALL_IDS,
    DECODED_CALLS,
    Presented,
    RequestMessage,
    blank_assistant,
    call_ids,
    convert,
    is_image,
    missing_result,
    own_provider_message,
)
from threadloom.engine.request.request_body import Fragments, LastRequest
from threadloom.records import Message
from threadloom.thread.history import MessageHistory


def cache_key(own: str, include_reasoning: bool) -> tuple[str, str, bool]:
    """The key of a history's ``ContextCache`` for one side (``MessageHistory.caches``)."""
    return ("context", own, include_reasoning)


_OPEN = 1 << 62  # the span end of a tool block with a missing result: never committed


class Unusable(Exception):
    """The history left the rules this cache can follow (the full pass takes over)."""


@dataclass(eq=False)
class Prepared:
    """One request's context: normalised messages with the system message first, and the
    provider message and log-body fragment of each. Only ``providers`` (the request's
    list) is built for each request; the messages and fragments read through the cache's
    committed lists (``messages``, ``fragments``: copies, ``fragment_view``: none)."""

    providers: list[Any]
    cache: ContextCache
    generation: int
    committed: int
    """Entries after the system message that came from the cache's committed prefix."""
    committed_chars: int = 0
    """The summed length of those entries' fragments."""
    head: list[tuple[RequestMessage, Any, str]] = field(default_factory=list)
    """The system entry, if any."""
    tail: Sequence[tuple[RequestMessage, Any, str]] = ()
    """The entries after the committed prefix (a tuple when none: an empty list would be
    one more object the collector tracks per request in flight, issue 40)."""
    prefix_sources: list[Message] = field(default_factory=list)
    prefix_fragments: list[str] = field(default_factory=list)
    """The cache's committed lists (the stored record each entry was built from, its
    fragment), of which the first ``committed`` entries are this context's (they only grow
    until the cache rebuilds into new lists)."""
    fragment_view: Fragments = field(init=False)

    def __post_init__(self) -> None:
        self.fragment_view = Fragments(
            [e[2] for e in self.head],
            self.prefix_fragments,
            self.committed,
            [e[2] for e in self.tail] or (),
        )

    @property
    def messages(self) -> list[RequestMessage]:
        """The normalised request messages (a new list). The committed prefix's are built
        again from their records: the cache keeps only their provider messages and
        fragments (what a request sends and logs)."""
        own, reasoning = self.cache.own, self.cache.include_reasoning
        prefix: list[RequestMessage] = []
        for record in self.prefix_sources[: self.committed]:
            item = convert(record, own, reasoning)
            assert item is not None  # it was committed from this very conversion
            prefix.append(item.request)
        return [*(e[0] for e in self.head), *prefix, *(e[0] for e in self.tail)]

    @property
    def fragments(self) -> list[str]:
        """The log-body fragment of each message (a new list)."""
        return self.fragment_view.copy()


@dataclass(eq=False, slots=True)
class _Unit:
    """The normalised output of one tail record: ``[lo, hi]`` spans the records it uses;
    ``sources``: the stored record of each entry (``None`` for a synthetic one)."""

    lo: int
    hi: int
    entries: list[tuple[RequestMessage, Any, str]] = field(default_factory=list)
    sources: list[Message | None] = field(default_factory=list)


def _entry(item: Presented) -> tuple[RequestMessage, Any, str]:
    if item.provider is None or item.fragment is None:  # remembered with the record
        item.provider = own_provider_message(item.request)
        item.fragment = fragment(item.provider)
    return item.request, item.provider, item.fragment


def _loose(request: RequestMessage) -> tuple[RequestMessage, Any, str]:
    provider = own_provider_message(request)
    return request, provider, fragment(provider)


@lru_cache(maxsize=64)
def _system_entry(text: str) -> tuple[RequestMessage, Any, str]:
    """The system message's entry for ``text``, shared by every context cache of the
    process (every thread of an agent usually has the same system text: one entry, not
    one a thread — issue 40); read-only, as a cache's own entries are."""
    return _loose(RequestMessage(role="system", content=text))


class ContextCache:
    """The normalised context of one history as one side sees it, kept incrementally."""

    def __init__(self, own: str, include_reasoning: bool) -> None:
        self.own = own
        self.include_reasoning = include_reasoning
        self.key = ("request", own, include_reasoning)
        self.usable = True
        self.generation = 0
        self._reset(0)

    def _reset(self, mark: int) -> None:
        self.generation += 1
        self.mark = mark
        self.consumed = 0
        self.issuer: dict[str, str] = {}
        self.orphans: set[str] = set()
        self.sources: list[Message] = []
        """The stored record of each committed entry (its request form is not kept: see
        ``_extend``)."""
        self.providers: list[Any] = []
        self.fragments: list[str] = []
        self.chars = 0
        """The summed length of ``fragments`` (a request body's length without a join)."""
        self.last_request: LastRequest | None = None
        """What the request builder remembers of the last request made from this cache."""

    @classmethod
    def of(cls, history: MessageHistory, own: str, include_reasoning: bool) -> ContextCache:
        key = cache_key(own, include_reasoning)
        cache = history.caches.get(key)
        if cache is None:
            cache = history.caches[key] = cls(own, include_reasoning)
        return cache

    def system_entry(self, text: str) -> tuple[RequestMessage, Any, str]:
        return _system_entry(text)

    def prepare(self, history: MessageHistory, system: str) -> Prepared | None:
        """The request context now, or ``None`` when only the full pass can give it."""
        if not self.usable:
            return None
        edited = history.first_edit_since(self.mark)
        if edited is not None and edited < self.consumed:
            self._reset(history.edit_mark)
        else:
            self.mark = history.edit_mark
        try:
            tail = self._extend(history, history.records_from(self.consumed))
        except Unusable:
            self.usable = False
            self._reset(history.edit_mark)
            return None
        committed = len(self.sources)
        head = [self.system_entry(system)] if system else []
        providers = [e[1] for e in head]
        providers += self.providers
        providers += [e[1] for e in tail]
        return Prepared(
            providers,
            self,
            self.generation,
            committed,
            self.chars,
            head,
            tail or (),
            self.sources,
            self.fragments,
        )

    def _extend(
        self, history: MessageHistory, records: list[Message]
    ) -> list[tuple[RequestMessage, Any, str]]:
        """Process the records after the consumed prefix: commit what lies before the last
        clean cut, return the normalised entries of the rest."""
        own = self.own
        issued: dict[str, tuple[int, str]] = {}
        for index, m in enumerate(records):
            if m.status != "completed":
                continue
            if m.attachments and any(is_image(a) for a in m.attachments):
                raise Unusable
            if m.tool_calls:
                for call_id in call_ids(history, m):
                    if call_id in self.issuer or call_id in issued or call_id in self.orphans:
                        raise Unusable  # issued twice, or answered before it was issued
                    issued[call_id] = (index, m.role)
        unstable = len(records)
        orphans: list[tuple[int, str]] = []
        items: list[tuple[int, Message, Presented]] = []
        answers: dict[str, tuple[int, Message, Presented]] = {}
        for index, m in enumerate(records):
            if m.status != "completed":
                if m.status != "failed" and index < unstable:
                    unstable = index  # a pending record may still become part of the context
                continue
            if m.role == "tool":
                call_id = m.tool_call_id or ""
                role = self.issuer.get(call_id)
                if role is None:
                    found = issued.get(call_id)
                    if found is None:
                        orphans.append((index, call_id))
                        continue
                    if found[0] > index:
                        raise Unusable
                    role = found[1]
                if role != own:
                    continue
            item: Presented | None = history.memo(
                m, self.key, lambda r: convert(r, own, self.include_reasoning, history=history)
            )
            if item is None:
                continue
            request = item.request
            if request.role == "tool" and request.tool_call_id:
                answers.setdefault(request.tool_call_id, (index, m, item))
            items.append((index, m, item))
        units = self._units(items, answers)
        cut = self._cut(units, unstable, len(records))
        out: list[tuple[RequestMessage, Any, str]] = []
        for unit in units:
            if unit.lo < cut:
                for source, (_, provider, fragment) in zip(unit.sources, unit.entries, strict=True):
                    assert source is not None  # a synthetic entry leaves its unit open
                    self.sources.append(source)
                    self.providers.append(provider)
                    self.fragments.append(fragment)
                    self.chars += len(fragment)
            else:
                out.extend(unit.entries)
        for index, call_id in orphans:
            if index < cut:
                self.orphans.add(call_id)
        for call_id, (index, role) in issued.items():
            if index < cut:
                self.issuer[call_id] = role
        self.consumed += cut
        if cut:
            # Committed records are not read here again (until an edit rebuilds the cache):
            # what the history remembered of them for this cache (their request forms and
            # decoded calls) is let go; the provider messages and fragments stay above.
            history.forget(records[:cut], (self.key, DECODED_CALLS, CALL_IDS))
        return out

    @staticmethod
    def _units(
        items: list[tuple[int, Message, Presented]],
        answers: dict[str, tuple[int, Message, Presented]],
    ) -> list[_Unit]:
        """Provider-bound normalisation (spec 04 §4.11.7) of the tail's items."""
        used: set[int] = set()
        units: list[_Unit] = []
        for index, record, item in items:
            request = item.request
            if request.role == "tool":
                continue  # emitted with its block, or dropped when outside any block
            if request.role == "assistant" and request.tool_calls:
                unit = _Unit(index, index, [_entry(item)], [record])
                for call in request.tool_calls:
                    found = answers.get(call.id)
                    if found is not None and found[0] not in used:
                        used.add(found[0])
                        unit.entries.append(_entry(found[2]))
                        unit.sources.append(found[1])
                        unit.hi = max(unit.hi, found[0])
                        continue
                    unit.entries.append(_loose(missing_result(call)))
                    unit.sources.append(None)
                    unit.hi = _OPEN
                units.append(unit)
                continue
            if blank_assistant(request):
                units.append(_Unit(index, index))
            else:
                units.append(_Unit(index, index, [_entry(item)], [record]))
        return units

    @staticmethod
    def _cut(units: list[_Unit], unstable: int, total: int) -> int:
        """The last position before which every unit is complete and no record pending."""
        best = 0
        reach = -1  # the furthest record used by the units before the candidate
        for unit in units:
            if unit.lo > unstable:
                break
            if reach < unit.lo:
                best = unit.lo
            reach = max(reach, unit.hi)
        end = min(unstable, total)
        if reach < end:
            best = end
        return best
