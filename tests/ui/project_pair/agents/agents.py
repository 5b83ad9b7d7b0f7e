"""A primary agent (``zed``) and the subagent it starts (``aide``), whose name sorts first:
the UI's New thread and ``threadloom run`` must start ``zed``."""

from threadloom import Agent, Side

zed = Agent(name="zed", title="Zed", side_a=Side(prompt="zed_prompt", label="Zed"))
aide = Agent(
    name="aide",
    title="Aide",
    type="dual_ai",
    expose_as_tool=True,
    tool_description="Helps with one question",
    side_a=Side(prompt="aide_prompt", label="Aide"),
    side_b=Side(prompt="aide_prompt", label="Boss"),
)
