"""NullFree statements: NULL written in the text reads back exactly as a bound None."""

from __future__ import annotations

import itertools
import sqlite3

import pytest

from threadloom.store.core.null_literals import NullFree

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself

_COLUMNS = ("a", "b", "c", "d")


def _table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, a, b TEXT, c REAL, d BLOB DEFAULT 'x')")
    return conn


def test_every_null_pattern_reads_back_as_bound_none() -> None:
    """Each pattern of None values gives the rows that binding them gives, and one text
    per pattern is kept."""
    values = (7, "seven", 7.5, b"\x00\x01")
    insert = NullFree("INSERT INTO t(k, a, b, c, d) VALUES (?, ?, ?, ?, ?)")
    free, bound = _table(), _table()
    patterns = list(itertools.product((False, True), repeat=len(values)))
    for key, pattern in enumerate(patterns):
        row = tuple(None if null else v for v, null in zip(values, pattern, strict=True))
        text, args = insert.bind((key, *row))
        assert text.count("NULL") == sum(pattern)
        assert len(args) == 1 + len(values) - sum(pattern)
        free.execute(text, args)
        bound.execute("INSERT INTO t(k, a, b, c, d) VALUES (?, ?, ?, ?, ?)", (key, *row))
    query = "SELECT k, a, b, c, d, typeof(d) FROM t ORDER BY k"
    assert free.execute(query).fetchall() == bound.execute(query).fetchall()
    assert len(insert._texts) == len(patterns)


def test_update_with_nulls_and_returning() -> None:
    """An UPDATE that sets some columns NULL returns and stores what a bound None would."""
    conn = _table()
    conn.execute("INSERT INTO t(k, a, b, c, d) VALUES (1, 1, 'one', 1.0, 'x')")
    update = NullFree("UPDATE t SET a = ?, b = ?, c = ? WHERE k = ? RETURNING d")
    returned = conn.execute(*update.bind((None, "uno", None, 1))).fetchall()
    assert returned == [("x",)]
    assert conn.execute("SELECT a, b, c FROM t WHERE k = 1").fetchone() == (None, "uno", None)


def test_values_must_match_the_slots() -> None:
    insert = NullFree("INSERT INTO t(k, a) VALUES (?, ?)")
    assert insert.slots == 2
    with pytest.raises(ValueError, match="3 values for 2 slots"):
        insert.bind((1, 2, 3))


def test_one_value_or_none_left_to_bind() -> None:
    """A pattern that leaves one value, or none, to bind still binds a tuple of them."""
    conn = _table()
    insert = NullFree("INSERT INTO t(a, b) VALUES (?, ?)")
    assert insert.bind((None, None))[1] == ()
    assert insert.bind((None, "b"))[1] == ("b",)
    conn.execute(*insert.bind((None, None)))
    conn.execute(*insert.bind((None, "b")))
    conn.execute(*insert.bind((1, "b")))
    assert conn.execute("SELECT a, b FROM t ORDER BY k").fetchall() == [
        (None, None),
        (None, "b"),
        (1, "b"),
    ]
