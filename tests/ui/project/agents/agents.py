"""Agents of the browser tests' project: ``chat`` (a scripted assistant with a tool and a
subagent) and ``helper`` (the dual-AI subagent ``chat`` starts, which reports at once)."""

from threadloom import Agent, Side
from threadloom.define import SessionBinding

chat = Agent(
    name="chat",
    title="Chat",
    description="Answers, looks orders up, streams long texts on request",
    side_a=Side(prompt="chat_prompt", label="Assistant"),
    side_b=Side(label="Customer"),
)
helper = Agent(
    name="helper",
    title="Helper",
    type="dual_ai",
    expose_as_tool=True,
    tool_description="Helps with one question and reports",
    max_session_turns=3,
    side_a=Side(
        prompt="helper_prompt",
        label="Helper",
        session_stop=SessionBinding(name="report", message_property="summary"),
    ),
    side_b=Side(prompt="helper_prompt", label="Boss"),
)
