"""The command line as a user runs it: the real ``threadloom`` in a subprocess (issue 24
item 4) — ``init`` writes a project that ``run`` answers offline at once and whose own
tests pass; ``--version``; a project with errors gives its findings and exit code 2; and,
on a pseudo-terminal, the spinner while the model works, speaker labels for both sides of
a ``dual_ai`` agent, and line editing at the prompt."""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from textwrap import dedent

import pytest

import threadloom
from test_cli_run import run_cli, threadloom_command

pytestmark = pytest.mark.sqlite_only  # the commands' own stores: files of the test
ROOT = Path(__file__).resolve().parents[1]


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text).lstrip(), encoding="utf-8")
    return root


def test_init_then_run_answers_offline(tmp_path: Path) -> None:
    made = run_cli("init", "shop", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "threadloom run shop" in made.stdout
    for name in ("models/models.py", "tools/orders.py", "prompts/prompts.py"):
        assert (tmp_path / "shop" / name).is_file()
    assert (tmp_path / "shop" / "tests" / "test_assistant.py").is_file()

    done = run_cli("run", "shop", "-m", "Where is order A-1001?", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:] == [
        "You: Where is order A-1001?",
        "  ⚙ lookup_order …",
        "  ⚙ lookup_order → success",
        "Assistant: I checked: order A-1001 is shipped, arriving Thursday.",
    ]
    assert done.stderr == ""
    assert (tmp_path / "threadloom.db").is_file()  # the default store, in the current folder


def test_the_projects_own_tests_pass(tmp_path: Path) -> None:
    """They pass, without a warning: the plugin pytest-asyncio (installed here) is not one
    they need, and it would warn on every run that its loop scope is unset."""
    assert run_cli("init", "shop", cwd=tmp_path).returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "shop/tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH" or "tests" not in v},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("2 passed in ")
    assert "warning" not in (done.stdout + done.stderr).lower()  # pytest-asyncio is installed


