"""Tests of the pure application-log normalisation (spec 02 §2.11.2–§2.11.5)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from threadloom.records import ThreadLogEntry, json_compact
from threadloom.thread.lognorm import (
    BODY_LIMIT,
    DATA_LIMIT,
    ENTRY_KEYS,
    NAME_LIMIT,
    TEXT_LIMIT,
    build_entry,
    normalize_log_entry,
    to_json_safe,
)

COLUMNS = {
    "model",
    "app_level",
    "app_message",
    "app_status",
    "app_error",
    "app_duration_ms",
    "app_cost",
    "app_request",
    "app_response",
    "app_trigger",
    "app_data",
}
MARK = "…[truncated]"


def norm(entry: object = None, **fields: Any) -> dict[str, Any]:
    """Assemble and normalise as ``log()`` does."""
    return normalize_log_entry(build_entry(entry, fields))


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def assert_text_truncated(original: str, result: str, limit: int = TEXT_LIMIT) -> None:
    """``result`` is the longest prefix of ``original`` + marker within ``limit`` bytes."""
    assert result.endswith(MARK)
    prefix = result[: -len(MARK)]
    assert original.startswith(prefix)
    assert nbytes(result) <= limit
    assert nbytes(original[: len(prefix) + 1] + MARK) > limit


def assert_json_truncated(full: str, result: str, limit: int) -> None:
    """``result`` is the exact §2.11.5 preview object for ``full`` under ``limit`` bytes."""
    marker = json.loads(result)
    assert list(marker) == ["$truncated", "bytes", "preview"]
    assert marker["$truncated"] is True
    assert marker["bytes"] == nbytes(full)
    preview = marker["preview"]
    assert full.startswith(preview)
    assert result == json_compact(marker)
    assert nbytes(result) <= limit
    longer = {"$truncated": True, "bytes": nbytes(full), "preview": full[: len(preview) + 1]}
    assert nbytes(json_compact(longer)) > limit


# --------------------------------------------------------------------------------------
# Assembling (§2.11.2)


def test_build_entry_shapes() -> None:
    assert {f"app_{key}" for key in ENTRY_KEYS - {"name"}} | {"model"} == COLUMNS
    assert build_entry("boot") == {"name": "boot"}
    assert build_entry({"name": "a", "other": 1}, {"message": "m"}) == {
        "name": "a",
        "message": "m",
    }
    assert build_entry({"name": "a"}, {"name": "b"}) == {"name": "b"}
    assert build_entry(None, {"name": "k"}) == {"name": "k"}
    assert build_entry(42) == {}
    assert build_entry([("name", "x")], {"cost": 1}) == {"cost": 1}
    typed: ThreadLogEntry = {"name": "t", "level": "warn"}
    assert build_entry(typed) == {"name": "t", "level": "warn"}


def test_build_entry_failing_mapping_is_empty() -> None:
    class Broken(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

        def __iter__(self) -> Iterator[str]:
            return iter(["name"])

        def __len__(self) -> int:
            return 1

    assert build_entry(Broken()) == {}
    assert build_entry(Broken(), {"name": "kw"}) == {"name": "kw"}
    assert norm(Broken())["model"] == "unnamed"


def test_keyword_none_overrides_then_counts_as_absent() -> None:
    assert norm({"name": "x"}, name=None)["model"] == "unnamed"


def test_result_has_exactly_the_columns() -> None:
    assert set(norm()) == COLUMNS
    assert norm() == {key: None for key in COLUMNS} | {"model": "unnamed", "app_level": "info"}


# --------------------------------------------------------------------------------------
# Field rules (§2.11.3)


def test_c02_059_plain_event() -> None:
    row = norm({"name": "cache.miss", "level": "debug", "message": "cold start"})
    assert (row["model"], row["app_level"], row["app_message"]) == (
        "cache.miss",
        "debug",
        "cold start",
    )


def test_name_stripped_and_blank_is_unnamed() -> None:
    assert norm(name="  boot \n")["model"] == "boot"
    assert norm(name="   ")["model"] == "unnamed"
    assert norm(name=3)["model"] == "unnamed"


def test_c02_061_name_rule() -> None:
    long = norm(name="x" * 500)["model"]
    assert len(long) == NAME_LIMIT and long == "x" * 119 + "…"
    assert norm(name="x" * 120)["model"] == "x" * 120
    assert norm(name="😀" * 121)["model"] == "😀" * 119 + "…"


def test_c02_066_level_default() -> None:
    assert norm(name="e", status="error")["app_level"] == "error"
    assert norm(name="e", level="loud")["app_level"] == "info"
    assert norm(name="e", level="loud", status="error")["app_level"] == "error"
    assert norm(name="e", level="warn", status="error")["app_level"] == "warn"
    row = norm(name="e", status="failed")
    assert (row["app_status"], row["app_level"]) == (None, "info")
    assert norm(name="e", status="skipped")["app_status"] == "skipped"


def test_c02_067_wrong_number_types_dropped() -> None:
    row = norm(name="t", duration_ms="182", cost=True)
    assert row["app_duration_ms"] is None and row["app_cost"] is None


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, 10**400, False, "1", [1]])
def test_amount_rejects(bad: object) -> None:
    row = norm(name="t", duration_ms=bad, cost=bad)
    assert row["app_duration_ms"] is None and row["app_cost"] is None


def test_amount_accepts_as_float() -> None:
    row = norm(name="t", duration_ms=182, cost=0.0004)
    assert row["app_duration_ms"] == 182.0 and isinstance(row["app_duration_ms"], float)
    assert row["app_cost"] == 0.0004
    assert norm(name="t", cost=0)["app_cost"] == 0.0


def test_c02_070_error_from_exception() -> None:
    assert norm(name="err", error=ValueError("bad"))["app_error"] == "ValueError: bad"
    assert norm(name="err", error=KeyError())["app_error"] == "KeyError"
    assert norm(name="err", error="plain")["app_error"] == "plain"
    assert norm(name="err", error=ValueError)["app_error"] is None


def test_error_whose_str_raises() -> None:
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert norm(name="err", error=Weird("x"))["app_error"] == "Weird"


def test_error_text_rule() -> None:
    error = norm(name="err", error=ValueError("y" * 5000))["app_error"]
    assert_text_truncated("ValueError: " + "y" * 5000, error)


def test_trigger_rules() -> None:
    trig = {"kind": "message", "id": "m1", "summary": "asked", "extra": 1}
    assert norm(name="t", trigger=trig)["app_trigger"] == (
        '{"kind":"message","id":"m1","summary":"asked"}'
    )
    assert norm(name="t", trigger={"kind": "k", "id": 5})["app_trigger"] == '{"kind":"k"}'
    assert norm(name="t", trigger={"kind": ""})["app_trigger"] is None
    assert norm(name="t", trigger={"id": "x"})["app_trigger"] is None
    assert norm(name="t", trigger="message")["app_trigger"] is None
    long = json.loads(
        norm(name="t", trigger={"kind": "k" * 200, "id": "i" * 121, "summary": "s" * 5000})[
            "app_trigger"
        ]
    )
    assert long["kind"] == "k" * 119 + "…" and long["id"] == "i" * 119 + "…"
    assert_text_truncated("s" * 5000, long["summary"])


# --------------------------------------------------------------------------------------
# Text rule (§2.11.5)


def test_text_rule_exact_boundary() -> None:
    at = "a" * TEXT_LIMIT
    assert norm(name="m", message=at)["app_message"] == at
    over = "a" * (TEXT_LIMIT + 1)
    result = norm(name="m", message=over)["app_message"]
    assert result == "a" * (TEXT_LIMIT - nbytes(MARK)) + MARK
    assert nbytes(result) == TEXT_LIMIT
    assert_text_truncated(over, result)


def test_c02_062_text_rule_multibyte() -> None:
    message = "é" * 3000
    result = norm(name="m", message=message)["app_message"]
    assert_text_truncated(message, result)
    emoji = "😀" * 1100  # 4-byte characters: the cut must not split one
    assert_text_truncated(emoji, norm(name="m", message=emoji)["app_message"])


def test_surrogates_are_replaced() -> None:
    row = norm(name="a\ud800", message="b\udfff", data={"k\ud800": "v\ud800"})
    assert row["model"] == "a\ufffd" and row["app_message"] == "b\ufffd"
    assert json.loads(row["app_data"]) == {"k\ufffd": "v\ufffd"}


# --------------------------------------------------------------------------------------
# JSON normalisation (§2.11.4)


def test_c02_064_markers() -> None:
    row = norm(name="r", request={1, 2}, response=float("nan"))
    assert row["app_request"] == '{"$unserializable":"set"}'
    assert row["app_response"] == '{"$unserializable":"float"}'
    assert to_json_safe([b"x", math.inf, frozenset()]) == [
        {"$unserializable": "bytes"},
        {"$unserializable": "float"},
        {"$unserializable": "frozenset"},
    ]


def test_c02_065_string_stays_text() -> None:
    assert norm(name="s", request='{"a":1}')["app_request"] == '"{\\"a\\":1}"'


def test_mapping_keys() -> None:
    value = {"s": 0, 2: 1, 1.5: 2, False: 3, None: 4, (1,): 5, math.nan: 6, 10**5000: 7}
    assert to_json_safe(value) == {
        "s": 0,
        "2": 1,
        "1.5": 2,
        "false": 3,
        "null": 4,
        "$unserializable:tuple": 5,
        "NaN": 6,
        "$unserializable:int": 7,
    }


def test_scalars_and_sequences() -> None:
    assert to_json_safe((1, [True, None], "x", 2.5)) == [1, [True, None], "x", 2.5]
    assert to_json_safe(10**5000) == {"$unserializable": "int"}


def test_models_and_dataclasses() -> None:
    class Inner(BaseModel):
        when: int = 1

    @dataclasses.dataclass
    class Point:
        x: int
        tags: tuple[str, ...]

    assert to_json_safe({"m": Inner(), "p": Point(1, ("a",))}) == {
        "m": {"when": 1},
        "p": {"x": 1, "tags": ["a"]},
    }

    class Opaque:
        pass

    class Holder(BaseModel):
        model_config = {"arbitrary_types_allowed": True}
        thing: Opaque

    assert to_json_safe(Holder(thing=Opaque())) == {"$unserializable": "Holder"}


def test_c02_069_odd_entries_and_cycles() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    for entry in (42, None, {"name": None}):
        assert norm(entry)["model"] == "unnamed"
    row = norm({"data": cyclic})
    assert row["model"] == "unnamed"
    assert json.loads(row["app_data"]) == [1, {"$unserializable": "cycle"}]
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert to_json_safe(loop) == {"self": {"$unserializable": "cycle"}}
    shared = [1]
    assert to_json_safe([shared, shared]) == [[1], [1]]  # shared, not cyclic


def nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_depth_limit_boundary() -> None:
    assert to_json_safe(nested(64)) == nested(64)
    deep = to_json_safe(nested(65))
    inner = deep
    for _ in range(63):
        inner = inner[0]
    assert inner == [{"$unserializable": "too_deep"}]
    assert json.loads(norm(data=nested(100_000))["app_data"])  # no RecursionError


def test_weird_objects_never_raise() -> None:
    class BadStr:
        def __str__(self) -> str:
            raise RuntimeError("no")

        __repr__ = __str__

    class BadClass:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            raise RuntimeError("no")

    value = {BadStr(): [BadStr(), BadClass()], "k": BadClass()}
    assert to_json_safe(value) == {
        "$unserializable:BadStr": [{"$unserializable": "BadStr"}, {"$unserializable": "BadClass"}],
        "k": {"$unserializable": "BadClass"},
    }
    row = norm(name=BadStr(), message=BadStr(), error=BadStr(), trigger=BadClass())
    assert row["model"] == "unnamed" and row["app_error"] is None


# --------------------------------------------------------------------------------------
# JSON rule (§2.11.5)


def test_c02_063_data_rule() -> None:
    data = {"s": "x" * 20000}
    result = norm(name="d", data=data)["app_data"]
    assert_json_truncated(json_compact(data), result, DATA_LIMIT)
    at = {"s": "x" * (DATA_LIMIT - 8)}
    assert nbytes(json_compact(at)) == DATA_LIMIT
    assert norm(name="d", data=at)["app_data"] == json_compact(at)
    over = {"s": "x" * (DATA_LIMIT - 7)}
    assert_json_truncated(json_compact(over), norm(name="d", data=over)["app_data"], DATA_LIMIT)


@pytest.mark.parametrize("field", ["request", "response"])
def test_body_rule_boundary(field: str) -> None:
    at = "x" * (BODY_LIMIT - 2)
    assert norm(**{field: at})[f"app_{field}"] == json_compact(at)
    over = "x" * (BODY_LIMIT - 1)
    result = norm(**{field: over})[f"app_{field}"]
    assert_json_truncated(json_compact(over), result, BODY_LIMIT)


@pytest.mark.parametrize("filler", ['"', "\n", "é", "😀", "\x01", "a\\"])
def test_json_rule_escaping_is_exact(filler: str) -> None:
    data = [filler * 9000]
    result = norm(data=data)["app_data"]
    assert_json_truncated(json_compact(data), result, DATA_LIMIT)


# --------------------------------------------------------------------------------------
# Property (C02-072 at the normaliser level)


class RaisingStr:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


class RaisingExc(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def huge_int() -> int:
    """An int too long for ``repr`` (built lazily so hypothesis never prints it)."""
    return 10**5000


_chars = st.characters(categories=["L", "N", "P", "S", "Z", "Cc", "Cs"])
_huge = st.builds(lambda c, n: c * n, _chars, st.integers(3000, 70000))
_text = st.one_of(st.text(_chars, max_size=30), _huge)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.builds(huge_int),
    st.floats(),
    _text,
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=3),
    st.builds(RaisingStr),
    st.builds(RaisingExc, st.text(max_size=5)),
    st.builds(ValueError, _text),
)
_key = st.one_of(
    st.text(_chars, max_size=10),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.builds(RaisingStr),
    st.tuples(st.integers()),
)
_value = st.recursive(
    _scalar,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(_key, children, max_size=4),
    ),
    max_leaves=12,
)
_bulk = st.lists(_huge, min_size=1, max_size=3)
_field = {
    "name": st.one_of(_text, _value),
    "message": st.one_of(_text, _value),
    "level": st.one_of(st.sampled_from(["debug", "info", "warn", "error", "loud"]), _value),
    "status": st.one_of(st.sampled_from(["success", "error", "skipped", "x"]), _value),
    "trigger": st.one_of(
        st.fixed_dictionaries({"kind": _text}, optional={"id": _value, "summary": _value}),
        _value,
    ),
    "request": st.one_of(_value, _bulk),
    "response": st.one_of(_value, _bulk),
    "error": st.one_of(_text, _value),
    "duration_ms": st.one_of(st.floats(min_value=0), _value),
    "cost": st.one_of(st.floats(min_value=0), _value),
    "data": st.one_of(_value, _bulk),
}
_entry = st.one_of(st.fixed_dictionaries({}, optional=_field), _value)


@settings(max_examples=300, deadline=None)
@given(entry=_entry, fields=st.fixed_dictionaries({}, optional=_field))
def test_c02_072_arbitrary_entries(entry: object, fields: dict[str, Any]) -> None:
    row = normalize_log_entry(build_entry(entry, fields))
    assert set(row) == COLUMNS
    assert 0 < len(row["model"]) <= NAME_LIMIT
    assert row["app_level"] in {"debug", "info", "warn", "error"}
    assert row["app_status"] in {None, "success", "error", "skipped"}
    for column in ("app_message", "app_error"):
        assert row[column] is None or nbytes(row[column]) <= TEXT_LIMIT
    limits = {"app_data": DATA_LIMIT, "app_request": BODY_LIMIT, "app_response": BODY_LIMIT}
    for column, limit in limits.items():
        assert row[column] is None or nbytes(row[column]) <= limit
    for column in (*limits, "app_trigger"):
        if row[column] is not None:
            json.loads(row[column])
    for column in ("app_duration_ms", "app_cost"):
        value = row[column]
        assert value is None or (type(value) is float and math.isfinite(value) and value >= 0)
