"""Prompts of the browser tests' project."""

from threadloom.define import Prompt, Subagent

chat_prompt = Prompt(
    name="chat_prompt",
    model="chat_model",
    system="You are a helpful shop assistant.",
    tools=["lookup_order", Subagent("helper", relationship="helper", blocking=True)],
)
helper_prompt = Prompt(
    name="helper_prompt", model="helper_model", system="Help, then report.", tools=["report"]
)
