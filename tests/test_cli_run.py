"""``threadloom run`` as a user runs it: the real command in a subprocess, on a project
folder written by the test and an SQLite file of its own. A failed run prints its cause and
exits 1 (spec 04 §4.21, case C04-111); a missing key is named when the project loads."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

from threadloom import Runtime

pytestmark = pytest.mark.sqlite_only  # the command's own store: a file of the test


def threadloom_command() -> list[str]:
    """The installed ``threadloom`` script of this environment (else the module)."""
    script = Path(sys.executable).with_name("threadloom")
    return [str(script)] if script.exists() else [sys.executable, "-m", "threadloom.cli"]


def run_cli(
    *args: str,
    cwd: Path,
    input: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment.update(env or {})
    environment.setdefault("COLUMNS", "200")
    return subprocess.run(
        [*threadloom_command(), *args],
        cwd=cwd,
        input=input,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def write_project(root: Path, provider: str) -> Path:
    """A one-agent project whose model is ``provider`` (``openai`` or ``scripted``)."""
    files = {
        "models/models.py": f"""
            from threadloom import Model
            fast = Model(name="fast", provider="{provider}", model="gpt-4o-mini")
        """,
        "prompts/prompts.py": """
            from threadloom import Prompt
            helper_prompt = Prompt(name="helper_prompt", model="fast", system="You help.")
        """,
        "agents/agents.py": """
            from threadloom import Agent, Side
            helper = Agent(name="helper", side_a=Side(prompt="helper_prompt"), side_b=Side())
        """,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip(), encoding="utf-8")
    return root


def test_c04_111_a_failed_run_prints_its_cause_and_exits_1(tmp_path: Path) -> None:
    project = write_project(tmp_path / "keyless", "openai")
    done = run_cli("run", str(project), "-m", "hi", "--store", "sqlite:///k.db", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Model "fast" (provider openai): OPENAI_API_KEY is not set' in done.stderr
    assert 'The run failed: Model "fast" (openai): OPENAI_API_KEY is not set' in done.stderr
    assert "Traceback" not in done.stderr

    scripted = write_project(tmp_path / "scripted", "scripted")
    done = run_cli("run", str(scripted), "-m", "hi", "--store", "sqlite:///s.db", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The run failed" not in done.stderr


FAILING_TOOL = {
    "models/m.py": """
        from threadloom import Model
        from threadloom.testing import Call, Reply, ScriptedProvider

        def reply(request):
            last = request.messages[-1]
            if last.role == "tool":
                return Reply.text(f"The tool said: {last.text}")
            return Reply.tool_calls(Call("refund", {"order_id": "A-1", "amount": -1}))

        m = Model(name="m", provider=ScriptedProvider(reply), model="scripted")
    """,
    "tools/refunds.py": """
        from threadloom import tool

        @tool
        def refund(order_id: str, amount: float) -> str:
            \"""Refund an order.\"""
            if amount <= 0:
                raise ValueError("the amount must be positive")
            return "refunded"
    """,
    "prompts/p.py": """
        from threadloom import Prompt
        p = Prompt(name="p", model="m", system="x", tools=["refund"])
    """,
    "agents/a.py": """
        from threadloom import Agent, Side
        a = Agent(name="a", side_a=Side(prompt="p", label="Shop"), side_b=Side())
    """,
}


def test_a_failed_tool_call_shows_what_the_model_was_told_without_a_traceback(
    tmp_path: Path,
) -> None:
    """A tool that raises (the documented way to tell the model it failed): the chat line
    shows the error the model got; stderr has one line naming the exception and where it
    was raised, no traceback; ``--verbose`` shows the traceback (once)."""
    project = tmp_path / "shop"
    for name, text in FAILING_TOOL.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip(), encoding="utf-8")
    done = run_cli("run", "shop", "-m", "refund A-1", "--store", "sqlite:///f.db", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    told = "Failed to execute tool: the amount must be positive"
    assert done.stdout.splitlines()[1:] == [
        "You: refund A-1",
        "  ⚙ refund …",
        f"  ⚙ refund → error: {told}",
        f"Shop: The tool said: {told}",
    ]
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("WARNING:     threadloom.tools: tool refund raised ValueError")
    assert line.endswith(
        "the amount must be positive (at shop/tools/refunds.py:7; --verbose shows the traceback)"
    )

    verbose = run_cli("run", "shop", "-m", "again", "-v", "--store", "sqlite:///v.db", cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    assert verbose.stderr.count("Traceback (most recent call last)") == 1
    assert 'raise ValueError("the amount must be positive")' in verbose.stderr


def test_a_locked_sqlite_file_is_refused_with_exit_2_as_serve_refuses_it(tmp_path: Path) -> None:
    """Another process runs the file's threads (it holds ``<file>.lock``): ``threadloom run``
    is refused before anything runs, naming that process, with exit code 2 — as
    ``threadloom serve`` is (spec 12 §12.1 rule 4) — not 1, which says a run failed."""
    project = write_project(tmp_path / "scripted", "scripted")
    url = f"sqlite:///{tmp_path / 'held.db'}"

    async def refused_while_held() -> subprocess.CompletedProcess[str]:
        async with await Runtime.open(url, project=project):  # holds the lock
            return await asyncio.to_thread(
                run_cli, "run", str(project), "-m", "hi", "--store", url, cwd=tmp_path
            )

    done = asyncio.run(refused_while_held())
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pid {os.getpid()}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_connection_error_says_what_failed_once(tmp_path: Path) -> None:
    """The model's server refuses the connection: the run fails with one line that says
    "Connection error" once and then the transport's error — not the SDK's own
    "Connection error." after it again."""
    project = write_project(tmp_path / "remote", "openai")
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        done = run_cli(
            "run", str(project), "-m", "hi", "--store", "sqlite:///c.db", cwd=tmp_path,
            env={"OPENAI_API_KEY": "sk-not-used", "OPENAI_BASE_URL": base},
        )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    failed = next(line for line in done.stderr.splitlines() if line.startswith("The run failed"))
    assert failed.startswith(
        'The run failed: Model "fast" (openai): Connection error: ConnectError: '
    ), failed
    assert failed.count("Connection error") == 1


MULTINODE_PROJECT = Path(__file__).resolve().parent / "multinode" / "project"


@pytest.mark.parametrize(("answer", "paid"), [("y\n", ["5 bo"]), ("n\ntoo much\n", [])])
def test_c14_023_the_terminal_chat_asks_for_each_approval(
    tmp_path: Path, answer: str, paid: list[str]
) -> None:
    """C14-023: ``threadloom run`` of the ``payer`` agent: the parked call is shown with its
    arguments and the prompt asks; ``y`` runs it once, ``n`` with a reason rejects it; the
    agent answers either way and the chat goes on."""
    done = run_cli(
        *("run", str(MULTINODE_PROJECT), "--agent", "payer", "--store", "sqlite:///c.db"),
        cwd=tmp_path,
        input=f"pay bo\n{answer}/quit\n",
        env={"THREADLOOM_TEST_GATE_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '⏸ pay {"amount": 5, "to": "bo"}' in done.stdout
    assert ("approved" if paid else "rejected") in done.stdout
    assert "Agent: done" in done.stdout
    written = tmp_path / "paid.txt"
    assert (written.read_text().splitlines() if written.exists() else []) == paid
