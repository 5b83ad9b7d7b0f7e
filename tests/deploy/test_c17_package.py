"""The package (spec 17 §17.6, C17-086 … C17-088): the sdist and the wheel an index would
get, what serving needs installed, and the systemd unit of docs/deploy.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from needs import cannot_run, free_port

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
# importable only with an extra or the dev extra: serving examples/ needs none of them
NOT_FOR_SERVING = ("pytest", "mypy", "ruff", "hypothesis", "schemathesis", "playwright",
                   "psycopg", "ag-ui-protocol", "jsonpatch", "mcp", "authlib",
                   "build", "twine")  # fmt: skip


@dataclass
class Dist:
    sdist: Path
    wheel: Path
    seconds: float


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """``python -m build``: the sdist, then the wheel built from the sdist (as an index's
    users would build it)."""
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    (sdist,) = out.glob("threadloom-*.tar.gz")
    (wheel,) = out.glob("threadloom-*.whl")
    return Dist(sdist, wheel, time.monotonic() - started)


def _package_files() -> list[str]:
    """Every file of the package in the checkout, as paths under ``src/``."""
    listed = subprocess.run(
        ["git", "ls-files", "src/threadloom"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    ).stdout.split()
    if not listed:  # not a git checkout: the tree as it is
        listed = [str(p.relative_to(ROOT)) for p in (ROOT / "src/threadloom").rglob("*")]
    return sorted(
        p.removeprefix("src/")
        for p in listed
        if (ROOT / p).is_file() and "__pycache__" not in p and not p.endswith(".pyc")
    )


def test_c17_086_the_wheel_and_sdist_are_ready_for_an_index(dist: Dist) -> None:
    """C17-086: ``python -m build`` makes an sdist and a wheel; the wheel carries every file
    of the package (the web UI's templates and static files, ``py.typed``) and the LICENSE
    (Apache-2.0, as its metadata says); the sdist carries the LICENSE; ``twine check
    --strict`` passes both."""
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        missing = [path for path in _package_files() if path not in names]
        assert not missing, f"the wheel lacks {missing}"
        assert "threadloom/py.typed" in names
        assert any(n.startswith("threadloom/server/ui/static/js/") for n in names)
        assert any(n.startswith("threadloom/server/ui/templates/") for n in names)
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        license_text = wheel.read(f"{info}/licenses/LICENSE").decode()
        metadata = wheel.read(f"{info}/METADATA").decode()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0" in license_text
    assert re.search(r"^License-Expression: Apache-2.0$", metadata, re.M)
    assert re.search(r"^License-File: LICENSE$", metadata, re.M)
    with tarfile.open(dist.sdist) as sdist:
        top = sdist.getnames()[0].split("/")[0]
        member = sdist.extractfile(f"{top}/LICENSE")
        assert member is not None and member.read().decode() == license_text

    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    print(
        f"\npython -m build: {dist.sdist.name} ({dist.sdist.stat().st_size // 1024} KiB),"
        f" {dist.wheel.name} ({dist.wheel.stat().st_size // 1024} KiB) in {dist.seconds:.0f} s"
        f"\n{checked.stdout.strip()}"
    )


@pytest.fixture
def serving_venv(dist: Dist, tmp_path: Path) -> Iterator[Path]:
    """A new virtual environment with the wheel and what it requires, nothing else: what
    ``make serve`` installs (it installs the checkout, editable)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            str(dist.wheel),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    yield venv


def test_c17_087_serving_the_examples_needs_only_the_package(serving_venv: Path) -> None:
    """C17-087: the package without extras serves the example project: a real
    ``threadloom serve examples`` in an environment holding only the wheel and its
    requirements runs a turn of the ``support`` agent; nothing of the dev extra or of an
    optional extra is installed."""
    listed = subprocess.run(
        [str(serving_venv / "bin/python"), "-m", "pip", "list", "--format=json"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout  # fmt: skip
    installed = {item["name"].lower().replace("_", "-") for item in json.loads(listed)}
    assert "threadloom" in installed
    assert installed.isdisjoint(NOT_FOR_SERVING), installed & set(NOT_FOR_SERVING)

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    env.pop("OPENAI_API_KEY", None)
    env.pop("ANTHROPIC_API_KEY", None)
    with tempfile.TemporaryDirectory() as work:
        server = subprocess.Popen(
            [str(serving_venv / "bin/threadloom"), "serve", str(ROOT / "examples"),
             "--port", str(port), "--store", f"sqlite:///{work}/serve.db"],
            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                assert server.poll() is None, server.stdout.read() if server.stdout else ""
                try:
                    if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            thread = httpx.post(f"{base}/api/threads", json={"agent_id": "support"}).json()
            url = f"{base}/api/threads/{thread['threadId']}/messages"
            assert httpx.post(url, json={"content": "Where is order A-1001?"}).status_code in (
                200,
                202,
            )
            messages: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                messages = httpx.get(f"{url}?order=asc").json()["messages"]
                if len(messages) == 4 and messages[-1]["status"] == "completed":
                    break
                time.sleep(0.2)
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
            assert "Walnut desk" in str(messages[-1]["content"])
        finally:
            server.send_signal(signal.SIGTERM)
            output = server.communicate(timeout=30)[0].decode(errors="replace")
    assert "Traceback" not in output, output


def _unit_from_docs() -> str:
    """The systemd unit docs/deploy.md shows (its ```ini block under "systemd")."""
    text = DEPLOY_DOC.read_text()
    section = text[text.index("## systemd") :]
    match = re.search(r"```ini\n(.*?)```", section, re.S)
    assert match, "docs/deploy.md has no ```ini block in its systemd section"
    return match.group(1)


def test_c17_088_the_systemd_unit_of_the_docs(tmp_path: Path) -> None:
    """C17-088: the unit in docs/deploy.md passes ``systemd-analyze verify``, stops with
    SIGTERM and gives the node longer than its drain to stop, restarts on failure, and runs
    hardened (no root, no new privileges, a read-only system, its own state directory)."""
    unit = _unit_from_docs()
    options: dict[str, list[str]] = {}
    for line in unit.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            options.setdefault(key.strip(), []).append(value.strip())
    assert options["KillSignal"] == ["SIGTERM"]
    assert options["Restart"] == ["on-failure"]
    assert options["NoNewPrivileges"] == ["yes"]
    assert options["ProtectSystem"] == ["strict"]
    assert options["StateDirectory"] == ["threadloom"]
    assert options.get("DynamicUser") == ["yes"] or options.get("User", ["root"]) != ["root"]
    drain = next(
        float(v.split("=", 1)[1]) for v in options["Environment"]
        if v.startswith("THREADLOOM_DRAIN_SECONDS=")
    )  # fmt: skip
    assert float(options["TimeoutStopSec"][0].rstrip("s")) > drain + 30

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        cannot_run("systemd-analyze is not installed", "the systemd unit check")
    # verify needs ExecStart's program to exist: this checkout's threadloom stands in
    program = Path(sys.executable).with_name("threadloom")
    exec_start = options["ExecStart"][0].split()[0]
    path = tmp_path / "threadloom.service"
    path.write_text(unit.replace(exec_start, str(program)))
    done = subprocess.run(
        [analyze, "verify", str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    # lines about other units of this machine (systemd-analyze loads their dependencies)
    # are not the unit's; a finding about threadloom.service is
    ours = [line for line in done.stdout.splitlines() if "threadloom.service" in line]
    assert done.returncode == 0 and not ours, done.stdout
