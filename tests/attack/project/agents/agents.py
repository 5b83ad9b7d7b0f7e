"""The crash suite's agents: ``plain`` (its messages can hold a model call, a tool call or
a subagent), ``chat`` (the same with the ``hold_delivery`` hook, which can also hold a queue
delivery; with a create hook, entries are delivered one at a time) and ``worker``, the
blocking ``helper`` subagent of both."""

from threadloom import Agent, Side
from threadloom.define import SessionBinding

plain = Agent(name="plain", side_a=Side(prompt="chat_prompt", label="Agent"), side_b=Side())
chat = Agent(
    name="chat",
    side_a=Side(prompt="chat_prompt", label="Agent"),
    side_b=Side(label="User"),
    hooks=("hold_delivery",),
)
worker = Agent(
    name="worker",
    type="dual_ai",
    expose_as_tool=True,
    tool_description="Works on one task and reports",
    max_session_turns=3,
    side_a=Side(
        prompt="worker_prompt",
        label="Worker",
        session_stop=SessionBinding(name="report", message_property="summary"),
    ),
    side_b=Side(prompt="echo_prompt", label="Boss"),
)
