"""Tools of the multinode tests' project: ``report`` ends a ``worker`` session; ``pay``
needs a person's approval and appends a line to ``paid.txt`` in the gate folder each time it
really runs (spec 14)."""

import os
from pathlib import Path

from threadloom.define import tool


@tool
def report(summary: str) -> str:
    """Report the work's outcome and end the session."""
    return "Reported."


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay an amount to someone."""
    folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
    if folder:
        with (Path(folder) / "paid.txt").open("a", encoding="utf-8") as out:
            out.write(f"{amount} {to}\n")
    return f"paid {amount} to {to}"
