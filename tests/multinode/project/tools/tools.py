"""Tools of the multinode tests' project: ``report`` ends a ``worker`` session."""

from threadloom.define import tool


@tool
def report(summary: str) -> str:
    """Report the work's outcome and end the session."""
    return "Reported."
