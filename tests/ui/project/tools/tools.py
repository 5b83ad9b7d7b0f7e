"""Tools of the browser tests' project."""

import asyncio
import os
from pathlib import Path

from threadloom import ThreadState
from threadloom.define import Attachment, ToolResult, tool
from threadloom.testing import png as _png


@tool
async def lookup_order(state: ThreadState, order_id: str) -> str:
    """Look an order up by its id."""
    await state.write_file(f"/orders/{order_id}.json", f'{{"order_id": "{order_id}"}}')
    await state.log({"name": "orders.lookup", "message": f"looked up {order_id}", "cost": 0.001})
    return f'{{"order_id": "{order_id}", "status": "shipped"}}'


@tool
def draw_chart() -> ToolResult:
    """Draw the sales chart (a PNG the tool returns as an attachment)."""
    chart = Attachment(data=_png(24, 16), name="chart.png", mime_type="image/png")
    return ToolResult(result="Chart drawn.", attachments=[chart])


@tool(requires_approval=True)
async def pay(state: ThreadState, amount: int, to: str) -> str:
    """Pay an amount to someone (a person approves each call first)."""
    await state.write_file(f"/payments/{to}.txt", f"{amount} to {to}")
    return f"paid {amount} to {to}"


@tool
def report(summary: str) -> str:
    """Report the outcome and end the helper's session."""
    return "Reported."


@tool
async def log_steps(state: ThreadState, gate: str) -> str:
    """Wait for the gate file ``<gate>-1``, write an application log row, wait for
    ``<gate>-2``, write another."""
    await _wait(f"{gate}-1")
    await state.log({"name": "steps.first", "message": "first step"})
    await _wait(f"{gate}-2")
    await state.log({"name": "steps.second", "message": "second step"})
    return "logged"


async def _wait(gate: str) -> None:
    folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
    if folder:
        for _ in range(1200):
            if (Path(folder) / gate).exists():
                return
            await asyncio.sleep(0.05)
