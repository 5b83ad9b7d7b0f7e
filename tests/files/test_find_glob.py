"""Spec 07 §7.5 find patterns, matched without backtracking (issue 23, item 1).

``**a**a**a**b`` against a path of 3 × 250 characters took 13 s through a backtracking
regex, on the event loop. The matcher (``threadloom.thread.pathglob``) reads each path
character once: these tests check its answers against a regex translation of the spec's
rules on small random cases (where backtracking is harmless), count the characters it
reads on the attack's paths, and run the attack through ``find_files`` on each store.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from threadloom.thread.filetypes import MAX_PATH
from threadloom.thread.pathglob import Glob
from threadloom.thread.state import ThreadState

ATTACK = "**a**a**a**b"


def reference(pattern: str) -> re.Pattern[str]:
    """Spec 07 §7.5 read literally, as a regex: ``**`` ``.*``, ``*`` ``[^/]*``, ``?``
    ``[^/]``, the rest literal; unanchored patterns may start after any ``/``."""
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    anchor = "" if pattern.startswith("/") else ".*/"
    return re.compile(anchor + "".join(parts), re.DOTALL)


patterns = st.text(alphabet="ab./*?[]%", min_size=1, max_size=10)
paths = st.lists(st.text(alphabet="ab.*?[]%", min_size=1, max_size=5), max_size=4).map(
    lambda segments: "/" + "/".join(segments)
)


@settings(max_examples=3000, deadline=None)
@given(pattern=patterns, path=paths)
def test_matches_the_spec_rules(pattern: str, path: str) -> None:
    """Same answer as the regex translation; never more steps than the path has characters."""
    matched, read = Glob.compile(pattern).run(path)
    assert matched == bool(reference(pattern).fullmatch(path))
    assert read <= len(path)


def test_spec_examples() -> None:
    cases = {
        ("*.txt", "/d/e/c.txt"): True,
        ("*.txt", "/d/e/c.txt/x"): False,
        ("/d/*", "/d/e"): True,
        ("/d/*", "/d/e/c.txt"): False,
        ("/d/**", "/d/e/c.txt"): True,
        ("?.txt", "/d/b.txt"): True,
        ("/?.txt", "/d/b.txt"): False,
        ("/?.txt", "//.txt"): False,
        ("/a***b", "/a/x/b"): True,
        ("/a*b", "/a/x/b"): False,
        ("50%_o*", "/50%_off.txt"): True,
        ("[ab]", "/a"): False,
        ("[ab]", "/[ab]"): True,
        ("../**", "/mine.txt"): False,
    }
    for (pattern, path), expected in cases.items():
        assert Glob.compile(pattern).match(path) is expected, (pattern, path)


def test_attack_reads_each_character_once() -> None:
    """The attack's paths: a full scan reads exactly the path's characters, at 1, 2, 3 and
    4 segments of 250, whether the path matches or not; the automaton's width is the
    pattern's, not the path's."""
    glob = Glob.compile(ATTACK)
    no_suffix = Glob.compile("**a**a**a**")
    assert glob.width == 10  # "**" "/" (unanchored) then ** a ** a ** a ** b
    for count in (1, 2, 3, 4):
        path = "/" + "/".join(["a" * 250] * count)
        assert glob.run(path + "b") == (True, len(path) + 1)
        assert glob.run(path) == (False, 0)  # without the literal suffix "b": nothing read
        assert no_suffix.run(path) == (True, len(path))
        others = "/" + "/".join(["b" * 250] * count)
        assert no_suffix.run(others) == (False, len(others))
        assert glob.run(others) == (False, len(others))


def test_star_runs_do_not_widen_the_automaton() -> None:
    """A run of stars is one token, and a pattern needing more characters than a path may
    hold matches nothing without reading any."""
    assert Glob.compile("*" * 5000 + ".txt").width == Glob.compile("**.txt").width
    assert Glob.compile("*" * 5000 + ".txt").match("/a/b.txt")
    assert Glob.compile("*" * 5001 + "a").match("/x/y/a")
    too_long = Glob.compile("/" + "?" * MAX_PATH)
    assert too_long.impossible
    assert too_long.run("/" + "a" * 1023) == (False, 0)
    assert not Glob.compile("/" + "?" * (MAX_PATH - 1)).impossible
    assert Glob.compile("/" + "?" * (MAX_PATH - 1)).match("/" + "a" * (MAX_PATH - 1))


async def test_attack_through_find_files(state: ThreadState) -> None:
    """The issue's case on the store: a path of 3 segments of 250 characters, and one of 4
    that ends with ``b``."""
    seg = "a" * 250
    three = f"/{seg}/{seg}/{seg}"
    beside = f"/{seg}/{seg}/{'a' * 249}d"
    four = f"{beside}/{'a' * 249}b"
    await state.write_file(three, b"x")
    await state.write_file(four, b"y")
    assert [e.path for e in await state.find_files(ATTACK)] == [four]
    everything = [f"/{seg}", f"/{seg}/{seg}", three, beside, four]
    assert [e.path for e in await state.find_files("**a**a**a**")] == everything
    assert [e.path for e in await state.find_files("**a**a**a**", type="file")] == [three, four]
    assert [e.path for e in await state.find_files("**a**a**a**", limit=2)] == everything[:2]
    assert await state.find_files("/" + "?" * MAX_PATH) == []
