"""The persisted reasoning shape and every row of the §5.6.2 conversion table (spec 05 §5.6)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from threadloom.providers.reasoning import (
    FORMAT_ANTHROPIC,
    FORMAT_GEMINI,
    FORMAT_OPENAI_RESPONSES,
    ReasoningSupply,
    ReasoningTarget,
    anthropic_supply,
    anthropic_thinking_blocks,
    compatible_content_supply,
    details_for,
    encrypted_detail,
    omit_supply,
    openrouter_supply,
    responses_reasoning_items,
    responses_supply,
    scripted_supply,
    summary_detail,
    summary_text,
    supply_reasoning,
    text_detail,
)

SIGNED = text_detail("th", format=FORMAT_ANTHROPIC, signature="sig", index=0)
UNSIGNED = text_detail("raw", format=FORMAT_ANTHROPIC, index=1)
REDACTED = encrypted_detail("R", format=FORMAT_ANTHROPIC, index=2)
SUMMARY_1 = summary_detail("s1", format=FORMAT_OPENAI_RESPONSES, id="rs_1", index=0)
SUMMARY_2 = summary_detail("s2", format=FORMAT_OPENAI_RESPONSES, id="rs_1", index=1)
ENCRYPTED_1 = encrypted_detail("E", format=FORMAT_OPENAI_RESPONSES, id="rs_1", index=2)
SUMMARY_OTHER = summary_detail("o", format=FORMAT_OPENAI_RESPONSES, id="rs_2")
SUMMARY_NO_ID = summary_detail("noid", format=FORMAT_OPENAI_RESPONSES)
GEMINI = text_detail("g", format=FORMAT_GEMINI)
FOREIGN = {"type": "vendor.blob", "data": "x", "format": "unknown"}

ALL: list[dict[str, Any]] = [
    SIGNED,
    UNSIGNED,
    REDACTED,
    SUMMARY_1,
    SUMMARY_2,
    ENCRYPTED_1,
    SUMMARY_OTHER,
    SUMMARY_NO_ID,
    GEMINI,
    FOREIGN,
]


def test_detail_builders_produce_the_persisted_shape() -> None:
    assert SIGNED == {
        "type": "reasoning.text",
        "text": "th",
        "signature": "sig",
        "format": "anthropic-claude-v1",
        "index": 0,
    }
    assert SUMMARY_1 == {
        "type": "reasoning.summary",
        "summary": "s1",
        "format": "openai-responses-v1",
        "id": "rs_1",
        "index": 0,
    }
    assert encrypted_detail("D", format="unknown") == {
        "type": "reasoning.encrypted",
        "data": "D",
        "format": "unknown",
    }


def test_details_for_filters_by_format_and_copies() -> None:
    picked = details_for(FORMAT_ANTHROPIC, ALL)
    assert picked == [SIGNED, UNSIGNED, REDACTED]
    picked[0]["text"] = "changed"
    assert SIGNED["text"] == "th"
    assert details_for(FORMAT_ANTHROPIC, None) == []


def test_summary_text_joins_text_and_summary_values() -> None:
    assert summary_text([SIGNED, REDACTED, SUMMARY_1, {"type": "reasoning.text", "text": ""}]) == (
        "th\ns1"
    )
    assert summary_text([REDACTED]) is None
    assert summary_text(None) is None


# -- one test per row of the table ----------------------------------------------------------


def test_row_scripted_supplies_both_unchanged() -> None:
    before = copy.deepcopy(ALL)
    supply = supply_reasoning("scripted", "why", ALL)
    assert supply == scripted_supply("why", ALL)
    assert supply.details == ALL and supply.text == "why" and supply.wire == []
    assert supply.details is not ALL and before == ALL
    assert supply_reasoning("scripted", None, None) == ReasoningSupply()


def test_row_openai_dialect_omits_everything() -> None:
    supply = supply_reasoning("openai", "why", ALL)
    assert supply == omit_supply("why", ALL) == ReasoningSupply()
    assert supply.empty


def test_row_openrouter_sends_reasoning_entries_and_text_only_without_them() -> None:
    supply = supply_reasoning("openrouter", "why", [SIGNED, FOREIGN, ENCRYPTED_1])
    assert supply == openrouter_supply("why", [SIGNED, FOREIGN, ENCRYPTED_1])
    assert supply.details == [SIGNED, ENCRYPTED_1]  # unchanged, any format
    assert supply.text is None  # a detail was sent
    fallback = supply_reasoning("openrouter", "why", [FOREIGN])
    assert (fallback.details, fallback.text) == (None, "why")
    assert supply_reasoning("openrouter", None, None).empty


def test_row_compatible_reasoning_content_sends_text_or_converts_details() -> None:
    target: ReasoningTarget = "compatible-reasoning-content"
    assert supply_reasoning(target, "why", ALL) == ReasoningSupply(text="why")
    converted = supply_reasoning(target, None, [summary_detail("sum", format="unknown")])
    assert converted == compatible_content_supply(None, [summary_detail("sum", format="unknown")])
    assert (converted.text, converted.details, converted.wire) == ("sum", None, [])
    assert supply_reasoning(target, None, [SIGNED, SUMMARY_1]).text == "th\ns1"
    assert supply_reasoning(target, None, None).empty


def test_row_compatible_none_omits_everything() -> None:
    assert supply_reasoning("compatible", "why", ALL) == ReasoningSupply()


def test_row_openai_responses_converts_its_own_entries_into_items() -> None:
    supply = supply_reasoning("openai-responses", "why", ALL)
    assert supply == responses_supply("why", ALL)
    assert supply.text is None and supply.details is None
    assert supply.wire == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "s1"},
                {"type": "summary_text", "text": "s2"},
            ],
            "encrypted_content": "E",
        },
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "o"}]},
    ]
    # C05-028: anthropic details give no item
    assert responses_reasoning_items([SIGNED, REDACTED]) == []


def test_row_anthropic_converts_signed_text_and_encrypted_only() -> None:
    supply = supply_reasoning("anthropic", "why", ALL)
    assert supply == anthropic_supply("why", ALL)
    assert supply.text is None and supply.details is None
    assert supply.wire == [
        {"type": "thinking", "thinking": "th", "signature": "sig"},
        {"type": "redacted_thinking", "data": "R"},
    ]
    # C05-031: a responses detail or unsigned text gives no block
    assert anthropic_thinking_blocks([UNSIGNED, SUMMARY_1, ENCRYPTED_1]) == []


@pytest.mark.parametrize(
    "target",
    [
        "scripted",
        "openai",
        "openrouter",
        "compatible",
        "compatible-reasoning-content",
        "openai-responses",
        "anthropic",
        "gemini",
    ],
)
def test_no_row_modifies_its_input(target: Any) -> None:
    details = copy.deepcopy(ALL)
    supply = supply_reasoning(target, "why", details)
    assert details == ALL
    for produced in (supply.details or []) + supply.wire:
        assert all(produced is not original for original in details)


def test_unknown_target_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown reasoning target"):
        supply_reasoning("no-such-row", None, None)  # type: ignore[arg-type]


def test_malformed_entries_are_ignored() -> None:
    junk: list[Any] = ["text", 3, None, {"format": FORMAT_ANTHROPIC}]
    assert anthropic_thinking_blocks(junk) == []
    assert responses_reasoning_items(junk) == []
    assert summary_text(junk) is None
    assert openrouter_supply("t", junk) == ReasoningSupply(text="t")
