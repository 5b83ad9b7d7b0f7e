"""Prompts of the example agents."""

from threadloom.define import Prompt, Reasoning

support_prompt = Prompt(
    name="support_prompt",
    model="assistant",
    system=(
        "You are the support agent of a furniture shop. Be brief and friendly. Use "
        "lookup_order to check an order and refund to refund one."
    ),
    tools=["lookup_order", "refund"],
)

writer_prompt = Prompt(
    name="writer_prompt",
    model="assistant",
    system="You are a writer. Write one short paragraph; revise it after each critique.",
    reasoning=Reasoning(effort="low"),
)

critic_prompt = Prompt(
    name="critic_prompt",
    model="assistant",
    system=(
        "You are a critic. Give one concrete improvement per review. When the draft is good, "
        "call approve."
    ),
    tools=["approve"],
)
