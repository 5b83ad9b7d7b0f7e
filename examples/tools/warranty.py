"""Tools of the warranty research pair: the researcher looks terms up, the reviewer submits."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from threadloom_project.tools.orders import ORDERS, normalise

from threadloom import ThreadState, tool

#: Warranty terms per item: (years, what is covered, what is not).
WARRANTIES = {
    "Walnut desk": (5, "the frame and the drawer runners", "scratches and water marks"),
    "Desk lamp": (2, "the switch, the wiring and the LED module", "a dropped or bent arm"),
}


@tool
async def warranty_terms(
    state: ThreadState,
    order_id: Annotated[str, Field(description="Order number, e.g. A-1001")],
) -> dict[str, object]:
    """Look up the item of an order and the warranty terms that apply to it."""
    order = ORDERS.get(normalise(order_id))
    await state.log(
        name="warranty.lookup",
        request={"order_id": order_id},
        status="success" if order else "error",
    )
    if order is None:
        raise ValueError(f"no order {order_id}")
    years, covered, excluded = WARRANTIES[str(order["item"])]
    return {
        "order_id": normalise(order_id),
        "item": order["item"],
        "status": order["status"],
        "warranty_years": years,
        "covers": covered,
        "excludes": excluded,
    }


@tool
def submit_findings(
    findings: Annotated[str, Field(description="The reviewed findings, as the final answer")],
) -> str:
    """Accept the researcher's findings and end the research session."""
    return findings
