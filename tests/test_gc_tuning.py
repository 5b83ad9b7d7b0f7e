"""``threadloom.tune_gc``: the collector tuning ``threadloom serve`` applies, offered to code
that embeds a Runtime in a process of its own, without the server stack."""

from __future__ import annotations

import json
import subprocess
import sys

EMBEDDER = """
import gc, json, sys
import threadloom
before = [gc.get_freeze_count(), list(gc.get_threshold())]
threadloom.tune_gc()
after = [gc.get_freeze_count(), list(gc.get_threshold())]
print(json.dumps({
    "before": before,
    "after": after,
    "server_modules": sorted(m for m in ("uvicorn", "fastapi", "starlette") if m in sys.modules),
}))
"""


def test_an_embedder_tunes_the_collector_without_importing_the_server() -> None:
    from threadloom.gc_tuning import GC_THRESHOLD

    done = subprocess.run(
        [sys.executable, "-c", EMBEDDER], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == [0, [700, 10, 10]]  # importing Threadloom leaves it alone
    frozen, threshold = seen["after"]
    assert frozen > 1_000 and threshold == list(GC_THRESHOLD)
    assert seen["server_modules"] == []
