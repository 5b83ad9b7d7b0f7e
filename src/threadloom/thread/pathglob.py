"""The glob patterns of ``find_files`` (spec 07 §7.5), matched in time linear in the path.

``**`` matches any run of characters, ``*`` any run without ``/``, ``?`` one character other
than ``/``; every other character is literal. A pattern without a leading ``/`` matches any
trailing part of a path that starts after a ``/``.

Patterns come from users, so they are never handed to a backtracking engine (``re`` takes
exponential time on ``**a**a**a**b`` against a long path). A pattern compiles into a
non-deterministic automaton whose set of live states is one ``int``, a bit per pattern
position; each character of the path moves every live state at once with a fixed handful of
integer operations. A path of n characters costs at most n such steps, whatever the pattern,
and the automaton's width is bounded too: a pattern that needs more characters than a path
may hold (``MAX_PATH``) can match nothing and compiles to a matcher that refuses at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from threadloom.thread.filetypes import MAX_PATH

_STAR, _DOUBLE_STAR, _ANY = "*", "**", "?"


def _tokens(pattern: str) -> list[str]:
    """The pattern as tokens: a run of two or more ``*`` is one ``**`` (``***`` is
    ``**`` then ``*``, which matches what ``**`` alone does), a lone ``*`` is ``*``, ``?``
    is ``?``, and every other character is a one-character literal. So two star tokens are
    never adjacent."""
    tokens: list[str] = [] if pattern.startswith("/") else [_DOUBLE_STAR, "/"]
    i = 0
    while i < len(pattern):
        if pattern[i] == "*":
            j = i
            while j < len(pattern) and pattern[j] == "*":
                j += 1
            tokens.append(_STAR if j - i == 1 else _DOUBLE_STAR)
            i = j
        else:
            tokens.append(pattern[i])  # "?" or a literal character
            i += 1
    return tokens


def _literal_suffix(tokens: list[str]) -> str:
    """The literal characters after the last wildcard: every match ends with them."""
    tail: list[str] = []
    for token in reversed(tokens):
        if token in (_STAR, _DOUBLE_STAR, _ANY):
            break
        tail.append(token)
    return "".join(reversed(tail))


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled find pattern. Bit ``k`` of a state set means "the first ``k`` tokens have
    matched the characters read so far"; bit ``width`` is the accepting state."""

    pattern: str
    width: int
    """Number of tokens: the automaton has ``width + 1`` states."""
    impossible: bool
    """The pattern needs more than ``MAX_PATH`` characters: it matches no path."""
    suffix: str
    start: int
    skip: int
    """Star positions, which may also match nothing (an epsilon move to the next bit)."""
    advance_default: int
    """Positions a character other than ``/`` and the pattern's literals moves past (``?``)."""
    advance_slash: int
    loop_default: int
    """Positions that consume a character other than ``/`` and stay (``*`` and ``**``)."""
    loop_slash: int
    """Positions that consume ``/`` and stay (``**``)."""
    advance_literal: dict[str, int] = field(default_factory=dict)
    """For each literal character of the pattern other than ``/``, the positions it moves
    past (its own literal positions and every ``?``)."""

    @classmethod
    def compile(cls, pattern: str) -> Glob:
        tokens = _tokens(pattern)
        literal: dict[str, int] = {}
        any_mask = star = double = 0
        for k, token in enumerate(tokens):
            bit = 1 << k
            if token == _STAR:
                star |= bit
            elif token == _DOUBLE_STAR:
                double |= bit
            elif token == _ANY:
                any_mask |= bit
            else:
                literal[token] = literal.get(token, 0) | bit
        consuming = sum(1 for t in tokens if t not in (_STAR, _DOUBLE_STAR))
        skip = star | double
        advance_literal = {ch: mask | any_mask for ch, mask in literal.items() if ch != "/"}
        return cls(
            pattern=pattern,
            width=len(tokens),
            impossible=consuming > MAX_PATH,
            suffix=_literal_suffix(tokens),
            start=1 | ((1 & skip) << 1),
            skip=skip,
            advance_default=any_mask,
            advance_slash=literal.get("/", 0),
            loop_default=skip,
            loop_slash=double,
            advance_literal=advance_literal,
        )

    def run(self, path: str) -> tuple[bool, int]:
        """Whether the whole of ``path`` matches, and the number of characters read to
        decide it (at most ``len(path)``; each costs the same fixed set of operations)."""
        if self.impossible or not path.endswith(self.suffix):
            return False, 0
        live, skip, accept = self.start, self.skip, 1 << self.width
        literal, default_advance = self.advance_literal, self.advance_default
        default_loop, slash_loop = self.loop_default, self.loop_slash
        slash_advance = self.advance_slash
        for read, ch in enumerate(path, 1):
            if ch == "/":
                advance, loop = slash_advance, slash_loop
            else:
                advance, loop = literal.get(ch, default_advance), default_loop
            live = ((live & advance) << 1) | (live & loop)
            live |= (live & skip) << 1
            if not live:
                return False, read
        return bool(live & accept), len(path)

    def match(self, path: str) -> bool:
        """Whether the whole of ``path`` matches the pattern."""
        return self.run(path)[0]
