"""The example project runs offline on the demo model, and the CLI chats with it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from threadloom import Runtime
from threadloom.cli.commands import app

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


async def test_support_agent_looks_up_an_order(db_url: str) -> None:
    runtime = await Runtime.open(db_url, project=EXAMPLES)
    try:
        state = await runtime.create_thread("support")
        await runtime.send_message(state.thread_id, "Where is order A-1001?")
        await runtime.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc", limit=None)
        roles = [(m.role, m.name) for m in page.messages]
        assert roles == [
            ("user", None),
            ("assistant", "Support"),
            ("tool", "lookup_order"),
            ("assistant", "Support"),
        ]
        assert "Walnut desk" in (page.messages[-1].content or "")
        status = await state.status()
        assert (status.state, status.reason) == ("idle", "stop_on_response")
        logs = await runtime.store.list_logs(state.thread_id, kind="app")
        assert [row.model for row in logs] == ["orders.lookup"]
    finally:
        await runtime.close()


async def test_writer_and_critic_end_the_session(db_url: str) -> None:
    runtime = await Runtime.open(db_url, project=EXAMPLES)
    try:
        state = await runtime.create_thread("writer_critic")
        await runtime.send_message(state.thread_id, "Why durable threads matter")
        await runtime.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc", limit=None)
        names = [m.name for m in page.messages if m.role != "tool"]
        assert names == [None, "Writer", "Critic", "Writer", "Critic"]
        assert page.messages[1].reasoning_content  # the writer's reasoning is persisted
        status = await state.status()
        assert (status.state, status.reason) == ("idle", "session_stop")
    finally:
        await runtime.close()


async def test_support_runs_the_warranty_research_pair_as_a_subagent(tmp_path: Path) -> None:
    """The support agent's blocking ``research`` relationship: one ``subagent_create`` call,
    a researcher/reviewer session in the child (lookup, draft, review, revision,
    ``submit_findings``), and the support agent answers with the submitted findings."""
    runtime = await Runtime.open(f"sqlite:///{tmp_path / 'examples.db'}", project=EXAMPLES)
    try:
        state = await runtime.create_thread("support")
        await runtime.send_message(state.thread_id, "Research the warranty for order A-1001")
        await runtime.wait_idle(state.thread_id, timeout=10)
        (entry,) = await state.get_children()
        assert (entry.relationship, entry.name, entry.status) == (
            "research",
            "warranty_research",
            "idle",
        )
        assert (entry.blocking, entry.resumable, entry.thread_name) == (
            True,
            True,
            "Warranty A-1001",
        )
        child = await runtime.thread(entry.reference)
        assert child.parent_thread_id == state.thread_id
        status = await child.status()
        assert (status.state, status.reason) == ("idle", "session_stop")
        talk = (await child.get_messages(order="asc", limit=None)).messages
        assert [(m.role, m.name) for m in talk] == [
            ("user", None),  # the support agent's instruction
            ("assistant", "Researcher"),  # warranty_terms call
            ("tool", "warranty_terms"),
            ("assistant", "Researcher"),  # first draft
            ("user", "Reviewer"),  # asks for the exclusions
            ("assistant", "Researcher"),  # revised draft
            ("user", "Reviewer"),  # submit_findings call
            ("tool", "submit_findings"),
        ]
        assert "A-1001" in (talk[0].content or "")
        findings = talk[-1].content or ""
        assert findings == talk[5].content and "does not cover scratches" in findings

        parent = (await state.get_messages(order="asc", limit=None)).messages
        assert [(m.role, m.name) for m in parent] == [
            ("user", None),
            ("assistant", "Support"),
            ("tool", "subagent_create"),
            ("assistant", "Support"),
        ]
        call, answer = parent[2], parent[3]
        assert call.tool_status == "success" and call.subagent_id == entry.reference
        assert call.content == f"{findings}\n\nReference: {entry.reference}"
        assert findings in (answer.content or "")
        status = await state.status()
        assert (status.state, status.reason) == ("idle", "stop_on_response")
        lookups = await runtime.store.list_logs(child.thread_id, kind="app")
        assert [row.model for row in lookups] == ["warranty.lookup"]
    finally:
        await runtime.close()


def test_cli_run_one_message(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(EXAMPLES),
            "--agent",
            "support",
            "--store",
            f"sqlite:///{tmp_path / 'cli.db'}",
            "-m",
            "Please refund A-1002",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Support: Done. Refund of 39.50 for A-1002 issued." in result.output
    assert "stop_on_response" not in result.output  # the end of a turn needs no code


def test_cli_reports_an_unknown_agent(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(EXAMPLES),
            "--agent",
            "nobody",
            "--store",
            f"sqlite:///{tmp_path / 'cli.db'}",
            "-m",
            "hi",
        ],
    )
    assert result.exit_code != 0
    assert "nobody" in result.output


async def test_the_demo_model_streams_at_a_readers_pace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For people the demo model writes a chunk every ``DEMO_CHUNK_SECONDS`` (0.06 s when
    unset), so a served demo shows a reply being written: its 11-chunk greeting takes at
    least 10 pauses; the tests run it with 0 (tests/conftest.py)."""
    monkeypatch.delenv("DEMO_CHUNK_SECONDS")
    runtime = await Runtime.open(f"sqlite:///{tmp_path / 'paced.db'}", project=EXAMPLES)
    try:
        state = await runtime.create_thread("support")
        started = time.monotonic()
        await runtime.send_message(state.thread_id, "hi")
        await runtime.wait_idle(state.thread_id, timeout=20)
        took = time.monotonic() - started
        reply = (await state.get_messages(order="asc", limit=None)).messages[-1]
        assert reply.content is not None and reply.content.startswith("Hello! I can look up")
        assert took >= 10 * 0.06  # a lower bound: the pauses, whatever the machine's speed
    finally:
        await runtime.close()
