"""Real third-party Node.js clients for the interop tests, installed once per lock file, and
the real ``threadloom serve`` they talk to (``tests/server/test_serve.py``'s ``spawn_server``).

A client folder beside the tests (``agui_node/``, ``mcp_node/``) keeps a ``package.json`` and
its ``package-lock.json``; :func:`installed` copies them into a cache folder keyed by their
digest (``~/.cache/threadloom-tests/<name>-<digest>``) and runs ``npm ci`` there once, so a
test run pays the registry only when the lock file changes. Without ``node`` and ``npm`` (20
or later) a test is skipped with the reason; under ``CI=true`` that is a failure
(``needs.cannot_run``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import textwrap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from needs import cannot_run

NPM_TIMEOUT_S = 300


def _serve_harness() -> Any:
    """``tests/server/test_serve.py`` (its ``spawn_server``), loaded under a name of its
    own: no ``sys.path`` change that could make another folder's ``conftest`` shadow."""
    path = Path(__file__).resolve().parents[1] / "server" / "test_serve.py"
    spec = importlib.util.spec_from_file_location("threadloom_tests_serve_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


spawn_server = _serve_harness().spawn_server


@contextlib.contextmanager
def serving(
    project: Path | Mapping[str, str],
    db_url: str,
    token: str,
    folder: Path | None = None,
    stop_timeout: float = 60,
    **env: str,
) -> Iterator[str]:
    """A real ``threadloom serve`` (its base URL) on a project folder, or on the files of
    ``project`` (path → text, dedented) written into ``folder``; credentials required,
    ``token`` the admin token, ``env`` more settings. Stopped with SIGTERM, its output
    free of tracebacks."""
    if not isinstance(project, Path):
        assert folder is not None, "files need a folder to be written into"
        for name, text in project.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(textwrap.dedent(text))
        project = folder
    proc, base = spawn_server(
        project, db_url, THREADLOOM_AUTH="required", THREADLOOM_ADMIN_TOKEN=token, **env
    )
    try:
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=stop_timeout)
        assert b"Traceback" not in output, output.decode(errors="replace")


def require_node(what: str) -> tuple[str, str]:
    """``node`` and ``npm`` (20 or later): skipped without them, failing under CI=true."""
    node, npm = shutil.which("node"), shutil.which("npm")
    problem = None
    if node is None or npm is None:
        problem = f"node and npm are needed to run {what}"
    else:
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
            problem = f"node 20 or later is needed, this is {version.strip()}"
    if problem is not None:
        cannot_run(problem, f"the interop tests of {what}")
    assert node is not None and npm is not None
    return node, npm


def installed(here: Path, what: str, scripts: Iterable[str] | None = None) -> tuple[str, Path]:
    """``node`` and a folder with the packages of ``here``'s lock file installed (``npm ci``,
    once per lock file), the ``scripts`` of ``here`` copied in beside them on every call (all
    its other files when ``None``), so an edited script runs without a new install."""
    node, npm = require_node(what)
    lock = (here / "package-lock.json").read_bytes() + (here / "package.json").read_bytes()
    digest = hashlib.sha256(lock).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    folder = cache / "threadloom-tests" / f"{here.name.replace('_', '-')}-{digest}"
    stamp = folder / ".installed"
    folder.mkdir(parents=True, exist_ok=True)
    # one install at a time: parallel test workers (pytest-xdist) that need the same lock
    # file wait for the first one's ``npm ci`` instead of racing it in the same folder
    with (folder.parent / f"{folder.name}.lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not stamp.exists():
            for name in ("package.json", "package-lock.json"):
                shutil.copy(here / name, folder / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=NPM_TIMEOUT_S,
            )
            if done.returncode != 0:
                raise AssertionError(f"npm ci failed:\n{done.stdout}\n{done.stderr}")
            stamp.write_text(digest)
    # the install is shared by every checkout of the machine: the scripts go into a folder
    # of this checkout's own beside it (node_modules linked), or one checkout's test would
    # run another's script; and one of each test worker's (pytest-xdist), or one worker
    # would copy a script over while another's node reads it
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    checkout = hashlib.sha256(f"{here.resolve()}{worker}".encode()).hexdigest()[:12]
    own = folder.parent / "scripts" / f"{folder.name}-{checkout}"
    own.mkdir(parents=True, exist_ok=True)
    modules = own / "node_modules"
    if not modules.is_symlink():
        modules.symlink_to(folder / "node_modules", target_is_directory=True)
    shutil.copy(here / "package.json", own / "package.json")  # "type": "module"
    if scripts is None:
        scripts = [
            item.name
            for item in here.iterdir()
            if item.is_file() and item.name not in ("package.json", "package-lock.json")
        ]
    for script in scripts:
        shutil.copy(here / script, own / script)
    return node, own


def node_run(client: tuple[str, Path], script: str, timeout: float = 120, **config: Any) -> Any:
    """Run ``script`` of an installed client folder with ``config`` as JSON; its JSON output.
    The script must exit 0 (its output says why not)."""
    node, folder = client
    done = subprocess.run(
        [node, script, json.dumps(config)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    print(f"--- node {config.get('scenario')} ---\n{done.stdout}")  # shown with -s
    return json.loads(done.stdout)
