"""Agents of the multinode tests' project (spec 12 §12.9): ``echo`` and ``gate``."""

from threadloom import Agent, Side

echo = Agent(name="echo", side_a=Side(prompt="echo_prompt"), side_b=Side(label="User"))
gate = Agent(name="gate", side_a=Side(prompt="gate_prompt"), side_b=Side(label="User"))
