"""The UI's page logic that does not touch the DOM, unit-tested with Node's own test
runner (``node --test``; no npm package): ``tests/ui/js/*.test.mjs``. Without ``node``
the test is skipped with the reason (under ``CI=true``, a failure); ``make test`` installs
Debian's nodejs when it is missing and the user is root."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from needs import cannot_run

HERE = Path(__file__).resolve().parent


def test_page_logic_passes_its_node_unit_tests() -> None:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        cannot_run(
            "node is missing; as root: apt-get install -y nodejs (make test does)",
            "the UI's unit tests",
        )

    files = sorted(str(p) for p in (HERE / "js").glob("*.test.mjs"))
    assert files
    done = subprocess.run(
        [node, "--test", *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout, done.stdout
