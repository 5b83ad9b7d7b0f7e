"""The crash suite's prompts."""

from threadloom.define import Prompt, Subagent

chat_prompt = Prompt(
    name="chat_prompt",
    model="chat_model",
    system="Answer, hold, or delegate.",
    tools=["hold", Subagent("worker", relationship="helper", blocking=True)],
)
worker_prompt = Prompt(
    name="worker_prompt", model="worker_model", system="Work, then report.", tools=["report"]
)
echo_prompt = Prompt(name="echo_prompt", model="echo_model", system="Echo.")
