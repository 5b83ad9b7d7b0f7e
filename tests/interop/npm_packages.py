"""Node packages the interop tests drive, installed from the lock files kept in the
repository: ``npm ci`` once per lock file, into a cache folder keyed by its digest
(``~/.cache/threadloom-tests/<name>-<digest>``). Without ``node`` 20+ and ``npm`` a test
is skipped with the reason; under ``CI=true`` that is a failure (``needs.cannot_run``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from needs import cannot_run

NPM_TIMEOUT_S = 600


def require_node(what: str) -> tuple[str, str]:
    """``node`` and ``npm`` (20 or later), for ``what`` (the tests that need them)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    problem = None
    if node is None or npm is None:
        problem = f"node and npm are needed to run {what}"
    else:
        version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
        if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
            problem = f"node 20 or later is needed, this is {version.strip()}"
    if problem is not None:
        cannot_run(problem, what)
    assert node is not None and npm is not None
    return node, npm


def installed(package: Path, what: str) -> tuple[str, Path]:
    """``node`` and a folder where ``package`` (a folder with ``package.json`` and
    ``package-lock.json``) is installed; its other files (scripts) are copied on every
    call, so an edited script runs without a new install — into a folder of this checkout's
    own beside the install (``node_modules`` linked): the install is shared by every
    checkout of the machine, and scripts copied into it overwrote each other's (a test of
    one checkout ran another's script)."""
    node, npm = require_node(what)
    lock = (package / "package-lock.json").read_bytes() + (package / "package.json").read_bytes()
    digest = hashlib.sha256(lock).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    folder = cache / "threadloom-tests" / f"{package.name}-{digest}"
    stamp = folder / ".installed"
    if not stamp.exists():
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(package / name, folder / name)
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
    checkout = hashlib.sha256(str(package.resolve()).encode()).hexdigest()[:12]
    scripts = folder.parent / "scripts" / f"{folder.name}-{checkout}"
    scripts.mkdir(parents=True, exist_ok=True)
    modules = scripts / "node_modules"
    if not modules.is_symlink():
        modules.symlink_to(folder / "node_modules", target_is_directory=True)
    for item in package.iterdir():
        if item.is_file() and item.name != "package-lock.json":
            shutil.copy(item, scripts / item.name)
    return node, scripts
