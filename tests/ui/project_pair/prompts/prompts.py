from threadloom import Prompt
from threadloom.define import Subagent

zed_prompt = Prompt(
    name="zed_prompt",
    model="m",
    system="You answer for {{shop}}.",
    tools=[Subagent("aide")],
    variables={"shop": "The shop's name"},
)
aide_prompt = Prompt(name="aide_prompt", model="m", system="You help.")
