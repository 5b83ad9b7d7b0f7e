"""Database failover under load (spec 17 §17.5, issue 36 item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest
from failover_load import table
from failover_scenario import run
from replication import require_replication


@pytest.mark.parametrize("fault,sync", [("restart", True), ("failover", False)])
def test_probe(tmp_path: Path, fault: str, sync: bool) -> None:
    require_replication()
    out = run(tmp_path, scenario=f"{fault} {sync}", fault=fault, synchronous=sync)
    print(table([out.row]))
    print(out)
    import shutil

    shutil.copytree(tmp_path, f"/tmp/fo_probe_{fault}", dirs_exist_ok=True)
