"""Prompts of the browser tests' project."""

from threadloom.define import Prompt, Subagent

chat_prompt = Prompt(
    name="chat_prompt",
    model="chat_model",
    system="You are a helpful shop assistant.",
    tools=[
        "lookup_order",
        "log_steps",
        "pay",
        "draw_chart",
        "notes_prompt",
        Subagent("helper", relationship="helper", blocking=True),
    ],
)
notes_prompt = Prompt(
    name="notes_prompt",
    model="notes_model",
    system="Write notes on the text.",
    tool_description="Writes notes on a text (a sub-prompt)",
    include_chat=False,
    required_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)
helper_prompt = Prompt(
    name="helper_prompt", model="helper_model", system="Help, then report.", tools=["report"]
)
