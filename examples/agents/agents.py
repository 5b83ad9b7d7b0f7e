"""The example agents: a support chat (ai_human) and a writer/critic pair (dual_ai)."""

from threadloom import Agent, Side
from threadloom.define import SessionBinding

support = Agent(
    name="support",
    title="Support",
    description="Answers customers about their orders.",
    side_a=Side(prompt="support_prompt", label="Support"),
    side_b=Side(label="Customer"),
)

writer_critic = Agent(
    name="writer_critic",
    type="dual_ai",
    title="Writer and critic",
    description="A writer drafts, a critic reviews until it approves.",
    side_a=Side(prompt="writer_prompt", label="Writer"),
    side_b=Side(
        prompt="critic_prompt",
        label="Critic",
        session_stop=SessionBinding(name="approve", message_property="verdict"),
    ),
    max_session_turns=4,
)
