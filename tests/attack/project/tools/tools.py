"""The crash suite's tools: ``hold`` waits for its gate; ``report`` ends a worker session."""

from threadloom_project.models.models import wait_gate

from threadloom.define import tool


@tool
async def hold(gate: str) -> str:
    """Wait until the test opens the gate."""
    await wait_gate(gate)
    return f"held {gate}"


@tool
def report(summary: str) -> str:
    """Report the work's outcome and end the session."""
    return "Reported."
