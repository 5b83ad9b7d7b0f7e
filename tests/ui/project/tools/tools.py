"""Tools of the browser tests' project."""

from threadloom import ThreadState
from threadloom.define import tool


@tool
async def lookup_order(state: ThreadState, order_id: str) -> str:
    """Look an order up by its id."""
    await state.write_file(f"/orders/{order_id}.json", f'{{"order_id": "{order_id}"}}')
    await state.log({"name": "orders.lookup", "message": f"looked up {order_id}", "cost": 0.001})
    return f'{{"order_id": "{order_id}", "status": "shipped"}}'


@tool
def report(summary: str) -> str:
    """Report the outcome and end the helper's session."""
    return "Reported."