def test_init_refuses_a_folder_with_files(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    done = run_cli("init", "taken", cwd=tmp_path)
    assert done.returncode == 2
    assert "already exists and is not an empty folder" in done.stderr
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"


def test_version(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"threadloom {threadloom.__version__}\n")


def test_no_arguments_shows_the_commands(tmp_path: Path) -> None:
    done = run_cli(cwd=tmp_path)
    for command in (
        "init",
        "run",
        "serve",
        "users",
        "keys",
        "backup",
        "restore",
        "migrate",
        "schedules",
        "triggers",
        "webhooks",
    ):
        assert command in done.stdout + done.stderr


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["init"],
        ["run"],
        ["serve"],
        ["retention"],
        ["users"],
        ["users", "create"],
        ["users", "list"],
        ["users", "delete"],
        ["users", "set-roles"],
        ["users", "revoke-oauth"],
        ["users", "quota"],
        ["keys"],
        ["keys", "create"],
        ["keys", "list"],
        ["keys", "revoke"],
        ["backup"],
        ["restore"],
        ["migrate"],
        ["schedules"],
        ["schedules", "list"],
        ["schedules", "show"],
        ["schedules", "create"],
        ["schedules", "update"],
        ["schedules", "delete"],
        ["schedules", "fire"],
        ["triggers"],
        ["triggers", "list"],
        ["triggers", "show"],
        ["triggers", "create"],
        ["triggers", "update"],
        ["triggers", "delete"],
        ["webhooks"],
        ["webhooks", "list"],
        ["webhooks", "add"],
        ["webhooks", "remove"],
        ["webhooks", "dead"],
        ["webhooks", "redeliver"],
    ],
)
def test_help_speaks_the_users_words(tmp_path: Path, command: list[str]) -> None:
    """No spec references; a flag without a type (``<bool>``); an option's value named for
    what it is (``--store, --db URL``); sentences wrapped to the terminal, not where the source
    broke them: each command of a group listed on one line, its summary whole."""
    done = run_cli(*command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "spec " not in done.stdout and "§" not in done.stdout
    assert "<bool>" not in done.stdout and "<str>" not in done.stdout.split("Options:")[-1]
    assert "╭" not in done.stdout  # plain text, no boxes
    if "--store" in done.stdout:
        assert re.search(r"--store(, --db)? URL", done.stdout)
    if "Commands:" in done.stdout:
        listed = done.stdout.split("Commands:\n", 1)[1].splitlines()
        assert listed and all(re.fullmatch(r"  [a-z-]+ +[A-Z][^ ].*\.", row) for row in listed)


BROKEN = {
    "tools/broken.py": """
        def oops(:
            pass
    """,
    "prompts/p.py": """
        from threadloom import Prompt
        p = Prompt(name="p", model="nope", system="x", tools=["weathr"])
    """,
    "agents/a.py": """
        from threadloom import Agent, Side
        a = Agent(name="a", side_a=Side(prompt="p"))
    """,
}


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_broken_project_gives_its_findings_and_exit_2(tmp_path: Path, command: str) -> None:
    project = write(tmp_path / "broken", BROKEN)
    args = ["--port", "1"] if command == "serve" else ["-m", "hi"]
    done = run_cli(command, str(project), *args, "--store", "sqlite:///b.db", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stderr.splitlines()[0] == "The project does not load:"
    assert "  tools/broken.py: SyntaxError" in done.stderr
    assert '  prompts/p.py: Prompt "p": model "nope" is not defined' in done.stderr
    assert '  prompts/p.py: Prompt "p": tool "weathr" is not defined' in done.stderr


def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """Another program listens on the port: ``serve`` says so before its banner (whose URL
    would be the other program's), in one line, and exits 2 as other start-up refusals do
    — not uvicorn's ``[Errno 98]`` and exit 3 after the banner."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(
            "serve", "--port", str(port), "--store", "sqlite:///p.db", cwd=tmp_path, timeout=60
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # no banner
    assert done.stderr.splitlines() == [
        f"threadloom serve: cannot listen on 127.0.0.1:{port}: address already in use (is"
        " another server running there?); stop it or choose another port with --port"
    ]


def test_run_names_the_agents_to_choose_from(tmp_path: Path) -> None:
    done = run_cli(
        "run", str(ROOT / "examples"), "-m", "hi", "--store", "sqlite:///e.db", cwd=tmp_path
    )
    assert done.returncode == 2
    assert "support" in done.stderr and "writer_critic" in done.stderr
    assert "warranty_research" not in done.stderr  # a subagent: not one to start
    assert "--agent" in done.stderr


WITH_SUBAGENT = {
    "models/m.py": """
        from threadloom import Model
        from threadloom.testing import ScriptedProvider

        m = Model(name="m", provider=ScriptedProvider(), model="default")
    """,
    "prompts/p.py": """
        from threadloom import Prompt
        from threadloom.define import Subagent
        zed_prompt = Prompt(name="zed_prompt", model="m", system="x", tools=[Subagent("aide")])
        aide_prompt = Prompt(name="aide_prompt", model="m", system="y")
    """,
    "agents/a.py": """
        from threadloom import Agent, Side
        zed = Agent(name="zed", side_a=Side(prompt="zed_prompt", label="Zed"))
        aide = Agent(
            name="aide",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="helps",
            side_a=Side(prompt="aide_prompt", label="Aide"),
            side_b=Side(prompt="aide_prompt", label="Boss"),
        )
    """,
}


def test_run_starts_the_one_agent_that_is_not_a_subagent(tmp_path: Path) -> None:
    """A project of one primary agent and a subagent (whose name sorts first): ``run``
    without ``--agent`` talks to the primary one, as the UI's New thread does."""
    project = write(tmp_path / "pair", WITH_SUBAGENT)
    done = run_cli("run", str(project), "-m", "hi", "--store", "sqlite:///p.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Zed: Test response received." in done.stdout.splitlines()


def test_run_resumes_a_thread_with_its_own_agent(tmp_path: Path) -> None:
    assert run_cli("init", "shop", cwd=tmp_path).returncode == 0
    first = run_cli("run", "shop", "-m", "Where is order A-1002?", cwd=tmp_path)
    thread = first.stdout.splitlines()[0].rsplit(" ", 1)[-1]
    again = run_cli("run", "shop", "--thread", thread, "-m", "thanks", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    shown = again.stdout.splitlines()
    assert "You: Where is order A-1002?" in shown  # the history is shown on resume
    assert "Assistant: I checked: order A-1002 is being packed, shipping tomorrow." in shown
    wrong = run_cli("run", "shop", "--thread", thread, "--agent", "other", "-m", "x", cwd=tmp_path)
    assert wrong.returncode == 2
    assert "belongs to agent 'assistant', not 'other'" in wrong.stderr


def test_dual_ai_shows_both_speakers(tmp_path: Path) -> None:
    done = run_cli(
        "run",
        str(ROOT / "examples"),
        "--agent",
        "writer_critic",
        "-m",
        "Write about tea",
        "--store",
        "sqlite:///w.db",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    speakers = [line.split(":", 1)[0] for line in done.stdout.splitlines() if ": " in line]
    assert "Writer" in speakers and "Critic" in speakers
    assert speakers.index("Writer") < speakers.index("Critic")
    assert "(the session ended)" in done.stdout


# -- on a terminal ----------------------------------------------------------------------------

SLOW = {
    "models/m.py": """
        from threadloom import Model
        from threadloom.testing import Reply, ScriptedProvider

        def slow(request):
            return Reply.text(f"echo: {request.messages[-1].text}", delay=1.5)

        m = Model(name="m", provider=ScriptedProvider(slow), model="slow")
    """,
    "prompts/p.py": """
        from threadloom import Prompt
        helper_prompt = Prompt(name="helper_prompt", model="m", system="x")
    """,
    "agents/a.py": """
        from threadloom import Agent, Side
        helper = Agent(name="helper", side_a=Side(prompt="helper_prompt", label="Helper"))
    """,
}


def on_a_terminal(args: list[str], cwd: Path, keys: list[tuple[str, str]]) -> str:
    """Run ``threadloom ARGS`` on a pseudo-terminal; for each ``(wait_for, keys)`` wait until
    the output so far contains ``wait_for``, then type ``keys``. The output, as received."""
    main, child = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(TERM="xterm", COLUMNS="120", LINES="40")
    proc = subprocess.Popen(
        [*threadloom_command(), *args], cwd=cwd, stdin=child, stdout=child, stderr=child, env=env
    )
    os.close(child)
    output = b""
    seen = 0  # each wait looks past what the one before it matched
    try:
        for wait_for, typed in [*keys, ("\x00never", "")]:
            deadline = time.monotonic() + 30
            while wait_for.encode() not in plain(output)[seen:]:
                if time.monotonic() > deadline:
                    if wait_for == "\x00never":
                        break
                    raise AssertionError(f"waited for {wait_for!r}; got {output!r}")
                ready, _, _ = select.select([main], [], [], 0.1)
                if ready:
                    try:
                        chunk = os.read(main, 4096)
                    except OSError:  # the child closed the terminal
                        chunk = b""
                    if not chunk and proc.poll() is not None:
                        break
                    output += chunk
                elif proc.poll() is not None:
                    break
            found = plain(output).find(wait_for.encode(), seen)
            seen = found + len(wait_for) if found >= 0 else seen
            if typed:
                os.write(main, typed.encode())
            if wait_for == "\x00never":
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return plain(output).decode(errors="replace")


ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def plain(output: bytes) -> bytes:
    """Terminal output without its escape sequences (colours, cursor moves)."""
    return ANSI.sub(b"", output)


def test_on_a_terminal_a_spinner_runs_and_the_prompt_edits(tmp_path: Path) -> None:
    project = write(tmp_path / "slow", SLOW)
    left = "\x1b[D"
    output = on_a_terminal(
        ["run", str(project), "--store", "sqlite:///t.db"],
        tmp_path,
        [("You: ", f"ab{left}X\r"), ("echo: aXb", ""), ("You: ", "/quit\r")],
    )
    assert "Helper is thinking" in output  # the spinner's text
    assert any(frame in output for frame in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # and its frames
    assert "Helper: echo: aXb" in output  # the left arrow moved the cursor: readline
