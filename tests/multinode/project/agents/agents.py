"""Agents of the multinode tests' project (spec 12 §12.9): ``echo``, ``slow`` (a tool call
and an answer, 0.2 s each) and ``gate``, and ``boss``, whose blocking subagent ``helper``
runs the ``worker`` agent (a gate that ends its session with ``report``)."""

from threadloom import Agent, Side
from threadloom.define import SessionBinding

echo = Agent(name="echo", side_a=Side(prompt="echo_prompt"), side_b=Side(label="User"))
slow = Agent(name="slow", side_a=Side(prompt="slow_prompt"), side_b=Side(label="User"))
gate = Agent(name="gate", side_a=Side(prompt="gate_prompt"), side_b=Side(label="User"))
payer = Agent(name="payer", side_a=Side(prompt="pay_prompt"), side_b=Side(label="User"))
boss = Agent(name="boss", side_a=Side(prompt="boss_prompt"), side_b=Side(label="User"))
worker = Agent(
    name="worker",
    type="dual_ai",
    expose_as_tool=True,
    tool_description="Works on one message and reports",
    max_session_turns=3,
    side_a=Side(
        prompt="worker_prompt",
        label="Worker",
        session_stop=SessionBinding(name="report", message_property="summary"),
    ),
    side_b=Side(prompt="echo_prompt", label="Boss"),
)
