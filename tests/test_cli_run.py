"""``threadloom run`` as a user runs it: the real command in a subprocess, on a project
folder written by the test and an SQLite file of its own. A failed run prints its cause and
exits 1 (spec 04 §4.21, case C04-111); a missing key is named when the project loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

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
