"""The example agents: a support chat (ai_human), a writer/critic pair (dual_ai) and a
researcher/reviewer pair (dual_ai) that the support agent runs as a subagent."""

from threadloom import Agent, SessionBinding, Side

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

warranty_research = Agent(
    name="warranty_research",
    type="dual_ai",
    title="Warranty research",
    description="A researcher drafts warranty findings, a reviewer checks and submits them.",
    # A subagent: its agent must be exposed as a tool (the support prompt lists it).
    expose_as_tool=True,
    tool_description="Researches the warranty of an order and returns reviewed findings.",
    side_a=Side(prompt="researcher_prompt", label="Researcher"),
    side_b=Side(
        prompt="reviewer_prompt",
        label="Reviewer",
        # Calling submit_findings ends the session; its `findings` argument is the session
        # result that goes back to the support agent's tool call.
        session_stop=SessionBinding(name="submit_findings", message_property="findings"),
    ),
    max_session_turns=6,
)
