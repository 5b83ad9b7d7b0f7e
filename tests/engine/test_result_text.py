"""The parent's queued result message (spec 06 §6.8.3) read back: a node whose blocking
call missed the notification of a child's result rebuilds it from that message
(``node/relay.py``), so ``parse_result_text`` must invert ``result_text`` exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadloom.engine.run.results import SessionResult, parse_result_text, result_text

PATHS = st.lists(st.text(min_size=1, max_size=20).filter(lambda p: "\n" not in p), max_size=3)


@given(success=st.booleans(), text=st.text(max_size=200), paths=PATHS)
def test_a_queued_result_reads_back_as_it_was_written(
    success: bool, text: str, paths: list[str]
) -> None:
    content = result_text("child-1", SessionResult(success, text, "done"), paths)
    assert parse_result_text("child-1", content) == (success, text)


def test_other_messages_are_no_result_of_that_child() -> None:
    content = result_text("child-1", SessionResult(True, "42", "done"), [])
    assert parse_result_text("child-2", content) is None
    assert parse_result_text("child-1", "Subagent completed.") is None
    assert parse_result_text("child-1", content.replace("returned", "sent")) is None
