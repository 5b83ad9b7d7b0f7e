"""Prompts of the multinode tests' project."""

from threadloom.define import Prompt

echo_prompt = Prompt(name="echo_prompt", model="echo_model", system="Echo the user.")
gate_prompt = Prompt(name="gate_prompt", model="gate_model", system="Wait for the gate.")
