"""The ``payer`` agent the approval tests share (spec 14): its model calls ``pay`` (which
needs approval) — once, or twice (5 to bo, 700 to eve) for the message ``pay two`` — and
answers ``done`` once the results are there. ``pay`` appends to ``PAID`` each time it
really runs."""

from __future__ import annotations

from typing import Any

from threadloom import Agent, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

PAID: list[tuple[int, str]] = []


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay an amount to someone."""
    PAID.append((amount, to))
    return f"paid {amount} to {to}"


def payer_reply(request: ProviderRequest) -> Reply:
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return Reply.text("done")
    if request.messages[-1].text == "pay two":
        return Reply.tool_calls(
            Call("pay", {"amount": 5, "to": "bo"}), Call("pay", {"amount": 700, "to": "eve"})
        )
    return Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}))


def payer() -> tuple[Any, ...]:
    """The definitions to add to a test's project (a fresh model each time)."""
    return (
        pay,
        Model(name="pay_model", provider=ScriptedProvider(payer_reply), model="scripted-pay"),
        Prompt(name="pay_prompt", model="pay_model", system="You pay.", tools=["pay"]),
        Agent(name="payer", side_a=Side(prompt="pay_prompt"), side_b=Side(label="Customer")),
    )
