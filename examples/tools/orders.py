"""Tools of the support agent: look an order up, refund it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from threadloom import ThreadState, tool

ORDERS = {
    "A-1001": {"status": "shipped", "item": "Walnut desk", "total": 349.0},
    "A-1002": {"status": "processing", "item": "Desk lamp", "total": 39.5},
}


def normalise(order_id: str) -> str:
    order_id = order_id.upper()
    return order_id if "-" in order_id else f"{order_id[0]}-{order_id[1:]}"


@tool
async def lookup_order(
    state: ThreadState,
    order_id: Annotated[str, Field(description="Order number, e.g. A-1001")],
) -> dict[str, object]:
    """Look up an order and return its status."""
    order = ORDERS.get(normalise(order_id))
    await state.log(
        name="orders.lookup",
        request={"order_id": order_id},
        response=order or "not found",
        status="success" if order else "error",
    )
    if order is None:
        raise ValueError(f"no order {order_id}")
    return {"order_id": normalise(order_id), **order}


@tool
async def refund(
    state: ThreadState,
    order_id: Annotated[str, Field(description="Order number to refund")],
    reason: Annotated[str, Field(description="Why the customer wants a refund")] = "",
) -> str:
    """Refund an order."""
    order = ORDERS.get(normalise(order_id))
    if order is None:
        raise ValueError(f"no order {order_id}")
    await state.log(
        name="payments.refund",
        status="success",
        cost=0.0004,
        request={"order_id": order_id, "reason": reason},
    )
    return f"Refund of {order['total']:.2f} for {normalise(order_id)} issued."


@tool
def approve(verdict: Annotated[str, Field(description="Why the draft is ready")]) -> str:
    """Approve the draft and end the writing session."""
    return verdict
