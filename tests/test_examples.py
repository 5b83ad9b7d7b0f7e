"""The example project runs offline on the demo model, and the CLI chats with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from threadloom import Runtime
from threadloom.cli import app

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
    assert "refund" in result.output and "39.50" in result.output
    assert "[idle: stop_on_response]" in result.output


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
