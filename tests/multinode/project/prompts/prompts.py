"""Prompts of the multinode tests' project."""

from threadloom.define import Prompt, Subagent

echo_prompt = Prompt(name="echo_prompt", model="echo_model", system="Echo the user.")
slow_prompt = Prompt(
    name="slow_prompt", model="slow_model", system="Report, then answer.", tools=["report"]
)
pay_prompt = Prompt(name="pay_prompt", model="pay_model", system="Pay.", tools=["pay"])
gate_prompt = Prompt(name="gate_prompt", model="gate_model", system="Wait for the gate.")
boss_prompt = Prompt(
    name="boss_prompt",
    model="boss_model",
    system="Delegate to the helper.",
    tools=[Subagent("worker", relationship="helper", blocking=True, resumable=True)],
)
worker_prompt = Prompt(
    name="worker_prompt", model="worker_model", system="Work, then report.", tools=["report"]
)
