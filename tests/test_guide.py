"""Every Python block of docs/guide.md runs as it is (issue 24 item 3): a block that starts
with ``# file: <path>`` is written to that path of a fresh folder; every other block is a
script, run in order in that folder in a subprocess, without provider keys, and must exit 0
(what it prints is not checked here; the guide says what to expect)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sqlite_only  # the scripts' own files
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FILE = re.compile(r"\A# file: (\S+)\n")


def blocks() -> list[str]:
    return BLOCK.findall(GUIDE.read_text(encoding="utf-8"))


def test_the_guide_has_its_sections() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    for title in (
        "## Install",
        "## Models and providers",
        "## Prompts",
        "## Tools",
        "## Agents",
        "## Subagents",
        "## Hooks",
        "## A project folder",
        "## Testing an agent with the scripted model",
        "## Testing a subagent",
        "## Running it",
    ):
        assert title in text
    assert len(blocks()) >= 12


def test_the_guide_shows_how_to_test_a_subagent() -> None:
    """Its section scripts a parent and its children with one provider: the relationship
    name as ``subagent_create``'s ``agent``, parallel calls answered by a function of the
    request (the block itself runs in the test below)."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Testing a subagent", 1)[1].split("\n## ", 1)[0]
    [code] = BLOCK.findall(section)
    assert '"subagent_create"' in code and '"agent": "research"' in code
    assert 'relationship="research"' in code and 'request.metadata["prompt"]' in code
    assert "in parallel" in section
    assert "`ai_human`) and `expose_as_tool" not in text  # a child agent is dual_ai only


def test_every_python_block_of_the_guide_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    scripts = 0
    for number, code in enumerate(blocks(), 1):
        target = FILE.match(code)
        if target is not None:
            path = tmp_path / target.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code, encoding="utf-8")
            continue
        script = tmp_path / f"block_{number:02}.py"
        script.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, script.name],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"block {number}:\n{code}\n{done.stdout}\n{done.stderr}"
        scripts += 1
    assert scripts >= 9
